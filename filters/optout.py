"""The ``optout`` curate stage: publishers' opt-out from training, applied again at curation.

The crawler decides training use when it fetches a page (:mod:`afm.consent.training`),
but opt-outs change, and pages from other crawlers (Common Crawl) were never decided by
us. So right after reading, before any extraction, every crawl page and every document
with a URL is checked again with the crawler's own policy object (:class:`OptoutConfig`
inherits the crawl's :class:`~afm.consent.training.ConsentSettings`; ``fallback_first``,
the training tokens and every switch mean the same in both). In this order (every signal
found is recorded as evidence; any one opts the page out):

1. **domain list** (``domains``, ``domains_file``): hosts, and their subdomains, that told
   us out of band;
2. **the page's own signals** (``page_signals``), from the stored response, every header
   field line kept (:class:`afm.headers.Headers`): ``noai`` (the ``directives`` list) in
   ``X-Robots-Tag`` or meta robots, ``tdm-reservation: 1`` in the header or HTML meta,
   ``Content-Signal: ai-train=no`` and ``Content-Usage: train-ai=n`` response fields;
3. **TDMRep** (``tdmrep``): the newest ``/.well-known/tdmrep.json`` snapshot of the host,
   superseded by the page's header and meta (the protocol's priority);
4. **robots.txt** (``robots``, ``content_signals``, ``content_usage``): the newest
   robots.txt snapshot of the host, read for every training token and for the crawl token
   (``crawl_agent``) as the crawler reads it;
5. **the crawler's stored decision** (``crawler_decision``): a page whose WARC record
   says ``AFM-Training-Use: optout`` stays opted out even when the signals above, read
   again, allow it; the reject then says the two disagree (``disagreement``), and so does
   a page the crawler allowed and curate opts out (a later opt-out). A stored ``allowed``
   never overrules an opt-out found now.

Snapshots come from ``snapshots``: stores built by ``afm robots snapshots``, crawl output
directories (their ``robotstxt/``), or robots.txt WARC files such as Common Crawl's; every
path is read through :mod:`afm.fs` (local, ``gs://``, ``s3://``). Rules for which snapshot
decides are :mod:`afm.consent.snapshots`'s: the newest readable one wins, a damaged or
``WARC-Truncated`` newest snapshot makes the page unverifiable (reason
``optout_unverifiable``, never a silent allow), a host with no snapshot is decided by
``missing``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from afm import fs
from afm.consent.directives import PageSignals, is_html, page_signals
from afm.consent.snapshots import (
    ROBOTS,
    SNAPSHOT_DIR,
    TDMREP,
    SnapshotIndex,
    load_index,
    source_files,
)
from afm.consent.training import ALLOWED, OPTOUT, ConsentSettings, FileContext, iso
from afm.consent.urls import hostname_of, normalize_host, origin_of
from afm.errors import UserError
from afm.filters.base import Decision
from afm.headers import Headers

REASON = "optout"
UNVERIFIABLE = "optout_unverifiable"
NO_SNAPSHOT = "optout_no_snapshot"
CRAWLER_SIGNAL = "crawler decision"


@dataclass
class OptoutConfig(ConsentSettings):
    """Which opt-out signals the ``optout`` stage honours (each can be switched off). The
    training-use fields are the crawl's own (:class:`ConsentSettings`)."""

    snapshots: list[str] = field(default_factory=list)  # stores, crawl dirs, robots WARCs
    crawl_agent: str = "afmbot"  # the crawl token (the crawl's user_agent)
    page_signals: bool = True  # the stored response's own X-Robots-Tag / meta / TDM / usage fields
    crawler_decision: bool = True  # a stored AFM-Training-Use: optout is honoured
    domains: list[str] = field(default_factory=list)  # opted-out hosts (and subdomains)
    domains_file: str | None = None  # one domain a line, '#' comments (any filesystem)
    missing: Literal["allow", "reject"] = "allow"  # a host with no snapshot at all

    def validate(self) -> None:
        if self.missing not in ("allow", "reject"):
            raise ValueError(f"missing: expected allow or reject, got {self.missing!r}")
        self.check_consent()


