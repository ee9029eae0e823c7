"""The hostile-program suite: every case in ``hostile_programs.py`` gets the verdict a safe
sandbox must give, and the host is untouched afterwards: canary files unchanged, nothing
created in the host's /tmp, no listener reached, no victim process killed, no process of
the run left behind, the evaluator's memory bounded. The cases run as the current user
and again as an unprivileged user (uid 65534, through ``setpriv``), so both ways the
sandbox isolates (a throw-away uid as root, a user namespace otherwise) are exercised."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import ROOT

sys.path.insert(0, str(Path(__file__).parent))
from hostile_programs import CASES, Target, problems, run_case  # noqa: E402

from afm.sandbox import kernel_boundary  # noqa: E402

pytestmark = pytest.mark.skipif(kernel_boundary().kind != "kernel",
                                reason=f"no kernel boundary here: {kernel_boundary().reason}")
HERE = Path(__file__).resolve().parent
BASHRC = Path("/root/.bashrc")


class Listener:
    """A socket on the host that records every connection it accepts."""

    def __init__(self, family: int, address) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except (TimeoutError, OSError):
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    token = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"  # doubles as a sleep duration
    canary_dir = Path(tempfile.mkdtemp(prefix="afm-canary-"))
    canary_dir.chmod(0o777)  # writable by anyone: only the sandbox stands in the way
    (canary_dir / "canary").write_text("original")
    (canary_dir / "canary").chmod(0o666)
    unix = Listener(socket.AF_UNIX, str(canary_dir / "sock"))
    os.chmod(canary_dir / "sock", 0o777)
    abstract_name = f"\0afm-hostile-{token}"
    abstract = Listener(socket.AF_UNIX, abstract_name)
    tcp = Listener(socket.AF_INET, ("127.0.0.1", 0))
    victim = subprocess.Popen(["sleep", "3600"])
    bashrc = _digest(BASHRC)
    t = Target(token=token, canary_dir=str(canary_dir), unix_socket=str(canary_dir / "sock"),
               abstract_socket=abstract_name, tcp_port=tcp.sock.getsockname()[1],
               victim_pid=victim.pid, evaluator_pid=os.getpid())
    yield t
    try:
        assert unix.accepted == abstract.accepted == tcp.accepted == 0, "a listener was reached"
        assert _digest(BASHRC) == bashrc
    finally:
        for listener in (unix, abstract, tcp):
            listener.close()
        victim.kill()
        victim.wait()
        shutil.rmtree(canary_dir, ignore_errors=True)


def host_problems(t: Target, victim_alive: bool = True) -> list[str]:
    found = []
    canary = Path(t.canary_dir)
    if (canary / "canary").read_text() != "original":
        found.append("the canary file was changed")
    extra = sorted(p.name for p in canary.iterdir() if p.name not in ("canary", "sock"))
    if extra:
        found.append(f"files appeared in the canary directory: {extra}")
    leaked = sorted(p.name for p in Path("/tmp").glob(f"afm-hostile-{t.token}*"))
    if leaked:
        found.append(f"files escaped to the host's /tmp: {leaked}")
    left = [pid for pid in _pids() if t.token.encode() in _cmdline(pid)]
    if left:
        found.append(f"processes of the run are still alive: {left}")
    try:
        os.kill(t.victim_pid, 0)
    except ProcessLookupError:
        found.append("the victim process was killed")
    return found


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_as_the_current_user(case, target: Target) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = run_case(case, target)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert not problems(case, result), result
    assert not host_problems(target)
    assert grown_mb < 100, f"the evaluator grew by {grown_mb:.0f} MB"
    if case.expect == ("timeout",) and "cpu_s" in case.policy:
        # a CPU-limit case: the kernel's reason (RLIMIT_CPU's SIGXCPU), not the clock, which a busy machine stretches
        assert result["reason"].startswith("over the CPU limit"), result
    elif case.expect == ("timeout",):
        # ended by the sandbox's own wall clock (not this harness's); how long the kill and the
        # clean-up took is the machine's speed, which a test does not assert
        assert result["reason"].startswith("over the wall-clock limit"), result


def _unprivileged_prefix(paths: list[str]) -> str:
    """Shell lines that, in a private mount namespace, keep ``paths`` reachable by any
    user even where an ancestor directory is private (e.g. an interpreter under /root)."""
    lines, hidden = [], {}
    for path in paths:
        parts = Path(path).parts
        for i in range(2, len(parts)):
            ancestor = str(Path(*parts[:i]))
            if not os.stat(ancestor).st_mode & 0o001:
                hidden.setdefault(ancestor, []).append(path)
                break
    for n, (ancestor, inside) in enumerate(hidden.items()):
        for m, path in enumerate(inside):
            stage = f"/tmp/.afm-stage-{os.getpid()}-{n}-{m}"
            lines.append(f"mkdir -p {stage} && mount --bind {path} {stage}")
        lines.append(f"mount -t tmpfs -o mode=0755 tmpfs {ancestor}")
        for m, path in enumerate(inside):
            stage = f"/tmp/.afm-stage-{os.getpid()}-{n}-{m}"
            lines.append(f"mkdir -p {path} && mount --move {stage} {path} && rmdir {stage}")
    return "\n".join(lines)


def test_as_an_unprivileged_user(target: Target, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: test_as_the_current_user ran the suite as such")
    if not (shutil.which("setpriv") and shutil.which("unshare")):
        pytest.skip("setpriv/unshare (util-linux) not found")
    repo = ROOT
    needed = [os.path.realpath(sys.base_prefix), str(repo), os.path.realpath(sys.prefix)]
    spec = tmp_path / "target.json"
    spec.write_text(json.dumps(target.__dict__))
    spec.chmod(0o644)
    tmp_path.chmod(0o755)
    for parent in tmp_path.parents:
        if str(parent) in ("/", "/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o005)
    script = f"""set -e
{_unprivileged_prefix(needed)}
exec setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME=/tmp {sys.executable} {HERE / 'hostile_programs.py'} {spec}
"""
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert set(results) == {c.name for c in CASES}
    wrong = {c.name: problems(c, results[c.name]) for c in CASES if problems(c, results[c.name])}
    assert not wrong, wrong
    assert all("user-namespace" in r["isolation"] for r in results.values())
    assert not host_problems(target)
