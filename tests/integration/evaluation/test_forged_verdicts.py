"""Verdicts no program can forge: each route red teams used to pass a wrong solution,
against the referee (the test in its own process, no code of the program there), and
through the real paths (``code_metrics.check_program``, lm-eval's HumanEval pass@1,
``afm synth code``).

Every candidate ``f`` below returns a wrong value; the test asserts the right one. The
programs look for a 64-hex key in every frame, global and module they can reach (from a
signal handler, a timer, another thread, a garbage-collector callback, a ``__del__``),
write each one they find to every descriptor, and wake whatever they can: two harnesses
ago the key was a local of the harness's ``main``, one ago a keeper thread's (which a
``gc`` callback could read). There is no key now; the referee judges values."""

from __future__ import annotations

import json

import pytest

from afm.evaluation import code_metrics
from afm.sandbox import SandboxPolicy, kernel_boundary, run_python
from afm.synth.code_data import CodeConfig, synth_code
from afm.synth.generators import Generation
from afm.synth.run import SynthRun

pytestmark = pytest.mark.skipif(kernel_boundary().kind != "kernel",
                                reason=f"no kernel boundary here: {kernel_boundary().reason}")

HUNT = '''
import os, re, sys
def looks(v):
    return isinstance(v, (str, bytes)) and len(v) == 64 and \\
        re.fullmatch(rb"[0-9a-f]{64}", v if isinstance(v, bytes) else v.encode()) is not None
def spray(found, extra=()):
    values = {v if isinstance(v, bytes) else v.encode() for v in found} | set(extra)
    for fd in range(3, 256):
        for v in values:
            try:
                os.write(fd, v)
            except OSError:
                pass
def walk(frame):
    found, seen = [], set()
    f = frame
    while f is not None:
        for d in (f.f_locals, f.f_globals):
            for v in list(d.values()):
                if looks(v):
                    found.append(v)
                if isinstance(v, dict):
                    found += [x for x in v.values() if looks(x)]
        f = f.f_back
    for m in list(sys.modules.values()):
        found += [v for v in list(vars(m).values()) if looks(v)]
    return found
'''

FORGERIES = {
    # a signal handler is handed the interrupted frame; f_back reaches the harness
    "signal-handler-frame": HUNT + '''
import signal
signal.signal(signal.SIGUSR1, lambda s, frame: spray(walk(frame)))
def f(x):
    signal.raise_signal(signal.SIGUSR1)
    return 0
''',
    # a timer that fires while the test is running the candidate
    "timer-inside-the-candidate": HUNT + '''
import signal, time
signal.signal(signal.SIGALRM, lambda s, frame: spray(walk(frame)))
def f(x):
    signal.setitimer(signal.ITIMER_REAL, 0.001)
    end = time.time() + 0.05
    while time.time() < end:
        pass
    return 0
''',
    # pthread_kill from a thread: the handler runs in the main thread, inside the test
    "pthread-kill-from-a-thread": HUNT + '''
import signal, threading, time
signal.signal(signal.SIGUSR2, lambda s, frame: spray(walk(frame)))
main = threading.main_thread().ident
def f(x):
    t = threading.Thread(target=lambda: signal.pthread_kill(main, signal.SIGUSR2))
    t.start()
    t.join()
    time.sleep(0.05)
    return 0
''',
    # empty every table of the harness, then use the routes they closed
    "emptied-hook-tables": HUNT + '''
import gc, signal, sys
frames = []
signal.signal(signal.SIGUSR1, lambda s, frame: frames.append(frame))
signal.raise_signal(signal.SIGUSR1)
bottom = frames[0]
while bottom.f_back is not None:
    bottom = bottom.f_back
harness = bottom.f_globals
for k, v in list(harness.items()):
    if isinstance(v, (frozenset, set, tuple, list, dict)) and not k.startswith("__"):
        harness[k] = type(v)()
found = []
for route in (lambda: sum((walk(fr) for fr in sys._current_frames().values()), []),
              lambda: [o for o in gc.get_objects() if looks(o)],
              lambda: __import__("ctypes")):
    try:
        found += route() or []
        print("route open")
    except Exception as e:
        print("route closed:", type(e).__name__)
spray(found)
def f(x):
    return 0
''',
    # _posixsubprocess.fork_exec, a process past the tripwire
    "posixsubprocess-fork-exec": '''
def f(x):
    try:
        import _posixsubprocess
        print("fork_exec available")
    except ImportError as e:
        print("refused:", e)
    return 0
''',
    # make the harness's own frame call finish on its failure path (a C partial adds no frame)
    "partial-of-finish-on-the-failure-path": '''
import functools, signal, sys
frame = sys._getframe()
while frame is not None and frame.f_code.co_name != "run":
    frame = frame.f_back
if frame is not None:
    names, local = frame.f_globals, frame.f_locals
    step = functools.partial(names["finish"], local["pull_w"], local["answer_r"], local["write"])
    names["_flush"] = step  # called with (flushes) as `read`: the pull happens first
    names["finish"] = step
    signal.signal(signal.SIGUSR1, functools.partial(names["finish"]))
def f(x):
    signal.raise_signal(signal.SIGUSR1) if hasattr(signal, "raise_signal") else None
    return 0
''',
    # pull the keeper from the program: it must notice the main thread is not done
    "pull-the-keeper": HUNT + '''
spray([], [b"p"])
def f(x):
    spray([], [b"p"])
    return 0
''',
    # a garbage-collector callback and a __del__ run in whatever thread allocates: the
    # keeper's too, where they could read its frame
    "gc-callback-and-del": HUNT + '''
import gc, sys
def steal(*_):
    found = []
    for frame in list(sys._current_frames().values()):
        found += walk(frame)
    spray(found, [b"p", b"k"])
gc.callbacks.append(steal)
gc.set_threshold(1)
class Bomb:
    def __del__(self):
        steal()
def f(x):
    for _ in range(3):
        Bomb()
        [[] for _ in range(5)]
    gc.set_threshold(700)
    return 0
''',
    # values that made the previous judge fall back to the program's process, where the
    # key could be stolen
    "a-million-and-one-items-then-steal": HUNT + '''
import sys
def f(x):
    spray(sum((walk(fr) for fr in sys._current_frames().values()), []), [b"p"])
    return tuple(range(1_000_001))
''',
}
KNOWN_TO_EVERY_HARNESS = {
    "eq-always-true": '''
class Always:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __lt__(self, other):
        return True
    __gt__ = __le__ = __ge__ = __lt__
    def __sub__(self, other):
        return Always()
    __rsub__ = __sub__
    def __abs__(self):
        return 0
    def __float__(self):
        return 2.5
def f(x):
    return Always()
''',
    "patched-abs-and-isclose": '''
import builtins, math
builtins.abs = lambda v: 0
math.isclose = lambda *a, **k: True
def f(x):
    return 12345.0
''',
}
TESTS = ["assert f(1) == 2.5", "assert abs(f(1) - 2.5) < 1e-6", "import math\nassert math.isclose(f(1), 2.5)"]


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgeries_fail(name: str) -> None:
    result = run_python(FORGERIES[name], SandboxPolicy(tripwire=name == "posixsubprocess-fork-exec"), test=TESTS[0])
    assert result.status == "failed" and result.judged == "outside", result
    if name == "posixsubprocess-fork-exec":
        assert "refused: sandbox: module _posixsubprocess" in result.stdout


