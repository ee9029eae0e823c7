"""The reply whose probability DPO / IPO compare is the *final* assistant turn: with a
multi-turn prompt, earlier assistant and user turns are context. IPO's per-token average
is checked against a transcription of Azar et al.'s loss on that span (computed here from
full log-softmax logits), DPO and the reward model on the same multi-turn pairs; records
without a level are rejects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.paths import CHAT_TOKENIZER

TOK = str(CHAT_TOKENIZER)
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
    from afm.model.text.tokenizer import Tokenizer

    return Tokenizer.load(TOK)


def test_the_reply_span_is_the_final_assistant_turn() -> None:
    from afm.training.data.preferences import encode_response

    tok = tokenizer()
    ids, reply = encode_response(tok, MULTI_TURN, "Answer: 8")
    start = int(np.argmax(reply))
    assert reply[start:].all() and not reply[:start].any()  # one span: the final turn
    prompt_ids = tok.encode_chat(MULTI_TURN, add_generation_prompt=True)[0]
    assert ids[:start] == prompt_ids  # everything before the reply is the prompt, earlier turns included
    assert tok.decode([t for t in ids[start:] if t != tok.end_id]).strip() == "Answer: 8"
    assert ids[-1] == tok.end_id  # the reply's end-of-turn token is part of it


def _rows_file(tmp_path: Path, rows: list) -> str:
    """``rows`` as the JSONL file the preference reader and the tasks read."""
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _task(kind: str, tmp_path: Path, beta: float | None = 0.5, rows: list | None = None):
    from afm.model.parts import ModelParts
    from afm.training.core.config import get_train_config, model_config
    from afm.training.core.config import with_task_options as with_options
    from afm.training.core.task import LossContext
    from afm.training.tasks import get_task

    path = _rows_file(tmp_path, rows or PAIRS)
    cfg = get_train_config("tiny-rm", [f"task={kind}", "model_overrides.vocab_size=640", "data.global_batch_size=2",
                                    "model_overrides.n_layers=1", f"data.seq_len={128 if rows else 96}"])
    cfg = with_options(cfg, tokenizer=TOK, beta=beta)
    cfg.data.paths = [path]
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


def _loss(task, batch: dict, ctx, params: dict):
    """The task's own loss (jitted) of ``params`` on ``batch``."""
    return jax.jit(lambda p: task.loss(p, {k: jnp.asarray(v) for k, v in batch.items()}, ctx))(params)


def _perturbed_loss(task, batch: dict, params: dict, ctx) -> tuple[Any, dict, dict]:
    """The task's loss for a policy that is not its reference (its matrices scaled by 1.05,
    so the loss depends on the span), with the policy's and the reference's own parameters."""
    policy = {k: (v * 1.05 if not k.startswith("ref/") and v.ndim >= 2 else v) for k, v in params.items()}
    ref = {k[len("ref/"):]: v for k, v in params.items() if k.startswith("ref/")}
    pol = {k: v for k, v in policy.items() if not k.startswith("ref/")}
    return _loss(task, batch, ctx, policy), pol, ref


def _transcribed_loss(kind: str, beta: float, parts, pol: dict, ref: dict,
                      chosen: tuple[np.ndarray, np.ndarray], rejected: tuple[np.ndarray, np.ndarray]) -> float:
    """One pair's loss from each side's ``(tokens, reply mask)``: IPO as Azar et al. write it,
    with TRL's per-token average of the log-ratios, or DPO's."""
    sides = []
    for tokens, mask in (chosen, rejected):
        (pi, n), (rf, _) = _reply_logprob(parts, pol, tokens, mask), _reply_logprob(parts, ref, tokens, mask)
        sides.append((pi, rf, n))
    (pc, rc, nc), (pr, rr, nr) = sides
    if kind == "ipo":
        return ((pc - rc) / nc - (pr - rr) / nr - 1 / (2 * beta)) ** 2
    return -np.log(1 / (1 + np.exp(-beta * ((pc - rc) - (pr - rr)))))


@pytest.mark.parametrize("kind", ["ipo", "dpo"])
def test_multi_turn_loss_equals_the_transcription_on_the_final_reply(kind: str, tmp_path: Path) -> None:
    from afm.training.data.preferences import encode_response

    beta = 0.5
    task, batch, params, parts, ctx = _task(kind, tmp_path, beta)
    out, pol, ref = _perturbed_loss(task, batch, params, ctx)
    tok = tokenizer()

    def final_turn(prompt: list, reply: str) -> tuple[np.ndarray, np.ndarray]:
        # the final assistant turn, from the chat template directly: after the prompt and
        # its <|assistant|> role token, through the end token
        ids = tok.encode_chat([*prompt, {"role": "assistant", "content": reply}])[0]
        start = len(tok.encode_chat(prompt, add_generation_prompt=True)[0])
        assert np.array_equal(encode_response(tok, prompt, reply)[1], np.arange(len(ids)) >= start)
        mask = np.zeros(len(ids))
        mask[start:] = 1.0
        return np.asarray(ids), mask

    # the loader shuffles: the loss is a sum, so the order does not matter
    losses = [_transcribed_loss(kind, beta, parts, pol, ref, final_turn(pair["prompt"], pair["chosen"]),
                                final_turn(pair["prompt"], pair["rejected"])) for pair in PAIRS]
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
    out = _loss(task, batch, ctx, params)
    assert np.isfinite(float(out.loss[0]))


