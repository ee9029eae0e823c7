"""Refuse private, loopback, link-local and cloud-metadata addresses at connect time.

A crawler that follows links from the open web must not be turned against the network
it runs in (SSRF). The check is on the address actually connected to: our resolver
refuses a name whose lookup yields a forbidden address, and Scrapy's HTTP handler
connects to the single address the resolver returned, so a name cannot resolve to a
public address for the check and a private one for the connection (DNS rebinding).
IP-literal URLs never reach a resolver, so a downloader middleware checks those. The rules
(which addresses, which names) are :mod:`afm.crawler.rules.addresses`, the batch fetcher's too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.resolver import CachingThreadedResolver
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.error import DNSLookupError

from afm.crawler.rules.addresses import forbidden_reason, refused_host

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

class PrivateAddressRefused(IgnoreRequest):
    """The URL's host is (or resolves to) an address we must not connect to."""


class GuardedResolver(CachingThreadedResolver):
    """Scrapy's resolver, failing lookups that yield a forbidden address."""

    allow_private = False

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> GuardedResolver:
        resolver = super().from_crawler(crawler, reactor)
        resolver.allow_private = crawler.settings.getbool("AFM_ALLOW_PRIVATE")
        return resolver

    def getHostByName(self, name: str, timeout: Any = ()) -> Any:  # noqa: N802 - Twisted API
        d = super().getHostByName(name, timeout)
        if not self.allow_private:
            d.addCallback(self._check, name)
        return d

    @staticmethod
    def _check(address: str, name: str) -> str:
        reason = forbidden_reason(address)
        if reason:
            raise DNSLookupError(f"refused {reason} address {address} for {name} (private address)")
        return address


class PrivateAddressMiddleware:
    """Refuse IP-literal URLs with forbidden addresses (names are checked by the resolver)."""

    def __init__(self, allow_private: bool) -> None:
        self.allow_private = allow_private

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrivateAddressMiddleware:
        return cls(crawler.settings.getbool("AFM_ALLOW_PRIVATE"))

    def process_request(self, request: Any) -> None:
        if self.allow_private:
            return None
        refusal = refused_host(urlparse_cached(request).hostname or "")
        if refusal:
            raise PrivateAddressRefused(refusal)
        return None
