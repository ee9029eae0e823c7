"""Issue 44: a running daemon can be watched: its Prometheus endpoint (scraped and parsed
as Prometheus would), its health endpoint, the periodic stats line in its log, and
``afm crawler status`` against it; SIGTERM takes the endpoint down with the daemon."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from afm.app.cli import main
from afm.crawler.operations.metrics import endpoint_file
from afm.crawler.testsite import LocalSites, Page

PAGES = 40


def _site() -> dict:
    pages = {f"/p{i}": Page(f"<p>page {i}</p>" + "".join(f'<a href="/p{j}">{j}</a>' for j in (i + 1, i + 2)
                                                         if j < PAGES), delay=0.05) for i in range(PAGES)}
    pages["/"] = Page('<a href="/p0">start</a> <a href="/private/x">no</a>')
    pages["/robots.txt"] = Page("User-agent: *\nDisallow: /private/\n", headers={"Content-Type": "text/plain"})
    return {"h0": pages}


@pytest.fixture
def daemon(tmp_path: Path, crawler_daemon):
    with LocalSites(_site()) as site:
        cfg = {"seeds": [site.url("h0", "/")], "out_dir": str(tmp_path / "out"), "allow_private": True,
               "per_host_concurrency": 1, "daemon": True, "idle_exit_seconds": 0, "progress_seconds": 0.5,
               "metrics_port": 0, "inbox": str(tmp_path / "inbox"), "poll_seconds": 0.5}
        (tmp_path / "crawl.yaml").write_text(yaml.safe_dump(cfg))
        log = tmp_path / "log.txt"
        with crawler_daemon(tmp_path / "crawl.yaml", log) as proc:
            yield proc, tmp_path / "out", log



def _metrics(url: str) -> dict[str, float]:
    from afm.crawler.operations.status import parse_metrics

    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        return parse_metrics(r.read().decode())


def test_a_running_daemon_serves_metrics_health_and_status(daemon, wait_until) -> None:
    proc, out, log = daemon
    info = json.loads(endpoint_file(out).read_text())
    assert info["host"] == "127.0.0.1" and info["port"] > 0  # loopback by default
    url = f"http://{info['host']}:{info['port']}"
    wait_until(lambda: _metrics(url).get("afm_crawler_pages_total", 0) >= PAGES, 90, "every page fetched")
    m = _metrics(url)
    assert m["afm_crawler_responses_total{status=200}"] >= PAGES
    assert m["afm_crawler_robots_denied_total"] >= 1 and m["afm_crawler_robots_fetches_total"] >= 1
    assert m["afm_crawler_up"] == 1 and m["afm_crawler_frontier_requests"] >= 0
    assert sum(v for k, v in m.items() if k.startswith("afm_crawler_training_use_total")) >= PAGES
    assert m["process_resident_memory_bytes"] > 10e6  # the process's own memory, for "flat over hours"
    with urllib.request.urlopen(url + "/healthz", timeout=10) as r:
        health = json.loads(r.read())
    assert r.status == 200 and health["status"] == "ok" and health["pages"] >= PAGES
    status = CliRunner().invoke(main, ["crawler", "status", "--out", str(out)])
    assert status.exit_code == 0, status.output
    flat = " ".join(status.output.split())
    assert "health │ ok" in flat.replace("│ │", "│") or "ok" in flat
    assert "robots denied" in flat and "memory MB" in flat
    assert CliRunner().invoke(main, ["crawler", "status", "--url", url, "--health"]).exit_code == 0
    wait_until(lambda: "frontier" in log.read_text(), 30, "a periodic stats line in the log")
    line = next(x for x in log.read_text().splitlines() if "[crawl] pages" in x)
    assert "/s now" in line and "warc-closed" in line and "errors" in line and line[:4].isdigit()  # timestamped
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, log.read_text()[-3000:]
    assert not endpoint_file(out).exists()
    gone = CliRunner().invoke(main, ["crawler", "status", "--url", url, "--health"])
    assert gone.exit_code != 0 and "Traceback" not in gone.output


def test_status_without_a_daemon_says_what_was_looked_for(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["crawler", "status", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "endpoint.json" in result.output and "Traceback" not in result.output
    both = CliRunner().invoke(main, ["crawler", "status", "--out", str(tmp_path), "--url", "http://x"])
    assert both.exit_code != 0 and "one of" in both.output


def test_status_wait_started_before_the_daemon_returns_its_status(tmp_path: Path, crawler_daemon) -> None:
    """The systemd unit's start check runs beside the daemon's start: it waits for the
    endpoint file, then for /healthz, and prints the status."""
    import subprocess
    import sys

    with LocalSites(_site()) as site:
        cfg = {"seeds": [site.url("h0", "/")], "out_dir": str(tmp_path / "out"), "allow_private": True,
               "daemon": True, "idle_exit_seconds": 0, "progress_seconds": 0, "metrics_port": 0}
        (tmp_path / "crawl.yaml").write_text(yaml.safe_dump(cfg))
        waiter = subprocess.Popen([sys.executable, "-c", "from afm.app.cli import main; main()", "crawler", "status",
                                   "--config", str(tmp_path / "crawl.yaml"), "--wait", "120"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert not endpoint_file(tmp_path / "out").exists()
        with crawler_daemon(tmp_path / "crawl.yaml", tmp_path / "log.txt", wait_ready=False):
            output, _ = waiter.communicate(timeout=150)
        assert waiter.returncode == 0, output
        assert "up: http://127.0.0.1:" in output and "crawler status" in output and "Traceback" not in output


def test_health_says_degraded_with_the_reason_when_every_fetch_fails(tmp_path: Path, crawler_daemon,
                                                                    wait_until) -> None:
    """Its only seed refused (loopback without allow_private): /healthz says degraded and why,
    /metrics counts the error by kind with its reason, and so does the stats line."""
    with LocalSites(_site()) as site:
        cfg = {"seeds": [site.url("h0", "/")], "out_dir": str(tmp_path / "out"), "daemon": True,
               "idle_exit_seconds": 0, "progress_seconds": 0.5, "metrics_port": 0}
        (tmp_path / "crawl.yaml").write_text(yaml.safe_dump(cfg))
        log = tmp_path / "log.txt"
        with crawler_daemon(tmp_path / "crawl.yaml", log) as proc:
            info = json.loads(endpoint_file(tmp_path / "out").read_text())
            url = f"http://{info['host']}:{info['port']}"

            def health() -> dict:
                with urllib.request.urlopen(url + "/healthz", timeout=10) as r:
                    return json.loads(r.read())

            wait_until(lambda: health()["status"] == "degraded", 60, "health to say degraded")
            body = health()
            assert "private_address" in body["reason"] and "allow_private" in body["reason"], body
            m = _metrics(url)
            assert m["afm_crawler_errors_total{kind=private_address}"] == 1
            assert m["afm_crawler_degraded"] == 1
            status = CliRunner().invoke(main, ["crawler", "status", "--url", url])
            assert status.exit_code == 1 and "degraded" in status.output and "private_address" in status.output
            wait_until(lambda: "DEGRADED" in log.read_text(), 30, "the stats line to say degraded")
            line = next(x for x in log.read_text().splitlines() if "DEGRADED" in x)
            assert "private_address 1: refused" in line
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
