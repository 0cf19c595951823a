#!/bin/bash
# paired: old = 087fd3e (end of round 2), new = a snapshot of the tree; alternating; load logged
set -u
OUT=/work/notes/bench19c
PY=/work/main/.venv/bin/python
st() { local tree=$1 label=$2
  echo "$(date -u +%T) start $label load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  (cd $tree && PYTHONPATH=$tree timeout 600 $PY $OUT/startup.py $OUT/$label.json > $OUT/$label.txt 2>&1)
  echo "$(date -u +%T) end $label rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log; }
b() { local tree=$1 label=$2; shift 2
  echo "$(date -u +%T) start $label $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  (cd $tree && PYTHONPATH=$tree timeout 1200 $PY -m kubemu.cli bench "$@" -o $OUT/$label.json > $OUT/$label.txt 2>&1)
  echo "$(date -u +%T) end $label rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log; }
for i in 1 2 3; do
  st /tmp/r3new new-st$i
  st /tmp/r3old old-st$i
done
for i in 4 5; do
  st /tmp/r3old old-st$i
  st /tmp/r3new new-st$i
done
b /tmp/r3new new-recq reconcile --quick
b /tmp/r3old old-recq reconcile --quick
b /tmp/r3old old-restq restart --quick
b /tmp/r3new new-restq restart --quick
for i in 1 2 3; do
  b /tmp/r3new new-store$i store --quick --peers none
  b /tmp/r3old old-store$i store --quick --peers none
done
echo ALLDONE >> $OUT/log
