"""The batch fetcher's HTTP client: aiohttp (asyncio's standard HTTP client), with
the crawler's safety rules (:mod:`afm.crawler.rules`) applied to every request.

* **private addresses**: the resolver refuses a name whose lookup yields a private,
  loopback, link-local or metadata address, and aiohttp connects to the addresses that
  resolver returned, so a name cannot pass the check and then connect elsewhere (DNS
  rebinding); IP literals and ``localhost`` names are refused before any lookup;
* **size**: a declared ``Content-Length`` over the cap is refused at the headers, a body
  growing past it while read is cut off (``refused_oversize``); a content type outside the
  allow-list is refused at the headers (``refused_content_type``);
* **decompression**: bodies are decoded here (gzip, deflate, and br where brotli is
  installed), each capped at :func:`~afm.crawler.rules.responses.decompression_cap` of
  its wire size (``refused_decompression_bomb``); the decoded encodings are dropped from
  the stored headers, as Scrapy drops them;
* **no redirect is followed here**: the fetcher follows them, each hop through its host's
  robots.txt and pacing (:mod:`afm.crawler.batch.fetcher`);
* **pacing from the wire**: when a request's headers have been written, its pacers count
  their spacing from then (:func:`~afm.crawler.batch.pacing.request_sent`).

Every failure is a :class:`FetchError` named as the crawler names its outcomes
(:mod:`afm.crawler.rules.outcomes`), marked transient when a retry may help.
"""

from __future__ import annotations

import asyncio
import socket
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver
from aiohttp.resolver import ThreadedResolver

from afm.crawler.batch.config import FetchConfig
from afm.crawler.batch.pacing import request_sent
from afm.crawler.rules import outcomes
from afm.crawler.rules.addresses import forbidden_reason, refused_host
from afm.crawler.rules.responses import decompression_cap, header_refusal

try:  # Scrapy's own dependency; decoded only where installed (and only then asked for)
    import brotli
except ImportError:  # pragma: no cover - a host without brotli asks for gzip / deflate only
    brotli = None

ENCODINGS = ("gzip", "deflate", "br") if brotli is not None else ("gzip", "deflate")
# The request headers Scrapy sends by default (DEFAULT_REQUEST_HEADERS), so a publisher's
# server sees one crawler, whichever fetcher ran.
REQUEST_HEADERS = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Language": "en",
    "Accept-Encoding": ", ".join(ENCODINGS),
}
_CHUNK = 1 << 16


class FetchError(Exception):
    """A request that produced no usable response: ``kind`` is its outcome name."""

    def __init__(self, kind: str, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.kind, self.transient = kind, transient


class PrivateAddressError(OSError):
    """A name resolved to an address we must not connect to."""


class GuardedResolver(AbstractResolver):
    """aiohttp's threaded resolver, refusing names that resolve to forbidden addresses."""

    def __init__(self, allow_private: bool) -> None:
        self.inner = ThreadedResolver()
        self.allow_private = allow_private

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        found = await self.inner.resolve(host, port, family)
        if not self.allow_private:
            for entry in found:
                reason = forbidden_reason(entry["host"])
                if reason:
                    raise PrivateAddressError(
                        f"refused {reason} address {entry['host']} for {host} (private address)")
        return found

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class Fetched:
    """One HTTP response: status, header field lines, decoded body, what was sent."""

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    request_headers: list[tuple[str, str]]
    wire_bytes: int = 0


async def _headers_sent(_session: object, _ctx: object, _params: object) -> None:
    request_sent()


def _sent_trace() -> aiohttp.TraceConfig:
    """Tells the pacers when a request really left (:func:`~afm.crawler.batch.pacing.request_sent`)."""
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_headers_sent)
    return trace


