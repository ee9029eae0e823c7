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
from afm.pipelines.beam.spill import SpillReader, SpillWriter
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


class _KeyFn(beam.DoFn):
    """Document -> ``(id, packed document)``, its text stowed in a spill file first when
    ``spill_dir`` is given (:mod:`afm.pipelines.beam.spill`): the group by id then holds
    a few hundred bytes a document, not the corpus."""

    def __init__(self, spill_dir: str | None):
        self.spill_dir = spill_dir
        self.writer: Any = None

    def start_bundle(self) -> None:
        self.writer = SpillWriter(self.spill_dir) if self.spill_dir else None

    def process(self, doc: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
        yield str(doc["id"]), pack(self.writer.stow(doc) if self.writer else doc)

    def finish_bundle(self) -> None:
        if self.writer is not None:
            self.writer.close()


class _PickFn(beam.DoFn):
    """The documents of one id (texts restored when stowed) -> kept + rejects."""

    def start_bundle(self) -> None:
        self.reader = SpillReader()

    def process(self, element: tuple[str, Iterable[bytes]]) -> Iterator[Any]:
        _id, packed = element
        kept, rejects = pick(self.reader.restore(unpack(p)) for p in packed)
        yield kept
        for reject in rejects:
            yield beam.pvalue.TaggedOutput("rejected", reject)

    def finish_bundle(self) -> None:
        self.reader.close()


class UniqueIds(beam.PTransform):
    """Documents -> ``{"kept", "rejected"}`` with one document per id. With ``spill_dir``
    the texts cross the group by id on disk (documents already stowed upstream are
    restored either way)."""

    def __init__(self, spill_dir: str | None = None, label: str | None = None):
        super().__init__(label)
        self.spill_dir = spill_dir

    def expand(self, docs: beam.PCollection) -> dict[str, beam.PCollection]:
        out = (
            docs
            | "key by id" >> beam.ParDo(_KeyFn(self.spill_dir))
            | "group by id" >> beam.GroupByKey()
            | "one per id" >> beam.ParDo(_PickFn()).with_outputs("rejected", main="kept")
        )
        return {"kept": out.kept, "rejected": out.rejected}
