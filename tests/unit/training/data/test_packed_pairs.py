"""Packed preference pairs (several pairs per row, segment ids) give the same DPO / IPO
loss, and the same number of pairs, as one pair per row; rows are used, not padded."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.paths import CHAT_TOKENIZER

TOK = str(CHAT_TOKENIZER)


def _loss(kind: str, tmp_path: Path, packing: str, rows: int) -> tuple[float, float, dict]:
    from afm.model.parts import ModelParts
    from afm.synth.arith_task import make_problems
    from afm.training.core.config import get_train_config, model_config
    from afm.training.core.config import with_task_options as with_options
    from afm.training.core.task import LossContext
    from afm.training.tasks import get_task

    problems = make_problems(6, seed=11)
    recs = [{"prompt": p.messages(), "chosen": p.solution(), "rejected": f"Answer: {p.answer + i + 1}",
             "level": "better"} for i, p in enumerate(problems)]
    path = tmp_path / f"p-{packing}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    cfg = get_train_config("tiny-rm", [f"task={kind}", "model_overrides.vocab_size=640", "model_overrides.n_layers=1",
                                    f"data.global_batch_size={rows}", "data.seq_len=512"])
    cfg = with_options(cfg, tokenizer=TOK, beta=0.5, packing=packing, max_pairs_per_row=4)
    cfg.data.paths = [str(path)]
    task = get_task(kind, cfg)
    # the held-out input: every pair exactly once (training batches run on into the next epoch)
    batch = next(task.make_eval_input([str(path)], vocab_size=640, process_index=0, process_count=1))
    mcfg = model_config(cfg).replace(dtype="float32")
    parts = ModelParts.build(mcfg, 0)
    params = parts.init()
    params |= {k: s.init(jax.random.key(0), params) for k, s in task.extra_params(mcfg).items()}
    policy = {k: (v * 1.1 if not k.startswith("ref/") and v.ndim >= 2 else v) for k, v in params.items()}
    ctx = LossContext(parts.build_model, mcfg, jax.random.key(0), train=False)
    out = jax.jit(lambda p: task.loss(p, {k: jnp.asarray(v) for k, v in batch.items()}, ctx))(policy)
    return float(out.loss[0]), float(out.loss[1]), batch


@pytest.mark.parametrize("kind", ["dpo", "ipo"])
def test_packed_pairs_give_the_same_loss_as_one_pair_per_row(kind: str, tmp_path: Path) -> None:
    unpacked, n_unpacked, _ = _loss(kind, tmp_path, "none", rows=6)
    packed, n_packed, batch = _loss(kind, tmp_path, "pairs", rows=4)
    assert n_unpacked == n_packed == 6
    assert packed == pytest.approx(unpacked, rel=1e-4)
    filled = batch["pair_weight"].sum(1)
    assert filled.max() > 1  # rows do hold several pairs
    real = (batch["segments"] > 0).mean()
    assert real > 0.5  # most of each row is tokens, not padding (unpacked: two 512-token rows per pair)


def test_packed_loader_resumes_at_the_same_pair(tmp_path: Path) -> None:
    """The checkpointed position (epoch, next pair) restarts the stream exactly."""
    from afm.model.text.tokenizer import Tokenizer
    from afm.synth.arith_task import make_problems
    from afm.training.data.packed_pairs import PackedPairLoader
    from afm.training.data.preferences import read_preferences, tokenize_pairs

    recs = [{"prompt": p.messages(), "chosen": p.solution(), "rejected": "Answer: 0", "level": "better"}
            for p in make_problems(10, seed=2)]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    read = read_preferences([str(tmp_path / "p.jsonl")])
    data = tokenize_pairs(read.pairs, Tokenizer.load(TOK), 200, packed=True)
    kw = {"seq_len": 200, "global_batch": 2, "max_pairs": 2, "pad_id": 0, "seed": 3}
    loader = PackedPairLoader(data, **kw)
    for _ in range(3):
        next(loader)
    resumed = PackedPairLoader(data, **kw, state=loader.state())
    for _ in range(4):  # across an epoch boundary too
        a, b = next(loader), next(resumed)
        assert all(np.array_equal(a[k], b[k]) for k in a)
