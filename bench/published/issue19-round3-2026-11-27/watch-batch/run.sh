#!/bin/bash
set -u
OUT=/work/notes/bench19d
PY=/work/main/.venv/bin/python
st() { local tree=$1 label=$2
  echo "$(date -u +%T) start $label load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  (cd $tree && PYTHONPATH=$tree timeout 600 $PY $OUT/startup.py $OUT/$label.json > $OUT/$label.txt 2>&1)
  echo "$(date -u +%T) end $label rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log; }
st /tmp/r4new new-st1; st /tmp/r4old old-st1
st /tmp/r4old old-st2; st /tmp/r4new new-st2
st /tmp/r4new new-st3; st /tmp/r4old old-st3
st /tmp/r4old old-st4; st /tmp/r4new new-st4
echo ALLDONE >> $OUT/log
