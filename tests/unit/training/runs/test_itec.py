"""An iTeC round on two tiny members: per-prompt reranking among *finished* replies, wins,
the SFT set, pair export, and a reward that cannot score. Member ``a`` ends its replies
often (its end-of-turn embedding is scaled up: each step ends it with probability ~1/2),
member ``b`` is plain random and is cut at ``max_new_tokens`` nearly always."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from afm.config import ConfigError
from afm.training.rl.rewards import TaskReward
from afm.training.runs.itec import Member, RoundConfig, export_pairs, parse_committee, run_round
from tests.paths import CHAT_TOKENIZER

CHAT = CHAT_TOKENIZER


@pytest.fixture(scope="module")
def members(tmp_path_factory) -> list[Member]:
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.text.tokenizer import Tokenizer
    from afm.model.transformer import Transformer

    cfg = get_config("tiny").replace(vocab_size=600, max_seq_len=128)
    end = Tokenizer.load(CHAT).end_id
    root = tmp_path_factory.mktemp("committee")
    out = []
    for seed, name in ((0, "a"), (1, "b")):
        model = Transformer(cfg, rngs=nnx.Rngs(params=seed))
        if name == "a":
            table = np.asarray(model.embed[...]).copy()
            direction = np.random.default_rng(seed).standard_normal(cfg.dim)
            table[end] = 3.0 / cfg.logit_scale * direction / np.linalg.norm(direction)
            model.embed[...] = table
        save_params(model, root / name)
        out.append(Member(name=name, checkpoint=str(root / name)))
    return out


def test_round_reranks_per_prompt_and_records_wins(members: list[Member], tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"say {w}"}) + "\n" for w in ("hi", "yes", "ok")))
    reward = TaskReward(lambda p, r: float(len(r)))  # longest response wins
    cfg = RoundConfig(name="r1", prompts=str(prompts), tokenizer=str(CHAT), committee=members, k=2,
                      max_new_tokens=6, out=str(tmp_path / "round"), seed=3)
    summary = run_round(cfg, reward_fn=reward, eval_reward_fn=reward, progress=False)
    rows = [json.loads(x) for x in (tmp_path / "round" / "sft.jsonl").read_text().splitlines()]
    cands = [json.loads(x) for x in (tmp_path / "round" / "candidates.jsonl").read_text().splitlines()]
    assert len(cands) == 3 * 2 * 2
    finished = [c for c in cands if c["stop_reason"] != "length" and c["response"]]
    with_finished = {c["prompt_index"] for c in finished}
    assert {c["stop_reason"] for c in cands} >= {"length", "end_of_turn"}  # both kinds occur
    assert len(rows) == len(with_finished) and summary["prompts_without_a_finished_reply"] == 3 - len(rows)
    assert sum(m["wins"] for m in summary["members"].values()) == len(rows)
    for row in rows:
        p = int(row["id"].rsplit("-", 1)[1])
        best = max(c["reward"] for c in finished if c["prompt_index"] == p)  # never a cut reply
        assert row["reward"] == best and row["messages"][-1]["role"] == "assistant"
        assert row["messages"][-1]["content"] in {c["response"] for c in finished if c["prompt_index"] == p}
    for m in summary["members"].values():
        assert np.isfinite(m["greedy_true_reward"])  # the member alone, greedy
        # the set's pick is at least the member's own finished best on every prompt where it has one
        assert m["set_margin"]["own_best_of_k"]["mean"] >= 0 or np.isnan(m["set_margin"]["own_best_of_k"]["mean"])
        cov = m["true_reward_coverage"]  # every column says what it rests on
        assert cov["samples"] == {"scored": 6, "of": 6} and cov["greedy"]["of"] == 3
    closest = summary["smallest_set_margin"]
    assert closest["of"] == len(rows) and closest["prompts"] <= closest["of"]
    assert summary["reranked_true_reward_coverage"]["of"] == len(rows)
    assert closest["mean"] == min(w["mean"] for m in summary["members"].values() for w in m["set_margin"].values())
    counts = export_pairs(tmp_path / "round" / "candidates.jsonl", prompts, tmp_path / "pairs.jsonl", per_prompt=2)
    pairs = [json.loads(x) for x in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert counts["pairs"] == len(pairs) and all(p["member_a"] != p["member_b"] for p in pairs)
    finished_texts = {c["response"] for c in finished}
    assert all(p["response_a"] in finished_texts and p["response_b"] in finished_texts for p in pairs)
    n_cut = len([c for c in cands if c["stop_reason"] == "length"])
    assert counts["cut_replies"] == n_cut and counts["skipped_unscored"] == 0  # every finished reply was scored
    # the round's stats count the cut replies, per member and in all
    assert summary["cut_replies"] == n_cut == sum(m["cut_replies"] for m in summary["members"].values())


def test_a_reward_that_scores_nothing_stops_the_round(members: list[Member], tmp_path: Path) -> None:
    from afm.training.rl.rewards import UnscoredRewardError

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"say {w}"}) + "\n" for w in ("hi", "yes")))

    def only_arithmetic(prompt, response):
        raise ValueError("not_arithmetic: the prompt is no arithmetic problem")

    cfg = RoundConfig(name="r", prompts=str(prompts), tokenizer=str(CHAT), committee=members, k=2,
                      max_new_tokens=6, out=str(tmp_path / "round"))
    with pytest.raises(UnscoredRewardError, match="could not score 100% of 4 responses of member a.*not_arithmetic: 4"):
        run_round(cfg, reward_fn=TaskReward(only_arithmetic), progress=False)


def test_paired_margin_is_the_mean_difference_with_its_paired_error() -> None:
    from afm.training.runs.itec import paired_margin

    a, b = np.array([1.0, 1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0, 0.0])
    m = paired_margin(a, b)
    assert m["mean"] == pytest.approx(0.5)
    assert m["stderr"] == pytest.approx(np.std([1, 0, 0, 1], ddof=1) / 2)


def test_committee_spec_parsing() -> None:
    ms = parse_committee("sft=runs/sft/best, runs/mdloo/model")
    assert [(m.name, m.checkpoint) for m in ms] == [("sft", "runs/sft/best"), ("mdloo", "runs/mdloo/model")]
    with pytest.raises(ConfigError):
        parse_committee("a=x,a=y")
    with pytest.raises(ConfigError):
        parse_committee(" , ")


def test_round_reranks_with_a_reward_model_checkpoint(members: list[Member], tmp_path: Path) -> None:
    """``--rm PATH``: a reward-model directory (``afm rm train`` layout) is loaded as the
    round's reward through the shared scorer signature."""
    import jax
    import numpy as np
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer
    from afm.training.rl.reward_model import PREFIX, RewardModelScorer, head_specs
    from afm.training.rl.rewards import load_reward

    rm = tmp_path / "rm"
    cfg = get_config("tiny").replace(vocab_size=640, n_layers=1)
    save_params(Transformer(cfg, rngs=nnx.Rngs(0)), rm / "model")
    heads = {k[len(PREFIX):]: np.asarray(s.init(jax.random.key(i), {}))
             for i, (k, s) in enumerate(head_specs(cfg.dim, 8).items())}
    heads["reward/w"] = np.asarray(jax.random.normal(jax.random.key(9), (cfg.dim,)))
    np.savez(rm / "heads.npz", **heads)
    (rm / "reward_model.json").write_text(json.dumps({"format": "afm-reward-model-1", "tokenizer": str(CHAT),
                                                      "seq_len": 128}))
    assert isinstance(load_reward(str(rm)), RewardModelScorer)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"say {w}"}) + "\n" for w in ("hi", "yes")))
    summary = run_round(RoundConfig(name="r", prompts=str(prompts), tokenizer=str(CHAT), reward=str(rm),
                                    committee=members, k=2, max_new_tokens=6, out=str(tmp_path / "round")),
                        progress=False)
    wins = sum(m["wins"] for m in summary["members"].values())
    assert wins == 2 - summary["prompts_without_a_finished_reply"] and wins > 0
    assert np.isfinite(summary["reranked_mean_reward"])


