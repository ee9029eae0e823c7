"""Two local processes joined by jax.distributed train one run together (CPU, gloo)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_train_one_run(tmp_path, token_shards):
    port = _free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    procs = []
    for rank in range(2):
        cmd = [
            sys.executable, "-m", "afm.cli", "train", "--config", "tiny-core",
            "--workdir", str(tmp_path / "run"), "--steps", "3",
            "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(rank),
            "--set", "mesh.fsdp=2",
        ]
        for shard in token_shards:
            cmd += ["--data", shard]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-3000:]
    shas = [re.search(r"params_sha256: ([0-9a-f]{64})", out).group(1) for out in outputs]
    assert shas[0] == shas[1]  # both hosts hold (shards of) the same parameters
    assert "4 devices, 2 host(s)" in outputs[0]
    assert (tmp_path / "run" / "checkpoints" / "3").is_dir()
