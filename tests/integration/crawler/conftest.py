"""Services the crawler tests start themselves: a redis-server of their own, and
``afm crawler daemon`` (:func:`running_daemon`, handed to tests as the ``crawler_daemon``
fixture)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml


@pytest.fixture
def redis_url(tmp_path):
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install -y redis-server)")
    proc, port = _start_redis(binary, tmp_path)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def _start_redis(binary: str, folder) -> tuple[subprocess.Popen, int]:
    """A redis-server of our own, serving before its port is used: a free port can be taken
    between choosing it and the server binding it, so the server is asked for its own pid
    on that port, and another port is tried when it did not start."""
    import redis

    for _ in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(200):
            if proc.poll() is not None:
                break  # could not bind: the port was taken meanwhile
            try:
                if client.info("server")["process_id"] == proc.pid:
                    return proc, port
            except redis.ConnectionError:
                time.sleep(0.05)
        proc.kill()
        proc.wait(10)
    pytest.fail("redis-server did not start on a free port")


@pytest.fixture
def crawler_daemon():
    """:func:`running_daemon`: ``with crawler_daemon(config, log) as proc: ...``."""
    return running_daemon


@contextmanager
def running_daemon(config: Path, log: Path, ready_timeout: float = 60.0,
                   wait_ready: bool = True) -> Iterator[subprocess.Popen]:
    """``afm crawler daemon --config config`` in a process of its own, its output appended to
    ``log``. With ``wait_ready`` the block starts once its health endpoint answers 200 (the
    config needs ``metrics_port``); a daemon that exits first or is not up in
    ``ready_timeout`` seconds fails the test with the tail of its log. Whatever the block
    did, the daemon is not left running: one still alive at the end is killed (a test that
    means to stop it cleanly sends SIGTERM itself)."""
    out = Path(yaml.safe_load(config.read_text())["out_dir"])
    with open(log, "ab") as sink:
        proc = subprocess.Popen([sys.executable, "-c", "from afm.app.cli import main; main()", "crawler",
                                 "daemon", "--config", str(config)], stdout=sink, stderr=subprocess.STDOUT)
        try:
            if wait_ready:
                _wait_healthy(proc, out, log, ready_timeout)
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _wait_healthy(proc: subprocess.Popen, out: Path, log: Path, timeout: float) -> None:
    """Until ``/healthz`` at the address in the daemon's endpoint file answers 200."""
    from afm.crawler.operations.metrics import endpoint_file

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"the crawler daemon exited ({proc.returncode}) before it was up; "
                        f"its log ends:\n{_tail(log)}")
        if _healthy(endpoint_file(out)):
            return
        time.sleep(0.1)
    pytest.fail(f"the crawler daemon was not up (/healthz 200) within {timeout:g} s; its log ends:\n{_tail(log)}")


def _healthy(endpoint: Path) -> bool:
    try:
        info = json.loads(endpoint.read_text())
        with urllib.request.urlopen(f"http://{info['host']}:{info['port']}/healthz", timeout=5) as r:
            return r.status == 200
    except (OSError, ValueError, KeyError):  # not written yet, half written, or not answering yet
        return False


def _tail(log: Path, chars: int = 3000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"(cannot read {log}: {exc.strerror})"


def _wait_until(predicate, timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def wait_until():
    """:func:`_wait_until`, for the crawler's integration tests."""
    return _wait_until
