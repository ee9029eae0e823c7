"""The sandbox's contract: a pass means the program and its test ran to the end, nothing
else passes, nonsense limits are refused, and a host that cannot isolate refuses to run
model-written code unless weaker isolation was accepted (then the verdict rule still
holds, and the tripwire closes the routes past its path checks: ``dir_fd``, ``/proc``).
The hostile-program suite is ``tests/integration/sandbox/test_hostile_programs.py``."""

from __future__ import annotations

import math
import sys

import pytest

from afm import sandbox
from afm.sandbox import (
    Boundary,
    SandboxPolicy,
    SandboxUnavailable,
    isolation,
    run,
    run_python,
)

KERNEL = sandbox.kernel_boundary().kind == "kernel"


def test_a_correct_program_and_test_pass() -> None:
    r = run_python("import math\ndef f(a, b):\n    return math.gcd(a, b)\nprint('ok')", test="assert f(12, 18) == 6")
    assert r.passed and r.stdout.strip() == "ok" and r.reason == "" and r.judged == "outside" and r.requests >= 1


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


@pytest.mark.parametrize("field", ["timeout_s", "memory_bytes", "max_output_bytes", "tmp_bytes", "max_message_bytes"])
@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf])
def test_nonsense_limits_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        SandboxPolicy(**{field: value})


@pytest.mark.parametrize("seed", [-1, 1 << 32, 1.5, "7"])
def test_a_hash_seed_out_of_range_is_refused(seed) -> None:
    with pytest.raises(ValueError, match="hash_seed"):
        SandboxPolicy(hash_seed=seed)


@pytest.fixture
def no_kernel_boundary(monkeypatch):
    """Pretend this host cannot create namespaces."""
    monkeypatch.setitem(run.kernel_boundary.results, (), Boundary("weak", "host", "unshare (util-linux) not found"))
    monkeypatch.setattr(run, "_ACCEPT_WEAK", [False])


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


# Routes past a path check: a descriptor of a directory outside the working directory
# (every dir_fd call starts from one), calls relative to one, a new working directory,
# /proc/self/mem through its directory, and mkfifo/mknod, which raise no audit event.
AT_ROUTES = {
    "open-a-directory": "import os\nfd = os.open({outside!r}, os.O_RDONLY)",
    "dir-fd-write": "import os\nfd = os.open({outside!r}, os.O_RDONLY)\n"
                    "os.close(os.open('x', os.O_CREAT | os.O_WRONLY, dir_fd=fd))",
    "dir-fd-of-the-workdir": "import os\nos.makedirs('a/b', exist_ok=True)\nfd = os.open('.', os.O_RDONLY)\n"
                             "os.chdir('a/b')\nos.close(os.open('../../../x', os.O_CREAT | os.O_WRONLY, dir_fd=fd))",
    "proc-self-mem-through-its-directory": "import os\nfd = os.open('/proc/self', os.O_RDONLY)\n"
                                           "os.open('mem', os.O_RDWR, dir_fd=fd)",
    "mkdir-dir-fd": "import os\nos.mkdir('x', dir_fd=3)",
    "rename-dir-fd": "import os\nopen('a', 'w').close()\nos.rename('a', 'x', dst_dir_fd=3)",
    "fwalk": "import os\nfor root, dirs, files, fd in os.fwalk({outside!r}):\n"
             "    os.close(os.open('x', os.O_CREAT | os.O_WRONLY, dir_fd=fd))\n    break",
    "chdir-out": "import os\nos.chdir({outside!r})\nopen('x', 'w').close()",
    "mkfifo-outside": "import os\nos.mkfifo({outside!r} + '/x')",
    "mknod-through-posix": "import posix\nposix.mknod({outside!r} + '/x')",
}


@pytest.mark.parametrize("name", sorted(AT_ROUTES))
def test_the_weak_tripwire_closes_the_at_routes(no_kernel_boundary, tmp_path, name: str) -> None:
    outside = tmp_path / "host"
    outside.mkdir()
    outside.chmod(0o777)
    program = AT_ROUTES[name].format(outside=str(outside))
    result = run_python(program, SandboxPolicy(allow_weak_isolation=True))
    assert result.status == "failed", result
    assert "sandbox:" in result.stderr or "AttributeError" in result.stderr, result.stderr[-500:]
    assert list(outside.iterdir()) == [], "the program wrote outside its directory"


