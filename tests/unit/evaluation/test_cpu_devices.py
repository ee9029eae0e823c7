"""``afm eval`` asks JAX for one CPU device per core (or ``AFM_CPU_DEVICES``) before JAX starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from afm.errors import UserError
from afm.evaluation import cpu_devices

SCRIPT = "from afm.evaluation.cpu_devices import use_cpu_cores; import jax; print(use_cpu_cores(), jax.device_count())"


def _run(env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", cpu_devices.ENV)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env={**base, "JAX_PLATFORMS": "cpu", **env},
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_a_fresh_process_gets_the_devices_asked_for() -> None:
    assert _run({cpu_devices.ENV: "3"}) == "3 3"


def test_an_explicit_xla_device_count_wins() -> None:
    assert _run({"XLA_FLAGS": "--xla_force_host_platform_device_count=2", cpu_devices.ENV: "3"}) == "None 2"


def test_a_bad_count_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv(cpu_devices.ENV, "two")
    with pytest.raises(UserError, match="positive whole number"):
        cpu_devices.use_cpu_cores()
