#!/bin/bash
OUT=/work/notes/bench19e; PY=/work/main/.venv/bin/python
b() { local tree=$1 label=$2; shift 2
  echo "$(date -u +%T) start $label $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  (cd $tree && PYTHONPATH=$tree timeout 1200 $PY -m kubemu.cli bench "$@" -o $OUT/$label.json > $OUT/$label.txt 2>&1)
  echo "$(date -u +%T) end $label rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log; }
for i in 1 2 3; do
  b /tmp/walt wal-store$i store --quick --peers none
  b /tmp/h0 h0-store$i store --quick --peers none
done
echo ALLDONE >> $OUT/log
