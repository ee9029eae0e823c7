#!/bin/bash
# 3 seeds x (MDLOO, PPO-clip), reward = the learned RM, from work/rl/sft/best
cd /work/wt28b && export PATH=$PWD/.venv/bin:$PATH
IT=${IT:-20}
for s in 0 1 2; do for algo in mdloo ppo; do
  ( nice -n 5 afm rl mdloo --config experiments/rl-arith/$algo.yaml --workdir work/rl/$algo-rm-s$s \
      --rm work/rl/rlhf/rm/reward-model --iterations $IT --set seed=$s \
      --set eval_every=0 --set eval_limit=32 --set eval_samples=0 --set checkpoint_every=5 \
      > work/rl/logs/$algo-rm-s$s.log 2>&1; echo "rc=$? $(date +%T) $(cat /proc/loadavg)" >> work/rl/logs/$algo-rm-s$s.log ) &
done; done
wait
