"""Arena-Hard v2.0 and AlpacaEval 2.0 LC as their published code computes them: on fixed
fixtures (``parity/fixtures.json``), afm's parser, per-category bootstrap, annotation,
win rate and LC GLMs equal the numbers the published code computed from the same inputs
(``parity/expected.json``, written by ``parity/make_expected.py`` from
lmarena/arena-hard-auto and tatsu-lab/alpaca_eval at the commits recorded in it)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from afm.evaluation.posttrain.judges.grading import Game, PairItem, PairResult
from afm.evaluation.posttrain.judges.prompts import parse_pairwise
from afm.evaluation.posttrain.writing import alpaca_eval, arena_hard

HERE = Path(__file__).parent / "parity"
FIXTURES = json.loads((HERE / "fixtures.json").read_text())
EXPECTED = json.loads((HERE / "expected.json").read_text())


def test_expected_values_name_their_source() -> None:
    assert EXPECTED["arena_hard"]["commit"].startswith("196f6b8")
    assert EXPECTED["alpaca_eval"]["commit"].startswith("cd543a1")


def test_arena_hard_verdicts_are_parsed_as_v2_parses_them() -> None:
    """Upper-cased, double brackets first, the last label wins: a lower-case label, a
    single-bracket one and a judge that changes its mind all have a verdict."""
    got = [[parse_pairwise(t) for t in row["games"]] for row in FIXTURES["arena_hard"]]
    assert got == EXPECTED["arena_hard"]["labels"]
    assert parse_pairwise("verdict: [[a>b]]") == "A>B"
    assert parse_pairwise("[[A>B]] then [[B>A]]") == "B>A"
    assert parse_pairwise("Final: [A=B]") == "A=B"
    assert parse_pairwise("[[B>A]] [B>>A]") == "B>A"
    assert parse_pairwise("[[A>>>B]]") is None  # not one of the ten labels: a failed judgment


def _arena_results() -> tuple[list[PairResult], list[str]]:
    results, categories = [], []
    for row in FIXTURES["arena_hard"]:
        item = PairItem(row["uid"], "q", "answer", "baseline", category=row["category"])
        results.append(PairResult(item, tuple(Game(parse_pairwise(t)) for t in row["games"])))
        categories.append(row["category"])
    return results, categories


def test_arena_hard_scores_each_category_on_its_own_as_show_result_does() -> None:
    from afm.evaluation.posttrain.judges.grading import model_scores

    results, categories = _arena_results()
    seed = EXPECTED["arena_hard"]["seed"]
    by_category = arena_hard.score_by_category(results, categories, seed=seed)
    assert set(by_category) == set(EXPECTED["arena_hard"]["per_category"])
    for category, want in EXPECTED["arena_hard"]["per_category"].items():
        battles = [b for r, c in zip(results, categories) if c == category for b in (model_scores(r) or [])]
        assert battles == want["battles"]
        got = by_category[category]
        for key in ("score", "lower", "upper"):
            assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-15)
    # the headline is v2.0's default table (hard_prompt), never a mean over both baselines
    assert arena_hard.headline(by_category) == "hard_prompt"
    pooled = arena_hard.score(results, seed=seed)["score"]
    assert pooled != pytest.approx(by_category["hard_prompt"]["score"], abs=1e-3)


def test_arena_hard_judges_each_category_with_its_own_prompt() -> None:
    from afm.evaluation.posttrain.judges.prompts import arena_hard_judge, pairwise_messages

    settings = arena_hard_judge()
    creative = pairwise_messages("Write a poem.", "A's", "B's", "creative_writing")
    hard = pairwise_messages("Prove it.", "A's", "B's", "hard_prompt")
    assert creative[0]["content"] == settings["system_prompts"]["creative_writing"] != hard[0]["content"]
    assert "generating your own answer" in hard[0]["content"] and "generating your own answer" not in creative[0]["content"]
    assert hard[1]["content"].startswith("<|User Prompt|>\nProve it.") and "<|The Start of Assistant B's Answer|>\nB's" in hard[1]["content"]
    assert pairwise_messages("q", "a", "b", "general")[0]["content"] == hard[0]["content"]  # others: the original


def _alpaca():
    data = FIXTURES["alpaca_eval"]
    items = data["items"]
    want = EXPECTED["alpaca_eval"]
    return data, items, want


def test_alpaca_eval_annotation_is_the_weighted_annotators() -> None:
    """Same order switch per instruction, same prompt, same preference from the log-probs."""
    _, items, want = _alpaca()
    for item, switched, digest, pref in zip(items, want["switched"], want["messages_sha256"], want["preferences"],
                                            strict=True):
        assert alpaca_eval.is_switched(item["instruction"]) == switched
        messages, s = alpaca_eval.weighted_messages(item["instruction"], item["reference"], item["answer"])
        assert s == switched
        assert hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest() == digest
        if item["reference"] == item["answer"]:
            assert pref == 1.5
            continue
        top = {t["token"]: t["logprob"] for t in item["top_logprobs"]}
        got = alpaca_eval.logprob_preference(top, switched)
        if pref is None:
            assert math.isnan(got)
        else:
            assert got == pytest.approx(pref, rel=1e-12)


def _prefs_and_lengths():
    data, items, want = _alpaca()
    prefs = [None if p is None else p for p in want["preferences"]]
    model_len = [len(i["answer"]) for i in items]
    ref_len = [len(i["reference"]) for i in items]
    difficulty = [i["difficulty"] for i in items]
    rows = data["gamed"]
    gamed = alpaca_eval.GamedRows(np.array([r["preference"] for r in rows], float),
                                  np.array([r["std_delta_len"] for r in rows], float),
                                  np.array([r["instruction_difficulty"] for r in rows], float))
    return prefs, model_len, ref_len, difficulty, gamed, want


def test_alpaca_eval_win_rate_equals_alpaca_evals() -> None:
    prefs, *_, want = _prefs_and_lengths()
    got = alpaca_eval.win_rate(prefs)
    w = want["win_rate"]
    assert got["win_rate"] * 100 == pytest.approx(w["win_rate"], rel=1e-12)
    assert got["stderr"] * 100 == pytest.approx(w["standard_error"], rel=1e-12)
    assert got["discrete_win_rate"] * 100 == pytest.approx(w["discrete_win_rate"], rel=1e-12)
    assert (got["n_wins"], got["n_losses"], got["n_draws"], got["n_total"]) == (
        w["n_wins"], w["n_wins_base"], w["n_draws"], w["n_total"])
    assert got["n_failed"] == sum(p is None for p in prefs) > 0


@pytest.mark.parametrize("glm", ["length_controlled_v1", "length_controlled_noreg", "length_controlled_minimal"])
def test_alpaca_eval_lc_win_rate_and_its_standard_error_equal_alpaca_evals(glm: str) -> None:
    """Over every item (the failed annotations included, as AlpacaEval averages), with the
    published formula and its regularisation towards the gamed baselines."""
    prefs, model_len, ref_len, difficulty, gamed, want = _prefs_and_lengths()
    lc = alpaca_eval.length_controlled(prefs, model_len, ref_len, difficulty, gamed, glm=glm)
    w = want["length_controlled"][glm]
    assert lc["glm"] == glm
    assert lc["lc_win_rate"] * 100 == pytest.approx(w["length_controlled_winrate"], rel=1e-9)
    assert lc["lc_stderr"] * 100 == pytest.approx(w["lc_standard_error"], rel=1e-6, abs=1e-9)
    if glm != "length_controlled_minimal":
        assert lc["lc_stderr"] > 0.005  # no longer 0 by construction: the difficulty varies
    else:
        assert "by construction" in lc["note"]


def test_the_formula_follows_the_data_given() -> None:
    prefs, model_len, ref_len, difficulty, gamed, _ = _prefs_and_lengths()
    assert alpaca_eval.choose_glm(difficulty, gamed) == "length_controlled_v1"
    assert alpaca_eval.choose_glm(difficulty, None) == "length_controlled_noreg"
    assert alpaca_eval.choose_glm(None, None) == "length_controlled_minimal"


class _LogprobJudge:
    """Answers AlpacaEval's annotator request with fixed top log-probs per instruction."""

    def __init__(self, answers: dict[str, object]):
        self.answers, self.asked = answers, []

    def ask_logprobs(self, conversations, *, top_logprobs, max_tokens, temperature):
        from afm.evaluation.posttrain.judges.judge import JudgeReply

        self.asked.append((len(conversations), top_logprobs, max_tokens, temperature))
        out = []
        for conv in conversations:
            key = next(k for k in self.answers if k in conv[-1]["content"])
            value = self.answers[key]
            out.append(JudgeReply(None, "HTTP 500") if value == "fail" else JudgeReply("x", top_logprobs=value))
        return out


