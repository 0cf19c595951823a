#!/bin/bash
# paired: old = 842d5f1 (the last stop), new = ad167b5 (this session's two commits); alternating
OUT=/work/notes/bench19e; PY=/work/main/.venv/bin/python
st() { local tree=$1 label=$2
  echo "$(date -u +%T) start $label load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  (cd $tree && PYTHONPATH=$tree timeout 600 $PY /work/notes/bench19c/startup.py $OUT/$label.json > $OUT/$label.txt 2>&1)
  echo "$(date -u +%T) end $label rc=$? $(cat $OUT/$label.txt | tail -1)" >> $OUT/log; }
for i in 1 2 3; do st /tmp/h2 r5new-st$i; st /tmp/h0 r5old-st$i; done
for i in 4 5 6; do st /tmp/h0 r5old-st$i; st /tmp/h2 r5new-st$i; done
echo R5DONE >> $OUT/log
