"""Issue 13, observed cases about outputs: re-running into an earlier run's directory, a
crash or ``kill -9`` mid-run, a read-only output. Nothing half-written is promoted, an
interrupted run is named as such, and an unusable output fails before any computing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.commands.pipelines.curate import curate_command
from afm.io import expand_inputs
from afm.outputs import SUCCESS, OutputError

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
ONLY_PII = {"stages": ["pii"]}


def _docs(path: Path, n: int, tag: str) -> Path:
    path.write_text("".join(json.dumps({"id": f"{tag}{i}", "text": f"{tag} document {i} " * 30})
                            + "\n" for i in range(n)))
    return path


def _ids(out: Path) -> set[str]:
    import pyarrow.parquet as pq

    return {r for f in expand_inputs([str(out)]) for r in pq.read_table(f).column("id").to_pylist()}


def test_rerun_crash_keeps_the_previous_output_whole(tmp_path: Path) -> None:
    """Observed: a crash mid-run into a directory holding an earlier run left run-2
    document shards beside run-1 rejects, manifest and report, with no marker."""
    from afm.pipelines.curate.pipeline import run_curate

    out = tmp_path / "corpus"
    run_curate([str(_docs(tmp_path / "a.jsonl", 5, "a"))], out, config=ONLY_PII,
               pipeline_args=LOCAL, quiet=True)
    before = sorted(p.name for p in out.iterdir())
    marker = (out / SUCCESS).read_text()
    # Run 2 fails in its shard writer (Beam's in-process runner does not retry).
    faulty = {**ONLY_PII, "debug": {"fail_once_at": ["write"], "marker_dir": str(tmp_path / "m")}}
    with pytest.raises(Exception, match="injected failure"):
        run_curate([str(_docs(tmp_path / "b.jsonl", 7, "b"))], out, config=faulty,
                   pipeline_args=LOCAL, overwrite=True, quiet=True)
    assert sorted(p.name for p in out.iterdir()) == before  # no staging left, nothing mixed
    assert (out / SUCCESS).read_text() == marker
    assert _ids(out) == {f"a{i}" for i in range(5)}
    # Without --overwrite a finished output is refused, with the way out in the message.
    result = CliRunner().invoke(curate_command, [
        "--input", str(tmp_path / "b.jsonl"), "--output", str(out),
        "--set", 'stages=["pii"]', *LOCAL])
    assert result.exit_code == 1 and "--overwrite" in result.output
    assert "Traceback" not in result.output


def test_kill_9_leaves_nothing_readable_and_is_named(tmp_path: Path) -> None:
    """Observed: kill -9 left a partial set of shards that looked like an output."""
    src = _docs(tmp_path / "big.jsonl", 4000, "k")
    out = tmp_path / "corpus"
    cmd = [sys.executable, "-m", "afm.app", "curate", "--input", str(src), "--output", str(out),
           "--set", 'stages=["pii"]', *LOCAL]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list(out.glob(".staging-*")) and proc.poll() is None:
            time.sleep(0.05)
        # Killed as soon as it has claimed the output: 4,000 documents take far longer than
        # that on any machine, and promotion (the only step that makes an output) is last.
        assert proc.poll() is None, "the run ended before it claimed its output"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert not (out / SUCCESS).exists()
    assert not list(out.glob("documents-*")) and not list(out.glob("manifest.json"))
    with pytest.raises(FileNotFoundError, match="interrupted"):
        expand_inputs([str(out)])
    result = CliRunner().invoke(curate_command, [
        "--input", str(_docs(tmp_path / "s.jsonl", 3, "s")), "--output", str(out),
        "--set", 'stages=["pii"]', *LOCAL])
    assert result.exit_code == 1 and "interrupted run" in result.output
    result = CliRunner().invoke(curate_command, [
        "--input", str(tmp_path / "s.jsonl"), "--output", str(out), "--overwrite",
        "--set", 'stages=["pii"]', *LOCAL])
    assert result.exit_code == 0, result.output
    assert _ids(out) == {"s0", "s1", "s2"} and not list(out.glob(".staging-*"))


def test_unwritable_output_fails_before_computing(tmp_path: Path, monkeypatch) -> None:
    """Observed: a read-only output directory failed only after all the computing."""
    import afm.pipelines.curate.pipeline as curate

    def never(*_a, **_k):  # pragma: no cover - reaching it is the failure
        raise AssertionError("the pipeline ran although the output cannot be written")

    monkeypatch.setattr(curate, "execute_curate", never)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    src = _docs(tmp_path / "d.jsonl", 2, "d")
    with pytest.raises(OutputError):
        curate.run_curate([str(src)], blocker / "corpus", config=ONLY_PII, quiet=True)
    result = CliRunner().invoke(curate_command, ["--input", str(src), "--output",
                                                 str(blocker / "corpus"), "--set",
                                                 'stages=["pii"]'])
    assert result.exit_code == 1 and "Error:" in result.output
    if Path("/proc/self").exists():  # a read-only filesystem, even for root
        result = CliRunner().invoke(curate_command, ["--input", str(src), "--output",
                                                     "/proc/afm-corpus", "--set",
                                                     'stages=["pii"]'])
        assert result.exit_code == 1 and "cannot write to /proc/afm-corpus" in result.output
