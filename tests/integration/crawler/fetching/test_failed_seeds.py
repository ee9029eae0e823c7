"""Seeds that fail are tried again after a backoff, recorded with their reason, and fetched
by the next run once the reason is fixed (refused for a setting, the site down, a 503);
the server's own log is the witness."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from contextlib import contextmanager
from pathlib import Path

from afm.crawler.api import crawl
from afm.crawler.storage.warc import read_index
from afm.crawler.testsite import LocalSites, Page

FAST = {"progress_seconds": 0, "retry_backoff_seconds": 0.2, "download_timeout": 5}


def _outcomes(out: Path) -> list[dict]:
    path = out / "state" / "outcomes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _stored(out: Path) -> set[str]:
    return {r["request_url"] for r in read_index(out)}


def test_a_seed_refused_for_a_setting_is_fetched_once_the_setting_allows_it(tmp_path, capfd):
    with LocalSites({"h": {"/": Page("hello"), "/robots.txt": Page("", status=404)}}) as site:
        seed = site.url("h", "/")
        first = crawl([seed], tmp_path, max_pages=5, config=FAST, show_output=True)
        assert site.requests == [] and first["pages"] == 0
        assert first["outcomes"] == {"private_address": 1}
        said = [line for line in capfd.readouterr().err.splitlines() if "not fetched" in line]
        assert said and seed in said[0] and "allow_private" in said[0]  # in the log as it happens
        [row] = _outcomes(tmp_path)
        assert row["o"] == "private_address" and "allow_private" in row["m"]  # says what would fix it
        fixed = crawl([seed], tmp_path, max_pages=5, allow_private=True, config=FAST)
        assert fixed["pages"] == 1 and _stored(tmp_path) == {seed}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _site_on(port: int):
    """A one-page site on 127.0.0.1:port, its requests' paths logged."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            seen.append(self.path)
            body = b"<p>up again</p>" if self.path == "/" else b""
            self.send_response(200 if self.path == "/" else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_seed_whose_site_was_down_is_fetched_by_the_next_run(tmp_path):
    port = _free_port()
    seed = f"http://127.0.0.1:{port}/"
    down = crawl([seed], tmp_path, max_pages=5, allow_private=True, config={**FAST, "retry_times": 1})
    assert down["pages"] == 0
    rows = _outcomes(tmp_path)
    assert rows and rows[-1]["u"] == seed and rows[-1].get("t") is True, rows  # transient, with its reason
    assert rows[-1]["m"]
    with _site_on(port) as seen:
        up = crawl([], tmp_path, max_pages=5, allow_private=True, config=FAST)  # a restart, no seed given
        assert up["pages"] == 1 and _stored(tmp_path) == {seed}
        assert seen.count("/") == 1


def test_a_503_is_retried_after_a_backoff_then_recorded_then_fetched_when_seeded_again(tmp_path):
    answers = iter([503, 503, 503, 200])

    def flaky(path: str, headers: dict) -> Page:
        status = next(answers, 200)
        return Page("busy" if status == 503 else "<p>fine</p>", status=status)

    with LocalSites({"h": {"/": flaky, "/robots.txt": Page("", status=404)}}) as site:
        seed = site.url("h", "/")
        first = crawl([seed], tmp_path, max_pages=5, allow_private=True, config={**FAST, "retry_times": 2})
        tries = [t for h, p, t in site.requests if p == "/"]
        assert len(tries) == 3, "the first try and two retries"
        # each retry left at least its backoff (0.2 s, then 0.4 s) after the answer to the try
        # before it, which came after the server saw that try: lower bounds no load can break
        assert tries[1] - tries[0] >= 0.2 and tries[2] - tries[1] >= 0.4, tries
        assert first["pages"] == 0 and first["outcomes"] == {"http_503": 1}
        assert _outcomes(tmp_path)[-1]["m"].startswith("HTTP 503")
        again = crawl([seed], tmp_path, max_pages=5, allow_private=True, config=FAST)
        assert again["pages"] == 1 and _stored(tmp_path) == {seed}
