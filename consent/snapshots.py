"""robots.txt and tdmrep.json snapshots: kept by the crawler, read from Common Crawl's
robots.txt WARCs, merged into a store by ``afm robots snapshots``, looked up by curate.

Opt-outs change: a page fetched last year may belong to a site that opts out today. So
every control file the crawler fetches is kept as a WARC response record in its output,
``<crawl>/robotstxt/warc/*.warc.gz`` (Common Crawl publishes the same kind of file for
every crawl: ``robotstxt/*.warc.gz``), and curate checks each page against the newest
snapshot of its host, whatever crawl it came from.

A snapshot is ``{host, kind, url, fetched_at, status, location, body, error, source}``:
``host`` is ``scheme://host[:port]`` (robots.txt's unit), ``kind`` ``robots.txt`` or
``tdmrep.json``. Which snapshot of a host counts (:meth:`SnapshotIndex.resolve`):

* the newest *conclusive* one (2xx, 4xx, or a 3xx followed to its target's snapshot):
  a later snapshot wins over the one taken when the page was fetched. A redirect is
  followed (RFC 9309 2.3.1.2, up to five hops, across hosts) to whatever the snapshot set
  captured at its target: another host's ``/robots.txt``, or any other URL - Common
  Crawl's robots.txt WARCs hold the redirect and, as its own record, the response at its
  target (``https://cdn.example/robots/site.txt``). A target the set did not capture is a
  host with no snapshot (curate's ``missing`` setting decides);
* a newer 5xx / 429 is a transient failure and does not hide it (RFC 9309 2.3.1.4 lets a
  crawler keep using a cached copy); with no conclusive snapshot at all, it is RFC 9309's
  "disallow all" and the page cannot be verified;
* a newer *damaged* snapshot (a record that could not be read, one marked
  ``WARC-Truncated`` - WARC 1.1 section 5.13: its body is not the whole response, so its
  readable part may lack the rule that opts out - or one whose HTTP status is not a status)
  can not be trusted either way: the page cannot be verified. Never a silent allow. A damaged record's fetch time
  cannot be read, so it counts as the newest: leave the damaged file out (or repair it)
  to decide that host's pages again.

A damaged record whose URL cannot be read cannot be given to any host, so reading a file
with one is an error (:class:`SnapshotError`), as is a store that cannot be read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import pyarrow as pa

from afm import fs
from afm.consent.robots import MAX_ROBOTS_BYTES, RobotsRules, rules_from_fetch
from afm.consent.tdmrep import WELL_KNOWN_PATH, TdmFile, tdm_from_fetch
from afm.consent.training import FileContext
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


def host_of(url: str) -> str:
    """``scheme://host[:port]`` (lower-cased, default ports dropped): robots.txt's unit."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    netloc = parts.netloc.lower().rsplit("@", 1)[-1]
    if (scheme == "http" and netloc.endswith(":80")) or (scheme == "https" and netloc.endswith(":443")):
        netloc = netloc.rsplit(":", 1)[0]
    return f"{scheme}://{netloc}"


def hostname_of(host: str) -> str:
    return (urlsplit(host).hostname or "").lower()


def snapshot_kind(url: str | None) -> str | None:
    """``robots.txt`` / ``tdmrep.json`` for the URL of either file, else None."""
    if not url:
        return None
    path = urlsplit(url).path
    if path == "/robots.txt":
        return ROBOTS
    if path == WELL_KNOWN_PATH:
        return TDMREP
    return None


def state_of(snap: dict[str, Any]) -> str:
    """``conclusive`` (2xx, 4xx), ``redirect`` (3xx), ``unavailable`` (5xx, 429) or
    ``damaged`` (no readable status)."""
    status = snap.get("status")
    if status is None or not 100 <= status <= 599:
        return "damaged"
    if status == 429 or status >= 500:
        return "unavailable"
    if 300 <= status < 400:
        return "redirect"
    return "conclusive"


