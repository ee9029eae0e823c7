"""Verdicts no program can forge: each route the red team used to pass a wrong solution,
in both places a verdict is decided (a split test judged in the evaluator; a test run in
the program's process, judged by the harness's keeper), and through the real paths
(``code_metrics.check_program``, lm-eval's HumanEval pass@1, ``afm synth code``).

Every candidate ``f`` below returns a wrong value; the test asserts the right one. The
programs look for a 64-hex key in every frame, global and module they can reach, and
write each one they find to every descriptor (against the harness before this change,
the first four pass a wrong solution: its key was a local of the harness's ``main``)."""

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
@pytest.mark.parametrize("split", [True, False], ids=["judged-outside", "judged-inside"])
def test_forgeries_fail_wherever_the_verdict_is_decided(name: str, split: bool) -> None:
    result = run_python(FORGERIES[name], SandboxPolicy(tripwire=name == "posixsubprocess-fork-exec"),
                        test=TESTS[0], split=split)
    assert result.status == "failed", result
    assert result.judged == ("outside" if split else "inside")
    if name == "posixsubprocess-fork-exec":
        assert "refused: sandbox: module _posixsubprocess" in result.stdout
    if name == "emptied-hook-tables":
        assert result.stdout.count("route closed: PermissionError") == 2, result.stdout
        assert "route closed: ImportError" in result.stdout and "route open" not in result.stdout


@pytest.mark.parametrize("name", sorted(KNOWN_TO_EVERY_HARNESS))
@pytest.mark.parametrize("test", TESTS, ids=["eq", "abs", "isclose"])
def test_objects_and_patched_builtins_cannot_pass_a_split_test(name: str, test: str) -> None:
    result = run_python(KNOWN_TO_EVERY_HARNESS[name], test=test)
    assert result.judged == "outside" and result.status == "failed", result


def test_the_right_answer_still_passes_every_form() -> None:
    for test in TESTS:
        result = run_python("def f(x):\n    return 2.5", test=test)
        assert result.passed and result.judged == "outside", (test, result)
        result = run_python("def f(x):\n    return 2.5", test=test, split=False)
        assert result.passed and result.judged == "inside", (test, result)


def test_no_key_in_any_frame_or_object_the_program_reaches() -> None:
    """In the program's process (a test that does not split) the key is nowhere the
    program can look: every frame, global and module, from a signal handler too."""
    program = HUNT + '''
import signal, sys
seen = []
signal.signal(signal.SIGUSR1, lambda s, frame: seen.extend(walk(frame)))
def f(x):
    signal.raise_signal(signal.SIGUSR1)
    seen.extend(walk(sys._getframe()))
    try:
        raise KeyError
    except KeyError as e:
        seen.extend(walk(e.__traceback__.tb_frame))
    print("keys found:", len(seen))
    return 2.5
'''
    result = run_python(program, test="try:\n    assert f(1) == 2.5\nfinally:\n    pass")
    assert result.judged == "inside" and result.passed, result
    assert "keys found: 0" in result.stdout


@pytest.mark.parametrize("route", [
    "import importlib.machinery, _imp, os\n"
    "spec = importlib.machinery.ModuleSpec('_ctypes', None, origin=[p for p in __import__('sys').path if p]"
    "[0])\n_imp.create_dynamic(spec)",
    "f = lambda: 1\nf.__code__ = (lambda: 2).__code__",
    "(lambda: 1).__code__.replace(co_name='x')",
    "import sys\nsys.settrace(lambda *a: None)",
    "import gc\ngc.get_referrers(gc)",
    "import sys\nsys._current_frames()",
])
def test_routes_to_raw_memory_and_other_threads_are_refused(route: str) -> None:
    result = run_python(route, split=False)
    assert result.status == "failed", result
    assert "sandbox:" in result.stderr, result.stderr[-500:]


def test_no_further_audit_hook_is_installed() -> None:
    """CPython drops a new hook silently when a hook refuses it: it never runs."""
    result = run_python("import sys\nsys.addaudithook(lambda e, a: print('hooked', e))\nimport json, re\n"
                        "open('x', 'w').close()", split=False)
    assert result.passed and "hooked" not in result.stdout


HUMANEVAL_LIKE = "def check(candidate):\n    assert candidate(1) == 2.5\n    assert abs(candidate(2) - 2.5) < 1e-6\n"


@pytest.mark.parametrize("name", sorted({**FORGERIES, **KNOWN_TO_EVERY_HARNESS}))
def test_code_metrics_scores_every_forgery_zero(name: str) -> None:
    program = {**FORGERIES, **KNOWN_TO_EVERY_HARNESS}[name]
    test = HUMANEVAL_LIKE + "\ncheck(f)"
    assert code_metrics.check_program(program, test) is False
    assert code_metrics.judge(program, test).judged_outside


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
    assert out["results"]["humaneval"]["pass_at_1,create_test"] == 0.0
    assert out["results"]["humaneval"]["judged_outside,create_test"] == 1.0


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
    assert section["judged_outside"] == {"verdicts": 12, "outside": 12, "share": 1.0}
