"""What each stage kept and rejected, by kind of document: source, language, length band
and (when the input says) page type.

A funnel says how much a stage removed; it does not say *what* it removed. A stage that
eats documentation, forum threads or one language shows up here at once: each stage's
kept and rejected documents are counted by kind (exact combiner counts, as the funnel's),
and ``report.html`` shows one table per kind with each stage's reject rate.

Kinds of a record: ``source`` (web, math, code ...), ``language`` (``-`` before the
language stage has named one), ``length`` (characters of its text, in bands; ``(page)``
for a crawl page not yet extracted) and
``page_type`` (a ``page_type`` field of the input documents, e.g. ``article`` or
``forum``; absent: not counted).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import apache_beam as beam

from afm.pipelines.beam.bundle_sums import SumKeysInBundle

LENGTH_BANDS = ((0, "empty"), (1, "< 500"), (500, "500-2k"), (2_000, "2k-10k"), (10_000, "10k-50k"),
                (50_000, ">= 50k"))
DIMENSIONS = ("source", "language", "length", "page_type")
SEP = "\x1f"  # between the parts of a key (never in a language code or page type we count)


def length_band(text: str | None) -> str:
    """The band of a text's length in characters."""
    n = len(text or "")
    label = LENGTH_BANDS[0][1]
    for low, name in LENGTH_BANDS:
        if n >= low:
            label = name
    return label


def kind_keys(rec: dict[str, Any], stage: str, outcome: str) -> list[tuple[str, int]]:
    """The counting keys of one record leaving ``stage`` as ``outcome`` (kept / rejected)."""
    is_page = "text" not in rec and "body" in rec  # a crawl page before extraction
    values = {"source": rec.get("source") or "-", "language": rec.get("language") or "-",
              "length": "(page)" if is_page else length_band(rec.get("text"))}
    page_type = rec.get("page_type")
    if isinstance(page_type, str) and page_type:
        values["page_type"] = page_type[:40]
    return [(SEP.join((stage, dim, str(value), outcome)), 1) for dim, value in values.items()]


class KindCounts:
    """Collects, in a Beam graph, the kind counts of each stage's kept and rejected parts."""

    def __init__(self) -> None:
        self._parts: list[tuple[Any, str, str]] = []

    def add(self, pcoll: Any, stage: str, outcome: str) -> None:
        self._parts.append((pcoll, stage, outcome))

    def collect(self, pipeline: Any) -> Any:
        """One PCollection of ``(key, count)`` (each part's counts summed in its bundles first)."""
        parts = [pcoll | f"kinds {stage} {outcome} {i}" >> beam.ParDo(SumKeysInBundle(kind_keys, stage, outcome))
                 for i, (pcoll, stage, outcome) in enumerate(self._parts)]
        if not parts:
            return pipeline | "no kinds" >> beam.Create([])
        return tuple(parts) | "all kinds" >> beam.Flatten() | "sum kinds" >> beam.CombinePerKey(sum)


def by_kind(counts: dict[str, int], stages: Iterable[str]) -> dict[str, Any]:
    """The counts as ``{dimension: {value: {stage: {"kept", "rejected"}}}}``, stages in run
    order, dimensions with no value left out."""
    order = list(stages)
    out: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
    for key, n in counts.items():
        stage, dim, value, outcome = key.split(SEP)
        cell = out.setdefault(dim, {}).setdefault(value, {}).setdefault(stage, {"kept": 0, "rejected": 0})
        cell[outcome] = cell.get(outcome, 0) + int(n)
    rank = {s: i for i, s in enumerate(order)}
    return {dim: {value: dict(sorted(per.items(), key=lambda kv: rank.get(kv[0], len(rank))))
                  for value, per in sorted(out[dim].items(), key=lambda kv: _value_order(dim, kv[0]))}
            for dim in DIMENSIONS if dim in out}


def _value_order(dim: str, value: str) -> tuple[int, str]:
    if dim == "length":
        names = [name for _, name in LENGTH_BANDS]
        return (names.index(value) if value in names else len(names), value)
    return (0, value)


def report_html(kinds: dict[str, Any]) -> str:
    """One table per kind: for each value, the documents each stage saw and the share it
    rejected (a high share in one row and not the others: that stage eats that kind)."""
    if not kinds:
        return ""
    e = html.escape
    tables = []
    for dim, values in kinds.items():
        stages = list(dict.fromkeys(s for per in values.values() for s in per))
        head = "".join(f"<th>{e(s)}</th>" for s in stages)
        rows = []
        for value, per in values.items():
            cells = []
            for s in stages:
                c = per.get(s)
                seen = (c["kept"] + c["rejected"]) if c else 0
                if not seen:
                    cells.append("<td></td>")
                    continue
                share = c["rejected"] / seen
                style = ' class="bad"' if share >= 0.5 and c["rejected"] >= 5 else ""
                cells.append(f"<td{style}>{c['rejected']:,} / {seen:,} ({100 * share:.0f}%)</td>")
            rows.append(f"<tr><td>{e(value)}</td>{''.join(cells)}</tr>")
        tables.append(f"<h3>by {e(dim.replace('_', ' '))}</h3><table><tr><th>{e(dim)}</th>{head}</tr>"
                      f"{''.join(rows)}</table>")
    return ("<h2>What each stage rejected, by kind</h2><p>Rejected / seen (share rejected) per stage. "
            "Length is in characters; language is '-' before the language stage names one.</p>"
            + "".join(tables))


__all__ = ["DIMENSIONS", "LENGTH_BANDS", "KindCounts", "by_kind", "kind_keys", "length_band", "report_html"]
