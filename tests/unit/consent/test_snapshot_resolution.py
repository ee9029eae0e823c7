"""Snapshot resolution as a state machine (RFC 9309 2.3.1, docs/crawler.md "Snapshots"):
fixed cases for each rule, then a Hypothesis property test over random snapshot histories
(captures, redirects, failures, damage, truncation, dates) checking the rules themselves:

* a redirect is followed within the captured set, across schemes and hosts (2.3.1.2); a
  target the set did not capture, a loop, or a 3xx without ``Location`` is *no snapshot*,
  so curate's ``missing`` setting applies (``missing: reject`` rejects);
* a newer damaged, failed or unresolvable snapshot never hides an older readable opt-out;
  only a newer readable snapshot supersedes it;
* ``afm robots snapshots`` never drops an opt-out: deciding with the store it writes is
  deciding with its inputs, also after merging later snapshots into it;
* no silent allow: a page is allowed only when a readable snapshot that allows it is
  reachable from its origin.
"""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from afm.consent.snapshots import ROBOTS, SnapshotIndex, build_store, load_index, make_snapshot
from afm.filters.optout import OptoutConfig, OptoutFilter

OPT_OUT = b"User-agent: *\nDisallow: /\n"
ALLOW = b"User-agent: *\nAllow: /\n"
DAY0 = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)


def snap(url: str, day: int | None, status: int | None, body: bytes = b"",
         location: str | None = None, error: str | None = None) -> dict:
    when = None if day is None else DAY0 + dt.timedelta(days=day)
    return make_snapshot(url, ROBOTS, fetched_at=when, status=status, body=body,
                         location=location, error=error)


def judge(s: dict) -> list[dict]:
    """A page is opted out by a 2xx disallowing all, or by a failure (RFC 9309 2.3.1.4)."""
    status = s["status"]
    if (200 <= status < 300 and s["body"] == OPT_OUT) or status == 429 or status >= 500:
        return [{"signal": "robots.txt", "file": s["url"]}]
    return []


def state(index: SnapshotIndex, url: str) -> str:
    return index.decide(url, ROBOTS, judge).state


def use(index: SnapshotIndex, url: str, missing: str = "allow") -> tuple[bool, str | None]:
    decision = OptoutFilter(OptoutConfig(missing=missing), index=index)({"url": url, "text": "t"})
    return decision.keep, decision.reason


# ---- the rules, one case each ----------------------------------------------------------------


def test_http_to_https_redirect_with_uncaptured_target_is_no_snapshot():
    """Common Crawl writes no record when the target fetch failed: the set holds only the
    redirect. Neither scheme has a snapshot; missing: reject rejects both."""
    index = SnapshotIndex([snap("http://h.example/robots.txt", 10, 301,
                                location="https://h.example/robots.txt")])
    for url in ("http://h.example/a", "https://h.example/a"):
        assert state(index, url) == "missing"
        assert use(index, url, missing="reject") == (False, "optout_no_snapshot")
        assert use(index, url) == (True, None)  # missing: allow, as configured


def test_http_to_https_redirect_followed_when_captured():
    index = SnapshotIndex([
        snap("http://h.example/robots.txt", 10, 301, location="https://h.example/robots.txt"),
        snap("https://h.example/robots.txt", 10, 200, OPT_OUT),
    ])
    assert use(index, "http://h.example/a") == (False, "optout")
    assert use(index, "https://h.example/a") == (False, "optout")


def test_redirect_loop_and_missing_location_are_no_snapshot():
    index = SnapshotIndex([
        snap("http://h.example/robots.txt", 10, 301, location="https://h.example/robots.txt"),
        snap("https://h.example/robots.txt", 10, 302, location="http://h.example/robots.txt"),
        snap("https://n.example/robots.txt", 10, 301),
    ])
    assert state(index, "https://h.example/a") == "missing"
    assert state(index, "http://h.example/a") == "missing"
    assert state(index, "https://n.example/a") == "missing"


def test_newer_uncaptured_redirect_does_not_hide_an_older_opt_out(tmp_path):
    snaps = [snap("https://h.example/robots.txt", 10, 200, OPT_OUT),
             snap("https://h.example/robots.txt", 20, 301, location="https://www.h.example/robots.txt")]
    assert use(SnapshotIndex(snaps), "https://h.example/a") == (False, "optout")
    rows = list(SnapshotIndex(snaps).snapshots())
    assert any(r["status"] == 200 for r in rows)  # the store keeps the opt-out
    # an older allow is no longer current: the newest snapshot leads nowhere
    allow = [snap("https://h.example/robots.txt", 10, 200, ALLOW), snaps[1]]
    assert state(SnapshotIndex(allow), "https://h.example/a") == "missing"


