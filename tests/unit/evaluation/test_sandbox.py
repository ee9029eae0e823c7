"""The sandbox: hostile programs fail cleanly and leave the run (and the machine) unharmed.

Each attack runs twice: with every layer, and with the in-process audit guard switched
off, so the kernel-level layer that stops it (process limit, network namespace,
unprivileged uid, CPU limit, timeout) is shown to work on its own.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest
from afm.evaluation.sandbox import SandboxPolicy, isolation_layers, netns_mode, run_python

GUARDS = [pytest.param(True, id="all-layers"), pytest.param(False, id="kernel-layers-only")]


def test_a_correct_program_passes() -> None:
    r = run_python("import math\nassert math.gcd(12, 18) == 6\nprint('ok')")
    assert r.passed and r.stdout.strip() == "ok"


@pytest.mark.parametrize("guard", GUARDS)
def test_fork_bomb_is_contained(guard: bool) -> None:
    if not guard and os.geteuid() != 0:
        pytest.skip("the process limit is per user; without root the guard is the containing layer")
    start = time.perf_counter()
    r = run_python("import os\nwhile True:\n    os.fork()", SandboxPolicy(timeout_s=10, audit_guard=guard))
    assert not r.passed and time.perf_counter() - start < 10
    assert "unprivileged-uid" in r.isolation or guard
    assert run_python("print(1)").passed  # the machine can still start processes


@pytest.mark.parametrize("guard", GUARDS)
def test_network_connection_fails(guard: bool) -> None:
    if not guard and netns_mode() is None:
        pytest.skip("no network namespace can be created here")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                accepted.append(server.accept())
                return
            except TimeoutError:
                continue

    t = threading.Thread(target=accept)
    t.start()
    program = (f"import socket\ns = socket.socket()\ns.settimeout(3)\ns.connect(('127.0.0.1', {port}))\n"
               "print('connected')")
    r = run_python(program, SandboxPolicy(audit_guard=guard))
    t.join()
    server.close()
    assert not r.passed and "connected" not in r.stdout
    assert accepted == []  # nothing reached the listener


@pytest.mark.parametrize("guard", GUARDS)
def test_write_outside_the_temp_dir_fails(tmp_path: Path, guard: bool) -> None:
    if not guard and os.geteuid() != 0:
        pytest.skip("only root can drop to a throw-away uid; the guard is the layer otherwise")
    target = tmp_path / "outside.txt"
    inside = "open('inside.txt', 'w').write('fine')\n"  # its own working directory is writable
    r = run_python(inside + f"open({str(target)!r}, 'w').write('pwned')", SandboxPolicy(audit_guard=guard))
    assert not r.passed and "PermissionError" in r.stderr
    assert not target.exists()


@pytest.mark.parametrize("guard", GUARDS)
def test_infinite_loop_is_stopped(guard: bool) -> None:
    start = time.perf_counter()
    r = run_python("while True:\n    pass", SandboxPolicy(timeout_s=20, cpu_s=1, audit_guard=guard))
    assert r.status == "timeout" and time.perf_counter() - start < 10
    r = run_python("import time\ntime.sleep(60)", SandboxPolicy(timeout_s=1, audit_guard=guard))
    assert r.status == "timeout" and r.seconds < 10


def test_memory_bomb_fails() -> None:
    r = run_python("x = bytearray(4 << 30)", SandboxPolicy(memory_bytes=512 << 20))
    assert r.status == "failed" and "MemoryError" in r.stderr


def test_layers_are_reported() -> None:
    layers = isolation_layers()
    assert {"process", "rlimits", "tempdir", "timeout", "audit-guard"} <= set(layers)
