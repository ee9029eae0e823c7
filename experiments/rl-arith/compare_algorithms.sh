#!/usr/bin/env bash
# MDLOO, PPO, GRPO, Dr. GRPO and DAPO on the arithmetic task: the same SFT start, budget and
# test problems, 3 seeds each; per-problem true rewards and paired standard errors.
# Usage: experiments/rl-arith/compare_algorithms.sh W [PARALLEL]
#   W: a work folder holding data/ (make_data.py) and sft/best (the SFT start);
#   PARALLEL: RL runs at a time (default 2).
set -euo pipefail
W=${1:?work folder}
P=${2:-2}
AFM=${AFM:-afm}
PY=${PY:-python}
ALGOS="mdloo ppo grpo dr_grpo dapo"
SEEDS="0 1 2"
runs=()
for s in $SEEDS; do for a in $ALGOS; do runs+=("$a $s"); done; done
printf '%s\n' "${runs[@]}" | xargs -P "$P" -L 1 bash -c '
  a=$0; s=$1
  '"$AFM"' rl train --config experiments/rl-arith/algorithms.yaml --algorithm $a --workdir '"$W"'/$a-s$s \
      --policy '"$W"'/sft/best --prompts '"$W"'/data/rl_prompts.jsonl --set seed=$s > '"$W"'/$a-s$s.log 2>&1
  echo "$a seed $s: $(tail -1 '"$W"'/$a-s$s.log)"'
models="sft=$W/sft/best"
for s in $SEEDS; do for a in $ALGOS; do models="$models $a-s$s=$W/$a-s$s/model"; done; done
$PY experiments/rl-arith/greedy_eval.py --n 96 --samples 4 --max-new-tokens 40 --per-problem "$W/eval.json" $models
$PY experiments/rl-arith/paired_se.py --start sft "$W/eval.json" --out "$W/paired.json"
