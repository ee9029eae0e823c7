"""The referee's verdict is plain Python's: each (program, test) pair of ``parity_shapes``
is judged by ``run_python`` (the program in one sandboxed process, the test in the
referee's) and by plain ``exec`` of program + test in one fresh interpreter with the
same hash seed (trusted code only), for passing and failing programs alike. Where the
program's own code would decide (``UNJUDGEABLE``), the verdict is ``unjudgeable``, a
counted failure, never a pass. This is the fast tier's share; every shape, under several
seeds and both boundaries, is ``tests/slow/sandbox/test_parity_sweep.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from afm.sandbox import SandboxPolicy, kernel_boundary, run_python

sys.path.insert(0, str(Path(__file__).parent))
from parity_shapes import FAST, SHAPES, UNJUDGEABLE, python_says  # noqa: E402

BOUNDARY = kernel_boundary()
pytestmark = pytest.mark.skipif(BOUNDARY.kind != "kernel", reason=f"no kernel boundary here: {BOUNDARY.reason}")
SEED = 20240


@pytest.mark.parametrize("name", FAST)
def test_verdicts_match_python(name: str, tmp_path) -> None:
    program, test = SHAPES[name]
    result = run_python(program, SandboxPolicy(hash_seed=SEED), test=test)
    assert result.passed == python_says(program, test, tmp_path, hash_seed=SEED), result
    assert result.judged == "outside", result


@pytest.mark.parametrize("name", sorted(UNJUDGEABLE))
def test_where_the_program_would_decide_the_test_is_unjudgeable(name: str) -> None:
    program, test = UNJUDGEABLE[name]
    result = run_python(program, test=test)
    assert result.status == "failed" and result.judged == "unjudgeable" and result.cause == "unjudgeable", result
    assert result.reason.startswith("unjudgeable: ")


def test_every_shape_is_in_the_sweep_and_the_fast_share_is_a_share() -> None:
    assert set(FAST) <= set(SHAPES) and len(FAST) < len(SHAPES)
    assert not set(SHAPES) & set(UNJUDGEABLE)


def test_a_test_that_never_ends_times_out_in_the_referee_not_the_evaluator() -> None:
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = run_python("def f():\n    return 1", SandboxPolicy(timeout_s=4, cpu_s=2),
                        test="x = []\nwhile f() == 1:\n    x.append(7 ** 99)")
    assert result.status == "timeout" and result.judged == "outside"
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 50


def test_a_program_that_writes_over_the_channel_fails_fast() -> None:
    program = "import os\ndef f():\n    for fd in range(3, 30):\n        try:\n            os.write(fd, b'{]\\n')\n" \
              "        except OSError:\n            pass\n    return 1"
    result = run_python(program, test="assert f() == 1")
    assert result.status == "failed" and result.cause == "garbled" and result.seconds < 8