def test_a_record_without_a_level_is_a_reject_with_a_reason(tmp_path: Path) -> None:
    from afm.training.data.preferences import read_preferences

    rows = [{k: v for k, v in PAIRS[0].items() if k != "level"}, {**PAIRS[1], "level": "much_better"}, PAIRS[0]]
    read = read_preferences([_rows_file(tmp_path, rows)])
    assert len(read.pairs) == 1
    reasons = sorted(r["reason"].split(":")[0] for r in read.rejects)
    assert reasons == ["bad_level", "missing_level"]


# Message-list replies (TRL's conversational form): an agentic reply of three messages, a
# tool call, its result and the answer; the rejected reply is one message.
CALL = {"role": "assistant", "content": None,
        "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 3, "b": 5}}}]}
RESULT = {"role": "tool", "content": "8"}
LIST_PAIRS = [
    {"prompt": MULTI_TURN, "chosen": [CALL, RESULT, {"role": "assistant", "content": "Answer: 8"}],
     "rejected": [{"role": "assistant", "content": "Answer: 9"}], "level": "better"},
    {"prompt": MULTI_TURN[:2], "chosen": [{"role": "assistant", "content": "2 + 2 = 4. Answer: 4"}],
     "rejected": [CALL, RESULT, {"role": "assistant", "content": "Answer: 5"}], "level": "significantly_better"},
]


def _assistant_spans(tok, prompt: list, reply: list) -> np.ndarray:
    """Which tokens of prompt + reply are the reply's assistant tokens, rendered message by
    message with the chat template: after each assistant message's role token, through its end."""
    ids = tok.encode_chat([*prompt, *reply])[0]
    mask = np.zeros(len(ids))
    for j, m in enumerate(reply):
        if m["role"] == "assistant":
            mask[len(tok.encode_chat([*prompt, *reply[:j]])[0]) + 1: len(tok.encode_chat([*prompt, *reply[: j + 1]])[0])] = 1
    return mask


def test_a_message_list_reply_is_read_whole(tmp_path: Path) -> None:
    """Every message of a message-list reply is kept, in order (not only the last), and the
    reply's log-probability covers each of its assistant messages, never the tool result."""
    from afm.training.data.preferences import encode_response, read_preferences

    read = read_preferences([_rows_file(tmp_path, LIST_PAIRS)])
    assert not read.rejects and [p.chosen for p in read.pairs][0] == LIST_PAIRS[0]["chosen"]
    tok = tokenizer()
    ids, reply = encode_response(tok, MULTI_TURN, LIST_PAIRS[0]["chosen"])
    np.testing.assert_array_equal(reply, _assistant_spans(tok, MULTI_TURN, LIST_PAIRS[0]["chosen"]).astype(bool))
    text = tok.decode([t for t, r in zip(ids, reply) if r and t != tok.end_id])
    assert text.endswith("</tool_call>Answer: 8") and text.count("8") == 1  # the tool result "8" is not in it


@pytest.mark.parametrize("kind", ["dpo", "ipo"])
def test_message_list_loss_equals_the_transcription_over_every_assistant_message(kind: str, tmp_path: Path) -> None:
    beta = 0.5
    task, batch, params, parts, ctx = _task(kind, tmp_path, beta, LIST_PAIRS)
    out, pol, ref = _perturbed_loss(task, batch, params, ctx)
    tok = tokenizer()

    def every_assistant_message(prompt: list, reply: list) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(tok.encode_chat([*prompt, *reply])[0]), _assistant_spans(tok, prompt, reply)

    losses = [_transcribed_loss(kind, beta, parts, pol, ref, every_assistant_message(pair["prompt"], pair["chosen"]),
                                every_assistant_message(pair["prompt"], pair["rejected"])) for pair in LIST_PAIRS]
    assert float(out.loss[0]) == pytest.approx(sum(losses), rel=2e-4)


def test_replies_that_are_not_the_assistants_or_were_cut_are_refused_and_counted(tmp_path: Path) -> None:
    """A list ending in a user turn is no reply; one with a user turn inside is no reply of
    the model; a reply cut at the token limit is never a finished turn. Each is a counted
    reject with its reason; TRL's implicit-prompt form is read with its shared prefix as
    the prompt."""
    from afm.training.data.preferences import read_preferences

    good = {"role": "assistant", "content": "Answer: 8"}
    rows = [
        {"prompt": MULTI_TURN, "chosen": [good, {"role": "user", "content": "thanks!"}],
         "rejected": "Answer: 9", "level": "better"},
        {"prompt": MULTI_TURN, "chosen": [good, {"role": "user", "content": "more?"}, good],
         "rejected": "Answer: 9", "level": "better"},
        {"prompt": MULTI_TURN, "chosen": [{**good, "finish_reason": "length"}], "rejected": "Answer: 9",
         "level": "better"},
        {"prompt": MULTI_TURN, "chosen": "Answer: 8", "rejected": "Answer: 9 because 3 + 5 is",
         "rejected_finish_reason": "length", "level": "better"},
        {"prompt": MULTI_TURN, "chosen": [], "rejected": "Answer: 9", "level": "better"},
        # TRL's implicit prompt: both sides carry the whole conversation
        {"chosen": [*MULTI_TURN, good], "rejected": [*MULTI_TURN, {"role": "assistant", "content": "9"}],
         "level": "slightly_better"},
    ]
    read = read_preferences([_rows_file(tmp_path, rows)])
    assert read.reasons == {"reply_not_from_assistant": 1, "bad_response": 1, "cut_reply": 2, "missing_response": 1}
    (pair,) = read.pairs
    assert pair.prompt == MULTI_TURN and pair.chosen == [good] and pair.rejected == [{"role": "assistant", "content": "9"}]
