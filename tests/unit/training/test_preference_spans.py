"""The reply whose probability DPO / IPO compare is the *final* assistant turn: with a
multi-turn prompt, earlier assistant and user turns are context. IPO's per-token average
is checked against a transcription of Azar et al.'s loss on that span (computed here from
full log-softmax logits), DPO and the reward model on the same multi-turn pairs; records
without a level are rejects."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

TOK = str(Path(__file__).resolve().parents[2] / "data" / "chat")
MULTI_TURN = [
    {"role": "system", "content": "You answer arithmetic questions."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "Answer: 4"},
    {"role": "user", "content": "And 3 + 5?"},
]
PAIRS = [
    {"prompt": MULTI_TURN, "chosen": "3 + 5 = 8. Answer: 8", "rejected": "Answer: 9", "level": "better"},
    {"prompt": [*MULTI_TURN[:3], {"role": "user", "content": "Double it."}],
     "chosen": "4 * 2 = 8. Answer: 8", "rejected": "I do not know.", "level": "significantly_better"},
]


def tokenizer():
    from afm.model.tokenizer import Tokenizer

    return Tokenizer.load(TOK)


def test_the_reply_span_is_the_final_assistant_turn() -> None:
    from afm.training.data.preferences import encode_response

    tok = tokenizer()
    ids, start = encode_response(tok, MULTI_TURN, "Answer: 8")
    prompt_ids = tok.encode_chat(MULTI_TURN, add_generation_prompt=True)[0]
    assert ids[:start] == prompt_ids  # everything before the reply is the prompt, earlier turns included
    assert tok.decode([t for t in ids[start:] if t != tok.end_id]).strip() == "Answer: 8"
    assert ids[-1] == tok.end_id  # the reply's end-of-turn token is part of it


def _task(kind: str, tmp_path: Path, beta: float | None = 0.5):
    from afm.training.core.config import get_train_config, model_config
    from afm.training.core.config import with_task_options as with_options
    from afm.training.core.engine import ModelParts
    from afm.training.core.task import LossContext
    from afm.training.tasks import get_task

    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in PAIRS) + "\n")
    cfg = get_train_config("tiny-rm", [f"task={kind}", "model_overrides.vocab_size=640", "data.global_batch_size=2",
                                    "model_overrides.n_layers=1", "data.seq_len=96"])
    cfg = with_options(cfg, tokenizer=TOK, beta=beta)
    cfg.data.paths = [str(tmp_path / "p.jsonl")]
    task = get_task(kind, cfg)
    batch = next(task.make_input(vocab_size=640, process_index=0, process_count=1))
    mcfg = model_config(cfg).replace(dtype="float32")
    parts = ModelParts.build(mcfg, 0)
    params = parts.init()
    params |= {k: s.init(jax.random.key(0), params) for k, s in task.extra_params(mcfg).items()}
    ctx = LossContext(parts.build_model, mcfg, jax.random.key(0), train=False)
    return task, batch, params, parts, ctx


def _reply_logprob(parts, params: dict, tokens: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """Sum of log p(token | prefix) over ``mask``, from full float64 log-softmax logits."""
    model = parts.build_model(params)
    logits = np.asarray(model(jnp.asarray(tokens[None, :-1])), np.float64)[0]
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    picked = logp[np.arange(len(tokens) - 1), tokens[1:]]
    m = mask[1:]
    return float((picked * m).sum()), float(m.sum())


@pytest.mark.parametrize("kind", ["ipo", "dpo"])
def test_multi_turn_loss_equals_the_transcription_on_the_final_reply(kind: str, tmp_path: Path) -> None:
    from afm.training.data.preferences import encode_response

    beta = 0.5
    task, batch, params, parts, ctx = _task(kind, tmp_path, beta)
    # a policy that is not its reference, so the loss depends on the span
    policy = {k: (v * 1.05 if not k.startswith("ref/") and v.ndim >= 2 else v) for k, v in params.items()}
    out = jax.jit(lambda p: task.loss(p, {k: jnp.asarray(v) for k, v in batch.items()}, ctx))(policy)
    ref = {k[len("ref/"):]: v for k, v in params.items() if k.startswith("ref/")}
    pol = {k: v for k, v in policy.items() if not k.startswith("ref/")}
    tok = tokenizer()
    losses = []
    for pair in PAIRS:  # the loader shuffles: the loss is a sum, so the order does not matter
        sides = []
        for reply in (pair["chosen"], pair["rejected"]):
            ids, start = encode_response(tok, pair["prompt"], reply)
            tokens = np.asarray(ids)
            mask = np.zeros(len(ids))
            mask[start:] = 1.0
            (pi, n), (rf, _) = _reply_logprob(parts, pol, tokens, mask), _reply_logprob(parts, ref, tokens, mask)
            sides.append((pi, rf, n))
        (pc, rc, nc), (pr, rr, nr) = sides
        if kind == "ipo":  # Azar et al. with TRL's per-token average of the log-ratios
            losses.append(((pc - rc) / nc - (pr - rr) / nr - 1 / (2 * beta)) ** 2)
        else:
            losses.append(-np.log(1 / (1 + np.exp(-beta * ((pc - rc) - (pr - rr))))))
    assert float(out.loss[0]) == pytest.approx(sum(losses), rel=2e-4)
    assert float(out.loss[1]) == 2


def test_reward_model_scores_the_final_reply_of_multi_turn_pairs(tmp_path: Path) -> None:
    """Rows hold the whole conversation; the reward is read at the final reply's end token."""
    from afm.training.rl.reward_model import last_token_index

    task, batch, params, parts, ctx = _task("reward_model", tmp_path, beta=None)
    for side in ("chosen", "rejected"):
        last = np.asarray(last_token_index(jnp.asarray(batch[f"{side}_segments"])))
        assert (batch[side][np.arange(2), last] == tokenizer().end_id).all()
        # the span starts after the last user turn's <|assistant|> marker: earlier turns are outside
        first = batch[f"{side}_response"].argmax(1)
        assert (first > 0).all() and all(batch[f"{side}_response"][i, : first[i]].sum() == 0 for i in range(2))
    out = jax.jit(lambda p: task.loss(p, {k: jnp.asarray(v) for k, v in batch.items()}, ctx))(params)
    assert np.isfinite(float(out.loss[0]))


def test_a_record_without_a_level_is_a_reject_with_a_reason(tmp_path: Path) -> None:
    from afm.training.data.preferences import read_preferences

    rows = [{k: v for k, v in PAIRS[0].items() if k != "level"}, {**PAIRS[1], "level": "much_better"}, PAIRS[0]]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    read = read_preferences([str(tmp_path / "p.jsonl")])
    assert len(read.pairs) == 1
    reasons = sorted(r["reason"].split(":")[0] for r in read.rejects)
    assert reasons == ["bad_level", "missing_level"]
