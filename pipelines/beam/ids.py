"""One document per id: the duplicate-id policy of every document pipeline.

Two records with one id reach a pipeline in two ways: the same URL crawled twice (the id
is the URL's hash), or an input file that reuses an id for different texts. The policy,
applied right after reading and extraction so that every later stage sees each id once:

* keep the most recently fetched copy (``fetched_at``; a copy without a date is older
  than any dated one);
* between copies fetched at the same time, or undated, keep the first in input order
  (input files sorted by path, records in file order);
* every other copy is rejected as ``duplicate_id``, with the kept copy's place, URL and
  fetch time in its details.

The decision needs only the records themselves (``_origin`` set by the reader), so it is
the same on every runner and worker count.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from afm.pipelines.beam.packing import pack, unpack

from afm.schema import make_reject

STAGE = "ids"
REASON = "duplicate_id"
ORIGIN = "_origin"
_OLDEST = dt.datetime.min.replace(tzinfo=dt.UTC)


def rank(doc: dict[str, Any]) -> tuple[Any, ...]:
    """Sort key: the document to keep sorts first."""
    fetched = doc.get("fetched_at")
    if not isinstance(fetched, dt.datetime):
        fetched = _OLDEST
    origin = doc.get(ORIGIN) or (0, 0, "")
    # Newest first: negate via the ordinal of the timestamp (microseconds since year 1).
    stamp = (fetched - _OLDEST) // dt.timedelta(microseconds=1)
    return (-stamp, origin[0], origin[1])


def pick(docs: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(kept, rejects)`` for the documents sharing one id (see the module docstring)."""
    ordered = sorted(docs, key=rank)
    kept = ordered[0]
    origin = kept.get(ORIGIN) or (0, 0, "")
    rejects = []
    for doc in ordered[1:]:
        same_time = rank(doc)[0] == rank(kept)[0]
        why = "later in input order" if same_time else "fetched earlier than the kept copy"
        rejects.append(make_reject(doc, STAGE, REASON, kept=origin[2], why=why,
                                   kept_url=kept.get("url"),
                                   kept_fetched_at=kept.get("fetched_at"),
                                   place=(doc.get(ORIGIN) or (0, 0, ""))[2]))
    return strip(kept), rejects


def strip(doc: dict[str, Any]) -> dict[str, Any]:
    """The document without the reader's bookkeeping."""
    if ORIGIN in doc:
        doc = {k: v for k, v in doc.items() if k != ORIGIN}
    return doc


class _PickFn(beam.DoFn):
    def process(self, element: tuple[str, Iterable[bytes]]) -> Iterator[Any]:
        _id, packed = element
        kept, rejects = pick(unpack(p) for p in packed)
        yield kept
        for reject in rejects:
            yield beam.pvalue.TaggedOutput("rejected", reject)


class UniqueIds(beam.PTransform):
    """Documents -> ``{"kept", "rejected"}`` with one document per id."""

    def expand(self, docs: beam.PCollection) -> dict[str, beam.PCollection]:
        out = (
            docs
            | "key by id" >> beam.Map(lambda d: (str(d["id"]), pack(d)))
            | "group by id" >> beam.GroupByKey()
            | "one per id" >> beam.ParDo(_PickFn()).with_outputs("rejected", main="kept")
        )
        return {"kept": out.kept, "rejected": out.rejected}
