"""Property-based tests (hypothesis) of curate's input boundary: random valid and damaged
JSONL, JSONL.gz, WARC and Parquet files go through ``read_file_items`` (the reader and the
coercion step the pipelines use), and the count of what comes out is checked against a
count made independently of the reader:

* JSONL: the non-blank lines of the (damaged) bytes, split by hand;
* JSONL.gz: zlib's own verdict on each member, and where a truncation cut;
* WARC: the byte range of every record the test wrote: each undamaged record comes out
  exactly once (as its page or as a non-document), the damaged one as one item (two at
  most in a plain WARC, where a corrupted length may frame part of a record);
* Parquet: the rows its footer declares (pyarrow, read apart), or one reject when the
  footer itself is gone.

And always: documents in = kept + rejected, every kept document fits the Parquet schema,
every reject names the read stage and a reason.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from afm.pipelines.beam.io import BAD, DOC, PAGE, SKIP, read_file_items
from afm.schema import REJECT_SCHEMA, to_table

# AFM_HYPOTHESIS_EXAMPLES=N: N random examples a test; unset, 60 fixed ones (derandomized).
EXAMPLES = os.environ.get("AFM_HYPOTHESIS_EXAMPLES")
SETTINGS = settings(max_examples=int(EXAMPLES or 60), deadline=None, derandomize=EXAMPLES is None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

# ---------------------------------------------------------------------------- strategies

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)
field_names = st.sampled_from(["id", "url", "source", "text", "title", "language",
                               "language_score", "fetched_at", "quality_score",
                               "safety_score", "pii_redactions", "dup_cluster", "signals",
                               "html", "body", "status", "headers", "extra"])
# Surrogates are allowed on purpose: JSON can carry "\\ud800".
texts = st.text(alphabet=st.characters(), max_size=60)
records = st.dictionaries(field_names, st.one_of(json_values, texts), max_size=8)
documents = st.builds(lambda d, t: {**d, "text": t}, records, texts)


def _json_line(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


lines = st.one_of(
    documents.map(_json_line),
    records.map(_json_line),
    json_values.map(_json_line),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ")),  # not JSON
)


@st.composite
def damage(draw: st.DrawFn, size: int) -> tuple[str, list[int]]:
    """("flip", positions) | ("truncate", [at]) | ("none", [])."""
    kind = draw(st.sampled_from(["none", "flip", "truncate"]))
    if kind == "none" or size == 0:
        return "none", []
    if kind == "flip":
        return "flip", draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4))
    return "truncate", [draw(st.integers(0, size - 1))]


def _apply(data: bytes, kind: str, where: list[int], xor: int = 0x5A) -> bytes:
    if kind == "flip":
        out = bytearray(data)
        for p in where:
            out[p] ^= xor
        return bytes(out)
    if kind == "truncate":
        return data[: where[0]]
    return data


def _through_curate_reader(path: Path) -> dict[str, list]:
    """Every item ``read_file_items`` yields, by kind, with the checks that hold always."""
    out: dict[str, list] = {PAGE: [], DOC: [], BAD: [], SKIP: []}
    for kind, payload in read_file_items(str(path), "web"):
        out[kind].append(payload)
    if out[DOC]:
        to_table(out[DOC])  # every kept document is writable: the types are right
    if out[BAD]:
        to_table(out[BAD], REJECT_SCHEMA)
        assert all(r["rejected_by"] == "read" and r["reason"] for r in out[BAD])
    return out


def _read_back(tmp_path_factory, name: str, raw: bytes) -> dict[str, list]:
    """``raw`` written as a file called ``name`` (its suffix picks the reader), then read."""
    path = tmp_path_factory.mktemp("p") / name
    path.write_bytes(raw)
    return _through_curate_reader(path)


def _joined(parts: list[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
    """``parts`` end to end, and each one's byte range ``[lo, hi)`` in the result."""
    bounds, pos = [], 0
    for part in parts:
        bounds.append((pos, pos + len(part)))
        pos += len(part)
    return b"".join(parts), bounds


