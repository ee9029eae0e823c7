"""DPO / IPO losses: stored values (checked against TRL's DPOTrainer in the slow tier,
tests/slow/training/test_trl_parity.py) and the task on the tiny model."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.training.tasks.dpo import dpo_loss, ipo_loss
from tests.paths import CHAT_TOKENIZER

# Summed reply log-probs of four pairs, their reply lengths, and the losses TRL 1.16's
# DPOTrainer._compute_loss gives for them (loss_type "sigmoid" and "ipo", per pair).
PI_C = [-12.5, -30.25, -7.0, -44.1]
PI_R = [-14.0, -28.5, -9.75, -40.0]
REF_C = [-13.0, -29.0, -8.5, -43.0]
REF_R = [-13.5, -29.5, -9.0, -41.5]
N_C = [5, 12, 3, 20]
N_R = [6, 10, 4, 18]
EXPECTED = {
    0.1: {"sigmoid": [0.6443966627120972, 0.8119620680809021, 0.5869620442390442, 0.8315733671188354],
          "ipo": [23.20027732849121, 27.08335304260254, 18.59765625, 26.402469635009766]},
    0.5: {"sigmoid": [0.4740769863128662, 1.4061501026153564, 0.28115013241767883, 1.5410078763961792],
          "ipo": [0.6669444441795349, 1.4500173330307007, 0.09765625, 1.2958027124404907]},
}
TOK = str(CHAT_TOKENIZER)


@pytest.mark.parametrize("beta", sorted(EXPECTED))
def test_dpo_and_ipo_losses_equal_stored_reference_values(beta):
    a = [np.asarray(x, np.float32) for x in (PI_C, PI_R, REF_C, REF_R, N_C, N_R)]
    np.testing.assert_allclose(np.asarray(dpo_loss(*a[:4], beta)), EXPECTED[beta]["sigmoid"], atol=1e-5)
    np.testing.assert_allclose(np.asarray(ipo_loss(*a, beta)), EXPECTED[beta]["ipo"], atol=1e-5)


@pytest.mark.parametrize("kind", ["dpo", "ipo"])
def test_task_starts_at_reference_and_a_step_prefers_chosen(kind, tmp_path):
    from afm.model.parts import ModelParts
    from afm.synth.arith_task import make_problems
    from afm.training.core.config import get_train_config, model_config
    from afm.training.core.config import with_task_options as with_options
    from afm.training.core.task import LossContext
    from afm.training.tasks import get_task

    rows = [{"prompt": p.messages(), "chosen": p.solution(), "rejected": f"Answer: {p.answer + 1}",
             "level": "significantly_better"} for p in make_problems(4, seed=5)]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = get_train_config("tiny-rm", [f"task={kind}", "model_overrides.vocab_size=640", "data.global_batch_size=4",
                                    "model_overrides.n_layers=1"])
    cfg = with_options(cfg, tokenizer=TOK, beta=0.5)
    cfg.data.paths = [str(tmp_path / "p.jsonl")]
    task = get_task(kind, cfg)
    batch = {k: jnp.asarray(v) for k, v in next(task.make_input(vocab_size=640, process_index=0,
                                                                process_count=1)).items()}
    mcfg = model_config(cfg).replace(dtype="float32")
    parts = ModelParts.build(mcfg, 0)
    params = parts.init()
    params |= {k: s.init(jax.random.key(0), params) for k, s in task.extra_params(mcfg).items()}
    ctx = LossContext(parts.build_model, mcfg, jax.random.key(0), train=False)
    loss_of = jax.jit(lambda p: task.loss(p, batch, ctx))  # op-by-op dispatch is minutes on CPU
    out = loss_of(params)
    first = float(out.loss[0] / out.loss[1])
    expected = np.log(2.0) if kind == "dpo" else (1 / (2 * 0.5)) ** 2  # policy == reference
    assert first == pytest.approx(expected, rel=1e-5)

    def loss_fn(trainable):
        o = task.loss({**params, **trainable}, batch, ctx)
        return o.loss[0] / o.loss[1]

    trainable = {k: v for k, v in params.items() if not k.startswith("ref/")}
    grads = jax.jit(jax.grad(loss_fn))(trainable)
    assert all(not k.startswith("ref/") for k in grads)
    stepped = {k: v - 0.05 * grads[k] for k, v in trainable.items()}
    after = loss_of({**params, **stepped})
    assert float(after.loss[0] / after.loss[1]) < first
    assert float(after.metrics["reward_accuracy"][0]) == 4.0  # every chosen reply now above the reference


@pytest.mark.parametrize("reference", ["frozen", "precomputed"])
def test_afm_dpo_trains_from_a_model_and_exports_the_policy(tmp_path, reference):
    """The whole command path: pairs on disk -> DPO with a frozen reference copy (or the
    reference's log-probs computed first, no copy in the step) -> the exported policy
    loads as an ordinary model, moved away from its start. In bf16, layers unscanned,
    eight pairs per batch, the first step starts exactly at the reference (log-ratios 0,
    loss log 2), and the reader's rejects are reported by reason in either mode."""
    from flax import nnx

    from afm.model.checkpoints.checkpoint import load_model, save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer
    from afm.synth.arith_task import make_problems
    from afm.training.core.metrics import read_metrics
    from afm.training.runs.train import train

    start = tmp_path / "sft-model"
    model_cfg = get_config("tiny").replace(vocab_size=640, n_layers=1)
    assert model_cfg.dtype == "bfloat16" and not model_cfg.scan_layers
    save_params(Transformer(model_cfg, rngs=nnx.Rngs(0)), start)
    rows = [{"prompt": p.messages(), "chosen": p.solution(), "rejected": f"Answer: {p.answer + 1}",
             "level": "better"} for p in make_problems(8, seed=3)]
    rows += [{**rows[0], "chosen_finish_reason": "length"}, {**rows[1], "level": "best"}]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = train(
        "tiny-rm", tmp_path / "dpo", data=[str(tmp_path / "p.jsonl")],
        task_options={"tokenizer": TOK, "beta": 0.1, "reference": reference},
        init_from=str(start), steps=2, quiet=True,
        overrides=["task=dpo", "model_overrides.vocab_size=640", "model_overrides.n_layers=1", "log_every=1",
                   "data.global_batch_size=8", "data.seq_len=192", "checkpoint.every_steps=2",
                   "optimizer.learning_rate=1e-2"])
    first = read_metrics(tmp_path / "dpo")[0]
    assert first["chosen_logratio"] == 0.0 and first["rejected_logratio"] == 0.0
    assert first["loss"] == float(np.float32(np.log(2.0)))
    assert out["rejects"]["training"] == {"records": 10, "pairs": 8, "rejected": 2,
                                          "reasons": {"cut_reply": 1, "bad_level": 1},
                                          "summary": "2 of 10 records rejected (cut_reply 1, bad_level 1)"}
    policy, _ = load_model(out["model"], dropout=0.0)
    base, _ = load_model(start, dropout=0.0)
    tokens = jnp.arange(16, dtype=jnp.int32)[None]
    assert not np.allclose(np.asarray(policy(tokens)), np.asarray(base(tokens)))
    exported = {"/".join(map(str, p)) for p, _ in nnx.to_flat_state(nnx.state(policy, nnx.Param))}
    assert exported and not any(k.startswith("ref") for k in exported)
    written = tmp_path / "dpo" / "reference_logps" / "logps.jsonl"
    assert written.exists() == (reference == "precomputed")
    if written.exists():
        rows = [json.loads(line) for line in written.read_text().splitlines()]
        assert len(rows) == 8 and all(r["ref_chosen_logps"] < 0 and r["ref_rejected_logps"] < 0 for r in rows)
