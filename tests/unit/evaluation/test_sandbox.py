"""The sandbox's contract: a pass means the program and its test ran to the end, nothing
else passes, nonsense limits are refused, and a host that cannot isolate refuses to run
model-written code unless weaker isolation was accepted (then the verdict rule still
holds). The hostile-program suite is ``tests/integration/evaluation/test_hostile_programs.py``."""

from __future__ import annotations

import math

import pytest

from afm import sandbox
from afm.sandbox import (
    Boundary,
    SandboxPolicy,
    SandboxUnavailable,
    isolation,
    run_python,
)

KERNEL = sandbox.kernel_boundary().kind == "kernel"


def test_a_correct_program_and_test_pass() -> None:
    r = run_python("import math\ndef f(a, b):\n    return math.gcd(a, b)\nprint('ok')", test="assert f(12, 18) == 6")
    assert r.passed and r.stdout.strip() == "ok" and r.reason == ""


@pytest.mark.parametrize("program, test", [
    ("def f():\n    return 1", "assert f() == 2"),
    ("raise SystemExit", None),
    ("import sys\nsys.exit(0)", None),
    ("import os\nos._exit(0)", None),
    ("def f():\n    return 1", "import os\nos._exit(0)\nassert f() == 2"),
    ("print('afm-test-passed')\nimport os\nos._exit(0)", "assert False"),
])
def test_nothing_but_a_finished_test_passes(program: str, test: str | None) -> None:
    assert run_python(program, test=test).status == "failed"


def test_a_syntax_error_fails_with_its_message() -> None:
    r = run_python("def f(:\n    pass")
    assert r.status == "failed" and "SyntaxError" in r.stderr


def test_output_is_capped_and_only_its_tail_kept() -> None:
    r = run_python("import sys\nfor i in range(100):\n    sys.stdout.write(str(i) * 10_000)",
                   SandboxPolicy(max_output_bytes=64 << 10))
    assert r.status == "failed" and r.reason == "over the output limit" and len(r.stdout) <= 10_000


@pytest.mark.parametrize("field", ["timeout_s", "memory_bytes", "max_output_bytes", "tmp_bytes"])
@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf])
def test_nonsense_limits_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        SandboxPolicy(**{field: value})


@pytest.fixture
def no_kernel_boundary(monkeypatch):
    """Pretend this host cannot create namespaces."""
    monkeypatch.setattr(isolation, "_PROBED", [Boundary("weak", "host", "unshare (util-linux) not found")])
    monkeypatch.setattr(isolation, "_ACCEPT_WEAK", [False])


def test_refuses_without_a_kernel_boundary(no_kernel_boundary) -> None:
    with pytest.raises(SandboxUnavailable, match="unshare .* not found.*--allow-weak-sandbox"):
        run_python("print(1)")
    assert sandbox.isolation_layers()[0].startswith("refused")


def test_weak_isolation_when_accepted_keeps_the_verdict_rule(no_kernel_boundary) -> None:
    weak = SandboxPolicy(allow_weak_isolation=True)
    assert run_python("def f():\n    return 2", weak, test="assert f() == 2").passed
    assert run_python("import os\nos._exit(0)", weak, test="assert False").status == "failed"
    assert "weak(no kernel boundary)" in run_python("pass", weak).isolation
    sandbox.accept_weak_isolation()  # what --allow-weak-sandbox sets, process-wide
    assert run_python("pass").passed


def test_the_tripwire_reports_what_it_stopped() -> None:
    r = run_python("import socket\nsocket.socket()")
    assert r.status == "failed" and "sandbox: socket" in r.stderr


@pytest.mark.skipif(not KERNEL, reason="no kernel boundary on this host")
def test_layers_name_the_kernel_boundary() -> None:
    layers = sandbox.isolation_layers()
    assert {"pid-namespace", "network-namespace", "private-tmp(bytes and inodes capped)", "verdict-channel"} <= set(layers)
