#!/bin/bash
# eval_one.sh NAME CHECKPOINT: true task reward on 128 test problems, greedy + 4 samples, per problem
cd /work/wt28b && export PATH=$PWD/.venv/bin:$PATH
nice -n 5 python experiments/rl-arith/greedy_eval.py --n 128 --samples 4 --per-problem work/rl/eval-$1.json $1=$2 > work/rl/logs/eval-$1.log 2>&1
echo "rc=$? $(date +%T) $(cat /proc/loadavg)" >> work/rl/logs/eval-$1.log
