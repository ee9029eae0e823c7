"""``afm.once``: callers that arrive together share one run of the probe, per argument; a
probe that raised is tried again; a test can pretend a result."""

from __future__ import annotations

import threading
import time

import pytest

from afm.once import once


def test_concurrent_callers_share_one_run() -> None:
    runs: list[str] = []

    @once
    def probe(name: str) -> str:
        runs.append(name)
        time.sleep(0.05)  # long enough for every thread below to arrive while it runs
        return name.upper()

    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(probe("a"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["A"] * 8 and runs == ["a"]
    assert probe("b") == "B" and runs == ["a", "b"]  # one run per argument
    assert probe.__name__ == "probe" and probe.results == {("a",): "A", ("b",): "B"}


def test_a_failed_run_is_not_kept(monkeypatch) -> None:
    calls = [0]

    @once
    def flaky() -> int:
        calls[0] += 1
        if calls[0] == 1:
            raise OSError("not yet")
        return calls[0]

    with pytest.raises(OSError):
        flaky()
    assert flaky() == 2 and flaky() == 2
    monkeypatch.setitem(flaky.results, (), 7)  # what a test pretending a host does
    assert flaky() == 7
