"""The training-use policy beside the crawl policy: may a fetched page be trained on?

Crawling and training are separate permissions, as with Applebot / Applebot-Extended
and Googlebot / Google-Extended: the crawl token's robots.txt group decides what is
fetched (:mod:`afm.consent.robots`), and this module decides what may be used for
training. The crawler records its decision on every page; ``afm curate``'s ``optout``
stage applies the same rules again with the newest robots.txt / tdmrep.json snapshot of
each host (:mod:`afm.consent.snapshots`), so a publisher who opts out later is honoured.

**One configuration, one policy object.** :class:`ConsentSettings` is the configuration
both the crawl (:class:`afm.crawler.config.CrawlConfig`) and curate's ``optout`` stage
(:class:`afm.filters.optout.OptoutConfig`) inherit: same names, same defaults, one
validation; :meth:`ConsentSettings.training_policy` builds the one :class:`TrainingPolicy`
both decide with, so the crawler and curate cannot read a signal differently.

A page is opted out when any of these says so (each can be switched off):

1. **directives** - the page's own ``X-Robots-Tag`` or meta robots carries ``noai`` or
   ``noimageai`` (``directives``; DeviantArt, their only definition, asks that content
   carrying either be left out of AI training sets, so both count, on text pages too);
2. **TDMRep** - ``tdm-reservation: 1`` after the protocol's priority: the origin's
   ``/.well-known/tdmrep.json``, superseded by the page's header, superseded by its
   HTML meta (:mod:`afm.consent.tdmrep`);
3. **robots.txt** - a training token's group disallows the URL. The training tokens are
   a set (``training_agents``; afm's own ``afmbot-extended`` always in it, the preset
   ``preset:ai-training`` adds GPTBot, CCBot, Google-Extended, ... :mod:`afm.consent.agents`):
   every token the file names decides with its own group, and any one that disallows
   opts the URL out (the evidence names it). When the file does not name our own
   training token, the crawl token's decision stands for it (with its fallback token and
   ``fallback_first``), as Applebot-Extended falls back to Applebot's rules, so a site
   that later disallows our crawler entirely is opted out too; adding tokens only ever
   adds opt-outs;
4. **Content Signals** (``content_signals``) - ``Content-Signal: ai-train=no`` in the
   robots.txt group of the crawl token or of a training token (Cloudflare writes it in
   ``User-agent: *``; a token's own group that states no ``ai-train`` takes it from the
   ``*`` group, as the policy is stated to every visitor), or in a ``Content-Signal``
   response field;
5. **AI preferences** (``content_usage``) - a ``Content-Usage`` statement that disallows
   training (``train-ai=n``; :mod:`afm.consent.preferences`): the robots.txt rule of the
   group that applies to the crawl token or a training token, longest matching path,
   for paths that group allows to be crawled (draft-ietf-aipref-attach-05 section 3.1),
   or the ``Content-Usage`` response field.

**Precedence.** Each vocabulary is read by its own rules: TDMRep's meta over header over
file; robots.txt's longest match, ``Allow`` winning a tie; Content-Usage's longest
matching path, statements of equal length combined. Across vocabularies and sources the
most restrictive statement wins (draft-ietf-aipref-vocab-07 section 5.1): an explicit
permission in one (``tdm-reservation: 0``, ``ai-train=yes``, ``train-ai=y``, an
``Allow``) never cancels an opt-out in another.

Every opt-out carries its evidence: the signal, where it was found, the rule or value,
the token(s) it was read for, and the fetch time and status of the file it came from.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from afm.consent.agents import OWN_TRAINING_TOKEN, expand_agents
from afm.consent.directives import TRAINING_DIRECTIVES, PageSignals
from afm.consent.preferences import (
    CONTENT_SIGNAL,
    CONTENT_USAGE,
    Preference,
    aipref_training,
    combine,
    signal_training,
    training,
)
from afm.consent.robots import Group, RobotsRules, UsageRule
from afm.consent.tdmrep import TdmFile
from afm.consent.tdmrep import combine as tdm_combine
from afm.errors import UserError

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
    """Which opt-out signals are honoured, for which product tokens (built by
    :meth:`ConsentSettings.training_policy`; see the module docstring)."""

    crawl_agent: str = "afmbot"
    training_agents: tuple[str, ...] = (OWN_TRAINING_TOKEN,)
    fallback_agent: str | None = None
    fallback_first: bool = False
    robots: bool = True
    tdmrep: bool = True
    directives: tuple[str, ...] = TRAINING_DIRECTIVES
    content_signals: bool = True
    content_usage: bool = True
    training_agent: str | None = None  # the earlier single-token form: added to the set

    def __post_init__(self) -> None:
        agents = tuple(self.training_agents)
        if self.training_agent and self.training_agent.lower() not in {a.lower() for a in agents}:
            agents += (self.training_agent,)
        object.__setattr__(self, "training_agents", agents)
        object.__setattr__(self, "training_agent", None)

    @property
    def agents(self) -> tuple[str, ...]:
        """The tokens a scoped directive may name to apply to us."""
        return tuple(a for a in (self.crawl_agent, *self.training_agents) if a)

    # ---- page signals ------------------------------------------------------------------
    def directive_evidence(self, signals: PageSignals, fetched_at: Any = None) -> list[dict]:
        return [{"signal": d, "source": where, "fetched_at": iso(fetched_at)}
                for d, where in sorted(signals.directives.items()) if d in self.directives]

    def tdm_evidence(self, url: str, tdm: TdmFile | None, tdm_file: FileContext | None,
                     signals: PageSignals, fetched_at: Any = None) -> list[dict]:
        if not self.tdmrep:
            return []
        from_file = tdm.decide(url) if tdm is not None else None
        verdict = tdm_combine(from_file, signals.tdm_header, signals.tdm_meta)
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

    def header_usage_evidence(self, signals: PageSignals, fetched_at: Any = None) -> list[dict]:
        """The ``Content-Signal`` and ``Content-Usage`` response fields."""
        out = []
        for kind, on, value, read in (
                (CONTENT_SIGNAL, self.content_signals, signals.content_signal, signal_training),
                (CONTENT_USAGE, self.content_usage, signals.content_usage, aipref_training)):
            if not on or value is None:
                continue
            pref = read(value)
            if pref.disallowed:
                name = "Content-Signal" if kind == CONTENT_SIGNAL else "Content-Usage"
                out.append({"signal": kind, "source": f"{name} header", "value": value,
                            "label": pref.label, "fetched_at": iso(fetched_at)})
        return out

    # ---- robots.txt --------------------------------------------------------------------------
    def _readers(self, robots: Any) -> list[tuple[str, str | None, bool]]:
        """``(token, fallback, fallback_first)`` for every token whose robots.txt group
        is read for usage preferences: the crawl token (with its fallback), afm's own
        training token, and each other training token the file names (one it does not
        name would read the ``*`` group, which the crawl token reads already)."""
        out = [(self.crawl_agent, self.fallback_agent, self.fallback_first)] if self.crawl_agent else []
        return out + [(t, None, False) for t in self.training_agents
                      if t.lower() != self.crawl_agent.lower()
                      and (t.lower() == OWN_TRAINING_TOKEN or robots.names(t))]

    def robots_evidence(self, url: str, rules: RobotsRules | None,
                        robots_file: FileContext | None) -> list[dict]:
        if not self.robots or rules is None:
            return []
        named = [t for t in self.training_agents
                 if rules.robots is not None and rules.robots.names(t)]
        verdicts = [(t, rules.decide(url, t)) for t in named]
        own = [t for t in self.training_agents
               if t.lower() in (OWN_TRAINING_TOKEN, f"{self.crawl_agent}-extended".lower())]
        if not any(t in named for t in (own or self.training_agents)):
            # Our training token is not named: the crawl token's decision stands for it
            # (Applebot-Extended follows Applebot). Other tokens count only where named.
            verdicts.append((self.crawl_agent, rules.decide(
                url, self.crawl_agent, self.fallback_agent, self.fallback_first)))
        by_rule: dict[Any, dict[str, Any]] = {}
        for agent, verdict in verdicts:
            if verdict.allowed:
                continue
            key = verdict.rule.line if verdict.rule is not None else None
            entry = by_rule.get(key)
            if entry is not None:
                entry["agents"].append(agent)
                continue
            entry = {"signal": "robots.txt", "source": "robots.txt", "agent": agent,
                     "agents": [agent], **verdict.evidence()}
            if rules.kind == "disallow_all":
                entry["detail"] = f"unavailable ({rules.reason}): disallow all (RFC 9309 2.3.1.4)"
            if robots_file is not None:
                entry.update(robots_file.evidence())
            by_rule[key] = entry
        return list(by_rule.values())

    def robots_usage_evidence(self, url: str, rules: RobotsRules | None,
                              robots_file: FileContext | None) -> list[dict]:
        """``Content-Signal`` and ``Content-Usage`` rules of robots.txt (module docstring)."""
        if rules is None or rules.robots is None:
            return []
        robots = rules.robots
        found: dict[tuple[str, int], dict[str, Any]] = {}
        for agent, fallback, first in self._readers(robots):
            groups = robots.groups_for(agent, fallback, first)
            for kind, on in ((CONTENT_SIGNAL, self.content_signals),
                             (CONTENT_USAGE, self.content_usage)):
                if not on:
                    continue
                if kind == CONTENT_USAGE and not robots.decide(url, agent, fallback, first).allowed:
                    continue  # attach-05 3.1: no preferences for what cannot be crawled
                pref, deciding = self._usage(robots, url, kind, groups)
                if not pref.disallowed:
                    continue
                for rule in deciding:
                    entry = found.get((kind, rule.line))
                    if entry is None:
                        entry = found[(kind, rule.line)] = {
                            "signal": kind, "source": "robots.txt", "agent": agent,
                            "agents": [], "rule": rule.text(), "line": rule.line,
                            "label": pref.label,
                            **(robots_file.evidence() if robots_file is not None else {})}
                    if agent not in entry["agents"]:
                        entry["agents"].append(agent)
        return list(found.values())

    @staticmethod
    def _usage(robots: Any, url: str, kind: str, groups: list[Group]
               ) -> tuple[Preference, list[UsageRule]]:
        """The training preference of ``kind`` rules for ``url`` in ``groups`` and the
        rules that said so. A Content-Signal left unstated by a token's own groups is
        taken from the ``*`` group (stated to every visitor); a statement still unknown is
        taken from lines written before any group (said to every crawler)."""
        tiers = [groups]
        if kind == CONTENT_SIGNAL and groups and not any(g.is_global for g in groups):
            tiers.append(robots.global_groups())
        tiers.append(robots.site_groups())
        for tier in tiers:
            rules = robots.usage_rules(url, kind, tier)
            prefs = [(training(kind, r.statement), r) for r in rules]
            pref = combine(p for p, _ in prefs)
            if pref.value != "unknown":
                return pref, [r for p, r in prefs if p.value == pref.value]
        return Preference(), []

    # ---- the decision ----------------------------------------------------------------------
    def decide(self, url: str, *, signals: PageSignals | None = None, fetched_at: Any = None,
               robots: RobotsRules | None = None, robots_file: FileContext | None = None,
               tdm: TdmFile | None = None, tdm_file: FileContext | None = None
               ) -> TrainingDecision:
        """Every opt-out signal for ``url``: directives, TDMRep, robots.txt, then the
        usage preferences of robots.txt and of the response fields."""
        signals = signals or PageSignals()
        return TrainingDecision(
            self.directive_evidence(signals, fetched_at)
            + self.tdm_evidence(url, tdm, tdm_file, signals, fetched_at)
            + self.robots_evidence(url, robots, robots_file)
            + self.robots_usage_evidence(url, robots, robots_file)
            + self.header_usage_evidence(signals, fetched_at))


@dataclass
class ConsentSettings:
    """The training-use settings the crawl and curate's ``optout`` stage share (both
    configs inherit these fields; see the module docstring). ``training_agent`` is the
    earlier single-token form: it is added to ``training_agents``, never replaces it."""

    fallback_agent: str | None = None  # obeyed when neither our token nor * is named
    fallback_first: bool = False  # fallback group before the * group (Applebot's own order)
    training_agents: list[str] = field(default_factory=lambda: [OWN_TRAINING_TOKEN])
    training_agent: str | None = None  # one more token (earlier configs); "" = none
    robots: bool = True  # robots.txt groups of the training tokens
    tdmrep: bool = True  # tdmrep.json, tdm-reservation header and meta
    directives: list[str] = field(default_factory=lambda: list(TRAINING_DIRECTIVES))
    content_signals: bool = True  # Content-Signal (robots.txt and response field)
    content_usage: bool = True  # IETF AI preferences Content-Usage (robots.txt and field)

    def training_tokens(self) -> tuple[str, ...]:
        """Every training token: afm's own, ``training_agents`` (presets expanded) and
        ``training_agent``."""
        return expand_agents([OWN_TRAINING_TOKEN, *self.training_agents,
                              self.training_agent or ""])

    def check_consent(self) -> None:
        """Raise :class:`UserError` for an unknown directive, token or preset."""
        unknown = [d for d in self.directives if d not in TRAINING_DIRECTIVES]
        if unknown:
            raise UserError(f"directives: unknown {unknown}; known: "
                            + ", ".join(TRAINING_DIRECTIVES))
        if self.fallback_agent is not None and not expand_agents([self.fallback_agent]):
            raise UserError("fallback_agent: empty; leave it out for none")
        self.training_tokens()

    def training_policy(self, crawl_agent: str) -> TrainingPolicy:
        """The one policy both the crawler and curate decide with."""
        self.check_consent()
        return TrainingPolicy(crawl_agent=crawl_agent, training_agents=self.training_tokens(),
                              fallback_agent=self.fallback_agent or None,
                              fallback_first=self.fallback_first, robots=self.robots,
                              tdmrep=self.tdmrep, directives=tuple(self.directives),
                              content_signals=self.content_signals,
                              content_usage=self.content_usage)


__all__ = ["ALLOWED", "OPTOUT", "ConsentSettings", "FileContext", "TrainingDecision",
           "TrainingPolicy", "iso"]