def read_domains(path: str) -> list[str]:
    """A domain opt-out list: one host name a line, ``#`` comments."""
    try:
        text = fs.read_bytes(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"optout domains_file {path}: cannot be read ({exc})") from exc
    return [line.split("#", 1)[0].strip() for line in text.splitlines()
            if line.split("#", 1)[0].strip()]


def stored_decision(record: dict[str, Any]) -> tuple[str | None, Any]:
    """The crawler's stored decision of a page (``AFM-Training-Use`` and its evidence,
    :mod:`afm.crawler.storage.warc`): ``(allowed | optout | None, evidence)``."""
    use = record.get("training_use")
    if not isinstance(use, str) or use.strip().lower() not in (ALLOWED, OPTOUT):
        return None, None
    raw = record.get("training_evidence")
    try:
        evidence = json.loads(raw) if isinstance(raw, str) and raw else None
    except ValueError:
        evidence = raw  # kept as written: unreadable evidence is still evidence
    return use.strip().lower(), evidence


class OptoutFilter:
    """The stage (``__call__(record) -> Decision``) for crawl pages and documents alike."""

    name = "optout"

    def __init__(self, cfg: OptoutConfig | None = None,
                 index: SnapshotIndex | None = None) -> None:
        self.cfg = cfg or OptoutConfig()
        self.cfg.validate()
        self.policy = self.cfg.training_policy(self.cfg.crawl_agent)
        domains = list(self.cfg.domains)
        if self.cfg.domains_file:
            domains += read_domains(self.cfg.domains_file)
        self.domains = {normalize_host(d) for d in domains if d.strip(". ")}
        if index is None and self.cfg.snapshots:
            index, _counts = load_index(self.cfg.snapshots)
        self.index = index

    # ---- the signals ------------------------------------------------------------------------
    def _domain(self, url: str) -> list[dict[str, Any]]:
        labels = hostname_of(url).split(".")
        for i in range(len(labels)):
            if ".".join(labels[i:]) in self.domains:
                return [{"signal": "domain list", "source": "optout.domains",
                         "domain": ".".join(labels[i:])}]
        return []

    def _signals(self, record: dict[str, Any]) -> PageSignals:
        if not self.cfg.page_signals or "body" not in record:
            return PageSignals()
        body = record.get("body") or b""
        if isinstance(body, str):
            body = body.encode("utf-8", "replace")
        headers = Headers.of(record.get("headers"))
        return page_signals(headers, body, is_html(headers.get("content-type"), body),
                            self.policy.agents)

    def _snapshot_evidence(self, url: str, signals: PageSignals, fetched: Any
                           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict | None]:
        """What the host's snapshots say about ``url`` (:meth:`SnapshotIndex.decide`):
        ``(opt-out evidence, unverifiable evidence, why there is no robots.txt snapshot
        or None)``."""
        evidence: list[dict[str, Any]] = []
        unverifiable: list[dict[str, Any]] = []
        missing = None
        index, policy = self.index, self.policy
        if index is None:
            return evidence, unverifiable, missing
        # TDMRep: the page's header or meta supersedes the file, which then cannot matter
        if self.cfg.tdmrep and signals.tdm_header is None and signals.tdm_meta is None:
            def judge_tdm(snap: dict[str, Any]) -> list[dict[str, Any]]:
                return policy.tdm_evidence(url, index.tdm_file(snap), _context(snap), signals,
                                           fetched)

            out = index.decide(url, TDMREP, judge_tdm)
            if out.state == "optout":
                evidence += _with_trail(out)
            elif out.state == "unverifiable":
                unverifiable.append({"signal": TDMREP, **out.details()})
            # missing: no tdmrep.json (most sites publish none)
        if self.cfg.robots or self.cfg.content_signals or self.cfg.content_usage:
            def judge_robots(snap: dict[str, Any]) -> list[dict[str, Any]]:
                rules, ctx = index.robots_rules(snap), _context(snap)
                return (policy.robots_evidence(url, rules, ctx)
                        + policy.robots_usage_evidence(url, rules, ctx))

            out = index.decide(url, ROBOTS, judge_robots)
            if out.state == "optout":
                evidence += _with_trail(out)
            elif out.state == "unverifiable":
                unverifiable.append({"signal": ROBOTS, **out.details()})
            elif out.state == "missing":
                missing = out.details()
        return evidence, unverifiable, missing

    def __call__(self, record: dict[str, Any]) -> Decision:
        url = record.get("url")
        if not isinstance(url, str) or "://" not in url:
            return Decision(True)  # a document without a URL: nothing to check it by
        host = origin_of(url)
        fetched_at = record.get("fetched_at")
        fetched = fetched_at if isinstance(fetched_at, dt.datetime) else None
        policy = self.policy
        signals = self._signals(record)
        evidence = self._domain(url) + policy.directive_evidence(signals, fetched)
        found, unverifiable, missing = self._snapshot_evidence(url, signals, fetched)
        if missing is not None and self.cfg.missing == "reject" and not evidence and not found:
            return Decision.drop(NO_SNAPSHOT, url=url, host=host, evidence=[
                {"signal": ROBOTS, "detail": "no robots.txt snapshot of this host", **missing}])
        # TDMRep from the page alone (with no file, or the file superseded)
        if signals.tdm_header is not None or signals.tdm_meta is not None:
            evidence += policy.tdm_evidence(url, None, None, signals, fetched)
        evidence += found
        evidence += policy.header_usage_evidence(signals, fetched)
        details: dict[str, Any] = {}
        stored, stored_evidence = stored_decision(record) if self.cfg.crawler_decision else (None, None)
        if stored == OPTOUT and not evidence:
            details["disagreement"] = "crawler optout, curate allowed"
            evidence.append({"signal": CRAWLER_SIGNAL, "source": "AFM-Training-Use",
                             "stored": OPTOUT, "evidence": stored_evidence,
                             "fetched_at": iso(fetched)})
        elif stored == ALLOWED and (evidence or unverifiable):
            details["disagreement"] = "crawler allowed, curate optout"
        if stored is not None:
            details["crawler_decision"] = stored
        if evidence:
            return Decision.drop(REASON, url=url, host=host, fetched_at=iso(fetched),
                                 evidence=evidence, **details)
        if unverifiable:
            return Decision.drop(UNVERIFIABLE, url=url, host=host, evidence=unverifiable,
                                 **details)
        return Decision(True)


