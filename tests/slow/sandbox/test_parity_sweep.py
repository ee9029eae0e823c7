"""Every test shape of ``parity_shapes``, under three hash seeds, behind the kernel
boundary and with weak isolation: the referee's verdict is plain Python's (run with the
same seed), and where the program's own code would decide, ``unjudgeable``."""

from __future__ import annotations

import sys

import pytest

from afm.sandbox import Boundary, SandboxPolicy, kernel_boundary, run_python
from tests.paths import TESTS

sys.path.insert(0, str(TESTS / "integration" / "sandbox"))
from parity_shapes import SHAPES, UNJUDGEABLE, python_says  # noqa: E402

pytestmark = pytest.mark.slow
SEEDS = (0, 7, 4242)


@pytest.fixture(params=["kernel", "weak"])
def boundary(request, monkeypatch):
    from afm.sandbox import run

    if request.param == "kernel":
        if kernel_boundary().kind != "kernel":
            pytest.skip(f"no kernel boundary here: {kernel_boundary().reason}")
    else:
        monkeypatch.setitem(run.kernel_boundary.results, (), Boundary("weak", "host", "the sweep"))
    return request.param


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_under_every_seed(boundary: str, name: str, tmp_path) -> None:
    program, test = SHAPES[name]
    tripwire = name != "open-in-the-program" or boundary == "kernel"
    for seed in SEEDS:
        policy = SandboxPolicy(hash_seed=seed, allow_weak_isolation=True, tripwire=tripwire)
        result = run_python(program, policy, test=test)
        assert result.passed == python_says(program, test, tmp_path, hash_seed=seed), (seed, result)
        assert result.judged == "outside", (seed, result)


@pytest.mark.parametrize("name", sorted(UNJUDGEABLE))
def test_every_unjudgeable_shape(boundary: str, name: str) -> None:
    program, test = UNJUDGEABLE[name]
    result = run_python(program, SandboxPolicy(allow_weak_isolation=True), test=test)
    assert result.status == "failed" and result.judged == "unjudgeable", result
