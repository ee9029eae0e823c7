"""Issue 13, observed cases, end to end through ``afm curate``: damaged and ill-typed
input loses nothing, the run exits 0, and every record is counted once, kept or
rejected with a reason; duplicate ids never reach the output twice; decontamination
is never silently off.

Each test names the observation it reproduces. The pipeline runs only the stages a case
needs (``stages``), on Beam's in-process runner, to keep the suite fast.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from afm.app.commands.pipelines.curate import curate_command

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _curate(inputs: list[Path], out: Path, stages: list[str], *extra: str) -> tuple[int, str]:
    args = [a for p in inputs for a in ("--input", str(p))] + ["--output", str(out)]
    args += ["--set", f"stages={json.dumps(stages)}", *extra, *LOCAL]
    result = CliRunner().invoke(curate_command, args)
    return result.exit_code, result.output


def _manifest(out: Path) -> dict[str, Any]:
    return json.loads((out / "manifest.json").read_text())


def _rows(out: Path, prefix: str) -> list[dict[str, Any]]:
    return [r for f in sorted(out.glob(f"{prefix}-*.parquet")) for r in pq.read_table(f).to_pylist()]


def _check_counts(out: Path, expected_in: int) -> dict[str, Any]:
    """The manifest's count equals the independent count, and the files agree with it."""
    manifest = _manifest(out)
    totals = manifest["totals"]
    assert manifest["accounting"]["ok"], manifest["accounting"]["problems"]
    assert totals["in"] == expected_in == totals["kept"] + totals["rejected"]
    assert len(_rows(out, "documents")) == totals["kept"]
    assert len(_rows(out, "rejects")) == totals["rejected"]
    assert (out / "_SUCCESS").exists()
    return manifest


def _pages(n: int, prefix: str = "http://d.test/p") -> list[tuple[str, int, str]]:
    return [(f"{prefix}{i}", 200, f"<html><body><article><p>{'Story number ' + str(i) + ' about rivers and towns. ' * 30}</p></article></body></html>")
            for i in range(n)]


# ---------------------------------------------------------------------------- damaged WARC


def test_truncated_and_corrupted_gzip_warcs(tmp_path: Path, warc_writer) -> None:
    """Observed: a truncated gzip WARC or one with corrupt bytes in the middle stopped
    reading (warcio's 'Error -3 while decompressing' on stderr), the remaining records
    vanished with no reject, the run exited 0 and "accounting holds" counted only what was
    decoded; the partial last record of a truncated file was kept as a normal page."""
    full = warc_writer(tmp_path / "full.warc.gz", _pages(20))
    data = full.read_bytes()
    members = [i for i in range(len(data)) if data.startswith(b"\x1f\x8b\x08", i)]
    truncated = tmp_path / "in" / "truncated.warc.gz"
    truncated.parent.mkdir()
    cut = (members[12] + members[13]) // 2  # inside record 12
    truncated.write_bytes(data[:cut])
    corrupt = warc_writer(tmp_path / "in" / "corrupt.warc.gz", _pages(20, "http://c.test/p"))
    bad = bytearray(corrupt.read_bytes())
    members_c = [i for i in range(len(bad)) if bytes(bad).startswith(b"\x1f\x8b\x08", i)]
    middle = (members_c[7] + members_c[8]) // 2
    bad[middle : middle + 6] = b"\x00" * 6
    corrupt.write_bytes(bytes(bad))
    code, output = _curate([tmp_path / "in"], tmp_path / "out", ["extract"])
    assert code == 0, output
    manifest = _check_counts(tmp_path / "out", 12 + 1 + 19 + 1)
    read = manifest["funnel"][0]
    assert read["reasons"] == {"truncated": 1, "corrupt_gzip": 1}
    docs = {d["url"] for d in _rows(tmp_path / "out", "documents")}
    assert "http://d.test/p12" not in docs and "http://d.test/p11" in docs
    assert "http://c.test/p7" not in docs and "http://c.test/p19" in docs
    rejects = {json.loads(r["details"]).get("file", "").rsplit("/", 1)[-1]: r
               for r in _rows(tmp_path / "out", "rejects") if r["rejected_by"] == "read"}
    assert json.loads(rejects["truncated.warc.gz"]["details"])["records_lost"] == "unknown"
    assert manifest["warnings"] and "cannot be known" in manifest["warnings"][0]
    assert "cannot be known" in output  # the summary warns


