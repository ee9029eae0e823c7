"""What opting out cost: pages, hosts and words the ``optout`` stage removed, per signal.

A published pipeline that applied robots.txt retroactively lost 8% of its English tokens;
a curator wants their own figure, and which signal it came from. The figure is made from
the stage's rejects (their evidence names each signal) and reported in the manifest
(``stage_reports.optout``), the run summary and ``report.html``:

* per signal (``noai``, ``tdm-reservation``, ``robots.txt``, ``content-signal``,
  ``content-usage``, ``domain list``, ``crawler decision``, and the ``robots.txt`` /
  ``tdmrep.json`` of unverifiable pages): pages, distinct hosts, words. A page opted out
  by two signals counts under each, once in the totals;
* per training token whose robots.txt group opted pages out (``by_agent``);
* words: what extraction (the run's ``extract`` stage config) would have kept of each
  removed page (measured in the stage, :class:`~afm.pipelines.curate.transforms.RecordFn`),
  the text's words for documents; ``share_of_words`` is removed / (removed + the words of
  the documents extraction produced from what the stage kept);
* ``disagreements``: pages where the crawler's stored decision and curate's differ.
"""

from __future__ import annotations

import html
import json
from typing import Any

from afm.consent.urls import origin_of
from afm.filters.extract import word_count

TOTAL = "*"
UNVERIFIED_PREFIX = "unverifiable "


def reject_rows(reject: dict[str, Any]) -> list[tuple[str, tuple[str, int, str, list[str]]]]:
    """``(signal, (host, words, disagreement, agents))`` for every signal of one optout
    reject, and one ``TOTAL`` row."""

    try:
        details = json.loads(reject.get("details") or "{}")
    except ValueError:
        details = {}
    url = reject.get("url") or ""
    host = details.get("host") or (origin_of(url) if "://" in url else "")
    words = details.get("text_words")
    if not isinstance(words, int):
        words = word_count(reject.get("text"))
    prefix = UNVERIFIED_PREFIX if reject.get("reason") == "optout_unverifiable" else ""
    signals: dict[str, list[str]] = {}
    for ev in details.get("evidence") or []:
        if isinstance(ev, dict) and ev.get("signal"):
            agents = signals.setdefault(prefix + str(ev["signal"]), [])
            agents += [a for a in ev.get("agents") or [] if a not in agents]
    if not signals:
        signals[str(reject.get("reason") or "optout")] = []
    disagreement = str(details.get("disagreement") or "")
    rows = [(signal, (host, words, disagreement, agents)) for signal, agents in signals.items()]
    return rows + [(TOTAL, (host, words, disagreement, []))]


def build_report(counts: dict[str, tuple[int, int]], hosts: dict[str, int],
                 agents: dict[str, tuple[int, int]], disagreements: dict[str, int],
                 kept_words: int) -> dict[str, Any]:
    """The manifest's ``optout_cost`` from the combined counts."""
    pages, words = counts.get(TOTAL, (0, 0))
    return {
        "pages": pages,
        "hosts": hosts.get(TOTAL, 0),
        "words": words,
        "kept_words": kept_words,
        "share_of_words": round(words / (words + kept_words), 6) if words + kept_words else 0.0,
        "by_signal": {signal: {"pages": n, "hosts": hosts.get(signal, 0), "words": w}
                      for signal, (n, w) in sorted(counts.items()) if signal != TOTAL},
        "by_agent": {agent: {"pages": n, "words": w} for agent, (n, w) in sorted(agents.items())},
        "disagreements": dict(sorted(disagreements.items())),
    }


