"""Refuse private, loopback, link-local and cloud-metadata addresses at connect time.

A crawler that follows links from the open web must not be turned against the network
it runs in (SSRF). The check is on the address actually connected to: our resolver
refuses a name whose lookup yields a forbidden address, and Scrapy's HTTP handler
connects to the single address the resolver returned, so a name cannot resolve to a
public address for the check and a private one for the connection (DNS rebinding).
IP-literal URLs never reach a resolver, so a downloader middleware checks those.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.resolver import CachingThreadedResolver
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.error import DNSLookupError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

# Addresses that are public by the ipaddress module's rules but still internal.
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("100.100.100.200"),
             ipaddress.ip_address("fd00:ec2::254")}


class PrivateAddressRefused(IgnoreRequest):
    """The URL's host is (or resolves to) an address we must not connect to."""


def forbidden_reason(address: str) -> str | None:
    """Why connecting to ``address`` is refused, or None if it is a public address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in _METADATA:
        return "metadata"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_private or ip.is_reserved or ip.is_unspecified or ip.is_multicast:
        return "private"
    if isinstance(ip, ipaddress.IPv4Address) and ip in ipaddress.ip_network("100.64.0.0/10"):
        return "private"  # carrier-grade NAT
    return None


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
        host = (urlparse_cached(request).hostname or "").strip("[]")
        reason = forbidden_reason(host)
        if reason:
            raise PrivateAddressRefused(f"refused {reason} address {host} (private address)")
        if host in ("localhost",) or host.endswith(".localhost"):
            raise PrivateAddressRefused(f"refused loopback name {host} (private address)")
        return None