@pytest.mark.parametrize("test", TESTS[:2], ids=["eq", "abs"])
def test_an_object_equal_to_everything_is_unjudgeable_never_passed(test: str) -> None:
    result = run_python(KNOWN_TO_EVERY_HARNESS["eq-always-true"], test=test)
    assert result.status == "failed" and result.judged == "unjudgeable", result


def test_an_object_that_converts_to_one_float_is_that_float() -> None:
    """``float()`` of an object is the program's answer about its own object (it never
    sees an expected value): for f(1) it is 2.5, right, and a second input shows f wrong."""
    program = KNOWN_TO_EVERY_HARNESS["eq-always-true"]
    assert run_python(program, test=TESTS[2]).passed
    result = run_python(program, test="import math\nassert math.isclose(f(1), 2.5) and math.isclose(f(2), 3.5)")
    assert result.status == "failed" and result.judged == "outside"


@pytest.mark.parametrize("test", TESTS, ids=["eq", "abs", "isclose"])
def test_patched_builtins_stay_in_the_program_s_process(test: str) -> None:
    result = run_python(KNOWN_TO_EVERY_HARNESS["patched-abs-and-isclose"], test=test)
    assert result.status == "failed" and result.judged == "outside", result


def test_the_right_answer_still_passes_every_form() -> None:
    for test in TESTS:
        result = run_python("def f(x):\n    return 2.5", test=test)
        assert result.passed and result.judged == "outside", (test, result)


@pytest.mark.parametrize("route", [
    "import ctypes",
    "import importlib.machinery, _imp, os\n"
    "spec = importlib.machinery.ModuleSpec('_ctypes', None, origin=[p for p in __import__('sys').path if p]"
    "[0])\n_imp.create_dynamic(spec)",
    "open('/proc/self/mem', 'rb')",
])
def test_the_tripwire_still_refuses_the_routes_past_it(route: str) -> None:
    result = run_python(route)
    assert result.status == "failed", result
    assert "sandbox:" in result.stderr, result.stderr[-500:]


def test_no_further_audit_hook_is_installed() -> None:
    """CPython drops a new hook silently when a hook refuses it: it never runs."""
    result = run_python("import sys\nsys.addaudithook(lambda e, a: print('hooked', e))\nimport json, re\n"
                        "open('x', 'w').close()")
    assert result.passed and "hooked" not in result.stdout