def _flip_in_one(data: st.DataObject, bounds: list[tuple[int, int]], where: list[int],
                 skip: int) -> tuple[int, list[int]]:
    """A flip moved inside one part (drawn), past its first ``skip`` bytes: damage spread
    over several parts would merge into one stretch. The part, and the flipped positions."""
    victim = data.draw(st.integers(0, len(bounds) - 1))
    lo, hi = bounds[victim]
    return victim, [lo + skip + w % (hi - lo - skip) for w in where]


def _cut(bounds: list[tuple[int, int]], at: int) -> tuple[list[int], int | None]:
    """A truncation at ``at``: the parts it leaves whole, and the part it cuts (None: none)."""
    whole = [i for i, (lo, hi) in enumerate(bounds) if hi <= at]
    return whole, next((i for i, (lo, hi) in enumerate(bounds) if lo < at < hi), None)


def _in(out: dict[str, list]) -> int:
    kept = len(out[PAGE]) + len(out[DOC])
    rejected = len(out[BAD])
    return kept + rejected


# --------------------------------------------------------------------------------- JSONL


@SETTINGS
@given(body=st.lists(lines, max_size=12), trailing_newline=st.booleans(), data=st.data())
def test_jsonl_every_line_counted_once(tmp_path_factory, body, trailing_newline, data) -> None:
    raw = b"\n".join(body) + (b"\n" if trailing_newline else b"")
    kind, where = data.draw(damage(len(raw)))
    raw = _apply(raw, kind, where)
    out = _read_back(tmp_path_factory, "d.jsonl", raw)
    expected = sum(1 for line in raw.split(b"\n") if line.strip())  # independent count
    assert _in(out) == expected
    assert not out[SKIP]


@SETTINGS
@given(body=st.lists(documents.map(_json_line), min_size=1, max_size=8), data=st.data())
def test_jsonl_gz_member_per_line(tmp_path_factory, body, data) -> None:
    members = [gzip.compress(line + b"\n", mtime=0) for line in body]
    raw, bounds = _joined(members)
    kind, where = data.draw(damage(len(raw)))
    if kind == "flip":  # one member damaged
        # Not the header's flag byte: a flipped FEXTRA/FNAME flag makes the member's
        # header legally extend over the next member, which no reader can tell apart.
        victim, where = _flip_in_one(data, bounds, where, skip=4)
    raw = _apply(raw, kind, where)
    out = _read_back(tmp_path_factory, "d.jsonl.gz", raw)
    if kind == "truncate":
        complete, partial = _cut(bounds, where[0])
        # A cut inside a member: its line was complete in zlib's prefix or not; the
        # reader keeps complete lines of a clean prefix, and the cut is one reject.
        prefix_lines = 0
        if partial is not None:
            d = zlib.decompressobj(31)
            prefix = d.decompress(raw[bounds[partial][0]:])
            prefix_lines = prefix.count(b"\n")
        assert _in(out) == len(complete) + prefix_lines + (1 if partial is not None else 0)
    elif kind == "flip":
        # zlib's own verdict on the damaged member's bytes: a member that still ends
        # cleanly (a flip in its timestamp) is its line; a data error costs exactly that
        # member; one whose end was destroyed is a truncated tail when it is the last
        # (its complete lines kept: a clean prefix, plus one reject), else one reject.
        lo, hi = bounds[victim]
        d = zlib.decompressobj(31)
        try:
            produced = d.decompress(raw[lo:hi])
            if d.eof:
                expected = sum(1 for x in produced.split(b"\n") if x.strip())
            elif victim == len(members) - 1:
                expected = sum(1 for x in produced.split(b"\n")[:-1] if x.strip()) + 1
            else:
                expected = 1
        except zlib.error:
            expected = 1
        assert _in(out) == len(members) - 1 + expected
    else:
        assert _in(out) == len(members)


# ---------------------------------------------------------------------------------- WARC


def _warc_record(i: int, rtype: str, body: bytes) -> bytes:
    if rtype == "response":
        payload = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body)
        ctype = b"application/http; msgtype=response"
    elif rtype == "request":
        payload, ctype = b"GET / HTTP/1.1\r\n\r\n", b"application/http; msgtype=request"
    else:
        payload, ctype = body, b"application/warc-fields"
    return (b"WARC/1.0\r\nWARC-Type: " + rtype.encode() + b"\r\nWARC-Target-URI: http://w.test/"
            + str(i).encode() + b"\r\nWARC-Date: 2024-05-01T12:00:00Z\r\nContent-Type: " + ctype
            + b"\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
            + b"\r\n\r\n")