class HttpClient:
    """One aiohttp session for a worker (see the module docstring). Create it inside the
    event loop that uses it; :meth:`close` when done."""

    def __init__(self, cfg: FetchConfig) -> None:
        self.cfg = cfg
        self.allowed = frozenset(t.lower() for t in cfg.content_types)
        self.user_agent = cfg.header_user_agent()
        connector = aiohttp.TCPConnector(limit=cfg.concurrent_requests, limit_per_host=0,
                                         resolver=GuardedResolver(cfg.allow_private),
                                         ttl_dns_cache=300, ssl=True)
        # Requests wait here, not in the connector's pool: the timeouts below then count
        # from when a connection is free, as Scrapy's download timeout counts from when
        # its downloader takes the request (a worker busy with others is not a slow host).
        self.slots = asyncio.Semaphore(cfg.concurrent_requests)
        self.session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
            headers={"User-Agent": self.user_agent, **REQUEST_HEADERS},
            timeout=aiohttp.ClientTimeout(total=cfg.download_timeout, connect=cfg.dns_timeout),
            skip_auto_headers=("Accept-Encoding",), trace_configs=[_sent_trace()])

    async def close(self) -> None:
        await self.session.close()

    def request_headers(self) -> list[tuple[str, str]]:
        return [("User-Agent", self.user_agent), *REQUEST_HEADERS.items()]

    async def get(self, url: str, *, control: bool = False) -> Fetched:
        """GET ``url`` once (no redirects followed). ``control``: a robots.txt or
        tdmrep.json fetch (no content-type rule, as the crawler's)."""
        if not self.cfg.allow_private:
            refusal = refused_host(urlsplit(url).hostname or "")
            if refusal:
                raise FetchError(outcomes.PRIVATE_ADDRESS, refusal)
        try:
            async with self.slots, self.session.get(url, allow_redirects=False) as resp:
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
                if not control:
                    refusal = header_refusal(resp.headers.get("Content-Type"), resp.content_length,
                                             self.allowed, self.cfg.max_response_bytes)
                    if refusal:
                        raise FetchError(outcomes.refused(refusal), refusal)
                wire = await self._read(resp)
                status = resp.status
        except FetchError:
            raise
        except aiohttp.ConnectionTimeoutError as exc:  # before TimeoutError, its base
            raise FetchError(outcomes.TIMEOUT, f"no connection within {self.cfg.dns_timeout} s",
                             transient=True) from exc
        except TimeoutError as exc:
            raise FetchError(outcomes.TIMEOUT, f"timed out after {self.cfg.download_timeout} s",
                             transient=True) from exc
        except aiohttp.ClientConnectorDNSError as exc:
            if "private address" in str(exc):
                raise FetchError(outcomes.PRIVATE_ADDRESS, str(exc.os_error)) from exc
            raise FetchError(outcomes.DNS_ERROR, str(exc), transient=True) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise FetchError(outcomes.ERROR_PREFIX + type(exc).__name__, str(exc)[:300],
                             transient=True) from exc
        body, headers = self._decode(wire, headers)
        return Fetched(url, status, headers, body, self.request_headers(), len(wire))

    async def _read(self, resp: aiohttp.ClientResponse) -> bytes:
        cap = self.cfg.max_response_bytes
        parts, size = [], 0
        async for chunk in resp.content.iter_chunked(_CHUNK):
            size += len(chunk)
            if cap and size > cap:
                raise FetchError(outcomes.refused("oversize"),
                                 f"body larger than the max size ({cap} bytes)")
            parts.append(chunk)
        return b"".join(parts)

    def _decode(self, wire: bytes, headers: list[tuple[str, str]]
                ) -> tuple[bytes, list[tuple[str, str]]]:
        """The body with its content encodings undone (capped), and the headers without
        the encodings that were undone."""
        codings = [c.strip().lower() for k, v in headers if k.lower() == "content-encoding"
                   for c in v.split(",") if c.strip()]
        if not codings or not wire:
            return wire, headers
        cap = decompression_cap(len(wire), self.cfg.max_compression_ratio, self.cfg.max_response_bytes)
        body = wire
        for coding in reversed(codings):
            if coding in ("identity", ""):
                continue
            if coding not in ("gzip", "x-gzip", "deflate", "br") or (coding == "br" and brotli is None):
                return wire, headers  # unknown coding: stored as sent, as Scrapy does
            body = _decompress(body, coding, cap)
        return body, [(k, v) for k, v in headers if k.lower() != "content-encoding"]


def _decompress(data: bytes, coding: str, cap: int) -> bytes:
    """``data`` decoded, refusing output past ``cap`` bytes (a decompression bomb)."""
    bomb = FetchError(outcomes.refused("decompression_bomb"),
                      f"decompressed body larger than {cap} bytes (decompression bomb)")
    try:
        if coding == "br":
            out = brotli.Decompressor().process(data, output_buffer_limit=cap + 1)
            if len(out) > cap:
                raise bomb
            return out
        wbits = 16 + zlib.MAX_WBITS if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        out, rest = bytearray(), data
        while rest:
            try:
                d = zlib.decompressobj(wbits)
                out += d.decompress(rest, cap + 1 - len(out))
            except zlib.error:
                if coding == "deflate" and wbits > 0 and not out:
                    wbits, rest = -zlib.MAX_WBITS, data  # raw deflate, as some servers send
                    continue
                raise
            if len(out) > cap or d.unconsumed_tail:
                raise bomb
            rest = d.unused_data  # the next gzip member
            if not d.eof:
                break
        return bytes(out)
    except FetchError:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken encoding: the page is unusable
        raise FetchError(outcomes.ERROR_PREFIX + "decoding", f"{coding}: {exc}") from exc


__all__ = ["ENCODINGS", "FetchError", "Fetched", "GuardedResolver", "HttpClient",
           "PrivateAddressError", "REQUEST_HEADERS"]