def test_corrupt_member_is_a_read_reject(tmp_path: Path, warc_writer) -> None:
    full = warc_writer(tmp_path / "w.warc.gz", _pages(6))
    data = bytearray(full.read_bytes())
    members = [i for i in range(len(data)) if bytes(data).startswith(b"\x1f\x8b\x08", i)]
    middle = (members[3] + members[4]) // 2
    data[middle : middle + 4] = b"\xff\xff\xff\xff"
    full.write_bytes(bytes(data))
    code, output = _curate([full], tmp_path / "out", ["extract"])
    assert code == 0, output
    manifest = _check_counts(tmp_path / "out", 6)
    assert manifest["funnel"][0]["reasons"] == {"corrupt_gzip": 1}


# -------------------------------------------------------------------- one bad value

def test_one_bad_value_costs_one_value_not_the_file(tmp_path: Path, warc_writer) -> None:
    """Observed: one bad value dropped the rest of its file as one unreadable_file
    reject: fetched_at 1e20 in JSONL (18 of 21 lost), an html record with status "OK"
    (8 of 10), a WARC record with a wrong Content-Length (16 of 20)."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    docs = [{"id": f"j{i}", "text": f"document {i} " * 20, "fetched_at": "2024-01-01T00:00:00Z"}
            for i in range(21)]
    docs[2]["fetched_at"] = 1e20
    (inputs / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    pages = [{"url": url, "html": html, "status": 200}
             for url, _status, html in _pages(10, "http://h.test/")]
    pages[1]["status"] = "OK"
    (inputs / "pages.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pages))
    warc = warc_writer(tmp_path / "plain.warc.gz", _pages(20, "http://w.test/p"))
    plain = gzip.decompress(warc.read_bytes())
    records = [b"WARC/1.0\r\n" + r for r in plain.split(b"WARC/1.0\r\n")[1:]]
    length = records[3].split(b"Content-Length: ")[1].split(b"\r\n")[0]
    records[3] = records[3].replace(b"Content-Length: " + length,
                                    b"Content-Length: " + str(int(length) - 11).encode(), 1)
    (inputs / "wrong-length.warc").write_bytes(b"".join(records))

    code, output = _curate([inputs], tmp_path / "out", ["extract"])
    assert code == 0, output
    manifest = _check_counts(tmp_path / "out", 21 + 10 + 20)
    by_stage = {f["stage"]: f for f in manifest["funnel"]}
    assert by_stage["read"]["reasons"] == {"bad_content_length": 1}
    assert by_stage["extract"]["reasons"] == {"http_status": 1}  # status "OK"
    assert manifest["read_notes"] == {"fetched_at:cleared": 1}
    kept = {d["id"]: d for d in _rows(tmp_path / "out", "documents")}
    assert kept["j2"]["fetched_at"] is None and kept["j20"]["fetched_at"] is not None
    assert len([u for u in kept.values() if (u["url"] or "").startswith("http://w.test/")]) == 19


# ------------------------------------------------------------------- ill-typed fields

ILL_TYPED = [
    {"id": 7, "text": "an integer id " * 10},
    {"id": "t", "text": "a numeric title " * 10, "title": 5},
    {"id": "s", "text": "signals that are a string " * 10, "signals": "x"},
    {"id": "u", "text": "a lone surrogate \ud800 in the text " * 10},
    {"id": "ok", "text": "an ordinary document " * 10},
]


def _ill_typed_jsonl(path: Path) -> Path:
    lines = [json.dumps(r) for r in ILL_TYPED]  # json.dumps writes "\ud800" as an escape
    lines.insert(2, '{"id": "broken", "text": "no closing brace"')
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ill_typed_fields_do_not_fail_curate(tmp_path: Path) -> None:
    """Observed: one ill-typed field failed the whole run: "id": 7, "title": 5,
    "signals": "x", a lone surrogate "\\ud800" in the text."""
    src = _ill_typed_jsonl(tmp_path / "docs.jsonl")
    code, output = _curate([src], tmp_path / "out", ["pii"])
    assert code == 0, output
    manifest = _check_counts(tmp_path / "out", 6)
    assert manifest["funnel"][0]["reasons"] == {"bad_json": 1}
    kept = {d["id"]: d for d in _rows(tmp_path / "out", "documents")}
    assert set(kept) == {"7", "t", "s", "u", "ok"}
    assert kept["t"]["title"] == "5" and "x" not in (kept["s"]["signals"] or {})
    assert "\ufffd" in kept["u"]["text"]
    reject = _rows(tmp_path / "out", "rejects")[0]
    assert json.loads(reject["details"])["line"] == 3


# ------------------------------------------------------------------------- same id twice


def test_same_id_twice_is_kept_once(tmp_path: Path, warc_writer) -> None:
    """Observed: the same id twice (two different texts, or a URL crawled twice) was
    written twice to the documents, and both copies were tokenized."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text(
        json.dumps({"id": "dup", "text": "the first text with this id " * 10}) + "\n"
        + json.dumps({"id": "dup", "text": "a second, different text " * 10}) + "\n")
    old, new = _pages(1, "http://r.test/page")[0], _pages(2, "http://r.test/page")[1]
    # The same URL crawled twice: the later fetch (second record) must win.
    warc_writer(inputs / "crawl.warc.gz", [old, ("http://r.test/page0", 200, new[2])])
    code, output = _curate([inputs], tmp_path / "out", ["extract"])
    assert code == 0, output
    manifest = _check_counts(tmp_path / "out", 4)
    ids = [d["id"] for d in _rows(tmp_path / "out", "documents")]
    assert len(ids) == len(set(ids)) == 2
    kept = {d["id"]: d for d in _rows(tmp_path / "out", "documents")}
    assert kept["dup"]["text"].startswith("the first text")  # first in input order
    page = next(d for d in kept.values() if d["url"] == "http://r.test/page0")
    assert "Story number 1" in page["text"]  # the later fetch
    assert {f["stage"]: f["reasons"] for f in manifest["funnel"]}["ids"] == {"duplicate_id": 2}


