"""Which addresses a crawler may connect to: private, loopback, link-local and
cloud-metadata addresses are refused (SSRF), unless a test site asks for them.

The check belongs on the address actually connected to (after DNS), so each fetcher
calls :func:`forbidden_reason` from its resolver (Scrapy's ``GuardedResolver``, the batch
fetcher's aiohttp resolver) and :func:`refused_host` for a URL's host before any lookup
(IP literals and ``localhost`` names never reach a resolver)."""

from __future__ import annotations

import ipaddress

# Addresses that are public by the ipaddress module's rules but still internal.
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("169.254.169.254"),
                                ipaddress.ip_address("100.100.100.200"),
                                ipaddress.ip_address("fd00:ec2::254")})
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def forbidden_reason(address: str) -> str | None:
    """Why connecting to ``address`` is refused, or None if it is a public address (or no
    address at all: names are checked once resolved)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return "metadata"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_private or ip.is_reserved or ip.is_unspecified or ip.is_multicast:
        return "private"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "private"  # carrier-grade NAT
    return None


def refused_host(host: str) -> str | None:
    """The refusal message for a URL's host that needs no lookup to be refused (a
    forbidden IP literal, ``localhost``), else None. The message ends in ``(private
    address)``, the marker both fetchers classify by."""
    host = (host or "").strip("[]").lower()
    reason = forbidden_reason(host)
    if reason:
        return f"refused {reason} address {host} (private address)"
    if host == "localhost" or host.endswith(".localhost"):
        return f"refused loopback name {host} (private address)"
    return None


__all__ = ["METADATA_ADDRESSES", "forbidden_reason", "refused_host"]