def test_newer_damage_does_not_hide_an_older_opt_out_and_makes_an_allow_unverifiable():
    damaged = snap("https://h.example/robots.txt", 20, None, error="damaged: WARC-Truncated")
    out = SnapshotIndex([snap("https://h.example/robots.txt", 10, 200, OPT_OUT), damaged])
    assert use(out, "https://h.example/a") == (False, "optout")
    allow = SnapshotIndex([snap("https://h.example/robots.txt", 10, 200, ALLOW), damaged])
    assert use(allow, "https://h.example/a") == (False, "optout_unverifiable")


def test_only_a_newer_readable_snapshot_supersedes():
    index = SnapshotIndex([snap("https://h.example/robots.txt", 10, 200, OPT_OUT),
                           snap("https://h.example/robots.txt", 15, 503),
                           snap("https://h.example/robots.txt", 20, 200, ALLOW)])
    assert use(index, "https://h.example/a") == (True, None)
    index = SnapshotIndex([snap("https://h.example/robots.txt", 10, 200, OPT_OUT),
                           snap("https://h.example/robots.txt", 20, 404)])
    assert use(index, "https://h.example/a") == (True, None)  # 404: no file (2.3.1.3)


def test_redirect_across_hosts_to_a_non_robots_url():
    index = SnapshotIndex([
        snap("https://h.example/robots.txt", 10, 301, location="https://cdn.example/r/h.txt"),
        snap("https://cdn.example/r/h.txt", 10, 200, OPT_OUT),
    ])
    assert use(index, "https://h.example/a") == (False, "optout")
    assert state(index, "https://cdn.example/a") == "missing"  # a capture is no origin's file


def test_one_normalisation_for_hosts():
    """WHATWG URL host parsing (IDNA, case, default ports) and one trailing dot dropped."""
    index = SnapshotIndex([snap("https://xn--bcher-kva.example/robots.txt", 10, 200, OPT_OUT),
                           snap("HTTPS://WWW.Example.COM:443/robots.txt", 10, 200, OPT_OUT)])
    assert use(index, "https://Bücher.example/buch") == (False, "optout")
    assert use(index, "https://BÜCHER.example:443/buch") == (False, "optout")
    assert use(index, "https://www.example.com./x") == (False, "optout")
    assert use(index, "https://www.example.com/x") == (False, "optout")
    # a Unicode snapshot URL, an ASCII document URL
    index = SnapshotIndex([snap("https://bücher.example/robots.txt", 10, 200, OPT_OUT)])
    assert use(index, "https://xn--bcher-kva.example/x") == (False, "optout")


def test_store_round_trip_keeps_every_opt_out(tmp_path):
    from tests.unit.consent.test_snapshots import _cc_warc

    warc = _cc_warc(tmp_path / "cc.warc.gz", [
        ("https://h.example/robots.txt", 200, [], OPT_OUT, {"WARC-Date": "2024-01-01T00:00:00Z"}),
        ("https://h.example/robots.txt", 301, [("Location", "https://h2.example/robots.txt")],
         b"", {"WARC-Date": "2025-01-01T00:00:00Z"}),
    ])
    build_store([str(warc)], str(tmp_path / "store"))
    index, _ = load_index([str(tmp_path / "store")])
    assert use(index, "https://h.example/a") == (False, "optout")


# ---- the property test --------------------------------------------------------------------------

ORIGINS = ("http://h.example", "https://h.example", "https://www.h.example", "http://h.example:8080")
CAPTURE = "https://cdn.example/r.txt"
TARGETS = ("https://h.example/robots.txt", "http://h.example/robots.txt",
           "https://www.h.example/robots.txt", "HTTPS://H.example:443/robots.txt",
           CAPTURE, "https://gone.example/robots.txt", "/robots.txt", "/other", None)
KINDS = ("optout", "allow", "404", "503", "429", "damaged", "truncated", "undated", "redirect")


def _make(url: str, what: str, day: int, target: str | None) -> dict:
    if what == "optout":
        return snap(url, day, 200, OPT_OUT)
    if what == "allow":
        return snap(url, day, 200, ALLOW)
    if what in ("404", "503", "429"):
        return snap(url, day, int(what))
    if what == "damaged":
        return snap(url, day, None, error="damaged: HTTP status 'x' is not a status")
    if what == "truncated":
        return snap(url, day, None, ALLOW, error="damaged: WARC-Truncated: length")
    if what == "undated":
        return snap(url, None, None, error="damaged: unreadable record")
    return snap(url, day, 301, location=target)