# -------------------------------------------------------------------- decontamination


def test_curate_without_an_index_stops_and_says_how(tmp_path: Path) -> None:
    """Observed: with no decontamination index configured, curate checked only the 20
    demo questions and printed "decontaminate ready, 0 dropped"."""
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"text": "hello " * 20}) + "\n")
    result = CliRunner().invoke(curate_command, ["--input", str(src), "--output",
                                                 str(tmp_path / "out"), *LOCAL])
    assert result.exit_code == 1
    assert "afm decontam build-index" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_decontamination_off_is_said_everywhere(tmp_path: Path) -> None:
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"text": "hello there " * 20}) + "\n")
    code, output = _curate([src], tmp_path / "out", ["pii", "decontaminate"],
                           "--set", "decontaminate.enabled=false")
    assert code == 0, output
    assert _manifest(tmp_path / "out")["decontamination"] == "off"
    assert "Decontamination: OFF" in (tmp_path / "out" / "report.html").read_text()
    assert "decontamination: off" in output


def test_curate_with_an_index_drops_contamination(tmp_path: Path, demo_index: Path) -> None:
    from afm.filters.benchmarks import demo_items

    question = demo_items()[0]["question"]
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"id": "hw", "text": f"Homework help. {question} Try it!"}) + "\n"
                   + json.dumps({"id": "ok", "text": "A walk by the river at dawn. " * 5}) + "\n")
    code, output = _curate([src], tmp_path / "out", ["decontaminate"],
                           "--decontam-index", str(demo_index))
    assert code == 0, output
    manifest = _check_counts(tmp_path / "out", 2)
    assert manifest["decontamination"] == "on"
    assert [r["id"] for r in _rows(tmp_path / "out", "rejects")] == ["hw"]


@pytest.mark.parametrize("bad", ["1", "0"])
def test_threshold_below_two_is_refused(tmp_path: Path, demo_index: Path, bad: str) -> None:
    """Observed: `afm decontam run --threshold 1` silently turned decontamination off."""
    from afm.app.commands.pipelines.decontam import decontam_group

    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"text": "x " * 20}) + "\n")
    result = CliRunner().invoke(decontam_group, ["run", "--index", str(demo_index), "--input",
                                                 str(src), "--output", str(tmp_path / "o"),
                                                 "--threshold", bad])
    assert result.exit_code == 2 and "x>=2" in result.output.replace(" ", "")
    code, output = _curate([src], tmp_path / "o2", ["decontaminate"], "--decontam-index",
                           str(demo_index), "--set", f"decontaminate.params.threshold={bad}")
    assert code == 1 and ">= 2" in output