def make_snapshot(url: str, kind: str, *, fetched_at: dt.datetime | None, status: int | None,
                  body: bytes = b"", location: str | None = None, error: str | None = None,
                  source: str = "", host: str | None = None) -> dict[str, Any]:
    return {"host": host or host_of(url), "kind": kind, "url": url,
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


def url_key(url: str) -> str:
    """A URL as a capture is looked up by: scheme and host as :func:`host_of` writes them,
    then the path and query as given (the fragment dropped)."""
    parts = urlsplit(url.strip())
    rest = parts.path or "/"
    return host_of(url) + rest + (f"?{parts.query}" if parts.query else "")


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
    elif not isinstance(status, int) or not 100 <= status <= 599:
        status, error = None, f"damaged: HTTP status {page.get('status')!r} is not a status"
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
            target = urljoin(snap["url"] or snap["host"] + "/", location)
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
    if snap.get("status") is None and when == EPOCH:
        return (dt.datetime.max.replace(tzinfo=dt.UTC), 0)
    return (when, snap.get("status") or 0)


def effective(snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The snapshots of one host and kind that can still matter, newest first: every one
    down to (and including) the newest conclusive or redirect one."""
    ordered = sorted(snaps, key=_order, reverse=True)
    out = []
    for snap in ordered:
        out.append(snap)
        if state_of(snap) in ("conclusive", "redirect"):
            break
    return out


# ---- the lookup curate uses -----------------------------------------------------------------


@dataclass
class Resolved:
    """The snapshot that decides for one host and kind: ``state`` is ``ok`` (``snapshot``
    decides), ``unverifiable`` (``why``), or ``missing`` (none known)."""

    state: str
    snapshot: dict[str, Any] | None = None
    why: str = ""
    trail: list[str] = field(default_factory=list)  # redirects followed

    def context(self) -> FileContext | None:
        if self.snapshot is None:
            return None
        return FileContext(self.snapshot["url"], self.snapshot["fetched_at"],
                           self.snapshot["status"])

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.snapshot is not None:
            out.update(self.context().evidence())  # type: ignore[union-attr]
            out["snapshot_source"] = self.snapshot.get("source")
        if self.why:
            out["detail"] = self.why
        if self.trail:
            out["redirects"] = self.trail
        return out


class SnapshotIndex:
    """Snapshots by host and kind, newest first, with the rules of the module docstring;
    responses captured at a redirect's target that is no control-file URL are kept apart,
    by URL (they are no host's robots.txt)."""

    def __init__(self, snapshots: Iterable[dict[str, Any]] = ()) -> None:
        grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
        captures: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for snap in snapshots:
            url = snap.get("url")
            if url and snapshot_kind(url) != snap["kind"]:
                captures.setdefault((url_key(url), snap["kind"]), []).append(snap)
            else:
                grouped.setdefault((snap["host"], snap["kind"]), []).append(snap)
        self._by_key = {key: effective(snaps) for key, snaps in grouped.items()}
        self._captures = {key: effective(snaps) for key, snaps in captures.items()}
        self._by_name: dict[str, list[str]] = {}
        for host, _kind in self._by_key:
            names = self._by_name.setdefault(hostname_of(host), [])
            if host not in names:
                names.append(host)
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

    def _candidates(self, host: str, kind: str) -> list[dict[str, Any]] | None:
        snaps = self._by_key.get((host, kind))
        if snaps is not None:
            return snaps
        # No snapshot for this scheme/port: the same host name's (newest) one, since a
        # site serves one robots.txt on http and https in practice.
        others = [self._by_key[(h, kind)] for h in self._by_name.get(hostname_of(host), ())
                  if (h, kind) in self._by_key]
        if not others:
            return None
        return max(others, key=lambda s: s[0]["fetched_at"] or EPOCH)

    def _target(self, url: str, kind: str) -> list[dict[str, Any]] | None:
        """What the snapshots captured at a redirect's target ``url``."""
        captured = self._captures.get((url_key(url), kind))
        if captured is not None:
            return captured
        if snapshot_kind(url) == kind:
            return self._candidates(host_of(url), kind)
        return None

    def resolve(self, host: str, kind: str) -> Resolved:
        trail: list[str] = []
        where = host
        snaps = self._candidates(host, kind)
        if snaps is None:
            return Resolved("missing")
        for _hop in range(MAX_REDIRECTS + 1):
            unavailable = None
            for snap in snaps:
                state = state_of(snap)
                if state == "damaged":
                    return Resolved("unverifiable", snap, f"the newest {kind} snapshot of "
                                    f"{where} is damaged ({snap.get('error')})", trail)
                if state == "unavailable":
                    unavailable = unavailable or snap
                    continue
                if state == "redirect":
                    location = snap.get("location")
                    if not location:
                        return Resolved("ok", None, f"{kind} redirects with no Location: "
                                        "treated as unavailable (allow)", trail)
                    target = urljoin(snap["url"] or where + "/", location)
                    trail.append(target)
                    where = target
                    found = self._target(target, kind)
                    if found is None:  # RFC 9309 2.3.1.2: a target nobody captured
                        return Resolved("missing", None, f"the redirect target {target} is "
                                        "not in the snapshots", trail)
                    snaps = found
                    break
                return Resolved("ok", snap, "", trail)
            else:
                return Resolved("unverifiable", unavailable,
                                f"{kind} of {where} was unavailable (HTTP "
                                f"{unavailable['status'] if unavailable else '?'}) and no earlier "
                                "snapshot could be read: RFC 9309 2.3.1.4 disallows all", trail)
        return Resolved("ok", None, f"more than {MAX_REDIRECTS} redirects: treated as "
                        "unavailable (allow)", trail)

    def robots_rules(self, resolved: Resolved) -> RobotsRules | None:
        snap = resolved.snapshot
        if resolved.state != "ok":
            return None
        if snap is None:
            return RobotsRules("allow_all", reason=resolved.why)
        return _parsed_once(self._robots, snap, rules_from_fetch)

    def tdm_file(self, resolved: Resolved) -> TdmFile | None:
        snap = resolved.snapshot
        if resolved.state != "ok" or snap is None:
            return None
        return _parsed_once(self._tdm, snap, tdm_from_fetch)


def _parsed_once(memo: dict[str, Any], snap: dict[str, Any], parse: Callable[[int | None, bytes | None], Any]) -> Any:
    """``parse(status, body)`` of a snapshot, once per (host, fetch time): many pages of a
    host share one robots.txt or tdmrep.json fetch. The memo is bounded (cleared past
    100,000 entries)."""
    key = f"{snap['host']}|{snap['fetched_at']}"
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
    :func:`effective`), as Parquet shards of :data:`STORE_SCHEMA` in the dataset directory
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


__all__ = ["KINDS", "ROBOTS", "SNAPSHOT_DIR", "STORE_SCHEMA", "TDMREP", "ReadCounts", "Resolved",
           "SnapshotError", "SnapshotIndex", "build_store", "effective",
           "host_of", "load_index", "make_snapshot", "read_snapshots", "snapshot_kind",
           "source_files", "state_of"]
