"""``afm synth code``: topics -> problems -> unit tests + candidate solutions -> run every
solution against every test in the sandbox -> keep the best passing solution (report
§4.1.2, Coding; §7.4: generated code is untrusted and runs only locked down).

1. **Problems** -- per topic, ``problems_per_topic`` interview-style questions with a
   Python signature (JSON from the generator; malformed ones are dropped with a reason).
2. **Tests** -- ``tests_per_problem`` ``assert`` lines per problem; a line that is not a
   single assert statement is discarded; a problem with fewer than ``min_tests`` valid
   tests is dropped.
3. **Solutions** -- ``solutions_per_problem`` samples; a candidate that stopped for length
   (``afm.finish``: never a finished turn; ``cut_reply``, counted in the manifest's
   ``cut_replies``), does not parse or does not define the function is dropped without
   being run.
4. **Execution** -- each (candidate, test) pair runs through ``afm.sandbox`` (its
   own namespaces, no network, a private /tmp, limits, timeout): the candidate in one
   sandboxed process, the assert line in another, the referee's (``sandbox/judge.py``),
   which calls the candidate over plain data and decides the verdict; nothing the
   candidate does in its process (a forged verdict, an ``__eq__`` that is always true, a
   patched ``abs``, a value built to stall the judge) can make a wrong solution pass and
   enter SFT data; an exit of any kind fails. Where the candidate's own code would have
   to decide (its ``__eq__`` against the expected value) the pair is ``unjudgeable``: a
   failure, counted in the manifest next to the share judged outside. Failures are
   classified: ``assertion_failed``, ``error:<Exception>``, ``timeout``, ``blocked``
   (the sandbox refused a socket, a process, a write outside its directory),
   ``exited_early``, ``unjudgeable``.
5. **Selection** -- per problem the candidate with the most passing tests; kept when it
   passes all of them (``min_pass_fraction``). Every other candidate is recorded with why.

The manifest has per-topic pass rates: problems, candidates, candidates passing all
their tests, problems kept.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from afm.console import track
from afm.finish import DROP_REASON, is_cut
from afm.sandbox import SandboxPolicy, isolation_layers, require, run_python
from afm.synth import prompts
from afm.synth.generators import GenerationRequest
from afm.synth.run import SynthRun


@dataclass
class CodeConfig:
    problems_per_topic: int = 5
    tests_per_problem: int = 5
    min_tests: int = 3
    solutions_per_problem: int = 4
    min_pass_fraction: float = 1.0
    temperature: float = 0.8
    max_tokens: int = 768
    timeout_s: float = 10.0
    workers: int = 4
    seed: int = 0


@dataclass
class CodeProblem:
    id: str
    topic: str
    title: str
    description: str
    signature: str
    function: str
    tests: list[str] = field(default_factory=list)


def first_json_list(text: str) -> list[Any] | None:
    """The first JSON array in ``text`` (generators wrap JSON in prose or code fences)."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\[", text):
        try:
            value, _ = decoder.raw_decode(text[match.start():])
        except ValueError:
            continue
        if isinstance(value, list):
            return value
    return None


def function_name(signature: str) -> str | None:
    """The name a ``def`` line defines, when it is one (checked by parsing it)."""
    sig = signature.strip()
    if not sig.endswith(":"):
        sig += ":"
    try:
        tree = ast.parse(sig + "\n    pass\n")
    except SyntaxError:
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    return node.name if isinstance(node, ast.FunctionDef) else None


def parse_problems(text: str, topic: str, start: int) -> tuple[list[CodeProblem], list[tuple[Any, str]]]:
    """Problems from the generator's JSON list; and the items refused with why."""
    items = first_json_list(text)
    if items is None:
        return [], [(text[:200], "no_json_list")]
    out, bad = [], []
    for k, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("description"), str) \
                or not isinstance(item.get("signature"), str):
            bad.append((item, "missing_fields"))
            continue
        name = function_name(item["signature"])
        if name is None:
            bad.append((item, "bad_signature"))
            continue
        slug = re.sub(r"\W+", "-", topic.lower()).strip("-")
        out.append(CodeProblem(f"{slug}/{start + k}", topic, str(item.get("title", name)),
                               item["description"].strip(), item["signature"].strip().rstrip(":") + ":", name))
    return out, bad


