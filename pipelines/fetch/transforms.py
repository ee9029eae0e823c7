"""The Beam steps of ``afm fetch`` (the graph is :mod:`afm.pipelines.fetch.graph`).

:class:`AsyncFn` is how a worker fetches many hosts at once: each element is handed to an
asyncio loop running in a thread of the worker, up to ``in_flight`` at a time, and its
outputs are emitted as it finishes; the bundle ends when every element has, and then
the worker's files are closed (:meth:`afm.crawler.batch.store.PageStore.publish`). One
worker's CPU, not the network wait, is then the limit, while each host is still fetched
by one slice in one worker (the pipeline's grouping), politely
(:mod:`afm.crawler.batch.pacing`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from afm import fs
from afm.crawler.batch.client import HttpClient
from afm.crawler.batch.config import FetchConfig
from afm.crawler.batch.control import HostFiles
from afm.crawler.batch.fetcher import (
    ROBOTS_UNAVAILABLE,
    SliceFetcher,
    SliceJob,
    UrlJob,
    handoff_json,
    outcome_row,
)
from afm.crawler.batch.pacing import Pacer
from afm.crawler.batch.store import OUTCOMES_DIR, PageStore, host_state_path
from afm.crawler.frontier.urls import canonical_url, host_key
from afm.crawler.rules import outcomes
from afm.io import read_shard
from afm.pipelines.beam.progress import ProgressFile
from afm.pipelines.fetch.urls import read_url_items

HANDOFF = "handoff"
#: Outcomes a rerun asks again (the server was unavailable, the network failed); every
#: other outcome is final, and a rerun skips its URL.
RETRIED_ON_RERUN = (outcomes.TIMEOUT, outcomes.DNS_ERROR, ROBOTS_UNAVAILABLE)


def final(row: dict[str, Any]) -> bool:
    """Whether a previous run's outcome stands (see :data:`RETRIED_ON_RERUN`)."""
    kind = row.get("outcome", "")
    if kind in RETRIED_ON_RERUN:
        return False
    return not (kind.startswith(outcomes.ERROR_PREFIX) and kind not in ("error_redirect", "error_decoding"))


# ------------------------------------------------------------------------- reading


class ReadUrlListFn(beam.DoFn):
    """``(file number, path)`` -> every URL of the list (:mod:`afm.pipelines.fetch.urls`)."""

    def __init__(self, cfg: FetchConfig, progress_dir: str | None = None):
        self.cfg, self.progress_dir = cfg, progress_dir

    def setup(self) -> None:
        self.progress = ProgressFile(self.progress_dir, "read") if self.progress_dir else None

    def process(self, numbered: tuple[int, str]) -> Iterator[Any]:
        file_no, path = numbered
        for kind, payload in read_url_items(path, file_no, self.cfg):
            if self.progress is not None:
                self.progress.add("read")
            yield kind, payload
        if self.progress is not None:
            self.progress.publish()


def previous_outcomes(out_dir: str) -> list[str]:
    """The files of earlier runs into ``out_dir`` that say which URLs are done: their
    outcome logs and the index shards of their WARC files (a page written just before a
    kill, its outcome line not yet, is done too)."""
    found = []
    for sub, suffix in ((OUTCOMES_DIR, ".jsonl"), ("index", ".parquet")):
        directory = fs.join(out_dir, sub)
        if fs.isdir(directory):
            found += sorted(f for f in fs.list_files(directory) if f.endswith(suffix))
    return found


