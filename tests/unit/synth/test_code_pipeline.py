"""``afm synth code`` with a deterministic stand-in generator: exactly the solutions that
pass their tests are kept, every other candidate is recorded with why, and malicious
candidates (network, fork bomb, writes outside the sandbox, early exit) are contained."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from afm.synth.code_data import CodeConfig, classify, parse_problems, parse_tests, synth_code
from afm.synth.generators import Generation, GenerationRequest
from afm.synth.run import SynthRun

pytest.importorskip("afm.sandbox", reason="the code pipeline runs programs in afm.evaluation's sandbox")

PROBLEMS = {
    "arithmetic": [
        {"title": "add", "description": "Return the sum of two integers.", "signature": "def add(a: int, b: int) -> int:"},
        {"title": "square", "description": "Return n squared.", "signature": "def square(n: int) -> int:"},
    ],
    "strings": [
        {"title": "shout", "description": "Upper-case a string.", "signature": "def shout(s: str) -> str:"},
        {"title": "bad", "description": "no signature here", "signature": "not python"},
        {"title": "few", "description": "Reverse a string.", "signature": "def rev(s: str) -> str:"},
    ],
}
TESTS = {
    "add": "```python\nassert add(1, 2) == 3\nassert add(-1, 1) == 0\nprint('not a test')\nassert add(10, 5) == 15\n```",
    "square": "assert square(3) == 9\nassert square(0) == 0\nassert square(-4) == 16",
    "shout": "assert shout('a') == 'A'\nassert shout('Hi') == 'HI'\nassert shout('') == ''",
    "rev": "assert rev('ab') == 'ba'",  # too few tests
}


class CodeStandIn:
    name = "stand-in-code"

    def __init__(self, port: int, escape: Path) -> None:
        self.port, self.escape = port, escape

    def candidates(self, fn: str) -> list[str]:
        good = {"add": "def add(a, b):\n    return a + b",
                "square": "def square(n):\n    return n * n",
                "shout": "def shout(s):\n    return s.upper()"}[fn]
        wrong = good.replace("+ b", "+ b + 1").replace("n * n", "n * 2").replace("s.upper()", "s")
        if fn == "add":
            return [wrong, f"```python\n{good}\n```", good + "\n", "def add(a, b) return"]
        if fn == "square":
            return [
                f"import socket\nsocket.socket().connect(('127.0.0.1', {self.port}))\n" + good,
                "import os\nwhile True:\n    os.fork()\n" + good,
                f"open({str(self.escape)!r}, 'w').write('escaped')\n" + good,
                "import sys\nsys.exit(0)\n" + good,
            ]
        return ["def shout(s):\n    while True:\n        pass", wrong, "x = 1", "import os\nos._exit(0)\n" + good]

    def generate(self, requests: list[GenerationRequest], on_result=None):
        out = []
        for r in requests:
            q = r.messages[-1]["content"]
            if r.tag == "code/problems":
                topic = q.split(" about ", 1)[1].split(",", 1)[0]
                texts = ["Here you go:\n" + json.dumps(PROBLEMS[topic])]
            elif r.tag == "code/tests":
                texts = [TESTS[q.split("Signature: def ", 1)[1].split("(", 1)[0]]]
            else:
                texts = self.candidates(q.split("`def ", 1)[1].split("(", 1)[0])[: r.n]
            out.append(Generation(texts, ["stop"] * len(texts)))
        for i, g in enumerate(out):
            if on_result:
                on_result(i, g)
        return out


@pytest.fixture()
def listener():
    """A local port that records any connection (there must be none)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                seen.append("connected")
                conn.close()
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1], seen
    stop.set()
    t.join(timeout=2)
    srv.close()


def test_keeps_exactly_the_passing_solutions_and_contains_malicious_ones(listener, tmp_path: Path) -> None:
    port, connections = listener
    escape = tmp_path / "escaped.txt"
    run = SynthRun("code", CodeStandIn(port, escape), progress=False)
    section = synth_code(run, ["arithmetic", "strings"], CodeConfig(
        problems_per_topic=3, tests_per_problem=5, min_tests=3, solutions_per_problem=4, timeout_s=2.0, workers=4))
    kept = {c["id"]: c for c in run.kept}
    assert set(kept) == {"arithmetic/0"}  # add: the first correct candidate
    assert "return a + b\n" in kept["arithmetic/0"]["messages"][1]["content"]
    triplets = run.extra_files["triplets.jsonl"]
    assert triplets[0]["tests"] == ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(10, 5) == 15"]
    why = {(d["item"], d.get("candidate")): d["reason"] for d in run.dropped if d["stage"] in ("execute", "solutions")}
    assert why[("arithmetic/0", 0)] == "assertion_failed"
    assert why[("arithmetic/0", 2)] == "not_selected"  # also correct, but the first one was chosen
    assert why[("arithmetic/0", 3)] == "syntax_error"
    # square: every candidate is malicious and contained; none passes
    square = [why[("arithmetic/1", k)] for k in range(4)]
    assert square[:2] == ["blocked", "blocked"] and square[3] == "exited_early"
    # the host path does not exist in the sandbox's own /tmp (or the tripwire stops the write)
    assert square[2] in ("blocked", "error:FileNotFoundError")
    assert why[("strings/0", 0)] == "timeout" and why[("strings/0", 1)] == "assertion_failed"
    assert why[("strings/0", 2)] == "no_function" and why[("strings/0", 3)] == "exited_early"
    problem_drops = {(d["stage"], d["reason"]) for d in run.dropped if d["stage"] in ("problems", "tests", "select")}
    assert problem_drops == {("problems", "bad_signature"), ("tests", "too_few_tests"), ("select", "no_passing_solution")}
    assert connections == [] and not escape.exists()
    table = section["per_topic"]
    assert table["arithmetic"] == {"problems": 2, "candidates": 8, "passing": 2, "kept": 1, "pass_rate": 0.25}
    assert table["strings"]["kept"] == 0 and table["strings"]["passing"] == 0


def test_parsers() -> None:
    problems, bad = parse_problems('text [{"description": "d", "signature": "def f(x)"}, {"x": 1}] more', "t", 0)
    assert problems[0].function == "f" and problems[0].signature == "def f(x):" and bad == [({"x": 1}, "missing_fields")]
    assert parse_problems("no list", "t", 0)[1][0][1] == "no_json_list"
    assert parse_tests("assert f(1) == 2\nassert g(1)\nassert f(2 ==\nx = f(3)", "f") == ["assert f(1) == 2"]

    class R:
        def __init__(self, status, err="", rc=1):
            self.status, self.stdout, self.stderr, self.returncode = status, "", err, rc

    assert classify(R("passed", rc=0)) == "passed"
    assert classify(R("failed", rc=0)) == "exited_early"  # left without the harness's verdict
    assert classify(R("failed", err="Traceback\nSystemExit: 0")) == "exited_early"
    assert classify(R("failed", err="Traceback\nAssertionError")) == "assertion_failed"
    assert classify(R("failed", err="Traceback\nZeroDivisionError: division by zero")) == "error:ZeroDivisionError"