def code_block(text: str) -> str:
    """The first fenced code block (```python ...```), else the text itself."""
    m = re.search(r"```(?:python|py)?[ \t]*\n(.*?)```", text, re.S)
    return (m.group(1) if m else text).strip() + "\n"


def parse_tests(text: str, function: str) -> list[str]:
    """Single ``assert`` statements that call the function (one per line)."""
    tests = []
    for line in code_block(text).splitlines():
        line = line.strip()
        if not line.startswith("assert"):
            continue
        try:
            tree = ast.parse(line)
        except SyntaxError:
            continue
        if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert) and function in line:
            tests.append(line)
    return list(dict.fromkeys(tests))


def defines(code: str, function: str) -> str | None:
    """None when ``code`` parses and defines ``function`` at top level, else the reason."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "syntax_error"
    if not any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body):
        return "no_function"
    return None


CAUSES = {"assertion": "assertion_failed", "exited": "exited_early", "blocked": "blocked",
          "timeout": "timeout", "unjudgeable": "unjudgeable"}


def classify(result: Any) -> str:
    """``passed`` or why a (candidate, test) program failed."""
    err = result.stderr or ""
    if result.status == "passed":
        return "passed"
    if result.status == "timeout":
        return "timeout"
    cause = getattr(result, "cause", "")
    if cause:  # the referee (or the evaluator) says what failed
        return CAUSES.get(cause, cause if cause.startswith("error:") else f"failed:{cause}")
    if "sandbox:" in err and "PermissionError" in err:
        return "blocked"
    found = re.findall(r"^(\w+(?:Error|Exception|Exit|Interrupt))\b", err, re.M)
    if result.returncode == 0 or (found and found[-1] == "SystemExit"):
        return "exited_early"
    if found and found[-1] == "AssertionError":
        return "assertion_failed"
    if found:
        return f"error:{found[-1]}"
    return f"failed:rc={result.returncode}"


def run_pairs(pairs: list[tuple[str, str]], cfg: CodeConfig, progress: bool) -> list[tuple[str, bool]]:
    """Each (solution, test) pair in the sandbox; per pair the verdict and whether the
    referee decided it (False: unjudgeable)."""

    policy = SandboxPolicy(timeout_s=cfg.timeout_s, cpu_s=max(1, int(math.ceil(cfg.timeout_s))))

    def one(pair: tuple[str, str]) -> tuple[str, bool]:
        result = run_python(pair[0], policy, test=pair[1])
        return classify(result), result.judged == "outside"

    if not pairs:
        return []
    require(policy)  # here, in the caller's thread: a Ctrl-C then stops every run at once
    with ThreadPoolExecutor(max(1, cfg.workers)) as pool:
        if not progress:
            return list(pool.map(one, pairs))

        return list(track(pool.map(one, pairs), "code: sandbox runs", total=len(pairs), unit="programs"))


def synth_code(run: SynthRun, topics: list[str], cfg: CodeConfig) -> dict[str, Any]:
    """The whole pipeline; returns the manifest section (per-topic table)."""
    stats: dict[str, dict[str, int]] = defaultdict(lambda: {"problems": 0, "candidates": 0, "passing": 0, "kept": 0})
    reqs = [GenerationRequest(tuple(prompts.code_problems(t, cfg.problems_per_topic)), temperature=0.7,
                              max_tokens=cfg.max_tokens * 2, seed=cfg.seed, tag="code/problems") for t in topics]
    problems: list[CodeProblem] = []
    for topic, gen in zip(topics, run.ask(reqs, "problems")):
        found, bad = parse_problems(gen.texts[0], topic, 0)
        for item, why in bad:
            run.drop("problems", why, item, topic=topic)
        seen = set()
        for p in found:
            if p.function in seen:
                run.drop("problems", "duplicate_function", p.description, topic=topic)
                continue
            seen.add(p.function)
            problems.append(p)
    tests = run.ask([GenerationRequest(tuple(prompts.code_tests(p.description, p.signature, cfg.tests_per_problem)),
                                       temperature=0.2, max_tokens=cfg.max_tokens, seed=cfg.seed, tag="code/tests")
                     for p in problems], "tests")
    testable = []
    for p, gen in zip(problems, tests):
        p.tests = parse_tests(gen.texts[0], p.function)[: cfg.tests_per_problem]
        stats[p.topic]["problems"] += 1
        if len(p.tests) < cfg.min_tests:
            run.drop("tests", "too_few_tests", p.id, topic=p.topic, tests=p.tests)
        else:
            testable.append(p)
    sols = run.ask([GenerationRequest(tuple(prompts.code_solution(p.description, p.signature)),
                                      n=cfg.solutions_per_problem, temperature=cfg.temperature,
                                      max_tokens=cfg.max_tokens, seed=cfg.seed, tag="code/solutions")
                    for p in testable], "solutions")
    candidates: list[tuple[CodeProblem, int, str]] = []
    for p, gen in zip(testable, sols):
        for k, text in enumerate(gen.texts):
            stats[p.topic]["candidates"] += 1
            if is_cut(gen.finish[k] if k < len(gen.finish) else None):  # never a finished turn
                run.drop("solutions", DROP_REASON, p.id, topic=p.topic, candidate=k, reply=text[:300])
                continue
            code = code_block(text)
            why = defines(code, p.function)
            if why:
                run.drop("solutions", why, p.id, topic=p.topic, candidate=k, code=code)
            else:
                candidates.append((p, k, code))
    pairs = [(code, t) for p, _, code in candidates for t in p.tests]
    outcomes = run_pairs(pairs, cfg, run.progress)
    verdicts = iter(v for v, _ in outcomes)
    results: dict[str, list[tuple[int, str, list[str]]]] = defaultdict(list)
    for p, k, code in candidates:
        per_test = [next(verdicts) for _ in p.tests]
        results[p.id].append((k, code, per_test))
    triplets = []
    for p in testable:
        runs = results.get(p.id, [])
        need = math.ceil(cfg.min_pass_fraction * len(p.tests))
        scored = sorted(runs, key=lambda r: (-sum(v == "passed" for v in r[2]), r[0]))
        stats[p.topic]["passing"] += sum(all(v == "passed" for v in r[2]) for r in runs)
        best = scored[0] if scored and sum(v == "passed" for v in scored[0][2]) >= need else None
        for k, code, verdict in scored:
            if best is not None and k == best[0]:
                continue
            failed = {i: v for i, v in enumerate(verdict) if v != "passed"}
            reason = "not_selected" if not failed else _main_reason(failed)
            run.drop("execute", reason, p.id, topic=p.topic, candidate=k, failed_tests=failed, code=code)
        if best is None:
            run.drop("select", "no_passing_solution", p.id, topic=p.topic)
            continue
        k, code, verdict = best
        stats[p.topic]["kept"] += 1
        triplets.append({"id": p.id, "topic": p.topic, "question": p.description, "signature": p.signature,
                         "tests": p.tests, "solution": code, "passed": sum(v == "passed" for v in verdict)})
        run.keep("select", {
            "id": p.id, "source": "synthetic-code",
            "messages": [{"role": "user", "content": f"{p.description}\n\nWrite the function `{p.signature}` in Python."},
                         {"role": "assistant", "content": f"```python\n{code}```"}],
            "meta": {"topic": p.topic, "tests": len(p.tests), "candidate": k},
        })
    run.extra_files["triplets.jsonl"] = triplets
    table = {t: dict(s, pass_rate=round(s["passing"] / s["candidates"], 4) if s["candidates"] else 0.0)
             for t, s in sorted(stats.items())}

    outside = sum(o for _, o in outcomes)
    refused = sum(v == "unjudgeable" for v, _ in outcomes)
    return {"config": vars(cfg), "per_topic": table, "sandbox": list(isolation_layers()),
            "judged_outside": {"verdicts": len(outcomes), "outside": outside,
                               "share": round(outside / len(outcomes), 4) if outcomes else 0.0},
            "unjudgeable": {"verdicts": len(outcomes), "unjudgeable": refused,
                            "share": round(refused / len(outcomes), 4) if outcomes else 0.0}}


def _main_reason(failed: dict[int, str]) -> str:
    """The most telling failure of a candidate: blocked > timeout > error > assertion."""
    values = list(failed.values())
    for prefix in ("blocked", "timeout", "exited_early", "error:", "failed:", "assertion_failed"):
        hit = next((v for v in values if v.startswith(prefix)), None)
        if hit:
            return hit
    return values[0]
