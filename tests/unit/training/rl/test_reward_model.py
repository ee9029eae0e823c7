"""Preference data reader (bad rows are rejects), the reward model's last-token gather
(left/right padding, packing) and its loss against a NumPy transcription of eq. 3-5."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from afm.training.data.preferences import (
    LEVELS,
    PairEvalInput,
    PairLoader,
    read_preferences,
    tokenize_pairs,
)
from afm.training.rl.reward_model import (
    apply_heads,
    head_specs,
    last_token_index,
    segment_last_index,
)
from afm.training.tasks.reward_model import SOFT_LABELS, reward_model_loss
from tests.paths import CHAT_TOKENIZER

TOK = str(CHAT_TOKENIZER)
GOOD = {"prompt": [{"role": "user", "content": "2+2?"}], "chosen": "4", "rejected": "5",
        "level": "better", "chosen_grades": {"instruction_following": 2, "verbosity": 1,
                                             "truthfulness": 2, "harmlessness": 2}}


def test_reader_keeps_good_rows_and_rejects_bad_ones_with_reasons(tmp_path):
    rows = [
        json.dumps(GOOD),
        json.dumps({**GOOD, "prompt": "plain string prompt"}),
        "{not json",
        json.dumps([1, 2]),
        json.dumps({**GOOD, "level": "much_better"}),
        json.dumps({**GOOD, "chosen": ""}),
        json.dumps({**GOOD, "rejected": "4"}),
        json.dumps({**GOOD, "prompt": [{"role": "wizard", "content": "x"}]}),
        json.dumps({**GOOD, "chosen_grades": {"verbosity": 7}}),
        json.dumps({**GOOD, "rejected_grades": {"politeness": 1}}),
    ]
    (tmp_path / "p.jsonl").write_text("\n".join(rows) + "\n")
    pq.write_table(pa.Table.from_pylist([{**GOOD, "prompt": json.dumps(GOOD["prompt"]),
                                          "chosen_grades": json.dumps(GOOD["chosen_grades"])}]),
                   tmp_path / "p.parquet")
    out = read_preferences([str(tmp_path)])
    assert len(out.pairs) + len(out.rejects) == len(rows) + 1  # every record accounted for
    assert len(out.pairs) == 3
    assert out.reasons == {"undecodable": 1, "not_an_object": 1, "bad_level": 1, "missing_response": 1,
                           "identical_responses": 1, "bad_prompt": 1, "bad_grades": 2}
    pair = out.pairs[0]
    assert pair.level == LEVELS.index("better")
    assert pair.chosen_grades == (2, 1, 2, 2) and pair.rejected_grades == (-1, -1, -1, -1)


def test_too_long_pairs_are_rejected_and_batches_mark_the_reply(tmp_path):
    from afm.model.text.tokenizer import Tokenizer

    tok = Tokenizer.load(TOK)
    long = {**GOOD, "chosen": "word " * 200}
    (tmp_path / "p.jsonl").write_text(json.dumps(GOOD) + "\n" + json.dumps(long) + "\n")
    read = read_preferences([str(tmp_path / "p.jsonl")])
    data = tokenize_pairs(read.pairs, tok, 64, read.rejects)
    assert len(data.level) == 1 and read.rejects[-1]["reason"].startswith("too_long")
    loader = PairLoader(data, seq_len=64, global_batch=2, pad_id=tok.pad_id, seed=0)
    batch = next(loader)
    n = data.chosen[0].size
    assert batch["chosen_segments"][0].sum() == n and batch["chosen"][0, n - 1] == tok.end_id
    reply = batch["chosen_response"][0]
    start = int(np.argmax(data.chosen_reply[0]))  # the first reply token
    assert reply[start] == 1 and reply[:start].sum() == 0 and reply[:n].sum() == data.chosen_reply[0].sum()
    state = loader.state()
    again = PairLoader(data, seq_len=64, global_batch=2, pad_id=tok.pad_id, seed=0, state=state)
    np.testing.assert_array_equal(next(again)["chosen"], next(loader)["chosen"])  # resumes exactly
    ev = PairEvalInput(data, seq_len=64, global_batch=4, pad_id=tok.pad_id)
    assert ev.batches_needed() == 1 and next(ev)["weight"].tolist() == [1, 0, 0, 0]


def test_a_task_input_says_how_many_pairs_it_dropped(tmp_path):
    """A run must not lose pairs silently: the too_long rejects of a task's input are
    counted on the console with the setting to change (once for the held-out set)."""
    from afm.console import console
    from afm.model.text.tokenizer import Tokenizer
    from afm.training.data.preferences import PairTaskInputs

    tok = Tokenizer.load(TOK)
    (tmp_path / "p.jsonl").write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "chosen": "word " * 200}) + "\n")

    class Inputs(PairTaskInputs):
        tokenizer = tok

        class config:  # noqa: N801 - the shape of a TrainConfig this mixin reads
            class data:  # noqa: N801
                paths, seq_len, global_batch_size, seed = [str(tmp_path / "p.jsonl")], 64, 2, 0

        def _pairs(self, paths):
            read = read_preferences(list(paths))
            return tokenize_pairs(read.pairs, tok, 64, read.rejects)

    task = Inputs()
    with console.capture() as cap:
        task.make_input(vocab_size=600, process_index=0, process_count=1)
        for _ in range(2):
            task.make_eval_input([str(tmp_path / "p.jsonl")], vocab_size=600, process_index=0, process_count=1)
    text = " ".join(cap.get().split())  # the console wraps long lines
    assert text.count("records rejected") == 2 and text.index("training pairs") < text.index("held-out pairs")
    assert "1 of 2 records rejected (too_long 1); raise data.seq_len (now 64)" in text


def test_last_token_with_right_and_left_padding_and_packing():
    right = jnp.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    left = jnp.array([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
    assert last_token_index(right).tolist() == [2, 4, 0]
    assert last_token_index(left).tolist() == [4, 4]
    packed = jnp.array([[1, 1, 2, 2, 2, 3, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    index, present = segment_last_index(packed, 4)
    assert index[0, :3].tolist() == [1, 4, 5] and present[0].tolist() == [True, True, True, False]
    assert index[1, 0] == 7 and present[1].tolist() == [True, False, False, False]
    # the reward of a row does not depend on how it was padded (right vs left): the model
    # sees the same tokens at the same positions with the padding masked out
    from flax import nnx

    from afm.model.config import get_config
    from afm.model.transformer import Transformer
    from afm.training.rl.reward_model import gather_last

    cfg = get_config("tiny").replace(vocab_size=64, dtype="float32")
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    ids = np.array([5, 9, 3, 7])
    rows = np.zeros((2, 7), np.int32)
    seg = np.zeros((2, 7), np.int32)
    rows[0, :4], seg[0, :4] = ids, 1
    rows[1, 3:], seg[1, 3:] = ids, 1
    pos = np.maximum(np.cumsum(seg != 0, axis=-1) - 1, 0)
    hidden, _ = model.features(jnp.asarray(rows), positions=jnp.asarray(pos), segment_ids=jnp.asarray(seg))
    feats = gather_last(hidden, last_token_index(jnp.asarray(seg)))
    np.testing.assert_allclose(feats[0], feats[1], atol=1e-5)
    alone, _ = model.features(jnp.asarray(ids[None]))
    np.testing.assert_allclose(feats[0], alone[0, -1], atol=1e-5)


def _np_log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _np_loss(r_c, r_r, u_c, u_r, level, grades, lam):
    """Report eq. 3-5, written out in NumPy."""
    p = np.array([0.65, 0.75, 0.85, 0.95])[level]
    d = r_c - r_r
    rank = -p * _np_log_sigmoid(d) - (1 - p) * _np_log_sigmoid(-d)

    def ce(u, z):
        logp = u - np.log(np.exp(u).sum(-1, keepdims=True))
        return np.array([sum(-logp[b, k, z[b, k]] for k in range(4) if z[b, k] >= 0) for b in range(len(z))])

    regu = ce(u_c, grades[:, :4]) + ce(u_r, grades[:, 4:])
    return rank + lam * regu


def test_soft_label_loss_equals_numpy_transcription_of_eq_3_to_5():
    rng = np.random.default_rng(0)
    b = 6
    r_c, r_r = rng.normal(size=b), rng.normal(size=b)
    u_c, u_r = rng.normal(size=(b, 4, 3)), rng.normal(size=(b, 4, 3))
    level = np.array([0, 1, 2, 3, 3, 1])
    grades = rng.integers(0, 3, size=(b, 8))
    grades[2, 5] = -1  # a missing grading adds no term
    total, rank, regu = reward_model_loss(*(jnp.asarray(x, jnp.float32) for x in (r_c, r_r, u_c, u_r)),
                                          jnp.asarray(level), jnp.asarray(grades), 0.3)
    np.testing.assert_allclose(np.asarray(total), _np_loss(r_c, r_r, u_c, u_r, level, grades, 0.3), rtol=1e-5)
    assert SOFT_LABELS == (0.65, 0.75, 0.85, 0.95)
    # the soft label: the ranking loss is minimised at d = logit(p), not at d -> infinity
    for lv, p in enumerate(SOFT_LABELS):
        d = np.linspace(-1, 6, 7001)
        losses = np.asarray(reward_model_loss(jnp.asarray(d), jnp.zeros_like(jnp.asarray(d)),
                                              jnp.zeros((d.size, 4, 3)), jnp.zeros((d.size, 4, 3)),
                                              jnp.full(d.size, lv), -jnp.ones((d.size, 8), jnp.int32), 0.0)[1])
        assert abs(d[losses.argmin()] - np.log(p / (1 - p))) < 2e-3


def test_heads_shapes_and_initial_reward_is_zero():
    specs = head_specs(16, 8)
    heads = {k: s.init(jax.random.key(i), {}) for i, (k, s) in enumerate(specs.items())}
    reward, logits = apply_heads(heads, jnp.ones((3, 16)))
    assert reward.shape == (3,) and logits.shape == (3, 4, 3)
    assert np.all(np.asarray(reward) == 0)
