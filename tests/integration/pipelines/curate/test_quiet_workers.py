"""Issue 44: Beam's worker logs of the multi-process local runner (the default) go to a
file beside the output, not to the user's terminal; ``--worker-logs terminal`` keeps them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _curate(tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"Text number {i} about rivers. " * 10}) + "\n"
                           for i in range(20)))
    return subprocess.run([sys.executable, "-m", "afm.app", "curate", "--input", str(src), "--output",
                           str(tmp_path / name), "--set", 'stages=["pii"]', "--direct_num_workers=2", *extra],
                          capture_output=True, text=True, timeout=600)


def test_worker_logs_go_to_a_file_beside_the_output(tmp_path: Path) -> None:
    run = _curate(tmp_path, "out")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sdk_worker" not in run.stderr and "harness" not in run.stderr  # no flood on the terminal
    logs = list((tmp_path / "out" / "_logs").glob("*.log"))
    assert len(logs) == 1 and "sdk_worker" in logs[0].read_text()  # the workers' lines are here
    assert str(logs[0]) in " ".join(run.stderr.split()).replace(" ", "") or "_logs" in run.stderr
    # The next run into the same directory is refused for the finished output, not for the logs.
    again = _curate(tmp_path, "out", "--overwrite")
    assert again.returncode == 0 and len(list((tmp_path / "out" / "_logs").glob("*.log"))) == 2


@pytest.mark.slow
def test_worker_logs_on_the_terminal_when_asked(tmp_path: Path) -> None:
    run = _curate(tmp_path, "out", "--worker-logs", "terminal")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sdk_worker" in run.stderr and not (tmp_path / "out" / "_logs").exists()
