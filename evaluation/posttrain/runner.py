"""Run the post-training tasks of one ``afm eval``: replies, scores, results entries.

For each task: read its items, ask the model under evaluation (a synth generator; in
``afm eval`` the loaded checkpoint through its chat template), score the replies (BFCL's
AST match, a judge, or the keyword detector), and return entries in the ``afm-eval-v1``
task layout (``primary`` metric ``name,scorer``, value, stderr, items) so the terminal
table, the PNG/HTML report and ``afm eval compare`` treat them like lm-eval's tasks, plus
per-task details (data source, judge, failures, every item's verdict) for the results
file. Judge failures are counted per task and excluded from its score.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from afm.errors import UserError
from afm.evaluation.posttrain.bfcl import data as bdata
from afm.evaluation.posttrain.bfcl.score import verdict
from afm.evaluation.posttrain.catalogue import (
    BFCL_LIVE_AST,
    BFCL_NON_LIVE_AST,
    TASKS,
    PosttrainTask,
)
from afm.evaluation.posttrain.judges import grading
from afm.evaluation.posttrain.judges.judge import (
    Judge,
    JudgeSettings,
    RewardJudge,
    check_spec,
    make_judge,
)
from afm.evaluation.posttrain.safety import data as sdata
from afm.evaluation.posttrain.safety import refusal
from afm.evaluation.posttrain.safety import score as safety_score
from afm.evaluation.posttrain.writing import alpaca_eval, arena_hard
from afm.evaluation.posttrain.writing import data as wdata
from afm.synth.generators import GenerationRequest, Generator, generate_texts

REPLY_CHARS = 600  # how much of each reply the results file keeps


class PosttrainError(UserError):
    """Post-training tasks asked for without what they need (a judge, data)."""


@dataclass
class PosttrainOptions:
    judge: JudgeSettings | None = None
    safety_detector: str | None = None  # keyword | judge; default: judge when a judge is given
    max_new_tokens: int | None = None  # overrides every task's default
    arena_baseline: str | None = None
    alpaca_annotation: str = "weighted"  # AlpacaEval 2.0's log-prob annotator | games (two Arena-style games)
    seed: int = 1234
    scale_note: str = ""  # e.g. "toy scale": added to every task's note


@dataclass
class PosttrainResult:
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    judge: dict[str, Any] | None = None


def detector(options: PosttrainOptions) -> str:
    chosen = options.safety_detector or ("judge" if options.judge else "keyword")
    if chosen not in ("keyword", "judge"):
        raise PosttrainError(f"--safety-detector must be keyword or judge, not {chosen!r}")
    if chosen == "judge" and not options.judge:
        raise PosttrainError("--safety-detector judge needs --judge")
    return chosen


def check_tasks(names: list[str], options: PosttrainOptions) -> None:
    """Refuse before any model loads: judged tasks without a judge, bad detector choice."""
    judged = [n for n in names if TASKS[n].needs_judge]
    if judged and not options.judge:
        raise PosttrainError(f"{', '.join(judged)} need a judge: --judge openai:URL --judge-model NAME "
                             "(an OpenAI-compatible endpoint) or --judge checkpoint:PATH")
    if any(TASKS[n].family == "safety" for n in names):
        detector(options)
    if options.judge is not None:
        check_spec(options.judge)


def needs_judge(names: list[str], options: PosttrainOptions) -> bool:
    """Whether any of ``names`` is scored by the judge (writing, or safety with the judge)."""
    return any(TASKS[n].needs_judge for n in names) or (
        any(TASKS[n].family == "safety" for n in names) and detector(options) == "judge")


def check_data(names: list[str], options: PosttrainOptions, data_dir: str | None, allow_hub: bool) -> None:
    """Refuse before any model loads or any reply is written: a task whose files are missing
    or broken (a judged writing set not in ``data_dir`` without ``allow_hub``, a BFCL or
    safety file in ``data_dir`` not in its layout). Reading them all takes well under a second."""

    for name in names:
        family = TASKS[name].family
        if family == "bfcl":
            bdata.load(name, data_dir)
        elif family == "safety":
            sdata.load(name, data_dir)
        elif name == "alpaca_eval" and not allow_hub:
            wdata.load_alpaca_eval(data_dir)
        elif name == "arena_hard" and not allow_hub:
            wdata.load_arena_hard(data_dir, options.arena_baseline)
        elif name == "afm_writing":
            wdata.load_graded(data_dir)


def _limit(n: int, limit: int | float | None) -> int:
    if limit is None:
        return n
    return min(n, int(math.ceil(n * limit)) if limit < 1 else int(limit))


def _entry(task: PosttrainTask, scorer: str, value: float | None, stderr: float | None, n: int,
           extra: dict[str, float | None] | None = None) -> dict[str, Any]:
    key = f"{task.metric},{scorer}"
    metrics = {key: {"value": value, "stderr": stderr}}
    for name, v in (extra or {}).items():
        metrics[f"{name},{scorer}"] = {"value": v, "stderr": None}
    return {"primary": key, "metrics": metrics, "samples": n, "num_fewshot": 0, "group": False,
            "parent": None, "higher_is_better": {task.metric: not task.lower_is_better}}


def run_posttrain(names: list[str], generator: Generator, *, data_dir: str | None, limit: int | float | None,
                  options: PosttrainOptions, progress: bool = True, allow_hub: bool = False) -> PosttrainResult:
    """Every task of ``names`` on ``generator``'s replies. Files come from ``data_dir`` or the
    ones afm ships; only with ``allow_hub`` are the writing sets fetched from the hub."""
    check_tasks(names, options)
    check_data(names, options, data_dir, allow_hub)
    out = PosttrainResult()
    judge: Judge | RewardJudge | None = None
    if needs_judge(names, options) and options.judge is not None:
        judge = make_judge(options.judge)
        out.judge = judge.describe()
    for name in names:
        task = TASKS[name]
        run = {"bfcl": _bfcl, "safety": _safety, "writing": _writing}[task.family]
        run(task, generator, judge, data_dir, limit, options, progress, out, allow_hub)
        if options.scale_note:
            out.notes[name] = f"{options.scale_note}; {out.notes.get(name, task.note)}"
    _bfcl_groups(out)
    return out


def _ask(generator: Generator, task: PosttrainTask, requests: list[GenerationRequest], progress: bool) -> list[str]:
    return [g.texts[0] for g in generate_texts(generator, requests, label=task.name, progress=progress)]


def _max_tokens(task: PosttrainTask, options: PosttrainOptions) -> int:
    return options.max_new_tokens or task.max_new_tokens


# -- tool use ---------------------------------------------------------------------------------

def _bfcl(task: PosttrainTask, generator: Generator, judge: Any, data_dir: str | None, limit: Any,
          options: PosttrainOptions, progress: bool, out: PosttrainResult, allow_hub: bool) -> None:
    s = bdata.load(task.name, data_dir)
    n = _limit(len(s.entries), limit)
    entries, answers = s.entries[:n], (s.answers or [None] * len(s.entries))[:n]
    requests = [GenerationRequest(tuple(bdata.messages(e)), tools=tuple(bdata.to_tools(e["function"])),
                                  max_tokens=_max_tokens(task, options), seed=options.seed, tag=task.name)
                for e in entries]
    replies = _ask(generator, task, requests, progress)
    items, errors = [], Counter()
    for e, a, reply in zip(entries, answers, replies):
        v = verdict(s.category, e["function"], reply, a["ground_truth"] if a else None)
        errors[v.error_type or "valid"] += 1
        items.append({"id": e["id"], "valid": v.valid, "error_type": v.error_type, "reply": reply[:REPLY_CHARS]})
    acc = sum(i["valid"] for i in items) / n if n else None
    stderr = math.sqrt(acc * (1 - acc) / n) if acc is not None and n > 1 else None
    out.tasks[task.name] = _entry(task, "ast" if s.answers else "relevance", acc, stderr, n)
    out.details[task.name] = {"source": s.source, "path": s.path, "category": s.category,
                              "outcomes": dict(errors), "items": items}
    note = f"{task.note}; data: {s.source}"
    if s.source == "afm sample":
        note += (" (the first entries of each category only: install bfcl-eval with --no-deps or pass "
                 "--data-dir for the full set)")
    out.notes[task.name] = note


def _bfcl_groups(out: PosttrainResult) -> None:
    """BFCL's summaries: non-live AST as the plain mean of its categories, live AST weighted
    by items (the leaderboard's rules; simple is Python only here)."""
    for group, members, weighted in (("bfcl_non_live_ast", BFCL_NON_LIVE_AST, False),
                                     ("bfcl_live_ast", BFCL_LIVE_AST, True)):
        rows = [(out.tasks[m]["samples"], out.tasks[m]["metrics"]["accuracy,ast"]["value"])
                for m in members if m in out.tasks]
        if len(rows) < 2 or any(v is None for _, v in rows):
            continue
        total = sum(n for n, _ in rows)
        value = (sum(n * v for n, v in rows) / total) if weighted else statistics.fmean(v for _, v in rows)
        # members keep parent None: each category stays on the table (unlike MMLU's subjects)
        out.tasks[group] = {"primary": "accuracy,ast", "metrics": {"accuracy,ast": {"value": value, "stderr": None}},
                            "samples": total, "num_fewshot": 0, "group": True, "parent": None,
                            "higher_is_better": {"accuracy": True}, "members": len(rows),
                            "of": [m for m in members if m in out.tasks]}


# -- safety -----------------------------------------------------------------------------------

def _safety(task: PosttrainTask, generator: Generator, judge: Any, data_dir: str | None, limit: Any,
            options: PosttrainOptions, progress: bool, out: PosttrainResult, allow_hub: bool) -> None:
    s = sdata.load(task.name, data_dir)
    items = sdata.spread(s.items, _limit(len(s.items), limit))
    requests = [GenerationRequest(({"role": "user", "content": it.prompt},), max_tokens=_max_tokens(task, options),
                                  seed=options.seed, tag=task.name) for it in items]
    replies = _ask(generator, task, requests, progress)
    scorer = detector(options)
    verdicts = (safety_score.judge_verdicts(judge, items, replies) if scorer == "judge"
                else safety_score.keyword_verdicts(items, replies))
    summary = safety_score.summarize(s.harmful, verdicts)
    out.tasks[task.name] = _entry(task, scorer, summary["rate"], summary["stderr"], len(items))
    out.details[task.name] = {
        "source": s.source, "detector": scorer if scorer == "keyword" else out.judge,
        **{k: v for k, v in summary.items() if k not in ("rate", "stderr")},
        "items": [{"id": v.id, "category": v.category, "flagged": v.flagged, "reason": v.reason, "error": v.error,
                   "reply": r[:REPLY_CHARS]} for v, r in zip(verdicts, replies)]}
    label = refusal.LABEL if scorer == "keyword" else f"judged by {out.judge['judge'] if out.judge else '?'}"
    failed = f"; {summary['failed']} judgments failed (not counted)" if summary["failed"] else ""
    out.notes[task.name] = f"{task.note}; {label}; data: {s.source}{failed}"


# -- judged writing ---------------------------------------------------------------------------

def _writing(task: PosttrainTask, generator: Generator, judge: Any, data_dir: str | None, limit: Any,
             options: PosttrainOptions, progress: bool, out: PosttrainResult, allow_hub: bool) -> None:
    if task.name == "alpaca_eval":
        s = wdata.load_alpaca_eval(data_dir, allow_hub)
    elif task.name == "arena_hard":
        s = wdata.load_arena_hard(data_dir, options.arena_baseline, allow_hub)
    else:
        s = wdata.load_graded(data_dir)
    items = s.items[: _limit(len(s.items), limit)]
    convs = [({"role": "user", "content": it.prompt},) for it in items]
    requests = [GenerationRequest(c, max_tokens=_max_tokens(task, options), seed=options.seed, tag=task.name)
                for c in convs]
    replies = _ask(generator, task, requests, progress)
    judge_name = out.judge["judge"] if out.judge else "?"
    if task.name == "afm_writing":
        grades = grading.single(judge, [(it.id, it.prompt, r, it.category, it.reference)
                                        for it, r in zip(items, replies)])
        ok = [g.rating for g in grades if g.rating is not None]
        mean = statistics.fmean(ok) if ok else None
        stderr = statistics.stdev(ok) / math.sqrt(len(ok)) if len(ok) > 1 else None
        by_cat: dict[str, list[float]] = {}
        for it, g in zip(items, grades):
            if g.rating is not None:
                by_cat.setdefault(it.category, []).append(g.rating)
        extra = {f"rating_{c}": statistics.fmean(v) for c, v in sorted(by_cat.items())}
        out.tasks[task.name] = _entry(task, "judge", mean, stderr, len(items), extra)
        failed = len(grades) - len(ok)
        out.details[task.name] = {"source": s.source, "judge": out.judge, "judged": len(ok), "failed": failed,
                                  "items": [{"id": g.id, "rating": g.rating, "error": g.error,
                                             "judgment": (g.judgment or "")[:REPLY_CHARS], "reply": r[:REPLY_CHARS]}
                                            for g, r in zip(grades, replies)]}
        out.notes[task.name] = (f"{task.note}; judged by {judge_name}; data: {s.source}"
                                + (f"; {failed} judgments failed (not counted)" if failed else ""))
        return
    pairs = [grading.PairItem(it.id, it.prompt, r, it.reference or "", list(c), category=it.category)
             for it, r, c in zip(items, replies, convs)]
    if task.name == "alpaca_eval":
        _alpaca(task, s, items, replies, pairs, judge, options, out)
        return
    results = grading.pairwise(judge, pairs)
    # Arena-Hard v2.0 reports each category against its own baseline, never pooled; the
    # task's one number is its default table's (hard_prompt), or the only category's
    by_cat = arena_hard.score_by_category(results, [it.category for it in items])
    head = arena_hard.headline(by_cat)
    extra = {f"score_{c}": v["score"] for c, v in by_cat.items()} if len(by_cat) > 1 else {}
    out.tasks[task.name] = _entry(task, "judge", by_cat[head]["score"] if head else None, None,
                                  by_cat[head]["questions"] if head else len(items), extra)
    for c, v in by_cat.items():
        if f"score_{c},judge" in out.tasks[task.name]["metrics"]:
            out.tasks[task.name]["metrics"][f"score_{c},judge"]["interval"] = [v["lower"], v["upper"]]
    summary: dict[str, Any] = {
        "formula": ("arena-hard-v2.0 show_result: per category against its own baseline, the mean of 100 "
                    "bootstrap means of the battles (a significant verdict three battles), 90% interval"),
        "headline_category": head, "by_category": by_cat,
        "failed": sum(v["failed"] for v in by_cat.values())}
    failed_games = sum(g.label is None for r in results for g in r.games)
    out.details[task.name] = {
        "source": s.source, "reference_model": s.reference_model, "judge": out.judge, **summary,
        "failed_games": failed_games,
        "items": [{"id": r.item.id, "labels": [g.label for g in r.games], "errors": [g.error for g in r.games],
                   "reply": r.item.answer[:REPLY_CHARS]} for r in results]}
    out.notes[task.name] = (f"{task.note}; judged by {judge_name} (both answer orders, v2.0's prompt per "
                            f"category); {'headline: ' + head if head else 'no headline: each category on its own'}"
                            f" (categories: {', '.join(by_cat)}); data: {s.source}"
                            + (f"; {failed_games} judgments failed (never counted as a win)" if failed_games else ""))


def _alpaca(task: PosttrainTask, s: Any, items: list[Any], replies: list[str], pairs: list[Any], judge: Any,
            options: PosttrainOptions, out: PosttrainResult) -> None:
    """AlpacaEval 2.0: its weighted annotation (or the games), win rate, LC win rate."""

    method = options.alpaca_annotation
    if method == "weighted" and isinstance(judge, RewardJudge):
        method = "games"  # a reward model writes no token to read log-probs of: its pairwise verdict
    details: list[dict[str, Any]] = []
    if method == "weighted":
        annotations = alpaca_eval.annotate_weighted(judge, [it.prompt for it in items],
                                                    [it.reference or "" for it in items], replies)
        prefs = [a.preference for a in annotations]
        details = [{"id": it.id, "preference": a.preference, "switched": a.switched, "top_logprobs": a.top_logprobs,
                    "error": a.error, "reply": r[:REPLY_CHARS]} for it, a, r in zip(items, annotations, replies)]
    else:
        results = grading.pairwise(judge, pairs)
        prefs = alpaca_eval.preferences(results)
        details = [{"id": r.item.id, "preference": p, "labels": [g.label for g in r.games],
                    "errors": [g.error for g in r.games], "reply": r.item.answer[:REPLY_CHARS]}
                   for r, p in zip(results, prefs)]
    wr = alpaca_eval.win_rate(prefs)
    difficulty = [it.difficulty for it in items] if all(it.difficulty is not None for it in items) else None
    gamed = alpaca_eval.read_gamed(s.gamed) if s.gamed and difficulty is not None else None
    lc = alpaca_eval.length_controlled(prefs, [len(r) for r in replies], [len(it.reference or "") for it in items],
                                       difficulty, gamed)
    out.tasks[task.name] = _entry(task, "judge", lc["lc_win_rate"], lc["lc_stderr"], len(items),
                                  {"win_rate": wr["win_rate"]})
    out.tasks[task.name]["metrics"]["win_rate,judge"]["stderr"] = wr["stderr"]
    annotation = ("weighted_alpaca_eval_gpt4_turbo (AlpacaEval 2.0's annotator: one token's log-probs)"
                  if method == "weighted" else "two position-swapped Arena-style games, averaged (not AlpacaEval's "
                  "annotator" + ("; a reward-model judge has no log-probs" if options.alpaca_annotation == "weighted"
                                 else "") + ")")
    out.details[task.name] = {"source": s.source, "reference_model": s.reference_model, "judge": out.judge,
                              **wr, "annotation": annotation, "glm": lc["glm"], "glm_weights": lc.get("weights"),
                              "glm_note": lc.get("note"), "failed": wr["n_failed"], "items": details}
    judge_name = out.judge["judge"] if out.judge else "?"
    out.notes[task.name] = (f"{task.note}; judged by {judge_name}; annotation: {annotation}; LC formula: {lc['glm']}"
                            f" (mean over all {len(items)} items); data: {s.source}"
                            + (f"; {wr['n_failed']} annotations failed (not in the win rate, never counted as a "
                               "win)" if wr["n_failed"] else ""))
