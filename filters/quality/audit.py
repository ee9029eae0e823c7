"""What a chain of document filters does to texts of each kind: the share kept per set,
topic, kind and language, the stage and rule that dropped the rest, and per junk kind the
share rejected.

``afm quality audit`` runs the document stages of ``afm curate`` (language, safety, PII,
the quality rules, the quality model; built as curate builds them) over good texts and
junk of each kind (:mod:`afm.filters.quality.texts`, :mod:`afm.filters.quality.junk`), so
the effect of every default on every kind of text is one command away, and
``docs/quality.md`` records its tables. The filters are handed in; this module only runs
them and counts.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from afm.filters.base import apply_filter, apply_filter_batch
from afm.filters.quality.junk import make_junk, materials_for
from afm.filters.quality.texts import KindText
from afm.schema import make_document


@dataclass(frozen=True)
class Outcome:
    """What the chain did to one text: kept, or the stage and reason that dropped it."""

    kept: bool
    stage: str | None = None
    reason: str | None = None


def run_chain(filters: Sequence[Any], texts: Sequence[str], *, batch_size: int = 64,
              progress: Callable[[int], None] | None = None) -> list[Outcome]:
    """Each text through ``filters`` in order, as documents of the ``web`` source (a filter
    with ``decide_batch`` decides a batch at once, as the curate stage feeds it); the first
    filter to drop a text decides its outcome."""
    docs: list[dict[str, Any] | None] = [dict(make_document(t)) for t in texts]
    outcomes: list[Outcome | None] = [None] * len(texts)
    for flt in filters:
        alive = [i for i, d in enumerate(docs) if d is not None]
        batched = hasattr(flt, "decide_batch")
        step = batch_size if batched else 1
        for start in range(0, len(alive), step):
            chunk = alive[start:start + step]
            if batched:
                results = apply_filter_batch(flt, [docs[i] for i in chunk])  # type: ignore[misc]
            else:
                results = [apply_filter(flt, docs[chunk[0]])]  # type: ignore[arg-type]
            for i, (kept, rejected) in zip(chunk, results):
                if rejected is not None:
                    outcomes[i] = Outcome(False, flt.name, rejected.get("reason"))
                    docs[i] = None
                else:
                    docs[i] = kept
        if progress is not None:
            progress(1)
    return [o if o is not None else Outcome(True) for o in outcomes]


@dataclass
class Group:
    """The outcomes of one group of texts."""

    n: int = 0
    kept: int = 0
    dropped_by: Counter = field(default_factory=Counter)  # "stage:reason" -> texts

    @property
    def keep_rate(self) -> float:
        return self.kept / self.n if self.n else float("nan")

    def as_dict(self, top: int = 3) -> dict[str, Any]:
        return {"n": self.n, "kept": self.kept, "keep_rate": round(self.keep_rate, 4),
                "dropped_by": dict(self.dropped_by.most_common(top))}


def group(keys: Sequence[str], outcomes: Sequence[Outcome]) -> dict[str, Group]:
    """Outcomes grouped by ``keys`` (one key per text), groups in first-seen order."""
    out: dict[str, Group] = {}
    for key, o in zip(keys, outcomes):
        g = out.setdefault(key, Group())
        g.n += 1
        if o.kept:
            g.kept += 1
        else:
            g.dropped_by[f"{o.stage}:{o.reason}"] += 1
    return out


def topic_gaps(groups: dict[str, Group], overall: float, min_n: int = 10) -> dict[str, float]:
    """How far each topic (with at least ``min_n`` texts; ``other`` is no topic) is kept
    below ``overall``, in points of share (positive: below)."""
    return {k: round(overall - g.keep_rate, 4) for k, g in groups.items() if g.n >= min_n and k != "other"}


__all__ = ["Group", "Outcome", "group", "run_chain", "topic_gaps"]


def signal_values(rule: Any, name: str, texts: Sequence[str]) -> list[float]:
    """Each text's signal ``name`` as ``rule`` (a quality rules filter: ``signals(text)``
    -> checks) computes it, on the lines the rule reads; NaN for a text the rule does not
    judge (its bound's ``judged`` is False), which then neither fails nor rejects in a
    development report and is left out of the quantiles a threshold is chosen from."""
    out = []
    for text in texts:
        checks, _ = rule.signals(text)
        value, bound = next((v, b) for check, v, b in checks if check == name)
        out.append(float(value) if bound.judged else float("nan"))
    return out


def keep_threshold(values: Sequence[float], keep: float, *, decimals: int, reject_below: bool = False) -> float:
    """The threshold of a learned rule that keeps ``keep`` of the development good text's
    ``values`` (NaN: a text the rule does not judge, left out), rounded away from the kept
    side to ``decimals`` (so the chosen share is kept, not one text less): for a rule that
    rejects above it (a perplexity, a chrome share) the ``keep`` quantile rounded up, for
    one that rejects below it (a gain) the ``1 - keep`` quantile rounded down."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    scale = 10.0 ** decimals
    if reject_below:
        return float(np.floor(np.quantile(finite, 1.0 - keep) * scale) / scale)
    return float(np.ceil(np.quantile(finite, keep) * scale) / scale)


def rule_development_report(values: Callable[[list[str]], list[float]], good: Sequence[KindText],
                            web: Sequence[KindText], boilerplate: dict[str, str],
                            passes: Callable[[list[str]], list[bool]], *, keep: float, decimals: int,
                            quantile_key: str, per_kind: int = 300, seed: int = 11, ndigits: int = 1,
                            quantiles: Sequence[float] = (0.5, 0.9, 0.95, 0.99),
                            reject_below: bool = False) -> dict[str, Any]:
    """How a learned rule (a value per text, rejected above a threshold, or below it with
    ``reject_below``) is set without looking at any set it is reported on: the threshold
    keeps ``keep`` of the ``values`` of the development good text the other stages keep
    (:func:`keep_threshold`, rounded to ``decimals``; ``passes``: texts -> kept by them;
    texts of 50 words or more), then the development junk made from the pages of ``web``
    is reported at it, by kind (rejected by the other stages, or by them or the rule), and
    the good text failing it by source and kind. The direction is stated once
    (``reject_below``): the threshold and the failing test both read it. A value of NaN is
    a text the rule does not judge: it neither fails nor rejects, and the quantiles leave
    it out."""
    good = [t for t in good if len(t.text.split()) >= 50]
    kept = [t for t, k in zip(good, passes([t.text for t in good])) if k]
    good_values = values([t.text for t in kept])  # NaN: a text the rule does not judge
    judged = [v for v in good_values if np.isfinite(v)]
    threshold = keep_threshold(good_values, keep, decimals=decimals, reject_below=reject_below)
    junk = make_junk(materials_for(list(web), boilerplate), per_kind=per_kind, seed=seed)
    junk_kept = passes([j.text for j in junk])
    junk_values = values([j.text for j in junk])

    def fails(v: float) -> bool:  # False for NaN either way
        return v < threshold if reject_below else v > threshold

    by_kind: defaultdict[str, list[tuple[bool, bool]]] = defaultdict(list)  # (others reject, with the rule)
    for j, k, v in zip(junk, junk_kept, junk_values):
        by_kind[j.kind].append((not k, (not k) or fails(v)))
    good_by: defaultdict[str, list[bool]] = defaultdict(list)
    for t, v in zip(kept, good_values):
        good_by[f"{t.source}/{t.kind}"].append(fails(v))
    return {"threshold": threshold, "keep_target": keep, "good_texts": len(judged),
            quantile_key: {q: round(float(np.quantile(judged, q)), ndigits) for q in quantiles}
            if judged else {},
            "good_failing_by_kind": {k: {"n": len(v), "failing": round(float(np.mean(v)), 4)}
                                     for k, v in sorted(good_by.items())},
            "junk_rejected_by_kind": {k: {"n": len(v), "rejected_by_others": round(float(np.mean([o for o, _ in v])), 4),
                                          "rejected": round(float(np.mean([r for _, r in v])), 4)}
                                      for k, v in sorted(by_kind.items())}}


def write_sidecar(path: str | Path, info: dict[str, Any]) -> Path:
    """``info`` merged into the JSON sidecar of the model at ``path`` (``PATH.json``; what
    it held before, a classifier's own metadata say, kept unless ``info`` replaces it)."""
    side = Path(f"{path}.json")
    meta = json.loads(side.read_text(encoding="utf-8")) if side.is_file() else {}
    meta.update(info)
    side.write_text(json.dumps(meta, indent=2, sort_keys=True, default=float) + "\n", encoding="utf-8")
    return side