def optout_cost(rejects: Any, kept_docs: Any, pipeline: Any) -> Any:
    """The optout stage's ``report`` hook (:mod:`afm.pipelines.curate.stages`): a one-element
    PCollection of the report, from the stage's ``rejects`` and the documents the run made
    of what it kept."""
    import apache_beam as beam
    from apache_beam.pvalue import AsDict, AsSingleton

    rows = rejects | "optout cost rows" >> beam.FlatMap(reject_rows)
    sums = (rows | "optout cost pages" >> beam.MapTuple(lambda s, r: (s, (1, r[1])))
            | "optout cost sum" >> beam.CombinePerKey(_add_pairs))
    hosts = (rows | "optout cost host keys" >> beam.MapTuple(lambda s, r: (s, r[0]))
             | "optout cost distinct hosts" >> beam.Distinct()
             | "optout cost host ones" >> beam.MapTuple(lambda s, _h: (s, 1))
             | "optout cost hosts" >> beam.CombinePerKey(sum))
    agents = (rows | "optout cost agents" >> beam.FlatMapTuple(
                  lambda s, r: [(a, (1, r[1])) for a in r[3]] if s == "robots.txt" else [])
              | "optout cost agent sum" >> beam.CombinePerKey(_add_pairs))
    disagreements = (rows | "optout cost disagreements" >> beam.FlatMapTuple(
                         lambda s, r: [(r[2], 1)] if s == TOTAL and r[2] else [])
                     | "optout cost disagreement sum" >> beam.CombinePerKey(sum))
    kept = (kept_docs | "optout cost kept words" >> beam.Map(
                lambda d: word_count(d.get("text") if isinstance(d, dict) else None))
            | "optout cost kept sum" >> beam.CombineGlobally(sum))
    return (pipeline | "optout cost seed" >> beam.Create([None])
            | "optout cost report" >> beam.Map(
                lambda _, c, h, a, d, k: build_report(c, h, a, d, k),
                AsDict(sums), AsDict(hosts), AsDict(agents), AsDict(disagreements),
                AsSingleton(kept)))


def summary_line(cost: dict[str, Any]) -> dict[str, str]:
    """The stage's ``summary`` hook: its line of the run summary."""
    return {"opted out (pages / hosts / share of words)":
            f"{cost['pages']:,} / {cost['hosts']:,} / {100 * cost['share_of_words']:.2f}%"}


def report_html(cost: dict[str, Any]) -> str:
    """The stage's ``report_html`` hook: the "what opting out cost" section of report.html
    (totals, per signal, per training token)."""
    rows = "".join(
        f"<tr><td>{_e(signal)}</td><td>{v['pages']:,}</td><td>{v['hosts']:,}</td>"
        f"<td>{v['words']:,}</td></tr>" for signal, v in cost["by_signal"].items())
    agents = "".join(f"<tr><td>{_e(a)}</td><td>{v['pages']:,}</td><td>{v['words']:,}</td></tr>"
                     for a, v in cost["by_agent"].items())
    agent_table = ("<table><tr><th>robots.txt token</th><th>pages</th><th>words</th></tr>"
                   f"{agents}</table>" if agents else "")
    disagree = "".join(f"<li>{_e(k)}: {v:,}</li>" for k, v in cost["disagreements"].items())
    disagree_html = (f"<p>Pages where the crawler's stored decision and curate's differ "
                     f"(kept opted out):</p><ul>{disagree}</ul>" if disagree else "")
    return (f"<h2>What opting out cost</h2><p>{cost['pages']:,} page(s) of {cost['hosts']:,} "
            f"host(s), {cost['words']:,} words: {100.0 * cost['share_of_words']:.2f}% of the "
            f"words extraction yields ({cost['kept_words']:,} kept). A page opted out by "
            "several signals counts under each.</p>"
            "<table><tr><th>signal</th><th>pages</th><th>hosts</th><th>words</th></tr>"
            f"{rows}</table>{agent_table}{disagree_html}")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _add_pairs(pairs: Any) -> tuple[int, int]:
    pages = words = 0
    for n, w in pairs:
        pages += n
        words += w
    return pages, words


__all__ = ["TOTAL", "build_report", "optout_cost", "reject_rows", "report_html", "summary_line"]
