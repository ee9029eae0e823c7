#!/usr/bin/env bash
# Table-6-style ablation at small scale (experiments/on-device-ablation/README.md).
# Run from the repository root with ../shared present: bash experiments/on-device-ablation/run.sh
set -euo pipefail
A=work/ablation
AFM=${AFM:-.venv/bin/afm}
mkdir -p $A
if [ -z "${SKIP_CORPUS:-}" ]; then  # SKIP_CORPUS=1: reuse the splits of an earlier run
# 1. real text -> curated, decontaminated, tokenized train / held-out splits
python3 experiments/on-device-ablation/make_corpus.py ../shared/eval/extraction/ground-truth.json $A/docs
$AFM decontam build-index --suite report --benchmarks ../shared/eval/benchmarks --out $A/decontam-index
for s in train heldout; do
  $AFM curate --input $A/docs/$s.jsonl --output $A/corpus-$s --decontam-index $A/decontam-index --overwrite
done
$AFM tokenizer train --input $A/corpus-train --vocab-size 1024 --out $A/tokenizer
for s in train heldout; do
  $AFM tokenize --input $A/corpus-$s --tokenizer $A/tokenizer --output $A/tokens-$s --overwrite
done
fi
T=experiments/on-device-ablation
RANDOM_SEEDS=${RANDOM_SEEDS:-0 1 2 3 4}  # seeds of the random-pruning control
CONTROLS="$(for s in $RANDOM_SEEDS; do printf 'random-%s ' $s; done)magnitude"
if [ -z "${SKIP_TRAIN:-}" ]; then  # SKIP_TRAIN=1: only evaluate and report the runs of an earlier run
# 2. the teacher (3x FFN), trained first
$AFM train --config $T/teacher.yaml --workdir $A/runs/teacher --data $A/tokens-train
# 3. its start and its targets: pruning masks -> pruned model; top-1 targets
$AFM prune learn --teacher $A/runs/teacher --target-ffn-dim 192 --config $T/prune.yaml \
  --workdir $A/runs/prune --data $A/tokens-train
$AFM prune apply --run $A/runs/prune --out $A/runs/pruned --overwrite
# controls for the learned masks: the same teacher's 192 of 576 units per layer chosen at
# random (one checkpoint per seed) or by magnitude (L2 norm of each unit's gate/up/down weights)
for s in $RANDOM_SEEDS; do
  $AFM prune apply --method random --seed $s --teacher $A/runs/teacher --target-ffn-dim 192 \
    --out $A/runs/pruned-random-$s --overwrite
done
$AFM prune apply --method magnitude --teacher $A/runs/teacher --target-ffn-dim 192 --out $A/runs/pruned-magnitude --overwrite
$AFM distill targets --teacher $A/runs/teacher --data $A/tokens-train --out $A/distill-train --window 128 --overwrite
# 4. four students of one size and compute, and a baseline with 1.5x the steps
$AFM train --config $T/student.yaml --workdir $A/runs/baseline --data $A/tokens-train
$AFM train --config $T/student.yaml --workdir $A/runs/prune-only --data $A/tokens-train --init-from $A/runs/pruned
for c in $CONTROLS; do  # the controls: the same student run from the randomly / magnitude-pruned teacher
  $AFM train --config $T/student.yaml --workdir $A/runs/prune-$c --data $A/tokens-train --init-from $A/runs/pruned-$c
done
$AFM train --config $T/student-distill.yaml --workdir $A/runs/distill-only --data $A/distill-train
$AFM train --config $T/student-distill.yaml --workdir $A/runs/both --data $A/distill-train --init-from $A/runs/pruned
$AFM train --config $T/student.yaml --workdir $A/runs/baseline-1.5x --data $A/tokens-train --set total_steps=750
fi
# 5. the evaluation task group and held-out perplexity for each, then the table and plot.
# --max-length 512: a few benchmark items are longer than the 256-token window the
# models were built with; RoPE scores them at positions past it, the same for every model.
EVAL_TASKS=${EVAL_TASKS-afm-tiny}  # EVAL_TASKS="": held-out perplexity only (the task group takes minutes per model)
for r in teacher baseline prune-only $(for c in $CONTROLS; do echo prune-$c; done) distill-only both baseline-1.5x; do
  $AFM eval --checkpoint $A/runs/$r/model --tokenizer $A/tokenizer --tasks "$EVAL_TASKS" --limit 100 --max-length 512 \
    --data-dir ../shared/eval/benchmarks --perplexity-data $A/tokens-heldout --output $A/eval/$r.json
done
# the pruned starts before any student step: how much the choice of units costs before training
for r in pruned $(for c in $CONTROLS; do echo pruned-$c; done); do
  $AFM eval --checkpoint $A/runs/$r --tokenizer $A/tokenizer --tasks "" --max-length 512 \
    --perplexity-data $A/tokens-heldout --output $A/eval-start/$r.json
done
$AFM prune report --runs $A/runs --eval $A/eval --start-eval $A/eval-start --out experiments/on-device-ablation
