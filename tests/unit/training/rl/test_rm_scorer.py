"""The exported reward model as a scorer (the signature MDLOO / iTeC code against), and
best-of-N rejection sampling picking the scorer's best reply."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from tests.paths import CHAT_TOKENIZER

TOK = str(CHAT_TOKENIZER)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer
    from afm.training.rl.reward_model import PREFIX, head_specs

    root = tmp_path_factory.mktemp("rm") / "reward-model"
    cfg = get_config("tiny").replace(vocab_size=640, n_layers=1)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    save_params(model, root / "model")
    heads = {k[len(PREFIX):]: np.asarray(s.init(jax.random.key(i), {}))
             for i, (k, s) in enumerate(head_specs(cfg.dim, 8).items())}
    heads["reward/w"] = np.asarray(jax.random.normal(jax.random.key(9), (cfg.dim,)))
    np.savez(root / "heads.npz", **heads)
    (root / "reward_model.json").write_text(json.dumps({"format": "afm-reward-model-1", "tokenizer": TOK,
                                                        "seq_len": 128}))
    return root, model


def test_scorer_signature_and_batch_independence(exported):
    from afm.synth.arith_task import make_problems
    from afm.training.rl.reward_model import RewardModelScorer

    root, _ = exported
    scorer = RewardModelScorer(root, TOK, batch_size=4)
    problems = make_problems(6, seed=0)
    prompts = [p.messages() for p in problems]
    responses = [p.solution() for p in problems[:3]] + ["Answer: 1", "no idea", "x " * 20]
    rewards = scorer(prompts, responses)
    assert rewards.dtype == np.float32 and rewards.shape == (6,)
    assert np.isfinite(rewards).all() and np.unique(rewards).size > 1
    one_by_one = np.array([scorer([p], [r])[0] for p, r in zip(prompts, responses, strict=True)])
    np.testing.assert_allclose(rewards, one_by_one, atol=1e-4)  # a reward does not depend on its batch
    with pytest.raises(ValueError):
        scorer(prompts, responses[:2])
    with pytest.raises(FileNotFoundError):
        RewardModelScorer(root.parent, TOK)


def test_best_of_n_keeps_the_scorers_best_reply(exported, tmp_path):
    from afm.model.text.tokenizer import Tokenizer
    from afm.synth.arith_task import make_problems
    from afm.training.rl.rejection_sampling import best_of_n, write_sft_rows

    _, model = exported
    tok = Tokenizer.load(TOK)
    prompts = [p.messages() for p in make_problems(3, seed=1)]
    seen: dict[str, float] = {}

    def scorer(ps, rs):  # prefer longer replies: a checkable rule
        out = np.asarray([float(len(r)) for r in rs], np.float32)
        seen.update(zip(rs, out.tolist(), strict=True))
        return out

    s = best_of_n(model, tok, prompts, scorer, 4, max_new_tokens=12, temperature=1.0, seed=0)
    assert s.prompts == 3 and s.kept + s.no_stopped_reply == 3 and s.tokens > 0
    for row in s.rows:
        assert row["messages"][:-1] in prompts and row["messages"][-1]["role"] == "assistant"
        assert row["reward"] == len(row["messages"][-1]["content"])
    assert write_sft_rows(tmp_path / "rs.jsonl", s.rows) == s.kept


def test_a_cut_reply_is_scored_without_the_end_token_and_a_too_long_one_not_at_all(exported):
    """The chat template closes every reply with <|end|>: a reply cut at the token limit is
    scored as the unfinished text it is; a conversation past the window is unscored (NaN,
    with the reason), never scored with its start cut off."""
    from afm.synth.arith_task import make_problems
    from afm.training.rl.reward_model import RewardModelScorer
    from afm.training.rl.rewards import score_responses

    root, _ = exported
    scorer = RewardModelScorer(root, TOK, batch_size=4)
    prompt = make_problems(1, seed=0)[0].messages()
    finished, cut = scorer([prompt, prompt], ["Answer: 4", "Answer: 4"], stopped=[True, False])
    assert finished != cut
    ids = scorer.encode(prompt, "Answer: 4", stopped=False)
    assert ids == scorer.encode(prompt, "Answer: 4")[:-1] and scorer.encode(prompt, "Answer: 4")[-1] == scorer.tokenizer.end_id
    batch = score_responses(scorer, [prompt, prompt], ["Answer: 4", "word " * 200], stopped=[True, True])
    assert np.isfinite(batch.scores[0]) and np.isnan(batch.scores[1])
    assert batch.unscored_share == 0.5 and "longer than the reward model's window (128 tokens)" in batch.reasons
