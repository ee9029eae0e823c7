"""robots.txt and tdmrep.json snapshots: kept by the crawler, read from Common Crawl's
robots.txt WARCs, merged into a store by ``afm robots snapshots``, looked up by curate.

Opt-outs change: a page fetched last year may belong to a site that opts out today. So
every control file the crawler fetches is kept as a WARC response record in its output,
``<crawl>/robotstxt/warc/*.warc.gz`` (Common Crawl publishes the same kind of file for
every crawl: ``robotstxt/*.warc.gz``), and curate checks each page against the newest
snapshot of its host, whatever crawl it came from.

A snapshot is ``{host, kind, url, fetched_at, status, location, body, error, source}``:
``host`` is ``scheme://host[:port]`` (robots.txt's unit, written by
:func:`afm.consent.urls.origin_of`, the one normalisation the crawler and curate use),
``kind`` ``robots.txt`` or ``tdmrep.json``. Which snapshot decides for a page
(:meth:`SnapshotIndex.decide`) is a state machine over its origin's history, newest first,
written from RFC 9309 2.3.1 (docs/crawler.md, "Snapshots: which one decides"):

* a *conclusive* snapshot (2xx, 4xx) decides and supersedes everything older: its opt-out
  always counts; its allow counts only when nothing newer was damaged (then the page is
  unverifiable) or led nowhere (then the origin has no snapshot, ``missing``);
* a 5xx / 429 is passed over for an older readable snapshot (2.3.1.4 lets a crawler keep
  a cached copy); with none at all it is "disallow all";
* a *damaged* snapshot (a record that could not be read, one marked ``WARC-Truncated`` -
  WARC 1.1 section 5.13: its readable part may lack the rule that opts out - or one whose
  HTTP status is not a status) is passed over and remembered: never a silent allow. A
  damaged record's fetch time cannot be read, so it counts as the newest;
* a 3xx is followed (2.3.1.2, at most five hops, across schemes and hosts) to what the set
  captured at its target, looked up exactly: another origin's control file, or any other
  URL (Common Crawl's robots.txt WARCs hold the redirect and, as its own record, the
  response at its target); the target's resolution is the redirect's outcome. A target
  the set did not capture, a loop, a sixth hop or a 3xx without ``Location`` is *no
  snapshot*, passed over and remembered: a newer redirect to nowhere never hides an older
  opt-out, and with nothing readable curate's ``missing`` setting decides.

A damaged record whose URL cannot be read cannot be given to any host, so reading a file
with one is an error (:class:`SnapshotError`), as is a store that cannot be read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import pyarrow as pa

from afm import fs
from afm.consent.robots import MAX_ROBOTS_BYTES, RobotsRules, rules_from_fetch
from afm.consent.tdmrep import WELL_KNOWN_PATH, TdmFile, tdm_from_fetch
from afm.consent.training import FileContext, iso
from afm.consent.urls import hostname_of, origin_of, path_and_query, url_key
from afm.errors import UserError
from afm.headers import Headers
from afm.io import read_shard, write_shard
from afm.outputs import IncompleteOutput, OutputDir, check_complete
from afm.readers import WARC_SUFFIXES, Failure, Record, read_file

SNAPSHOT_DIR = "robotstxt"  # in a crawl's output directory
ROBOTS, TDMREP = "robots.txt", "tdmrep.json"
KINDS = (ROBOTS, TDMREP)
STORE_PREFIX = "snapshots-"
STORE_ROWS_PER_SHARD = 100_000
MAX_REDIRECTS = 5
EPOCH = dt.datetime.fromtimestamp(0, dt.UTC)

STORE_SCHEMA = pa.schema(
    [
        pa.field("host", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("fetched_at", pa.timestamp("us", tz="UTC")),
        pa.field("status", pa.int32()),  # None: damaged (see error)
        pa.field("location", pa.string()),  # a 3xx's Location header
        pa.field("body", pa.binary()),
        pa.field("error", pa.string()),
        pa.field("source", pa.string()),  # the file the snapshot was read from
    ],
    metadata={"afm.record": "robots_snapshot", "afm.schema_version": "1"},
)


class SnapshotError(UserError):
    """A snapshot file or store that cannot be read, or damage that cannot be attributed."""


def snapshot_kind(url: str | None) -> str | None:
    """``robots.txt`` / ``tdmrep.json`` for the URL of either file, else None."""
    if not url:
        return None
    path = path_and_query(url)
    if path == "/robots.txt":
        return ROBOTS
    if path == WELL_KNOWN_PATH:
        return TDMREP
    return None


def state_of(snap: dict[str, Any]) -> str:
    """``conclusive`` (2xx, 4xx), ``redirect`` (3xx), ``unavailable`` (5xx, 429) or
    ``damaged`` (no readable status, or a 1xx: an interim response is no answer, and
    reading it as one would be a silent allow)."""
    status = snap.get("status")
    if status is None or not 200 <= status <= 599:
        return "damaged"
    if status == 429 or status >= 500:
        return "unavailable"
    if 300 <= status < 400:
        return "redirect"
    return "conclusive"


def make_snapshot(url: str, kind: str, *, fetched_at: dt.datetime | None, status: int | None,
                  body: bytes = b"", location: str | None = None, error: str | None = None,
                  source: str = "", host: str | None = None) -> dict[str, Any]:
    return {"host": host or origin_of(url), "kind": kind, "url": url,
            "fetched_at": fetched_at or EPOCH, "status": status, "location": location,
            "body": bytes(body[:MAX_ROBOTS_BYTES]), "error": error, "source": source}


# ---- reading snapshots ---------------------------------------------------------------------


@dataclass
class ReadCounts:
    """What reading snapshot sources met."""

    records: int = 0
    snapshots: int = 0
    damaged: int = 0
    other: int = 0  # responses for other URLs (pages), and non-response records
    files: int = 0


def _record_snapshot(page: dict[str, Any], kind: str, path: str) -> dict[str, Any]:
    """The snapshot of one readable response record: truncated (``WARC-Truncated``) or
    with no valid HTTP status, it is a damaged snapshot, dated."""
    headers = Headers.of(page.get("headers"))
    status = page.get("status")
    error = None
    truncated = page.get("warc_truncated")
    if truncated:
        status, error = None, (f"damaged: WARC-Truncated: {truncated} (the record holds part "
                               "of the response only)")
    elif not isinstance(status, int) or not 200 <= status <= 599:
        status, error = None, f"damaged: HTTP status {page.get('status')!r} is not a final status"
    return make_snapshot(page["url"], kind, fetched_at=page.get("fetched_at"), status=status,
                         body=page.get("body") or b"", location=headers.get("location"),
                         error=error, source=path)


def _warc_snapshots(path: str, counts: ReadCounts, others: dict[str, set[str]] | None = None,
                    wanted: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """The robots.txt / tdmrep.json snapshots of one WARC file. ``others`` collects the
    URLs of the other responses (``url_key`` -> files), where a redirect's target may be;
    ``wanted`` (``url_key`` -> kind) instead yields just those records, as snapshots of
    that kind (the second pass that follows redirects)."""

    unattributed: list[str] = []
    for item in read_file(path):
        if wanted is None:
            counts.records += 1
        url = item.value.get("url") if isinstance(item, Record) else getattr(item, "url", None)
        kind = snapshot_kind(url) if wanted is None else wanted.get(url_key(url)) if url else None
        if isinstance(item, Record):
            if kind is None:
                if wanted is None:
                    counts.other += 1
                    if others is not None and url:
                        others.setdefault(url_key(url), set()).add(path)
                continue
            snap = _record_snapshot(item.value, kind, path)
            counts.snapshots += 1
            counts.damaged += snap["status"] is None
            yield snap
        elif isinstance(item, Failure):
            if kind is None and item.url:
                if wanted is None:
                    counts.other += 1  # a damaged page record, not a control file
                    if others is not None:
                        others.setdefault(url_key(item.url), set()).add(path)
                continue
            if kind is None:
                if wanted is None:
                    unattributed.append(item.where.describe())
                continue
            counts.snapshots += 1
            counts.damaged += 1
            yield make_snapshot(item.url or "", kind, fetched_at=None, status=None,
                                error=f"damaged: {item.reason}: {item.error[:200]}", source=path)
        elif wanted is None:
            counts.other += 1
    if unattributed:
        raise SnapshotError(
            f"{path}: {len(unattributed)} damaged record(s) whose URL cannot be read (first: "
            f"{unattributed[0]}); the host they belong to cannot be known, so no page could be "
            "checked against them. Repair the file or leave it out")


def _store_snapshots(path: str, counts: ReadCounts) -> Iterator[dict[str, Any]]:
    try:
        check_complete(path)
    except IncompleteOutput as exc:
        raise SnapshotError(f"robots snapshot store {exc}") from exc
    shards = sorted(f for f in fs.list_files(path, recursive=False)
                    if fs.basename(f).startswith(STORE_PREFIX) and f.endswith(".parquet"))
    for shard in shards:
        counts.files += 1
        try:
            table = read_shard(shard)
        except Exception as exc:  # noqa: BLE001 - any unreadable shard is the same error
            raise SnapshotError(f"robots snapshot store {path}: {fs.basename(shard)} cannot be "
                                f"read ({type(exc).__name__}: {exc}); rebuild it with "
                                "`afm robots snapshots`") from exc
        missing = [n for n in STORE_SCHEMA.names if n not in table.schema.names]
        if missing:
            raise SnapshotError(f"robots snapshot store {path}: {fs.basename(shard)} lacks "
                                f"columns {missing}; it is not a snapshot store")
        for row in table.to_pylist():
            counts.records += 1
            counts.snapshots += 1
            if row["kind"] not in KINDS or not row["host"]:
                raise SnapshotError(f"robots snapshot store {path}: {fs.basename(shard)} has a "
                                    f"row with kind {row['kind']!r} / host {row['host']!r}")
            if row["status"] is None:
                counts.damaged += 1
            yield row


def source_files(paths: Iterable[str]) -> list[tuple[str, str]]:
    """``(kind, path)`` for every snapshot source named: a store directory (``store``),
    a crawl output directory (its ``robotstxt/`` WARCs), a directory of WARCs, a WARC
    file or a glob of them (``warc``)."""

    out: list[tuple[str, str]] = []
    for path in paths:
        if fs.has_glob(path):
            found = [f for f in fs.glob(path) if f.lower().endswith(WARC_SUFFIXES)]
            if not found:
                raise SnapshotError(f"robots snapshots: {path} matches no WARC file")
            out += [("warc", f) for f in sorted(found)]
        elif fs.isdir(path):
            names = fs.list_dir(path)
            if "_SUCCESS" in names or any(n.startswith(STORE_PREFIX) for n in names):
                out.append(("store", path))
                continue
            if SNAPSHOT_DIR not in names and "index" in names and "warc" in names:
                raise SnapshotError(f"robots snapshots: the crawl {path} has no {SNAPSHOT_DIR}/ "
                                    "(it was crawled before the crawler kept its control files)")
            root = fs.join(path, SNAPSHOT_DIR) if SNAPSHOT_DIR in names else path
            found = [f for f in fs.list_files(root) if f.lower().endswith(WARC_SUFFIXES)
                     and not fs.basename(f).startswith(".")]
            if not found:
                raise SnapshotError(f"robots snapshots: {path} holds no snapshot store, no "
                                    f"{SNAPSHOT_DIR}/ of a crawl and no WARC file")
            out += [("warc", f) for f in sorted(found)]
        elif fs.isfile(path):
            if not path.lower().endswith(WARC_SUFFIXES):
                raise SnapshotError(f"robots snapshots: {path} is neither a WARC file nor a "
                                    "snapshot store directory")
            out.append(("warc", path))
        else:
            raise SnapshotError(f"robots snapshots: {path} not found")
    return out


def read_snapshots(paths: Iterable[str], counts: ReadCounts | None = None
                   ) -> Iterator[dict[str, Any]]:
    """Every snapshot of every source (see :func:`source_files`), then the responses that
    redirects lead to (any URL: read again from the WARC files that hold them, hop by hop,
    at most :data:`MAX_REDIRECTS` rounds)."""
    counts = counts if counts is not None else ReadCounts()
    others: dict[str, set[str]] = {}
    captured: set[tuple[str, str]] = set()
    pending: dict[str, str] = {}  # url_key of a redirect target -> kind

    def note(snap: dict[str, Any]) -> None:
        if snap.get("url"):
            captured.add((url_key(snap["url"]), snap["kind"]))
        location = snap.get("location")
        if location and snap.get("status") is not None and 300 <= snap["status"] < 400:
            target = redirect_target(snap) or ""
            if snapshot_kind(target) != snap["kind"]:
                pending.setdefault(url_key(target), snap["kind"])

    for kind, path in source_files(paths):
        if kind == "store":
            source: Iterator[dict[str, Any]] = _store_snapshots(path, counts)
        else:
            counts.files += 1
            source = _warc_snapshots(path, counts, others)
        for snap in source:
            note(snap)
            yield snap
    for _round in range(MAX_REDIRECTS):
        wanted = {key: kind for key, kind in pending.items() if (key, kind) not in captured}
        pending = {}
        files = sorted({f for key in wanted for f in others.get(key, ())})
        if not files:
            return
        for path in files:
            for snap in _warc_snapshots(path, counts, wanted=wanted):
                note(snap)
                yield snap


def _order(snap: dict[str, Any]) -> tuple[dt.datetime, int]:
    """Newest first; a damaged record whose fetch time could not be read may be the newest
    of all, so it counts as the newest (a page is then unverifiable, not allowed)."""
    when = snap["fetched_at"] or EPOCH
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    if snap.get("status") is None and when == EPOCH:
        return (dt.datetime.max.replace(tzinfo=dt.UTC), 0)
    return (when, snap.get("status") or 0)


def redirect_target(snap: dict[str, Any]) -> str | None:
    """The absolute URL a 3xx snapshot's ``Location`` names (None: no Location)."""
    location = (snap.get("location") or "").strip()
    if not location:
        return None
    return urljoin(snap.get("url") or snap["host"] + "/", location)


