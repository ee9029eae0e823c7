"""The ``afm fetch`` graph, a line of named steps:

    read the lists -> one URL per key (duplicates; what earlier runs ended) -> group by host
    -> group hosts by server (IP address) -> slices (control files first for a server split
    into several) -> fetch -> redirect rounds (targets on other hosts, grouped by host again)
    -> every outcome counted: per outcome, per host (the report), URLs in = outcomes out

Every URL read becomes exactly one outcome row; the run's stats (written by the last step)
hold both counts, and the launcher refuses a run where they differ
(:mod:`afm.pipelines.fetch.pipeline`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.pvalue import AsSingleton

from afm import fs
from afm.consent.training import OPTOUT
from afm.crawler.frontier.urls import host_key
from afm.crawler.rules import outcomes
from afm.crawler.rules.responses import MAX_REDIRECTS
from afm.io import write_shard
from afm.pipelines.beam.io import write_json
from afm.pipelines.fetch.transforms import (
    HANDOFF,
    ChooseFn,
    ControlFn,
    FetchFn,
    ReadPreviousFn,
    ReadUrlListFn,
    ServerFn,
    job_json,
    plan_slices,
    round_jobs,
    unfinished,
)
from afm.pipelines.fetch.urls import URL

REPORT_DIR = "report"
HOST_SHARDS = 8
HOST_SCHEMA = pa.schema([("host", pa.string()), ("urls", pa.int64()), ("fetched", pa.int64()),
                         ("optout", pa.int64()), ("not_fetched", pa.int64()),
                         ("resumed", pa.int64()), ("outcomes", pa.string())])


def build_fetch_graph(plan: Any, pipeline: Any, stats_path: str) -> dict[str, Any]:
    """Add the fetch of ``plan`` (:class:`~afm.pipelines.fetch.pipeline.FetchPlan`) to
    ``pipeline`` (a pipeline, or the start of a composite: :class:`FetchGraph`); the run's
    stats go to ``stats_path``."""
    cfg, out, progress = plan.config, plan.output, plan.progress_dir
    items = (pipeline | "lists" >> beam.Create(list(enumerate(plan.inputs)))
             | "spread lists" >> beam.Reshuffle()
             | "read lists" >> beam.ParDo(ReadUrlListFn(cfg, progress)))
    parts = items | "url or end" >> beam.Partition(lambda it, _n: 0 if it[0] == URL else 1, 2)
    urls = parts[0] | "urls" >> beam.Map(lambda it: it[1])
    ends = [parts[1] | "ended before a request" >> beam.Map(lambda it: it[1])]
    if plan.previous:
        previous = (pipeline | "earlier runs" >> beam.Create(plan.previous)
                    | "what they ended" >> beam.ParDo(ReadPreviousFn()))
    else:
        previous = pipeline | "no earlier run" >> beam.Create([])
    chosen = ({"list": urls, "done": previous} | "by page" >> beam.CoGroupByKey()
              | "one url a page" >> beam.ParDo(ChooseFn()).with_outputs("ends", main="fetch"))
    ends.append(chosen.ends)
    servers = (chosen.fetch | "by host" >> beam.GroupByKey()
               | "server of host" >> beam.ParDo(ServerFn(cfg.slices_in_flight))
               | "by server" >> beam.GroupByKey()
               | "listed" >> beam.MapTuple(lambda server, hosts: (server, sorted(hosts))))
    size = cfg.slice_urls
    sized = servers | "fits one slice" >> beam.Partition(
        lambda e, _n: 0 if sum(len(u) for _, u in e[1]) <= size else 1, 2)
    small = sized[0] | "one slice" >> beam.MapTuple(
        lambda server, hosts: job_json(plan_slices(server, hosts, size)[0]))
    big = sized[1] | "control files, then slices" >> beam.ParDo(ControlFn(cfg, out, progress))
    jobs = (small, big) | "slices" >> beam.Flatten() | "spread slices" >> beam.Reshuffle()
    fetched = jobs | "fetch" >> beam.ParDo(FetchFn(cfg, out, progress)).with_outputs(HANDOFF, main="outcomes")
    ends.append(fetched.outcomes)
    handoffs = fetched[HANDOFF]
    for r in range(1, MAX_REDIRECTS + 1):
        hop = (handoffs | f"round {r}: by host" >> beam.Map(lambda h: (host_key(h["url"]), h))
               | f"round {r}: group" >> beam.GroupByKey()
               | f"round {r}: slices" >> beam.Map(round_jobs, r)
               | f"round {r}: fetch" >> beam.ParDo(FetchFn(cfg, out, progress)).with_outputs(
                   HANDOFF, main="outcomes"))
        ends.append(hop.outcomes)
        handoffs = hop[HANDOFF]
    ends.append(handoffs | "past the last round" >> beam.Map(unfinished))
    every = tuple(ends) | "every outcome" >> beam.Flatten()

    read_in = items | "count in" >> beam.combiners.Count.Globally()
    by_outcome = (every | "outcome keys" >> beam.Map(lambda r: (_label(r), 1))
                  | "per outcome" >> beam.CombinePerKey(sum) | "outcome counts" >> beam.combiners.ToDict())
    resumed = (every | "resumed" >> beam.Filter(lambda r: bool(r.get("resumed")))
               | "count resumed" >> beam.combiners.Count.Globally())
    host_rows = (every | "host keys" >> beam.Map(lambda r: (r["host"], r))
                 | "per host" >> beam.CombinePerKey(HostCounts()))
    files = (host_rows | "host shard" >> beam.MapTuple(lambda h, c: (_shard(h), (h, c)))
             | "host shards" >> beam.GroupByKey()
             | "write host report" >> beam.MapTuple(lambda shard, rows: _write_hosts(shard, rows, out))
             | "report files" >> beam.combiners.ToList())
    worst = (host_rows | "hosts with most failed" >> beam.combiners.Top.Of(
        10, key=lambda hc: (hc[1]["not_fetched"], hc[0])) )
    hosts = host_rows | "count hosts" >> beam.combiners.Count.Globally()
    _ = (pipeline | "stats path" >> beam.Create([stats_path])
         | "write stats" >> beam.Map(_write_stats, read_in=AsSingleton(read_in),
                                     by_outcome=AsSingleton(by_outcome), resumed=AsSingleton(resumed),
                                     files=AsSingleton(files), worst=AsSingleton(worst),
                                     hosts=AsSingleton(hosts)))
    return {"outcomes": every}


class FetchGraph(beam.PTransform):
    """The fetch graph as one composite step (its labels under the step's own), to be
    composed with another graph in one job (``afm curate --urls``): ``{"outcomes": ...}``."""

    def __init__(self, plan: Any, stats_path: str):
        super().__init__()
        self.plan, self.stats_path = plan, stats_path

    def expand(self, pbegin: Any) -> dict[str, Any]:
        return build_fetch_graph(self.plan, pbegin, self.stats_path)


def _label(row: dict[str, Any]) -> str:
    if row["outcome"] == outcomes.FETCHED:
        return f"fetched ({row.get('training_use') or 'allowed'})"
    return row["outcome"]


def _shard(host: str) -> int:
    return int(hashlib.sha1(host.encode("utf-8")).hexdigest()[:8], 16) % HOST_SHARDS


class HostCounts(beam.CombineFn):
    """A host's outcomes: URLs, fetched, opted out, not fetched, resumed, and every
    outcome's count."""

    def create_accumulator(self) -> Counter:
        return Counter()

    def add_input(self, acc: Counter, row: dict[str, Any]) -> Counter:
        acc["urls"] += 1
        acc[f"outcome:{row['outcome']}"] += 1
        if row["outcome"] == outcomes.FETCHED:
            acc["fetched"] += 1
            acc["optout"] += row.get("training_use") == OPTOUT
        elif row["outcome"] != outcomes.DUPLICATE:
            acc["not_fetched"] += 1
        acc["resumed"] += bool(row.get("resumed"))
        return acc

    def merge_accumulators(self, accs: Any) -> Counter:
        total: Counter = Counter()
        for a in accs:
            total.update(a)
        return total

    def extract_output(self, acc: Counter) -> dict[str, Any]:
        return {"urls": acc["urls"], "fetched": acc["fetched"], "optout": acc["optout"],
                "not_fetched": acc["not_fetched"], "resumed": acc["resumed"],
                "outcomes": {k.split(":", 1)[1]: v for k, v in acc.items() if k.startswith("outcome:")}}


def _write_hosts(shard: int, rows: Any, out: str) -> str:
    rows = sorted(rows)
    path = fs.join(out, REPORT_DIR, f"hosts-{shard:05d}.parquet")
    table = pa.Table.from_pylist([{"host": h, **{k: c[k] for k in ("urls", "fetched", "optout",
                                                                    "not_fetched", "resumed")},
                                   "outcomes": json.dumps(c["outcomes"], sort_keys=True)}
                                  for h, c in rows], schema=HOST_SCHEMA)
    write_shard(path, table, HOST_SCHEMA)
    return path


def _write_stats(path: str, *, read_in: int, by_outcome: dict[str, int], resumed: int,
                 files: list[str], worst: list[Any], hosts: int) -> None:
    write_json(path, {"urls_in": read_in, "outcomes": by_outcome, "outcomes_out": sum(by_outcome.values()),
                      "resumed": resumed, "hosts": hosts, "host_report": sorted(files),
                      "hosts_most_not_fetched": [{"host": h, **c} for h, c in worst]})


__all__ = ["HOST_SCHEMA", "REPORT_DIR", "FetchGraph", "build_fetch_graph"]