def test_weighted_annotation_of_a_run_keeps_failures_apart() -> None:
    """Identical outputs are a draw without asking; a failed request and a reply without
    m or M have no preference (left out of the win rate, never a win)."""
    judge = _LogprobJudge({"q1": {"m": math.log(0.25), "M": math.log(0.75)}, "q2": "fail",
                           "q3": {"The": -0.1}})
    notes = alpaca_eval.annotate_weighted(judge, ["q1", "q2", "q3", "q4"], ["r1", "r2", "r3", "same"],
                                          ["a1", "a2", "a3", "same"])
    assert judge.asked == [(3, 5, 1, 1.0)]  # one token, top 5, temperature 1: the annotator's settings
    switched = alpaca_eval.is_switched("q1")
    assert notes[0].preference == pytest.approx(1.25 if switched else 1.75)  # P(model) = P(token of the model)
    assert notes[1].preference is None and "judge failed" in notes[1].error
    assert notes[2].preference is None and "neither m nor M" in notes[2].error
    assert notes[3].preference == 1.5
    assert alpaca_eval.win_rate([n.preference for n in notes])["n_failed"] == 2


def test_a_checkpoint_judge_returns_its_first_tokens_log_probs() -> None:
    """What an OpenAI server's top_logprobs gives: the k likeliest first tokens under the
    model, checked against a direct log-softmax of the prompt's last logits."""
    import jax.numpy as jnp
    from flax import nnx

    from afm.model.config import get_config
    from afm.model.inference.sampling import first_token_logprobs
    from afm.model.transformer import Transformer

    model = Transformer(get_config("tiny").replace(dtype="float32"), rngs=nnx.Rngs(0))
    prompts = [[1, 5, 9], [4, 2, 7, 7, 3]]
    got = first_token_logprobs(model, prompts, 5)
    for prompt, top in zip(prompts, got, strict=True):
        logits = np.asarray(model(jnp.asarray([prompt])))[0, -1].astype(np.float64)
        lp = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
        order = np.argsort(-lp)[:5]
        assert [t for t, _ in top] == order.tolist()
        np.testing.assert_allclose([v for _, v in top], lp[order], atol=1e-5)