def effective(snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The snapshots of one history (an origin's file, or one captured URL) that can still
    matter, newest first: down to and including the newest *conclusive* one (2xx, 4xx),
    which supersedes everything older. A redirect never supersedes (what its target holds
    may be damaged or missing in a later merge), so it keeps the older ones. Of the
    snapshots above that one, only the first of each kind can change a resolution (a
    second failure, damage, or redirect to the same target adds nothing the first did not,
    :meth:`SnapshotIndex.decide`), so the rest are left out: a host that redirects in
    every crawl keeps one redirect, not one per crawl."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str | None]] = set()
    for snap in sorted(snaps, key=_order, reverse=True):
        state = state_of(snap)
        if state == "conclusive":
            out.append(snap)
            break
        mark = (state, url_key(redirect_target(snap) or "") if state == "redirect" else None)
        if mark not in seen:
            seen.add(mark)
            out.append(snap)
    return out


# ---- resolution: which snapshot decides -------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One snapshot of a history, as resolution sees it: ``conclusive``, ``unavailable``,
    ``damaged``, ``redirect`` (``target``: the steps of what the set captured at its
    target) or ``missing`` (a redirect that leads to no snapshot: ``why``)."""

    snapshot: dict[str, Any]
    state: str
    target_url: str | None = None
    target: tuple[Step, ...] = ()
    why: str = ""


@dataclass
class Outcome:
    """What the snapshots say about one page for one kind of file: ``optout`` (``evidence``
    from the snapshot that decided), ``allowed``, ``unverifiable`` (damage where an
    opt-out may be), ``missing`` (no snapshot: curate's ``missing`` setting decides) or
    ``unavailable`` (only failures: RFC 9309 2.3.1.4's "disallow all", judged by the
    caller). ``trail``: the redirects followed."""

    state: str
    snapshot: dict[str, Any] | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    why: str = ""
    trail: list[str] = field(default_factory=list)

    def context(self) -> FileContext | None:
        if self.snapshot is None:
            return None
        return FileContext(self.snapshot["url"], self.snapshot["fetched_at"],
                           self.snapshot["status"])

    def details(self) -> dict[str, Any]:
        """Where this outcome came from, as evidence fields."""
        out: dict[str, Any] = {}
        if self.snapshot is not None:
            out.update(self.context().evidence())  # type: ignore[union-attr]
            out["snapshot_source"] = self.snapshot.get("source")
        if self.why:
            out["detail"] = self.why
        if self.trail:
            out["redirects"] = list(self.trail)
        return out


#: ``judge(snapshot) -> evidence``: what one readable (or failed) snapshot says about the
#: page in question; empty when it allows it.
Judge = Callable[[dict[str, Any]], list[dict[str, Any]]]


def _when(snap: dict[str, Any]) -> str:
    when = snap.get("fetched_at")
    return iso(when) or "?" if when and when != EPOCH else "an unknown time"


def _evaluate(steps: tuple[Step, ...], judge: Judge, trail: list[str]) -> Outcome:
    """The state machine of one history, newest snapshot first (RFC 9309 2.3.1 and the
    module docstring): a conclusive snapshot decides - its opt-out always counts, its
    allow only when nothing newer was damaged (then: unverifiable) or led nowhere (then:
    missing); a failure (5xx / 429) is passed over for an older readable one (2.3.1.4: a
    cached copy); damage and redirects to nothing are passed over too, but remembered; a
    redirect is its target's own resolution, followed (2.3.1.2)."""
    damaged: Outcome | None = None
    missing: Outcome | None = None
    unavailable: Outcome | None = None

    def settle(allowed: Outcome) -> Outcome:
        if damaged is not None:
            return Outcome("unverifiable", damaged.snapshot, [], damaged.why + "; the older "
                           f"snapshot of {allowed.snapshot['fetched_at'] if allowed.snapshot else '?'} "
                           "allows, but the damaged one may opt out", damaged.trail)
        if missing is not None:
            return Outcome("missing", missing.snapshot, [], missing.why + " (an older "
                           "snapshot allows; it no longer applies)", missing.trail)
        return allowed

    for step in steps:
        snap = step.snapshot
        if step.state == "conclusive":
            evidence = judge(snap)
            if evidence:
                return Outcome("optout", snap, evidence, "", trail)
            return settle(Outcome("allowed", snap, [], "", trail))
        if step.state == "redirect":
            sub = _evaluate(step.target, judge, [*trail, step.target_url or ""])
            if sub.state == "optout":
                return sub
            if sub.state == "allowed":
                return settle(sub)
            if sub.state == "unverifiable":
                damaged = damaged or sub
            elif sub.state == "missing":
                missing = missing or sub
            else:
                unavailable = unavailable or sub
        elif step.state == "unavailable":
            unavailable = unavailable or Outcome(
                "unavailable", snap, [], f"{snap['kind']} of {snap['url']} was unavailable "
                f"(HTTP {snap['status']}, {_when(snap)}) and no earlier snapshot could be read: "
                "RFC 9309 2.3.1.4 disallows all", trail)
        elif step.state == "damaged":
            damaged = damaged or Outcome(
                "unverifiable", snap, [], f"the {snap['kind']} snapshot of {snap['url']} "
                f"({_when(snap)}) is damaged ({snap.get('error')})", trail)
        else:  # missing
            missing = missing or Outcome("missing", snap, [], step.why, [*trail, step.target_url or ""])
    if damaged is not None:
        return damaged
    if unavailable is not None:
        return unavailable
    if missing is not None:
        return missing
    return Outcome("missing", None, [], "no snapshot", trail)


class SnapshotIndex:
    """Snapshots by origin and kind, and the responses captured at redirect targets that
    are no control-file URL (by URL: they are no origin's robots.txt); resolved with
    :meth:`decide` (the module docstring's rules). Origins and URLs are written by
    :mod:`afm.consent.urls`, so ``https://Bücher.example:443`` and
    ``https://xn--bcher-kva.example`` are one origin."""

    def __init__(self, snapshots: Iterable[dict[str, Any]] = ()) -> None:
        grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
        captures: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for snap in snapshots:
            url = snap.get("url")
            if url and snapshot_kind(url) != snap["kind"]:
                captures.setdefault((url_key(url), snap["kind"]), []).append(snap)
            else:
                origin = origin_of(url) if url else origin_of(snap["host"])
                grouped.setdefault((origin, snap["kind"]), []).append(snap)
        self._by_key = {key: effective(snaps) for key, snaps in grouped.items()}
        self._captures = {key: effective(snaps) for key, snaps in captures.items()}
        self._by_name: dict[str, list[str]] = {}
        for origin, _kind in self._by_key:
            names = self._by_name.setdefault(hostname_of(origin), [])
            if origin not in names:
                names.append(origin)
        self._plans: dict[tuple[str, str], tuple[Step, ...]] = {}
        self._robots: dict[str, RobotsRules] = {}
        self._tdm: dict[str, TdmFile] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    @property
    def hosts(self) -> int:
        return len({host for host, _ in self._by_key})

    def snapshots(self) -> Iterator[dict[str, Any]]:
        for key in sorted(self._by_key):
            yield from self._by_key[key]
        for key in sorted(self._captures):
            yield from self._captures[key]

    # ---- plans: each history's steps, redirects linked to their targets --------------------
    def _history(self, key: tuple[str, str, str]) -> list[dict[str, Any]] | None:
        where, name, kind = key
        return (self._by_key if where == "origin" else self._captures).get((name, kind))

    @staticmethod
    def _target_key(url: str, kind: str) -> tuple[str, str, str]:
        """A redirect target, looked up exactly: an origin's own control file, or a
        captured URL. Never another scheme's or port's file (RFC 9309 2.3: robots.txt is
        per origin); the one normalisation makes ``HTTPS://Host:443/robots.txt`` the same."""
        if snapshot_kind(url) == kind:
            return ("origin", origin_of(url), kind)
        return ("url", url_key(url), kind)

    def _steps(self, key: tuple[str, str, str], visited: tuple[tuple[str, str, str], ...]
               ) -> tuple[Step, ...]:
        out = []
        for snap in self._history(key) or ():
            state = state_of(snap)
            if state != "redirect":
                out.append(Step(snap, state))
                continue
            target = redirect_target(snap)
            if target is None:
                out.append(Step(snap, "missing", why=f"{snap['url']} redirects (HTTP "
                                f"{snap['status']}) with no Location: no snapshot"))
                continue
            tkey = self._target_key(target, snap["kind"])
            if tkey in visited:
                why = f"the redirect from {snap['url']} to {target} loops: no snapshot"
            elif len(visited) > MAX_REDIRECTS:
                why = (f"more than {MAX_REDIRECTS} redirects (RFC 9309 2.3.1.2) from "
                       f"{snap['url']}: no snapshot")
            elif self._history(tkey) is None:
                why = (f"the redirect target {target} of {snap['url']} is not in the "
                       "snapshots: no snapshot")
            else:
                out.append(Step(snap, "redirect", target, self._steps(tkey, (*visited, tkey))))
                continue
            out.append(Step(snap, "missing", target, why=why))
        return tuple(out)

    def plan(self, origin: str, kind: str) -> tuple[Step, ...] | None:
        """The steps of ``origin``'s ``kind`` history (None: the set has none)."""
        key = (origin_of(origin), kind)
        if key not in self._by_key:
            return None
        plan = self._plans.get(key)
        if plan is None:
            root = ("origin", *key)
            plan = self._plans[key] = self._steps(root, (root,))
        return plan

    # ---- the decision ---------------------------------------------------------------------------
    def decide(self, url: str, kind: str, judge: Judge) -> Outcome:
        """What the snapshots of ``url``'s origin say about it (``judge`` reads one
        snapshot for this page). When the origin has no snapshot (none at all, or none its
        redirects lead to), the same host name's other origins (another scheme or port)
        are read: their opt-out or damage counts, their allow does not (``missing``)."""
        origin = origin_of(url)
        plan = self.plan(origin, kind)
        if plan is not None:
            found = self._final(_evaluate(plan, judge, []), judge)
            if found.state != "missing":
                return found
        else:
            found = Outcome("missing", None, [], f"no {kind} snapshot of {origin}")
        outcomes = []
        for other in sorted(self._by_name.get(hostname_of(origin), ())):
            other_plan = self.plan(other, kind)
            if other == origin or other_plan is None:
                continue
            out = self._final(_evaluate(other_plan, judge, []), judge)
            if out.state in ("optout", "unverifiable"):
                out.why = (f"no {kind} snapshot of {origin}; that of {other} (the same host) "
                           + ("opts out" if out.state == "optout" else out.why))
                for entry in out.evidence:
                    entry.setdefault("detail", out.why)
                outcomes.append(out)
        # an opt-out first, then damage: whichever order the origins were read in
        for wanted in ("optout", "unverifiable"):
            for out in outcomes:
                if out.state == wanted:
                    return out
        return found

    @staticmethod
    def _final(out: Outcome, judge: Judge) -> Outcome:
        if out.state == "unavailable" and out.snapshot is not None:
            evidence = judge(out.snapshot)  # RFC 9309 2.3.1.4: disallow all
            for entry in evidence:
                entry.setdefault("detail", out.why)
            return Outcome("optout" if evidence else "allowed", out.snapshot, evidence,
                           out.why, out.trail)
        return out

    def robots_rules(self, snap: dict[str, Any]) -> RobotsRules:
        """What one robots.txt snapshot means (parsed once per fetch)."""
        return _parsed_once(self._robots, snap, rules_from_fetch)

    def tdm_file(self, snap: dict[str, Any]) -> TdmFile:
        """What one tdmrep.json snapshot means (parsed once per fetch)."""
        return _parsed_once(self._tdm, snap, tdm_from_fetch)


def _parsed_once(memo: dict[str, Any], snap: dict[str, Any], parse: Callable[[int | None, bytes | None], Any]) -> Any:
    """``parse(status, body)`` of a snapshot, once per (URL, fetch time): many pages of a
    host share one robots.txt or tdmrep.json fetch. The memo is bounded (cleared past
    100,000 entries)."""
    key = f"{snap['url'] or snap['host']}|{snap['fetched_at']}|{snap['status']}"
    parsed = memo.get(key)
    if parsed is None:
        parsed = parse(snap["status"], snap["body"])
        if len(memo) > 100_000:
            memo.clear()
        memo[key] = parsed
    return parsed


def load_index(paths: Iterable[str]) -> tuple[SnapshotIndex, ReadCounts]:
    """A :class:`SnapshotIndex` of every snapshot of ``paths`` (stores, crawls, WARCs)."""
    counts = ReadCounts()
    return SnapshotIndex(read_snapshots(list(paths), counts)), counts


# ---- the store -------------------------------------------------------------------------------


def build_store(inputs: list[str], out: str, *, overwrite: bool = False) -> dict[str, Any]:
    """``afm robots snapshots``: every snapshot of ``inputs`` that can still matter (see
    :func:`effective`: deciding with the store is deciding with the inputs, so no opt-out
    is dropped), as Parquet shards of :data:`STORE_SCHEMA` in the dataset directory
    ``out`` (``manifest.json``, ``_SUCCESS``). Returns the manifest."""

    output = OutputDir.prepare(out, overwrite=overwrite)
    try:
        index, counts = load_index(inputs)
        rows = list(index.snapshots())
        shards = []
        for n, start in enumerate(range(0, max(len(rows), 1), STORE_ROWS_PER_SHARD)):
            part = rows[start:start + STORE_ROWS_PER_SHARD]
            name = f"{STORE_PREFIX}{n:05d}.parquet"
            write_shard(output.staged(name), pa.Table.from_pylist(part, schema=STORE_SCHEMA),
                        STORE_SCHEMA)
            shards.append({"path": name, "rows": len(part)})
        by_state: dict[str, int] = {}
        for row in rows:
            by_state[state_of(row)] = by_state.get(state_of(row), 0) + 1
        manifest = {
            "command": "robots snapshots",
            "inputs": list(inputs),
            "records_read": counts.records,
            "snapshots_read": counts.snapshots,
            "damaged_read": counts.damaged,
            "other_records": counts.other,
            "hosts": index.hosts,
            "kept": len(rows),
            "superseded": counts.snapshots - len(rows),
            "kept_by_state": by_state,
            "kept_by_kind": {k: sum(1 for r in rows if r["kind"] == k) for k in KINDS},
            "shards": shards,
        }
        output.promote(manifest)
    except BaseException:
        output.abort()
        raise
    return manifest


__all__ = ["KINDS", "ROBOTS", "SNAPSHOT_DIR", "STORE_SCHEMA", "TDMREP", "Judge", "Outcome",
           "ReadCounts", "SnapshotError", "SnapshotIndex", "Step", "build_store", "effective",
           "load_index", "make_snapshot", "read_snapshots", "redirect_target",
           "snapshot_kind", "source_files", "state_of"]
