"""A local multi-host web site for tests, the demo and benchmarks.

Each logical host is served on its own loopback address (``127.0.0.10``, ``.11``, ...,
then ``127.0.1.1`` ...: :func:`loopback_address`) on one shared free port, so a crawler sees distinct hosts (distinct robots.txt files,
distinct politeness slots) without DNS. Every request served is logged server-side
(:attr:`LocalSites.requests`): tests prove what a crawler did *not* fetch from that log,
not from the crawler's own account.

Example::

    sites = {
        "shop": {"/": Page('<a href="{{host:blog}}/post">blog</a>'),
                 "/robots.txt": Page("User-agent: *\\nDisallow: /private"),
                 "/calendar/*": lambda path, headers: Page(f"<a href='{path}/next'>x</a>")},
        "blog": {"/post": Page("hello")},
    }
    with LocalSites(sites) as site:
        site.url("shop", "/")        # http://127.0.0.10:PORT/

Keys of a host's mapping are paths (with the query when one is given); a key ending in
``*`` matches every path with that prefix (longest prefix wins). A value is a
:class:`Page` or a callable ``(request_path, request_headers) -> Page``. A host's mapping
may be any ``Mapping`` (a generated site need not build every page up front). Unknown
paths get 404.

A page's ``headers`` is a dict, or a list of ``(name, value)`` pairs to send a field as
several field lines (``[("X-Robots-Tag", "noai"), ("X-Robots-Tag", "noarchive")]``); a
value holding ``"\r\n "`` goes out as an obsolete line fold (RFC 9112 5.2), as old
proxies send them.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FIRST_OCTET = 10  # hosts are 127.0.0.10, 127.0.0.11, ... then 127.0.1.1, 127.0.1.2, ...
PER_BLOCK = 250  # hosts per 127.0.N.0/24 beyond the first (.1 to .250)
MAX_HOSTS = (255 - FIRST_OCTET) + 254 * PER_BLOCK


def loopback_address(i: int) -> str:
    """The ``i``-th host's address: all of 127.0.0.0/8 is loopback on Linux, so a web of
    hundreds of hosts needs no DNS (scale tests: 500 hosts and more)."""
    first = 255 - FIRST_OCTET
    if i < first:
        return f"127.0.0.{FIRST_OCTET + i}"
    block, k = divmod(i - first, PER_BLOCK)
    return f"127.0.{1 + block}.{1 + k}"
_PLACEHOLDER = "{{host:"


@dataclass
class Page:
    """One response: body, status, headers (a dict, or pairs for repeated field lines;
    Content-Type defaults to UTF-8 HTML), delay."""

    body: bytes | str
    status: int = 200
    headers: dict[str, str] | list[tuple[str, str]] | None = None
    delay: float = 0.0


PageSource = Page | Callable[[str, dict], Page]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], owner: LocalSites, host: str) -> None:
        self.owner = owner
        self.logical_host = host
        super().__init__(addr, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers and crawlers use
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        return  # quiet: the owner keeps its own log

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self._serve(send_body=False)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._serve(send_body=True)

    def _serve(self, send_body: bool) -> None:
        owner, host = self.server.owner, self.server.logical_host
        owner._log(host, self.path)
        page = owner._resolve(host, self.path, dict(self.headers.items()))
        if page.delay > 0:
            time.sleep(page.delay)
        given = page.headers or {}
        headers = list(given.items()) if isinstance(given, dict) else list(given)
        body = page.body
        if isinstance(body, str):
            body = owner.rewrite(body).encode("utf-8")
        elif _PLACEHOLDER.encode() in body and not _has(headers, "content-encoding"):
            body = owner.rewrite(body.decode("utf-8", errors="surrogateescape")).encode(
                "utf-8", errors="surrogateescape"
            )
        if not _has(headers, "content-type"):
            headers.append(("Content-Type", "text/html; charset=utf-8"))
        if not _has(headers, "content-length"):
            headers.append(("Content-Length", str(len(body))))
        try:
            self.send_response(page.status)
            for key, value in headers:
                self.send_header(key, value)
            self.end_headers()
            if send_body:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (size cap, timeout): fine


def _has(headers: list[tuple[str, str]], name: str) -> bool:
    return any(k.lower() == name for k, _ in headers)


class LocalSites:
    """Serve ``sites`` (host name -> path -> page) on loopback, one address per host."""

    def __init__(self, sites: dict[str, Mapping[str, PageSource]]) -> None:
        if not sites:
            raise ValueError("LocalSites needs at least one host")
        if len(sites) > MAX_HOSTS:
            raise ValueError(f"at most {MAX_HOSTS:,} hosts fit on the loopback addresses used")
        self.sites = sites
        self._ips = {host: loopback_address(i) for i, host in enumerate(sites)}
        self._prefixes = {
            host: sorted((k[:-1] for k in pages if isinstance(k, str) and k.endswith("*")), key=len, reverse=True)
            for host, pages in sites.items()
        }
        self._servers: list[_Server] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._requests: list[tuple[str, str, float]] = []
        self.port = 0

    # ---- public API ---------------------------------------------------------------------
    def base_url(self, host: str) -> str:
        if host not in self._ips:
            raise KeyError(f"unknown host {host!r}; known: {sorted(self._ips)}")
        return f"http://{self._ips[host]}:{self.port}"

    def url(self, host: str, path: str = "/") -> str:
        return self.base_url(host) + (path if path.startswith("/") else "/" + path)

    def host_of(self, ip: str) -> str | None:
        """The logical host served on ``ip`` (``127.0.0.N``), if any."""
        for host, addr in self._ips.items():
            if addr == ip:
                return host
        return None

    @property
    def requests(self) -> list[tuple[str, str, float]]:
        """Snapshot of every request served: ``(host, path, unix time)``, in order."""
        with self._lock:
            return list(self._requests)

    def rewrite(self, text: str) -> str:
        """Replace ``{{host:NAME}}`` with that host's base URL."""
        if _PLACEHOLDER not in text:
            return text
        for host in self._ips:
            text = text.replace(_PLACEHOLDER + host + "}}", self.base_url(host))
        return text

    # ---- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> LocalSites:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        last_error: OSError | None = None
        for _attempt in range(20):
            try:
                self._bind_all()
                break
            except OSError as exc:  # port taken on one of the addresses: try another
                last_error = exc
                self._close_servers()
        else:
            raise RuntimeError(f"could not bind the local sites: {last_error}")
        for server in self._servers:
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
        self._close_servers()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()

    # ---- internals ------------------------------------------------------------------------
    def _bind_all(self) -> None:
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
            probe.bind((self._ips[next(iter(self.sites))], 0))
            port = probe.getsockname()[1]
        self.port = port
        for host, ip in self._ips.items():
            self._servers.append(_Server((ip, port), self, host))

    def _close_servers(self) -> None:
        for server in self._servers:
            server.server_close()
        self._servers.clear()

    def _log(self, host: str, path: str) -> None:
        with self._lock:
            self._requests.append((host, path, time.time()))

    def _resolve(self, host: str, path: str, headers: dict) -> Page:
        pages = self.sites[host]
        source = pages.get(path)
        if source is None and "?" in path:
            source = pages.get(path.split("?", 1)[0])
        if source is None:
            for prefix in self._prefixes[host]:
                if path.startswith(prefix):
                    source = pages.get(prefix + "*")
                    break
        if source is None:
            return Page("not found", status=404, headers={"Content-Type": "text/plain"})
        if callable(source) and not isinstance(source, Page):
            try:
                return source(path, headers)
            except Exception as exc:  # noqa: BLE001 - a broken page is a 500, as on the web
                return Page(f"server error: {exc}", status=500, headers={"Content-Type": "text/plain"})
        return source
