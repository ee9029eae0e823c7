"""pipelines/beam/allocator.py: a local run's processes give freed memory back (glibc), and a
setting the user put in the environment stays."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from afm.pipelines.beam import allocator

CHILD = ("import json, os; from afm.pipelines.beam.allocator import SETTINGS, returning_freed_memory\n"
         "with returning_freed_memory() as ok:\n"
         "    inside = {k: os.environ.get(k) for k in SETTINGS}\n"
         "print(json.dumps([ok, inside, {k: os.environ.get(k) for k in SETTINGS}]))")


def _child(env: dict[str, str]) -> tuple[bool, dict[str, str | None], dict[str, str | None]]:
    clean = {k: v for k, v in os.environ.items() if k not in allocator.SETTINGS}
    out = subprocess.run([sys.executable, "-c", CHILD], env={**clean, **env}, capture_output=True, text=True,
                         check=True).stdout
    ok, inside, after = json.loads(out.strip().splitlines()[-1])
    return ok, inside, after


@pytest.mark.skipif(allocator._glibc() is None, reason="glibc only (elsewhere return_freed_memory does nothing)")
def test_settings_reach_the_processes_a_run_starts_and_go_after_it() -> None:
    ok, inside, after = _child({})
    assert ok
    assert inside == {"MALLOC_MMAP_THRESHOLD_": "4194304", "MALLOC_TRIM_THRESHOLD_": "16777216",
                      "MALLOC_ARENA_MAX": "2"}
    assert after == dict.fromkeys(allocator.SETTINGS)


@pytest.mark.skipif(allocator._glibc() is None, reason="glibc only")
def test_the_users_setting_stays() -> None:
    _, inside, after = _child({"MALLOC_ARENA_MAX": "8"})
    assert inside["MALLOC_ARENA_MAX"] == after["MALLOC_ARENA_MAX"] == "8"
    assert inside["MALLOC_MMAP_THRESHOLD_"] == "4194304"
