#!/bin/bash
OUT=/work/notes/bench19e; PY=/work/main/.venv/bin/python
b() { local tree=$1 label=$2; shift 2
  echo "$(date -u +%T) start $label $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  (cd $tree && PYTHONPATH=$tree timeout 1200 $PY -m kubemu.cli bench "$@" -o $OUT/$label.json > $OUT/$label.txt 2>&1)
  echo "$(date -u +%T) end $label rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log; }
b /tmp/h1 fnew-recq reconcile --quick
b /tmp/h0 fold-recq reconcile --quick
echo RECQDONE >> $OUT/log