def _context(snap: dict[str, Any]) -> FileContext:
    return FileContext(snap["url"], snap["fetched_at"], snap["status"])


def _with_trail(out: Any) -> list[dict[str, Any]]:
    """An outcome's evidence, each entry naming the redirects followed to it."""
    if out.trail:
        for entry in out.evidence:
            entry.setdefault("redirects", list(out.trail))
    return out.evidence


# ---- the curate stage's hooks (afm.pipelines.curate.stages) ----------------------------------


def prepare_run(cfg: OptoutConfig, inputs: list[str]) -> None:
    """Before a run: with no snapshots configured, read the robots.txt / tdmrep.json
    snapshots of the crawl directories given as input (their ``robotstxt/``); then make a
    missing, unreadable or damaged-beyond-attribution snapshot source a one-line error here,
    not a failure inside a worker (local sources are read whole, and read again by the
    workers; remote ones are listed)."""
    if not cfg.snapshots:
        cfg.snapshots = [p if fs.is_remote(p) else os.path.abspath(p) for p in inputs
                         if not fs.has_glob(p) and fs.isdir(p) and fs.isdir(fs.join(p, SNAPSHOT_DIR))]
    if not cfg.snapshots:
        return
    if any(fs.is_remote(p) for p in cfg.snapshots):
        source_files(list(cfg.snapshots))
    else:
        load_index(list(cfg.snapshots))


def run_warnings(cfg: OptoutConfig, counts: dict[str, int]) -> list[str]:
    """After a run: documents with URLs were checked without any robots.txt / tdmrep.json
    snapshot (only the pages' own signals and the domain list applied)."""
    with_url = counts.get("read.pages", 0) + counts.get("read.docs_with_url", 0)
    if cfg.snapshots or not with_url or not (cfg.robots or cfg.tdmrep):
        return []
    return ["optout: no robots.txt / tdmrep.json snapshots (no --robots-snapshots, and no "
            "input is a crawl directory with robotstxt/): only the pages' own noai / TDM "
            "signals and the domain list were checked"]


__all__ = ["CRAWLER_SIGNAL", "NO_SNAPSHOT", "REASON", "UNVERIFIABLE", "OptoutConfig",
           "OptoutFilter", "prepare_run", "read_domains", "run_warnings", "stored_decision"]