HUMANEVAL_LIKE = "def check(candidate):\n    assert candidate(1) == 2.5\n    assert abs(candidate(2) - 2.5) < 1e-6\n"


@pytest.mark.parametrize("name", sorted({**FORGERIES, **KNOWN_TO_EVERY_HARNESS}))
def test_code_metrics_scores_every_forgery_zero(name: str) -> None:
    program = {**FORGERIES, **KNOWN_TO_EVERY_HARNESS}[name]
    test = HUMANEVAL_LIKE + "\ncheck(f)"
    assert code_metrics.check_program(program, test) is False
    verdict = code_metrics.judge(program, test)
    assert not verdict.passed and verdict.judged_outside != verdict.unjudgeable


def test_humaneval_pass_at_1_is_zero_for_forging_completions(shared_eval) -> None:
    """lm-eval's HumanEval task, completions that forge instead of solving: pass@1 0.0,
    every verdict judged outside."""
    from afm.evaluation.local_data import read_file
    from afm.evaluation.parity import run_tasks
    from afm.evaluation.suite import BuildContext, build_task_configs
    from tests.integration.evaluation.test_humaneval_sandbox import FixedCompletions

    problems = read_file(shared_eval / "benchmarks" / "humaneval.jsonl.gz")[:8]
    body = ("    import signal, builtins\n    builtins.abs = lambda v: 0\n"
            "    class Always:\n        def __eq__(self, o):\n            return True\n"
            "    signal.signal(signal.SIGUSR1, lambda s, f: None)\n    return Always()\n")
    configs = build_task_configs(["humaneval"], BuildContext(data_dir=str(shared_eval / "benchmarks")))
    out = run_tasks(FixedCompletions({p["prompt"]: body for p in problems}), configs, limit=8)
    found = out["results"]["humaneval"]
    assert found["pass_at_1,create_test"] == 0.0
    assert found["judged_outside,create_test"] + found["unjudgeable,create_test"] == 1.0


JUDGED_INSIDE_BODY = ("    import gc, sys\n    gc.callbacks.append(lambda *a: [f for f in sys._current_frames().values()])\n"
                      "    gc.set_threshold(1)\n    [[] for _ in range(50)]\n    gc.set_threshold(700)\n"
                      "    return tuple(range(1_000_001))\n")


def test_humaneval_33_and_37_are_not_passed_by_choosing_where_to_be_judged(shared_eval) -> None:
    """The previous judge fell back to the program's process for a value it could not
    carry (over a million items), where the program stole the verdict: HumanEval/33 and
    /37 passed although plain Python fails them. Through check_program and run_pairs, now
    both fail (lm-eval's pass@1 of the same: the slow tier's test_humaneval_sweep.py)."""
    from afm.evaluation.local_data import read_file
    from afm.synth.code_data import run_pairs

    problems = {p["task_id"]: p for p in read_file(shared_eval / "benchmarks" / "humaneval.jsonl.gz")}
    chosen = [problems["HumanEval/33"], problems["HumanEval/37"]]
    pairs = [(p["prompt"] + JUDGED_INSIDE_BODY, code_metrics.test_program(p)) for p in chosen]
    assert [code_metrics.check_program(*pair) for pair in pairs] == [False, False]
    assert all(v != "passed" for v, _ in run_pairs(pairs, CodeConfig(timeout_s=10.0, workers=2), progress=False))


class ForgingCoder:
    """A generator for ``afm synth code`` whose only candidates forge a pass."""

    name = "forging-coder"

    def generate(self, requests, on_result=None):
        out = []
        for r in requests:
            if r.tag == "code/problems":
                texts = [json.dumps([{"title": "half", "description": "Return x / 2 as a float.",
                                      "signature": "def f(x: int) -> float:"}])]
            elif r.tag == "code/tests":
                texts = ["assert f(5) == 2.5\nassert abs(f(1) - 0.5) < 1e-9\nassert f(0) == 0.0"]
            else:
                texts = [FORGERIES["signal-handler-frame"], KNOWN_TO_EVERY_HARNESS["eq-always-true"],
                         KNOWN_TO_EVERY_HARNESS["patched-abs-and-isclose"], FORGERIES["pull-the-keeper"]][: r.n]
            out.append(Generation(texts, ["stop"] * len(texts)))
        for i, g in enumerate(out):
            if on_result:
                on_result(i, g)
        return out


def test_synth_code_keeps_no_forged_solution() -> None:
    run = SynthRun("code", ForgingCoder(), progress=False)
    section = synth_code(run, ["numbers"], CodeConfig(problems_per_topic=1, tests_per_problem=3, min_tests=3,
                                                      solutions_per_problem=4, timeout_s=5.0, workers=2))
    assert run.kept == []
    assert section["per_topic"]["numbers"]["passing"] == 0
    assert section["judged_outside"]["outside"] + section["unjudgeable"]["unjudgeable"] == 12
    assert section["unjudgeable"]["unjudgeable"] == 3  # the object equal to everything, on each of its 3 tests
