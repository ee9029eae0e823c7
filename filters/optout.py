"""The ``optout`` curate stage: publishers' opt-out from training, applied again at curation.

The crawler decides training use when it fetches a page (:mod:`afm.crawler.training`),
but opt-outs change, and pages from other crawlers (Common Crawl) were never decided by
us. So right after reading, before any extraction, every crawl page and every document
with a URL is checked again, in this order (every signal found is recorded as evidence;
any one opts the page out):

1. **domain list** (``domains``, ``domains_file``): hosts, and their subdomains, that told
   us out of band;
2. **the page's own signals** (``page_signals``), from the stored response: ``noai`` (the
   ``directives`` list) in ``X-Robots-Tag`` or meta robots, and ``tdm-reservation: 1`` in
   the header or HTML meta;
3. **TDMRep** (``tdmrep``): the newest ``/.well-known/tdmrep.json`` snapshot of the host,
   superseded by the page's header and meta (the protocol's priority);
4. **robots.txt** (``robots``): the newest robots.txt snapshot of the host, read for the
   training token (``training_agent``), or for the crawl token when the file does not
   name the training token.

Snapshots come from ``snapshots``: stores built by ``afm robots snapshots``, crawl output
directories (their ``robotstxt/``), or robots.txt WARC files such as Common Crawl's; every
path is read through :mod:`afm.fs` (local, ``gs://``, ``s3://``). Rules for which snapshot
decides are :mod:`afm.crawler.snapshots`'s: the newest readable one wins, a damaged newest
snapshot makes the page unverifiable (reason ``optout_unverifiable``, never a silent
allow), a host with no snapshot is decided by ``missing``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal

from afm.crawler.directives import PageSignals, page_signals
from afm.crawler.robots import rules_from_fetch
from afm.crawler.snapshots import ROBOTS, TDMREP, SnapshotIndex, host_of, load_index, state_of
from afm.crawler.training import TrainingPolicy, iso
from afm.filters.base import Decision

from afm import fs
from afm.errors import UserError

REASON = "optout"
UNVERIFIABLE = "optout_unverifiable"
NO_SNAPSHOT = "optout_no_snapshot"


@dataclass
class OptoutConfig:
    """Which opt-out signals the ``optout`` stage honours (each can be switched off)."""

    snapshots: list[str] = field(default_factory=list)  # stores, crawl dirs, robots WARCs
    training_agent: str = "afmbot-extended"  # the robots.txt token deciding training use
    crawl_agent: str = "afmbot"  # its decision stands when the training token is not named
    fallback_agent: str | None = None
    robots: bool = True  # robots.txt snapshots (needs `snapshots`)
    tdmrep: bool = True  # tdmrep.json snapshots, and the page's tdm-reservation header/meta
    page_signals: bool = True  # the stored response's own X-Robots-Tag / meta / TDM values
    directives: list[str] = field(default_factory=lambda: ["noai"])  # e.g. add "noimageai"
    domains: list[str] = field(default_factory=list)  # opted-out hosts (and subdomains)
    domains_file: str | None = None  # one domain a line, '#' comments (any filesystem)
    missing: Literal["allow", "reject"] = "allow"  # a host with no snapshot at all

    def validate(self) -> None:
        if self.missing not in ("allow", "reject"):
            raise ValueError(f"missing: expected allow or reject, got {self.missing!r}")
        unknown = [d for d in self.directives if d not in ("noai", "noimageai")]
        if unknown:
            raise ValueError(f"directives: unknown {unknown}; known: noai, noimageai")


def read_domains(path: str) -> list[str]:
    """A domain opt-out list: one host name a line, ``#`` comments."""
    try:
        text = fs.read_bytes(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"optout domains_file {path}: cannot be read ({exc})") from exc
    return [line.split("#", 1)[0].strip() for line in text.splitlines()
            if line.split("#", 1)[0].strip()]


def _header_pairs(headers: Any) -> list[tuple[str, str]]:
    if isinstance(headers, dict):
        return [(str(k), str(v)) for k, v in headers.items()]
    if isinstance(headers, list):
        return [(str(k), str(v)) for k, v in headers]
    return []


def _is_html(headers: list[tuple[str, str]], body: bytes) -> bool:
    ctype = next((v for k, v in headers if k.lower() == "content-type"), "").lower()
    return "html" in ctype or (not ctype and b"<html" in body[:1024].lower())


