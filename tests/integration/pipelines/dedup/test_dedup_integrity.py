"""Issue 13, observed cases in ``afm dedup``: a failed run must not grow the accepted-
corpus index, and bad input lines are rejects, not a failed run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.commands.pipelines.dedup import dedup_command
from afm.pipelines.dedup.pipeline import index_files

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _batch(path: Path, tag: str, n: int = 6) -> Path:
    """``n`` documents that are not near duplicates of each other."""
    rng = random.Random(tag)
    texts = [" ".join(f"w{rng.randrange(100_000)}" for _ in range(120)) for _ in range(n)]
    path.write_text("".join(json.dumps({"id": f"{tag}-{i}", "text": t}) + "\n"
                            for i, t in enumerate(texts)))
    return path


def test_failed_run_leaves_the_index_unchanged(tmp_path: Path) -> None:
    """Observed: `afm dedup --index IDX --write-index` that failed (exit 1) had already
    added its rows; the next batch with the same texts then lost every document as an
    exact duplicate of documents that were never accepted."""
    from afm.pipelines.curate.pipeline import run_curate

    index = tmp_path / "index"
    src = _batch(tmp_path / "week.jsonl", "w")
    params = {"index_dir": str(index), "write_index": True}
    faulty = {"stages": ["dedup"], "dedup": {"params": params},
              "debug": {"fail_once_at": ["write"], "marker_dir": str(tmp_path / "markers")}}
    with pytest.raises(Exception, match="injected failure"):
        run_curate([str(src)], tmp_path / "out1", config=faulty, pipeline_args=LOCAL, quiet=True)
    assert index_files(str(index)) == []
    assert not list(index.glob(".staging-*")) and not list(index.glob("batch-*"))
    assert not (tmp_path / "out1" / "_SUCCESS").exists()

    # The same batch again, through the command: nothing is lost to the failed attempt.
    result = CliRunner().invoke(dedup_command, ["--input", str(src), "--output",
                                                str(tmp_path / "out2"), "--index", str(index),
                                                "--write-index"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out2" / "manifest.json").read_text())
    assert manifest["totals"] == {"in": 6, "kept": 6, "rejected": 0}
    committed = index_files(str(index))
    assert committed and all("/batch-" in f for f in committed)
    # And now that batch is accepted: copies of its texts (under other ids) are duplicates.
    copies = tmp_path / "copies.jsonl"
    copies.write_text(src.read_text().replace('"id": "w-', '"id": "copy-'))
    result = CliRunner().invoke(dedup_command, ["--input", str(copies), "--output",
                                                str(tmp_path / "out3"), "--index", str(index)])
    assert result.exit_code == 1 and "dedup kept no document" in result.output  # the one rule
    result = CliRunner().invoke(dedup_command, ["--input", str(copies), "--output", str(tmp_path / "out3"),
                                                "--index", str(index), "--allow-empty", "--overwrite"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out3" / "manifest.json").read_text())["totals"]["kept"] == 0


def test_bad_lines_and_types_are_rejects_not_failures(tmp_path: Path) -> None:
    """Observed: in dedup a single malformed JSON line aborted everything, and so did
    "id": 7 or a lone surrogate."""
    src = tmp_path / "d.jsonl"
    lines = [json.dumps({"id": 7, "text": "integer id text " * 20}),
             '{"id": "cut", "text": "unterminated',
             json.dumps({"id": "sur", "text": "lone \ud800 surrogate text " * 20, "title": 5}),
             json.dumps({"id": "sig", "text": "string signals text " * 20, "signals": "x"}),
             json.dumps(["not", "an", "object"])]
    src.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(dedup_command, ["--input", str(src), "--output", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["totals"] == {"in": 5, "kept": 3, "rejected": 2}
    assert manifest["funnel"][0]["reasons"] == {"bad_json": 1, "not_a_record": 1}
