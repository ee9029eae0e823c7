"""Services the crawler tests start themselves: a redis-server of their own."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest


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