class OptoutFilter:
    """The stage (``__call__(record) -> Decision``) for crawl pages and documents alike."""

    name = "optout"

    def __init__(self, cfg: OptoutConfig | None = None,
                 index: SnapshotIndex | None = None) -> None:
        self.cfg = cfg or OptoutConfig()
        self.cfg.validate()
        self.policy = TrainingPolicy(crawl_agent=self.cfg.crawl_agent,
                                     training_agent=self.cfg.training_agent,
                                     fallback_agent=self.cfg.fallback_agent,
                                     robots=self.cfg.robots, tdmrep=self.cfg.tdmrep,
                                     directives=tuple(self.cfg.directives))
        domains = list(self.cfg.domains)
        if self.cfg.domains_file:
            domains += read_domains(self.cfg.domains_file)
        self.domains = {d.lower().strip(".") for d in domains if d.strip(".")}
        if index is None and self.cfg.snapshots:
            index, _counts = load_index(self.cfg.snapshots)
        self.index = index

    # ---- the signals ------------------------------------------------------------------------
    def _domain(self, host: str) -> list[dict[str, Any]]:
        name = (host.split("://", 1)[-1].rsplit("@", 1)[-1].split(":", 1)[0]).lower()
        labels = name.split(".")
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
        headers = _header_pairs(record.get("headers"))
        return page_signals(headers, body, _is_html(headers, body), self.policy.agents)

    def __call__(self, record: dict[str, Any]) -> Decision:
        url = record.get("url")
        if not isinstance(url, str) or "://" not in url:
            return Decision(True)  # a document without a URL: nothing to check it by
        host = host_of(url)
        fetched_at = record.get("fetched_at")
        if isinstance(fetched_at, dt.datetime) or fetched_at is None:
            fetched = fetched_at
        else:
            fetched = None
        evidence = self._domain(host)
        signals = self._signals(record)
        evidence += self.policy.directive_evidence(signals, fetched)
        unverifiable: list[dict[str, Any]] = []
        tdm = tdm_ctx = rules = robots_ctx = None
        if self.index is not None:
            if self.cfg.tdmrep:
                resolved = self.index.resolve(host, TDMREP)
                if resolved.state == "unverifiable":
                    snap = resolved.snapshot
                    if snap is not None and state_of(snap) == "unavailable":
                        from afm.crawler.tdmrep import tdm_from_fetch

                        tdm, tdm_ctx = tdm_from_fetch(snap["status"], b""), resolved.context()
                    else:
                        unverifiable.append({"signal": TDMREP, **resolved.evidence()})
                else:
                    tdm, tdm_ctx = self.index.tdm_file(resolved), resolved.context()
            if self.cfg.robots:
                resolved = self.index.resolve(host, ROBOTS)
                if resolved.state == "missing":
                    if self.cfg.missing == "reject" and not evidence:
                        return Decision.drop(NO_SNAPSHOT, url=url, host=host,
                                             evidence=[{"signal": ROBOTS, "detail":
                                                        "no robots.txt snapshot of this host"}])
                elif resolved.state == "unverifiable":
                    snap = resolved.snapshot
                    if snap is not None and state_of(snap) == "unavailable":
                        rules = rules_from_fetch(snap["status"], b"")  # RFC 9309: disallow all
                        robots_ctx = resolved.context()
                    else:
                        unverifiable.append({"signal": ROBOTS, **resolved.evidence()})
                else:
                    rules, robots_ctx = self.index.robots_rules(resolved), resolved.context()
        if tdm is not None or signals.tdm_header is not None or signals.tdm_meta is not None:
            evidence += self.policy.tdm_evidence(url, tdm, tdm_ctx, signals, fetched)
        if rules is not None:
            evidence += self.policy.robots_evidence(url, rules, robots_ctx)
        if evidence:
            return Decision.drop(REASON, url=url, host=host, fetched_at=iso(fetched),
                                 evidence=evidence)
        if unverifiable:
            return Decision.drop(UNVERIFIABLE, url=url, host=host, evidence=unverifiable)
        return Decision(True)


__all__ = ["NO_SNAPSHOT", "REASON", "UNVERIFIABLE", "OptoutConfig", "OptoutFilter",
           "read_domains"]
