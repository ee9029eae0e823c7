"""The training-use policy beside the crawl policy: may a fetched page be trained on?

Crawling and training are separate permissions, as with Applebot / Applebot-Extended
and Googlebot / Google-Extended: the crawl token's robots.txt group decides what is
fetched (:mod:`afm.crawler.robots`), and this module decides what may be used for
training. The crawler records its decision on every page; ``afm curate``'s ``optout``
stage applies the same rules again with the newest robots.txt / tdmrep.json snapshot of
each host (:mod:`afm.crawler.snapshots`), so a publisher who opts out later is honoured.

A page is opted out when any of these says so (each can be switched off):

1. **directives** - the page's own ``X-Robots-Tag`` or meta robots carries ``noai``
   (``directives``; ``noimageai`` concerns images and is not in the default list);
2. **TDMRep** - ``tdm-reservation: 1`` after the protocol's priority: the origin's
   ``/.well-known/tdmrep.json``, superseded by the page's header, superseded by its
   HTML meta (:mod:`afm.crawler.tdmrep`);
3. **robots.txt** - the training token's group (``training_agent``, e.g.
   ``afmbot-extended``) disallows the URL. When robots.txt does not name the training
   token, the crawl token's decision stands for it (as Applebot-Extended falls back to
   Applebot's rules), so a site that later disallows our crawler entirely is opted out
   too.

Every opt-out carries its evidence: the signal, where it was found, the rule or value,
and the fetch time and status of the file it came from.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from afm.crawler.directives import PageSignals
from afm.crawler.robots import RobotsRules
from afm.crawler.tdmrep import TdmFile, combine

OPTOUT = "optout"
ALLOWED = "allowed"


def iso(when: float | dt.datetime | None) -> str | None:
    """A time as ISO 8601 UTC (seconds), for evidence."""
    if when is None:
        return None
    if isinstance(when, (int, float)):
        when = dt.datetime.fromtimestamp(when, dt.UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class FileContext:
    """Where a host file's decision came from: its URL, fetch time and status."""

    url: str
    fetched_at: float | dt.datetime | None
    status: int | None

    def evidence(self) -> dict[str, Any]:
        return {"file": self.url, "fetched_at": iso(self.fetched_at), "status": self.status}


@dataclass
class TrainingDecision:
    """``use`` is ``optout`` or ``allowed``; ``evidence`` lists every opt-out signal."""

    evidence: list[dict[str, Any]] = field(default_factory=list)

    @property
    def optout(self) -> bool:
        return bool(self.evidence)

    @property
    def use(self) -> str:
        return OPTOUT if self.evidence else ALLOWED


@dataclass(frozen=True)
class TrainingPolicy:
    """Which opt-out signals are honoured, for which product tokens."""

    crawl_agent: str = "afmbot"
    training_agent: str = "afmbot-extended"  # "" = robots.txt is not checked for training
    fallback_agent: str | None = None
    fallback_first: bool = False
    robots: bool = True
    tdmrep: bool = True
    directives: tuple[str, ...] = ("noai",)

    @property
    def agents(self) -> tuple[str, ...]:
        """The tokens a scoped directive may name to apply to us."""
        return tuple(a for a in (self.crawl_agent, self.training_agent) if a)

    # ---- the three signals --------------------------------------------------------------
    def directive_evidence(self, signals: PageSignals, fetched_at: Any = None) -> list[dict]:
        return [{"signal": d, "source": where, "fetched_at": iso(fetched_at)}
                for d, where in sorted(signals.directives.items()) if d in self.directives]

    def tdm_evidence(self, url: str, tdm: TdmFile | None, tdm_file: FileContext | None,
                     signals: PageSignals, fetched_at: Any = None) -> list[dict]:
        if not self.tdmrep:
            return []
        from_file = tdm.decide(url) if tdm is not None else None
        verdict = combine(from_file, signals.tdm_header, signals.tdm_meta)
        if verdict is None or not verdict.reserved:
            return []
        out: dict[str, Any] = {"signal": "tdm-reservation", "source": verdict.source,
                               "value": verdict.reservation, "detail": verdict.detail}
        if verdict.policy:
            out["policy"] = verdict.policy
        if verdict is from_file and tdm_file is not None:
            out.update(tdm_file.evidence())
        else:
            out["fetched_at"] = iso(fetched_at)
        return [out]

    def robots_evidence(self, url: str, rules: RobotsRules | None,
                        robots_file: FileContext | None) -> list[dict]:
        if not self.robots or rules is None:
            return []
        named = (self.training_agent and rules.robots is not None
                 and rules.robots.names(self.training_agent))
        if named:
            agent, verdict = self.training_agent, rules.decide(url, self.training_agent)
        else:
            agent = self.crawl_agent
            verdict = rules.decide(url, agent, self.fallback_agent, self.fallback_first)
        if verdict.allowed:
            return []
        out: dict[str, Any] = {"signal": "robots.txt", "source": "robots.txt", "agent": agent,
                               **verdict.evidence()}
        if rules.kind == "disallow_all":
            out["detail"] = f"unavailable ({rules.reason}): disallow all (RFC 9309 2.3.1.4)"
        if robots_file is not None:
            out.update(robots_file.evidence())
        return [out]

    def decide(self, url: str, *, signals: PageSignals | None = None, fetched_at: Any = None,
               robots: RobotsRules | None = None, robots_file: FileContext | None = None,
               tdm: TdmFile | None = None, tdm_file: FileContext | None = None
               ) -> TrainingDecision:
        """Every opt-out signal for ``url`` (directives, TDMRep, robots.txt, in that order)."""
        signals = signals or PageSignals()
        return TrainingDecision(
            self.directive_evidence(signals, fetched_at)
            + self.tdm_evidence(url, tdm, tdm_file, signals, fetched_at)
            + self.robots_evidence(url, robots, robots_file))


__all__ = ["ALLOWED", "OPTOUT", "FileContext", "TrainingDecision", "TrainingPolicy", "iso"]