def test_true_reward_columns_say_how_much_they_could_score(members: list[Member], tmp_path: Path) -> None:
    """A true reward that cannot score some replies leaves them out of its means; each
    column says how many it rests on, and the paired margin how many prompts."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"say {w}"}) + "\n" for w in ("hi", "yes", "ok")))

    def truth(prompt, response):
        if prompt[-1]["content"].endswith("ok"):
            raise ValueError("unknown_prompt: this grader has no answer for it")
        return float(len(response))

    cfg = RoundConfig(name="r2", prompts=str(prompts), tokenizer=str(CHAT), committee=members, k=2,
                      max_new_tokens=6, out=str(tmp_path / "round"), seed=3)
    summary = run_round(cfg, reward_fn=TaskReward(lambda p, r: float(len(r))), eval_reward_fn=TaskReward(truth),
                        progress=False)
    for m in summary["members"].values():
        cov = m["true_reward_coverage"]
        assert cov["samples"]["of"] == 6 and cov["samples"]["scored"] <= 4  # the "ok" prompt's 2 never
        assert cov["greedy"] == {"scored": 2, "of": 3} or cov["greedy"]["scored"] < 2
    assert summary["smallest_set_margin"]["prompts"] < summary["smallest_set_margin"]["of"] or \
        summary["prompts_without_a_finished_reply"] > 0