class ReadPreviousFn(beam.DoFn):
    """An outcome log or index shard of an earlier run -> ``(key, outcome row)`` of each
    URL it ended, for the rerun's anti-join."""

    def process(self, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if path.endswith(".parquet"):
            for r in read_shard(path).to_pylist():
                row = outcome_row(r["request_url"], outcomes.FETCHED, url=r["url"], status=r["status"],
                                  training_use=r.get("training_use"), warc_file=r["warc_file"])
                yield _key(row["request_url"]), row
            return
        for line in fs.read_bytes(path).decode("utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill: its URL is fetched again
            yield _key(row["request_url"]), row


def _key(url: str) -> str:
    try:
        return canonical_url(url)
    except Exception:  # noqa: BLE001 - a row of another kind of key (a bad URL's outcome)
        return url


class ChooseFn(beam.DoFn):
    """One key's URLs of the lists and earlier outcomes -> the URL to fetch (the first in
    input order), a ``duplicate`` outcome for every other, or, when an earlier run ended
    it, that outcome again (``resumed``) instead of a request."""

    def process(self, element: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
        _key_, parts = element
        listed = sorted(parts["list"], key=lambda r: tuple(r["order"]))
        if not listed:
            return  # an earlier run's URL that is not in this run's lists
        first, rest = listed[0], listed[1:]
        for r in rest:
            yield beam.pvalue.TaggedOutput("ends", outcome_row(r["url"], outcomes.DUPLICATE,
                                                                reason=f"same page as {first['url']}"))
        done = [r for r in parts["done"] if final(r)]
        if done:
            row = dict(done[0])
            row["resumed"] = True
            row["request_url"] = first["url"]
            yield beam.pvalue.TaggedOutput("ends", row)
            return
        yield host_key(first["url"]), first["url"]


# ------------------------------------------------------------------------ the async step


class AsyncFn(beam.DoFn):
    """Elements handled concurrently on an asyncio loop of the worker (module docstring).
    A subclass writes :meth:`open` (inside the loop), :meth:`handle` (one element ->
    outputs), :meth:`end_bundle` and :meth:`close`."""

    def __init__(self, in_flight: int):
        self.in_flight = max(1, in_flight)

    def setup(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="afm-fetch-loop", daemon=True)
        self.thread.start()
        self._call(self.open())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def open(self) -> None:
        return None

    async def handle(self, element: Any) -> list[Any]:
        raise NotImplementedError

    async def end_bundle(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def start_bundle(self) -> None:
        self.pending: list[concurrent.futures.Future] = []

    def process(self, element: Any) -> Iterator[Any]:
        self.pending.append(asyncio.run_coroutine_threadsafe(self.handle(element), self.loop))
        yield from self._done(block=len(self.pending) >= self.in_flight)

    def _done(self, block: bool = False, everything: bool = False) -> Iterator[Any]:
        if everything:
            concurrent.futures.wait(self.pending)
        elif block:
            concurrent.futures.wait(self.pending, return_when=concurrent.futures.FIRST_COMPLETED)
        finished = [f for f in self.pending if f.done()]
        self.pending = [f for f in self.pending if not f.done()]
        for future in finished:
            yield from future.result()  # an exception fails the bundle (retried by the runner)

    def finish_bundle(self) -> Iterator[Any]:
        outputs = list(self._done(everything=True))
        self._call(self.end_bundle())
        for out in outputs:
            if isinstance(out, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(out.tag, GlobalWindows.windowed_value(out.value))
            else:
                yield GlobalWindows.windowed_value(out)

    def teardown(self) -> None:
        if getattr(self, "loop", None) is None:
            return
        try:
            self._call(self.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.loop = None


class ServerFn(AsyncFn):
    """``(origin, urls)`` -> ``(server, (origin, urls))``: the server a host is on (the
    address it resolves to; an IP literal is its own), so hosts sharing one are fetched
    together under one budget. A host that does not resolve is its own server (its
    fetch then ends in ``dns_error``)."""

    async def handle(self, element: tuple[str, list[str]]) -> list[Any]:
        origin, urls = element
        return [(await server_of(origin), (origin, sorted(urls)))]


async def server_of(origin: str) -> str:
    parts = urlsplit(origin)
    host = (parts.hostname or "").strip("[]")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 80, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return origin
    return sorted(info[4][0] for info in infos)[0] if infos else origin


def plan_slices(server: str, hosts: list[tuple[str, list[str]]], slice_urls: int) -> list[SliceJob]:
    """A server's URLs as slices of at most ``slice_urls`` (one slice when they fit): URL
    ``k`` of each host goes to slice ``k mod n``, so every slice holds every host."""
    total = sum(len(urls) for _, urls in hosts)
    n = max(1, -(-total // slice_urls))
    jobs = [SliceJob(server, {}, slot=i, slices=n) for i in range(n)]
    for origin, urls in sorted(hosts):
        for k, url in enumerate(urls):
            jobs[k % n].urls.setdefault(origin, []).append(UrlJob(url, url))
    return [j for j in jobs if j.urls]


def job_json(job: SliceJob) -> dict[str, Any]:
    return {"server": job.server, "slot": job.slot, "slices": job.slices, "round": job.round,
            "hosts": job.hosts,
            "urls": {o: [[u.url, u.request_url, u.hops] for u in us] for o, us in job.urls.items()}}


def job_from_json(data: dict[str, Any]) -> SliceJob:
    return SliceJob(data["server"], {o: [UrlJob(*u) for u in us] for o, us in data["urls"].items()},
                    slot=data["slot"], slices=data["slices"], round=data["round"],
                    hosts=data.get("hosts") or {})


class _WorkerFn(AsyncFn):
    """What the steps that fetch share: one client, one store, one fetcher per worker."""

    def __init__(self, cfg: FetchConfig, out_dir: str, progress_dir: str | None = None):
        super().__init__(cfg.slices_in_flight)
        self.cfg, self.out_dir, self.progress_dir = cfg, out_dir, progress_dir

    async def open(self) -> None:
        self.client = HttpClient(self.cfg)
        self.store = PageStore(self.out_dir, self.cfg)
        self.progress = ProgressFile(self.progress_dir, "fetch") if self.progress_dir else None
        self.fetcher = SliceFetcher(self.cfg, self.client, self.store, host_files=self._known,
                                    on_outcome=self._counted)

    def _known(self, origin: str) -> HostFiles | None:
        path = host_state_path(self.out_dir, origin)
        try:
            return HostFiles.from_json(json.loads(fs.read_bytes(path)))
        except (OSError, ValueError, KeyError):
            return None

    def _counted(self, row: dict[str, Any]) -> None:
        if self.progress is None:
            return
        self.progress.add("ended")
        kind = row["outcome"]
        if kind == outcomes.FETCHED:
            self.progress.add("fetched")
        elif kind.startswith(outcomes.ERROR_PREFIX) or kind in RETRIED_ON_RERUN:
            self.progress.add("errors")

    async def end_bundle(self) -> None:
        self.store.publish()
        if self.progress is not None:
            self.progress.add("requests", self.fetcher.requests)
            self.fetcher.requests = 0
            self.progress.publish()

    async def close(self) -> None:
        self.store.close()
        await self.client.close()


class ControlFn(_WorkerFn):
    """A server too large for one slice: its hosts' control files fetched once here, then
    its slices, each carrying them (so no slice asks again)."""

    async def handle(self, element: tuple[str, list[tuple[str, list[str]]]]) -> list[Any]:
        server, hosts = element
        jobs = plan_slices(server, list(hosts), self.cfg.slice_urls)
        pacer = Pacer(self.cfg.min_interval(), self.cfg.per_host_concurrency)
        known: dict[str, dict[str, Any]] = {}
        for origin, _urls in sorted(hosts):
            files = self._known(origin)
            if files is None or not files.fresh(self.cfg):
                files = await self.fetcher.control_files(origin, pacer, tdm=True)
            known[origin] = files.to_json()
        for job in jobs:
            job.hosts = {o: known[o] for o in job.urls}
        return [job_json(j) for j in jobs]


class FetchFn(_WorkerFn):
    """A slice -> its outcomes, and its redirects to other hosts (tagged ``handoff``)."""

    async def handle(self, data: dict[str, Any]) -> list[Any]:
        result = await self.fetcher.run(job_from_json(data))
        out: list[Any] = list(result.outcomes)
        out += [beam.pvalue.TaggedOutput(HANDOFF, handoff_json(h)) for h in result.handoffs]
        if self.progress is not None:
            self.progress.add("slices")
        return out


def round_jobs(element: tuple[str, list[dict[str, Any]]], round_: int) -> dict[str, Any]:
    """A host's redirect targets of one round as one slice (the host is its own server)."""
    origin, handoffs = element
    jobs = [UrlJob(h["url"], h["request_url"], h["hops"]) for h in sorted(handoffs, key=lambda h: h["request_url"])]
    return job_json(SliceJob(origin, {origin: jobs}, round=round_))


def unfinished(handoff: dict[str, Any]) -> dict[str, Any]:
    """A redirect still going to another host after the last round."""
    return outcome_row(handoff["request_url"], outcomes.REDIRECT_LIMIT, url=handoff["url"],
                       reason="more redirects than rounds")


__all__ = ["AsyncFn", "ChooseFn", "ControlFn", "FetchFn", "HANDOFF", "RETRIED_ON_RERUN",
           "ReadPreviousFn", "ReadUrlListFn", "ServerFn", "final", "job_from_json", "job_json",
           "plan_slices", "previous_outcomes", "round_jobs", "server_of", "unfinished"]
