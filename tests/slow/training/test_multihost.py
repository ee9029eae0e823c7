"""Several local processes joined by jax.distributed (CPU): one run, exact resume on the
same and on a different number of hosts, and a stop signal on one host agreed by all."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
DEVICES = 4  # the mesh is always 4 CPU devices: 2 processes x 2 or 1 process x 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(workdir: Path, shards: list[str], steps: int, processes: int, *extra: str) -> list[subprocess.Popen]:
    port = _free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={DEVICES // processes}"}
    procs = []
    for rank in range(processes):
        cmd = [sys.executable, "-m", "afm.app", "train", "--config", "tiny-core", "--workdir", str(workdir),
               "--steps", str(steps), "--set", "mesh.fsdp=2", "--set", "log_every=1", *extra]
        if processes > 1:
            cmd += ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(processes), "--process-id", str(rank)]
        for shard in shards:
            cmd += ["--data", shard]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return procs


def _run(workdir: Path, shards: list[str], steps: int, processes: int) -> list[str]:
    procs = _launch(workdir, shards, steps, processes)
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-3000:]
    return outputs


def _sha(output: str) -> str:
    return re.search(r"params_sha256: ([0-9a-f]{64})", output).group(1)


def _rows(workdir: Path) -> dict[int, dict]:
    return {r["step"]: r for r in map(json.loads, (workdir / "metrics.jsonl").read_text().splitlines())}


def test_two_hosts_resume_exactly_and_on_one_host(tmp_path, token_shards):
    """2 hosts x 4 steps == 2 hosts x 2 steps + resume to 4 (same params_sha256); and the
    same checkpoint resumed by ONE host reads exactly the remaining batches."""
    full = _run(tmp_path / "full", token_shards, 4, 2)
    assert _sha(full[0]) == _sha(full[1])  # both hosts hold (shards of) the same parameters
    assert "4 devices, 2 host(s)" in " ".join(full[0].split())

    _run(tmp_path / "split", token_shards, 2, 2)
    resumed = _run(tmp_path / "split", token_shards, 4, 2)
    assert _sha(resumed[0]) == _sha(full[0])

    _run(tmp_path / "elastic", token_shards, 2, 2)
    one = _run(tmp_path / "elastic", token_shards, 4, 1)
    assert "written by 2 host(s), now 1" in " ".join(one[0].split())
    ref, got = _rows(tmp_path / "full"), _rows(tmp_path / "elastic")
    for step in (3, 4):
        assert got[step]["batch_checksum"] == ref[step]["batch_checksum"]  # same data
        assert got[step]["loss"] == pytest.approx(ref[step]["loss"], rel=1e-3)


def test_sigterm_on_one_host_stops_every_host_at_the_same_step(tmp_path, token_shards):
    workdir = tmp_path / "run"
    procs = _launch(workdir, token_shards, 100_000, 2, "--set", "total_steps=100000")
    metrics = workdir / "metrics.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 3):
        time.sleep(0.5)
    procs[1].send_signal(signal.SIGTERM)  # only host 1 is preempted
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-3000:]
    steps = [int(re.search(r"checkpoint saved at step (\d+)", " ".join(o.split())).group(1)) for o in outputs]
    assert steps[0] == steps[1] >= 3
    assert (workdir / "checkpoints" / str(steps[0])).is_dir()
