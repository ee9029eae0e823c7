"""SIGTERM (TPU preemption) saves a checkpoint and exits; a rerun resumes from it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.slow
def test_sigterm_saves_and_rerun_resumes(tmp_path, token_shards):
    workdir = tmp_path / "run"

    def command(steps: int) -> list[str]:
        cmd = [sys.executable, "-m", "afm.app", "train", "--config", "tiny-core", "--workdir", str(workdir),
               "--steps", str(steps), "--set", "total_steps=100000", "--set", "log_every=1"]
        for shard in token_shards:
            cmd += ["--data", shard]
        return cmd

    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    proc = subprocess.Popen(command(100000), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics = workdir / "metrics.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 3):
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out[-3000:]
    assert "checkpoint saved at step" in " ".join(out.split())
    saved = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
    assert saved and 3 <= saved[-1] < 100000
    rerun = subprocess.run(command(saved[-1] + 2), env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    flat = " ".join(rerun.stderr.split())
    assert f"start: step {saved[-1]}, resumed from" in flat
    last = json.loads(metrics.read_text().splitlines()[-1])
    assert last["step"] == saved[-1] + 2