def test_the_weak_tripwire_leaves_ordinary_file_work_alone(no_kernel_boundary) -> None:
    program = ("import os, tempfile, pathlib\nos.makedirs('d/e', exist_ok=True)\nopen('d/e/f.txt', 'w').write('x')\n"
               "assert sorted(os.listdir('d')) == ['e'] and pathlib.Path('d/e/f.txt').read_text() == 'x'\n"
               "with tempfile.TemporaryFile() as fh:\n    fh.write(b'y')\nos.remove('d/e/f.txt')\n"
               "assert [r for r, _, _ in os.walk('d')] == ['d', 'd/e']\n")
    result = run_python(program, SandboxPolicy(allow_weak_isolation=True))
    assert result.passed, result.stderr[-1000:]


@pytest.mark.skipif(not KERNEL, reason="no kernel boundary on this host")
def test_layers_name_the_kernel_boundary() -> None:
    layers = sandbox.isolation_layers()
    assert {"pid-namespace", "network-namespace", "private-tmp(bytes and inodes capped)", "verdict-channel"} <= set(layers)


def _alive_with(token: str) -> list[int]:
    import os

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if token.encode() in fh.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and subreapers are Linux's")
@pytest.mark.parametrize("cgroups", ["as probed", "off"])
@pytest.mark.parametrize("test", [None, "assert f()"], ids=["alone", "with-a-test"])
def test_weak_isolation_leaves_no_detached_process_behind(no_kernel_boundary, monkeypatch, cgroups, test) -> None:
    """A setsid grandchild (double fork) is re-parented to the run's reaper and killed
    before run_python returns (and, where there is one, the run's cgroup is emptied),
    also when the run is ended from outside, after the referee's verdict; the layers say
    who the program could signal."""
    import secrets

    from afm.sandbox import cgroup

    if cgroups == "off":
        monkeypatch.setitem(cgroup.support.results, (), cgroup.CgroupSupport("none", "switched off by the test"))

    token = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
    program = ("import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
               f"        os.execv('/bin/sleep', ['sleep', '{token}'])\n    os._exit(0)\ndef f():\n    return True\n")
    result = run_python(program, SandboxPolicy(allow_weak_isolation=True, tripwire=False), test=test)
    assert result.passed, result
    assert _alive_with(token) == []
    assert "subreaper" in result.isolation
    assert "throw-away-uid" in result.isolation or \
        "same-uid(can signal the user's processes)" in result.isolation


def test_weak_isolation_as_a_throwaway_uid_cannot_signal_the_evaluator(no_kernel_boundary) -> None:
    import os

    if "throw-away-uid" not in sandbox.isolation_layers(SandboxPolicy(allow_weak_isolation=True)):
        pytest.skip("weak isolation keeps our uid here (not root, or the interpreter is private)")
    program = f"import os\ntry:\n    os.kill({os.getpid()}, 0)\n    print('reached')\nexcept PermissionError:\n" \
              "    print('refused')\n"
    result = run_python(program, SandboxPolicy(allow_weak_isolation=True, tripwire=False))
    assert result.passed and result.stdout.strip() == "refused"


def test_the_private_tmp_caps_inodes_as_well_as_bytes() -> None:
    """Directories cost kernel memory that a byte size does not count: the inode cap
    bounds them on every host, with or without a cgroup."""
    if not KERNEL:
        pytest.skip("no kernel boundary on this host")
    policy = SandboxPolicy(tmp_bytes=4 << 20, tripwire=False)
    program = ("import os\nn = 0\ntry:\n    while n < 100000:\n        os.mkdir('/tmp/d%06d' % n + 'x' * 200)\n"
               "        n += 1\nexcept OSError:\n    pass\nprint(n)\n")
    result = run_python(program, policy)
    assert result.passed and 0 < int(result.stdout) <= isolation.tmp_inodes(policy)