@st.composite
def histories(draw, max_size: int = 9) -> list[dict]:
    n = draw(st.integers(0, max_size))
    days = draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n, unique=True))
    out = []
    for day in days:
        where = draw(st.sampled_from((*ORIGINS, CAPTURE)))
        url = where if where.endswith(".txt") else where + "/robots.txt"
        out.append(_make(url, draw(st.sampled_from(KINDS)), day, draw(st.sampled_from(TARGETS))))
    return out


def _states(snaps: list[dict]) -> dict[str, str]:
    index = SnapshotIndex(snaps)
    return {o: state(index, o + "/page") for o in ORIGINS}


def _reachable_allows(snaps: list[dict], origin: str) -> bool:
    """Whether some readable snapshot that allows is reachable from ``origin``'s file
    (directly, or by any chain of redirects within the set) - an over-approximation."""
    from afm.consent.snapshots import redirect_target, snapshot_kind
    from afm.consent.urls import origin_of, url_key

    def key(s):
        return ("o", origin_of(s["url"])) if snapshot_kind(s["url"]) else ("u", url_key(s["url"]))

    todo, seen = [("o", origin_of(origin))], set()
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        for s in snaps:
            if key(s) != k or s["status"] is None:
                continue
            if 300 <= s["status"] < 400 and redirect_target(s):
                t = redirect_target(s)
                todo.append(("o", origin_of(t)) if snapshot_kind(t) else ("u", url_key(t)))
            elif not judge(s) and not 300 <= s["status"] < 400:
                return True
    # the same host name's other origins are read only for their opt-outs
    return False


@settings(max_examples=300, deadline=None)
@given(histories(), st.randoms(use_true_random=False))
def test_resolution_rules_hold_on_random_histories(snaps, rnd):
    states = _states(snaps)
    # the order snapshots are read in does not matter
    shuffled = list(snaps)
    rnd.shuffle(shuffled)
    assert _states(shuffled) == states
    # the store decides as its inputs do
    rows = list(SnapshotIndex(snaps).snapshots())
    assert _states(rows) == states
    for origin, got in states.items():
        # no silent allow
        if got == "allowed":
            assert _reachable_allows(snaps, origin), (origin, snaps)
        # missing: reject rejects
        if got == "missing":
            assert use(SnapshotIndex(snaps), origin + "/page", missing="reject")[0] is False


@settings(max_examples=200, deadline=None)
@given(histories(), histories(max_size=4))
def test_merging_a_store_with_later_snapshots_is_merging_the_inputs(first, later):
    store = list(SnapshotIndex(first).snapshots())
    assert _states(store + later) == _states(first + later)


@settings(max_examples=200, deadline=None)
@given(histories(), st.sampled_from(ORIGINS),
       st.lists(st.sampled_from(("503", "429", "damaged", "truncated", "undated", "redirect")),
                min_size=1, max_size=3),
       st.lists(st.sampled_from(TARGETS), min_size=3, max_size=3))
def test_newer_unreadable_snapshots_never_hide_an_opt_out(snaps, origin, newer, targets):
    """Whatever the history, an opt-out stays an opt-out (or becomes unverifiable, never
    allowed or missing) when snapshots that cannot be read or resolved are added after it."""
    before = _states(snaps)[origin]
    if before != "optout":
        return
    last = max([(s["fetched_at"] - DAY0).days for s in snaps if s["fetched_at"].year > 1970] + [0])
    added = []
    for i, (what, target) in enumerate(zip(newer, targets, strict=False)):
        if what == "redirect" and target is not None and not target.startswith(
                ("https://gone.", "/other")):
            target = "https://gone.example/robots.txt"  # a target nobody captured
        added.append(_make(origin + "/robots.txt", what, last + 1 + i, target))
    after = _states(snaps + added)[origin]
    assert after in ("optout", "unverifiable"), (snaps, added)
    # a newer readable snapshot does supersede (an undated damaged record counts as the
    # newest of all: its date cannot be read)
    if "undated" in newer or any(s["status"] is None and s["fetched_at"].year == 1970
                                 for s in snaps):
        return
    assert _states(snaps + added + [_make(origin + "/robots.txt", "allow", last + 10, None)]
                   )[origin] == "allowed"
