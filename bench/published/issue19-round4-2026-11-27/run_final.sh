#!/bin/bash
# paired: old = 842d5f1 (the last stop), new = 5c70e30 (this session's commit); alternating; load logged
OUT=/work/notes/bench19e; PY=/work/main/.venv/bin/python
st() { local tree=$1 label=$2
  echo "$(date -u +%T) start $label load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  (cd $tree && PYTHONPATH=$tree timeout 600 $PY /work/notes/bench19c/startup.py $OUT/$label.json > $OUT/$label.txt 2>&1)
  echo "$(date -u +%T) end $label rc=$? $(cat $OUT/$label.txt | tail -1)" >> $OUT/log; }
b() { local tree=$1 label=$2; shift 2
  echo "$(date -u +%T) start $label $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  (cd $tree && PYTHONPATH=$tree timeout 1200 $PY -m kubemu.cli bench "$@" -o $OUT/$label.json > $OUT/$label.txt 2>&1)
  echo "$(date -u +%T) end $label rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log; }
for i in 1 2 3 4; do st /tmp/h1 fnew-st$i; st /tmp/h0 fold-st$i; done
for i in 5 6 7 8; do st /tmp/h0 fold-st$i; st /tmp/h1 fnew-st$i; done
b /tmp/h1 fnew-recq reconcile --quick
b /tmp/h0 fold-recq reconcile --quick
b /tmp/h0 fold-restq restart --quick
b /tmp/h1 fnew-restq restart --quick
for i in 1 2 3; do
  b /tmp/h1 fnew-store$i store --quick --peers none
  b /tmp/h0 fold-store$i store --quick --peers none
done
echo FINALDONE >> $OUT/log
