"""What a dead evaluator leaves is removed: by the janitor when the evaluator's end of its
pipe closes, and at the next start for what is named after an evaluator that no longer
exists. (The end-to-end check, an evaluator killed mid-run, is
``tests/integration/sandbox/test_runs_die_with_their_evaluator.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from afm.sandbox import cgroup, cleanup


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_directories_of_dead_evaluators_are_swept_at_the_next_start(monkeypatch) -> None:
    dead = Path(tempfile.gettempdir()) / f"{cleanup.WORKDIR_PREFIX}{_dead_pid()}-test"
    (dead / "sub").mkdir(parents=True)
    live = Path(tempfile.mkdtemp(prefix=f"{cleanup.WORKDIR_PREFIX}{os.getpid()}-"))
    monkeypatch.setitem(cleanup._STATE, "swept", None)
    try:
        removed = cleanup.sweep_stale()
        assert str(dead) in removed and not dead.exists()
        assert live.exists()  # this process is alive: its directories are its own
        assert cleanup.sweep_stale() == []  # once per process
    finally:
        live.rmdir()


def test_cgroups_of_dead_evaluators_are_swept(monkeypatch) -> None:
    found = cgroup.support()
    if found.version == "none":
        pytest.skip(f"no cgroups here: {found.reason}")
    stale = os.path.join(found.memory_parent, f"{cgroup.RUN_PREFIX}{_dead_pid()}-0-test")
    os.mkdir(stale)
    monkeypatch.setitem(cleanup._STATE, "swept", None)
    try:
        assert stale in cleanup.sweep_stale()
        assert not os.path.exists(stale)
    finally:
        if os.path.exists(stale):
            os.rmdir(stale)


def test_the_janitor_cleans_up_when_its_evaluator_goes() -> None:
    """A janitor whose pipe closes (what the kernel does when its evaluator dies) kills
    the runs it was told of and removes their directories."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{cleanup.WORKDIR_PREFIX}{os.getpid()}-"))
    (workdir / "file").write_text("x")
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    janitor = cleanup.Janitor()
    janitor.note("run1", workdir=str(workdir), cgroups=[])
    janitor.note("run1", pgid=victim.pid)
    janitor.note("run2", workdir="/tmp/not-a-sandbox-dir-of-ours")  # only afm-sandbox-* is removed
    janitor.forget("run2")
    janitor.proc.stdin.close()  # the evaluator is gone
    janitor.proc.wait(timeout=30)
    assert victim.wait(timeout=30) != 0
    assert not workdir.exists()


def test_a_forked_evaluator_gets_a_janitor_of_its_own(monkeypatch) -> None:
    first = cleanup.janitor()
    monkeypatch.setitem(cleanup._STATE, "janitor", first)  # restored afterwards, with the pid
    monkeypatch.setitem(cleanup._STATE, "pid", -1)  # as a forked child sees it
    second = cleanup.janitor()
    try:
        assert second is not first and second.proc.poll() is None
    finally:
        second.proc.stdin.close()
        second.proc.wait(timeout=30)