warc_specs = st.lists(st.tuples(st.sampled_from(["response", "response", "request",
                                                 "metadata", "warcinfo"]),
                                st.binary(max_size=300)), min_size=1, max_size=8)


@SETTINGS
@given(spec=warc_specs, gz=st.booleans(), data=st.data())
def test_warc_every_record_accounted(tmp_path_factory, spec, gz, data) -> None:
    parts = [_warc_record(i, rtype, body) for i, (rtype, body) in enumerate(spec)]
    if gz:
        parts = [gzip.compress(p, mtime=0) for p in parts]
    raw, bounds = _joined(parts)
    kind, where = data.draw(damage(len(raw)))
    victim = None
    if kind == "flip":  # not the gzip flag byte (see the JSONL.gz test)
        victim, where = _flip_in_one(data, bounds, where, skip=4 if gz else 0)
    out = _read_back(tmp_path_factory, "w.warc.gz" if gz else "w.warc", _apply(raw, kind, where))
    items = _in(out) + len(out[SKIP])
    assert not out[DOC]
    pages = [p["url"] for p in out[PAGE]]

    if kind == "truncate":
        complete, partial = _cut(bounds, where[0])
        assert items == len(complete) + (1 if partial is not None else 0)
        untouched = complete
    elif kind == "flip":
        untouched = [i for i in range(len(parts)) if i != victim]
        extra = items - len(untouched)
        assert extra == 1 if gz else extra in (1, 2)
    else:
        untouched = list(range(len(parts)))
        assert items == len(parts) and not out[BAD]
    # Every undamaged response is its own page, exactly once.
    for i in untouched:
        if spec[i][0] == "response":
            assert pages.count(f"http://w.test/{i}") == 1


# ------------------------------------------------------------------------------- Parquet

columns = st.fixed_dictionaries({
    "id": st.one_of(st.just("str"), st.just("int")),
    "title": st.one_of(st.just("str"), st.just("int"), st.just("none")),
    "signals": st.one_of(st.just("map"), st.just("str")),
})


def _table(n: int, kinds: dict[str, str], with_text: bool) -> pa.Table:
    data: dict[str, list] = {
        "id": [str(i) if kinds["id"] == "str" else i for i in range(n)],
        "title": [f"t{i}" if kinds["title"] == "str" else (i if kinds["title"] == "int" else None)
                  for i in range(n)],
    }
    if with_text:
        data["text"] = [f"document {i} " * (i % 7 + 1) for i in range(n)]
    if kinds["signals"] == "map":
        data["signals"] = pa.array([[("a", float(i))] for i in range(n)],
                                   pa.map_(pa.string(), pa.float64()))
    else:
        data["signals"] = ["x"] * n
    return pa.table(data)


@SETTINGS
@given(n=st.integers(0, 40), row_group=st.integers(1, 15), kinds=columns,
       with_text=st.booleans(), data=st.data())
def test_parquet_every_row_accounted(tmp_path_factory, n, row_group, kinds, with_text, data) -> None:
    path = tmp_path_factory.mktemp("p") / "d.parquet"
    pq.write_table(_table(n, kinds, with_text), path, row_group_size=row_group,
                   compression=data.draw(st.sampled_from(["none", "zstd", "snappy"])))
    raw = path.read_bytes()
    kind, where = data.draw(damage(len(raw)))
    path.write_bytes(_apply(raw, kind, where))
    try:  # independent of the reader: does the footer still say how many rows?
        meta = pq.read_metadata(path)
        declared = meta.num_rows
        consistent = sum(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) == declared
    except Exception:  # noqa: BLE001
        declared, consistent = None, False
    out = _through_curate_reader(path)
    if declared is None:
        assert _in(out) == 1 and out[BAD][0]["reason"] == "unreadable_file"
    elif consistent:
        assert _in(out) == declared
    else:  # a footer that contradicts itself: the loss is reported as unknown
        assert any('"records_lost": "unknown"' in (r["details"] or "") for r in out[BAD]) \
            or _in(out) == sum(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    if kind == "none":
        assert len(out[DOC]) == (n if with_text else 0) and len(out[BAD]) == (0 if with_text else n)
