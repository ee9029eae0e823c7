"""The output-directory policy (afm.outputs) and the input rules (afm.io.resolve_inputs):
nothing half-written is ever read, rejects are never read as documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afm.io import InputRefused, expand_inputs, resolve_inputs, write_parquet
from afm.outputs import (
    SUCCESS,
    IncompleteOutput,
    OutputDir,
    OutputError,
    check_complete,
)
from afm.schema import REJECT_SCHEMA, make_document, make_reject


def _finished(path: Path, names: tuple[str, ...] = ("documents-00000.parquet",
                                                    "rejects-00000.parquet")) -> Path:
    out = OutputDir.prepare(path)
    for name in names:
        doc = make_document(f"text of {name}", url=f"http://x.test/{name}")
        if name.startswith("rejects"):
            write_parquet([make_reject(doc, "s", "r")], out.staged(name), REJECT_SCHEMA)
        else:
            write_parquet([doc], out.staged(name))
    out.promote({"run": "test"})
    return path


def test_promote_writes_success_last_and_removes_staging(tmp_path: Path) -> None:
    out = _finished(tmp_path / "o")
    names = sorted(p.name for p in out.iterdir())
    assert names == [SUCCESS, "documents-00000.parquet", "manifest.json", "rejects-00000.parquet"]
    marker = check_complete(str(out))
    assert set(marker["files"]) == {"documents-00000.parquet", "manifest.json",
                                    "rejects-00000.parquet"}


def test_non_empty_output_is_refused_with_the_reason(tmp_path: Path) -> None:
    out = _finished(tmp_path / "o")
    with pytest.raises(OutputError, match="finished run.*--overwrite"):
        OutputDir.prepare(out)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "notes.txt").write_text("x")
    with pytest.raises(OutputError, match="not empty"):
        OutputDir.prepare(tmp_path / "p")
    interrupted = OutputDir.prepare(tmp_path / "q")  # claimed, never promoted (a crash)
    write_parquet([make_document("x")], interrupted.staged("documents-00000.parquet"))
    with pytest.raises(OutputError, match="interrupted run"):
        OutputDir.prepare(tmp_path / "q")
    with pytest.raises(IncompleteOutput, match="interrupted"):
        expand_inputs([str(tmp_path / "q")])


def test_overwrite_keeps_the_old_output_until_promote(tmp_path: Path) -> None:
    out = _finished(tmp_path / "o", ("documents-00000.parquet", "documents-00001.parquet"))
    again = OutputDir.prepare(out, overwrite=True)
    assert check_complete(str(out))  # the old run is still complete and readable
    write_parquet([make_document("new")], again.staged("documents-00000.parquet"))
    again.abort()  # a failed second run changes nothing
    assert len(expand_inputs([str(out)])) == 2
    again = OutputDir.prepare(out, overwrite=True)
    write_parquet([make_document("new")], again.staged("documents-00000.parquet"))
    again.promote({})
    assert [Path(f).name for f in expand_inputs([str(out)])] == ["documents-00000.parquet"]


def test_unwritable_output_fails_before_any_work(tmp_path: Path) -> None:
    """Issue 13: a read-only output directory failed only after all the computing."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputError, match="cannot write|is a file"):
        OutputDir.prepare(blocker / "out")
    with pytest.raises(OutputError, match="is a file"):
        OutputDir.prepare(blocker)
    if Path("/proc/self").exists():
        with pytest.raises(OutputError, match="cannot write"):
            OutputDir.prepare("/proc/afm-no-such-output")


def test_readers_take_documents_only_and_need_success(tmp_path: Path) -> None:
    """Issue 13: `--input CURATE_OUT/` read rejects-*.parquet too."""
    out = _finished(tmp_path / "corpus")
    resolved = resolve_inputs([str(out)])
    assert [Path(f).name for f in resolved.files] == ["documents-00000.parquet"]
    assert {Path(p).name: why for p, why in resolved.skipped}["rejects-00000.parquet"] \
        .startswith("rejected documents")
    # A glob over the directory: same rule.
    assert [Path(f).name for f in expand_inputs([str(out / "*.parquet")])] == \
        ["documents-00000.parquet"]
    # A rejects file named explicitly is refused (curate may re-curate it on purpose).
    with pytest.raises(InputRefused, match="never read as documents"):
        expand_inputs([str(out / "rejects-00000.parquet")])
    assert resolve_inputs([str(out / "rejects-00000.parquet")], allow_rejects=True).files
    # Without _SUCCESS the directory is refused, with the reason.
    (out / SUCCESS).unlink()
    with pytest.raises(IncompleteOutput, match="_SUCCESS"):
        expand_inputs([str(out)])
    with pytest.raises(FileNotFoundError):  # the tokenizer CLI reports exactly this type
        expand_inputs([str(out / "documents-00000.parquet")])


def test_success_listing_a_missing_file_is_incomplete(tmp_path: Path) -> None:
    out = _finished(tmp_path / "corpus")
    (out / "documents-00000.parquet").unlink()
    with pytest.raises(IncompleteOutput, match="missing"):
        expand_inputs([str(out)])


def test_reject_files_in_plain_directories_are_skipped_by_schema(tmp_path: Path) -> None:
    d = tmp_path / "old-layout"
    write_parquet([make_document("kept")], d / "kept" / "part-0.parquet")
    write_parquet([make_reject(make_document("bad"), "s", "r")], d / "rejects" / "part-0.parquet",
                  REJECT_SCHEMA)
    resolved = resolve_inputs([str(d)])
    assert [Path(f).parent.name for f in resolved.files] == ["kept"]
    assert "afm.record=reject" in resolved.skipped[0][1]
    with pytest.raises(InputRefused):
        expand_inputs([str(d / "rejects" / "part-0.parquet")])


def test_crawl_directory_reads_its_warcs(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    (crawl / "warc").mkdir(parents=True)
    (crawl / "index").mkdir()
    (crawl / "warc" / "a.warc.gz").write_bytes(b"")
    (crawl / "index" / "a.parquet").write_bytes(b"")
    (crawl / "state.jsonl").write_text(json.dumps({}) + "\n")
    resolved = resolve_inputs([str(crawl)])
    assert [Path(f).name for f in resolved.files] == ["a.warc.gz"]
    assert len(resolved.skipped) == 2
