"""The one URL normalisation of consent: which origin a URL belongs to, written one way.

robots.txt and tdmrep.json are per origin (RFC 9309 2.3: scheme, host and port), so the
crawler (which fetches them per origin), the snapshot index (which files them by origin)
and curate's ``optout`` stage (which looks a document's origin up there) must all name an
origin the same way, or a document at ``https://Bücher.example`` misses the snapshot of
``https://xn--bcher-kva.example/robots.txt`` and is trained on.

Host parsing follows the WHATWG URL Standard (section 3.5 "host parsing", for the special
schemes ``http``, ``https``, ``ws``, ``wss``, ``ftp``, ``file``):

* the host is percent-decoded, then *domain to ASCII* (section 3.3) with UTS #46
  (``CheckHyphens=false``, ``UseSTD3ASCIIRules=false``, ``Transitional_Processing=false``,
  ``CheckBidi`` and ``CheckJoiners`` on): upper case is mapped to lower case, ``faß``
  stays ``faß`` (non-transitional: ``xn--fa-hia``, not ``fass``), Unicode labels become
  Punycode (``xn--``); an ASCII host whose labels do not start with ``xn--`` is just
  lower-cased (the standard's own shortcut);
* a host that ends in a number is an IPv4 address (``0x7f.1`` is ``127.0.0.1``), an
  IPv6 address in brackets is written compressed in lower case;
* the port is dropped when it is the scheme's default (``:80`` for http, ``:0443`` is
  443 for https), and userinfo is not part of an origin.

One choice the standard leaves to us: it keeps a trailing dot (``example.com.`` is
another host to a browser), but DNS names the same node with and without it (RFC 1034
section 3.1: the dot only makes the name absolute), and the same server answers both. An
origin here drops one trailing dot, so a document at ``example.com.`` is checked against
the robots.txt of ``example.com``. ``www.example`` and ``example`` stay different hosts
(RFC 9309 2.3: one robots.txt per authority); a snapshot set links them only when one's
robots.txt redirects to the other's.

A URL the standard cannot parse keeps a lower-cased form of its raw authority (so it is
still looked up consistently, and never raises): consent never crashes on a bad URL.
The library ``idna`` supplies the UTS #46 mapping and the IDNA validity checks; the
serialisation rules are the standard's.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import unicodedata
from typing import NamedTuple

import idna
import idna.core

SPECIAL_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21, "file": None}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_PCT = re.compile(rb"%([0-9A-Fa-f]{2})")
# URL Standard 3.1: forbidden host code points, plus C0 controls, % and DEL for domains.
_FORBIDDEN_HOST = set("\x00\t\n\r #/:<>?@[\\]^|")
_FORBIDDEN_DOMAIN = _FORBIDDEN_HOST | {chr(c) for c in range(0x20)} | {"%", "\x7f"}


class Origin(NamedTuple):
    """A URL's scheme, host (serialised as the URL Standard does) and non-default port."""

    scheme: str
    host: str
    port: int | None

    def serialize(self) -> str:
        return f"{self.scheme}://{self.host}" + (f":{self.port}" if self.port is not None else "")


class HostError(ValueError):
    """A host the URL Standard's host parser fails on."""


# ---- the URL Standard's host parser ----------------------------------------------------------


def _ipv4_number(text: str) -> int:
    """URL Standard 3.5 "IPv4 number parser": decimal, ``0x`` hex or ``0`` octal."""
    if not text:
        raise HostError("empty IPv4 part")
    radix = 10
    if text[:2].lower() == "0x":
        text, radix = text[2:], 16
    elif len(text) >= 2 and text[0] == "0":
        text, radix = text[1:], 8
    if not text:
        return 0
    digits = {10: "0123456789", 16: "0123456789abcdefABCDEF", 8: "01234567"}[radix]
    if any(c not in digits for c in text):
        raise HostError(f"not an IPv4 number: {text!r}")
    return int(text, radix)


def _ends_in_a_number(host: str) -> bool:
    parts = host.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    if last and all(c in "0123456789" for c in last):
        return True
    try:
        _ipv4_number(last)
    except HostError:
        return False
    return True


def _ipv4(host: str) -> str:
    """URL Standard 3.5 "IPv4 parser", serialised dotted-decimal."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise HostError("more than four IPv4 parts")
    numbers = [_ipv4_number(p) for p in parts]
    if any(n > 255 for n in numbers[:-1]):
        raise HostError("IPv4 part over 255")
    if numbers[-1] >= 256 ** (5 - len(numbers)):
        raise HostError("IPv4 address out of range")
    address = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        address += n * 256 ** (3 - i)
    return ".".join(str((address >> shift) & 255) for shift in (24, 16, 8, 0))


def _ipv6(text: str) -> str:
    """URL Standard 3.5 "IPv6 parser" and 3.6 serializer (longest run of two or more
    zero pieces compressed, the first on a tie; lower-case hex; no dotted IPv4 form)."""
    if any(c in text for c in "%/") or not text:
        raise HostError(f"not an IPv6 address: {text!r}")
    try:
        packed = ipaddress.IPv6Address(text).packed
    except ValueError as exc:
        raise HostError(str(exc)) from exc
    pieces = [int.from_bytes(packed[i:i + 2], "big") for i in range(0, 16, 2)]
    best_start, best_len, i = -1, 1, 0
    while i < 8:
        if pieces[i] == 0:
            j = i
            while j < 8 and pieces[j] == 0:
                j += 1
            if j - i > best_len:
                best_start, best_len = i, j - i
            i = j
        else:
            i += 1
    out, i = "", 0
    while i < 8:
        if i == best_start:
            out += "::" if i == 0 else ":"
            i += best_len
            continue
        out += f"{pieces[i]:x}" + (":" if i < 7 else "")
        i += 1
    return f"[{out}]"


def _label_to_ascii(label: str) -> str:
    """UTS #46 section 4.1 validity (non-transitional, hyphens and STD3 not checked) and
    Punycode for one mapped label."""
    if label.startswith("xn--"):
        try:
            decoded = label[4:].encode("ascii").decode("punycode")
        except (UnicodeError, ValueError) as exc:
            raise HostError(f"invalid Punycode label {label!r}") from exc
        if not decoded or decoded.isascii() or unicodedata.normalize("NFC", decoded) != decoded:
            raise HostError(f"invalid Punycode label {label!r}")
        try:  # the decoded label must be unchanged by the mapping (UTS #46 4.1 step 4)
            if idna.uts46_remap(decoded, std3_rules=False, transitional=False) != decoded:
                raise HostError(f"Punycode label {label!r} is not in mapped form")
        except idna.IDNAError as exc:
            raise HostError(str(exc)) from exc
        _check_label(decoded)
        return label
    if label.isascii():
        return label
    _check_label(label)
    return "xn--" + label.encode("punycode").decode("ascii")


def _check_label(label: str) -> None:
    try:
        idna.core.check_initial_combiner(label)
        for pos, ch in enumerate(label):  # CheckJoiners: ZWNJ / ZWJ only in their contexts
            if ch in "\u200c\u200d" and not idna.core.valid_contextj(label, pos):
                raise HostError(f"joiner out of context in {label!r}")
        if any(unicodedata.bidirectional(c) in ("R", "AL", "AN") for c in label):
            idna.core.check_bidi(label)  # CheckBidi: RFC 5893 for a bidi label
    except idna.IDNAError as exc:
        raise HostError(str(exc)) from exc


def domain_to_ascii(domain: str) -> str:
    """URL Standard 3.3 "domain to ASCII" with ``beStrict`` false."""
    labels = domain.split(".")
    if domain.isascii() and not any(lab[:4].lower() == "xn--" for lab in labels):
        result = domain.lower()  # the standard's shortcut for plain ASCII hosts
    else:
        try:
            mapped = idna.uts46_remap(domain, std3_rules=False, transitional=False)
        except idna.IDNAError as exc:
            raise HostError(str(exc)) from exc
        result = ".".join(_label_to_ascii(lab) for lab in mapped.split("."))
    if not result:
        raise HostError("empty host")
    return result


@functools.lru_cache(maxsize=65536)
def parse_host(text: str, special: bool = True) -> str:
    """URL Standard 3.5 "host parser": the host serialised, or :class:`HostError`."""
    if text.startswith("["):
        if not text.endswith("]"):
            raise HostError(f"unclosed IPv6 address {text!r}")
        return _ipv6(text[1:-1])
    if not special:  # an opaque host: kept as written (lower-cased for lookups)
        return text.lower()
    raw = _PCT.sub(lambda m: bytes([int(m.group(1), 16)]), text.encode("utf-8"))
    domain = raw.decode("utf-8", errors="replace")
    ascii_domain = domain_to_ascii(domain)
    if any(c in _FORBIDDEN_DOMAIN for c in ascii_domain):
        raise HostError(f"forbidden code point in host {ascii_domain!r}")
    if _ends_in_a_number(ascii_domain):
        return _ipv4(ascii_domain)
    return ascii_domain


# ---- URLs --------------------------------------------------------------------------------------


def _split(url: str) -> tuple[str, str, str] | None:
    """``(scheme, authority, rest)`` as the URL Standard's parser reads a URL with a
    special scheme (leading / trailing C0 and spaces, tabs and newlines removed; any run
    of ``/`` and ``\\`` before the authority); None when it has no such scheme."""
    url = _TAB_NEWLINE.sub("", url.strip("\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r"
                                         "\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19"
                                         "\x1a\x1b\x1c\x1d\x1e\x1f "))
    match = _SCHEME.match(url)
    if not match:
        return None
    scheme = match.group(1).lower()
    rest = url[match.end():]
    special = scheme in SPECIAL_PORTS
    if special:
        rest = rest.lstrip("/\\")
    elif rest.startswith("//"):
        rest = rest[2:]
    else:
        return scheme, "", rest
    ends = [p for p in (rest.find(c) for c in ("/\\?#" if special else "/?#")) if p != -1]
    end = min(ends) if ends else len(rest)
    return scheme, rest[:end], rest[end:]


def parse_origin(url: str) -> Origin:
    """The origin of ``url`` per the URL Standard (host parsing in the module docstring;
    a trailing dot dropped); :class:`HostError` when it has none."""
    parts = _split(url)
    if parts is None:
        raise HostError(f"no scheme in {url[:80]!r}")
    scheme, authority, _rest = parts
    hostport = authority.rsplit("@", 1)[-1]
    if hostport.startswith("["):
        close = hostport.find("]")
        host, after = hostport[:close + 1], hostport[close + 1:]
        if close == -1 or (after and not after.startswith(":")):
            raise HostError(f"bad IPv6 authority {authority!r}")
        port_text = after[1:] if after else None
    else:
        host, sep, port_text = hostport.partition(":")
        port_text = port_text if sep else None
    if not host:
        raise HostError(f"no host in {url[:80]!r}")
    serialized = parse_host(host, scheme in SPECIAL_PORTS)
    port: int | None = None
    if port_text:
        if not port_text.isdigit() or not port_text.isascii():
            raise HostError(f"bad port {port_text!r}")
        port = int(port_text)
        if port > 65535:
            raise HostError(f"port {port} out of range")
        if port == SPECIAL_PORTS.get(scheme):
            port = None
    if serialized.endswith(".") and len(serialized) > 1 and not serialized.startswith("["):
        serialized = serialized[:-1]
    return Origin(scheme, serialized, port)


@functools.lru_cache(maxsize=65536)
def origin_of(url: str) -> str:
    """``scheme://host[:port]``, the unit robots.txt and tdmrep.json apply to, normalised
    as the module docstring says. A URL without a parsable host keeps a lower-cased form
    of its raw scheme and authority (never raises)."""
    try:
        return parse_origin(url).serialize()
    except HostError:
        parts = _split(url)
        if parts is None:
            return url.strip().lower()
        scheme, authority, _ = parts
        return f"{scheme}://{authority.rsplit('@', 1)[-1].lower()}"


def hostname_of(url: str) -> str:
    """The normalised host of a URL or an origin (no scheme, no port)."""
    try:
        return parse_origin(url).host
    except HostError:
        return origin_of(url).split("://", 1)[-1]


def normalize_host(name: str) -> str:
    """A bare host name (a domain list's entry) as an origin writes it: ``Bücher.Example.``
    is ``xn--bcher-kva.example``; one that cannot be parsed is lower-cased."""
    name = name.strip()
    try:
        host = parse_host(name)
    except HostError:
        return name.lower().rstrip(".")
    return host[:-1] if host.endswith(".") and len(host) > 1 else host


def path_and_query(url: str) -> str:
    """The path (``/`` when empty) and query of ``url`` as given, the fragment dropped."""
    parts = _split(url)
    rest = parts[2] if parts is not None else ""
    rest = rest.split("#", 1)[0]
    if parts is not None and parts[0] in SPECIAL_PORTS:
        path, sep, query = rest.partition("?")
        rest = path.replace("\\", "/") + sep + query
    if not rest.startswith("/"):
        rest = "/" + rest
    return rest


def url_key(url: str) -> str:
    """A URL as a capture is filed and looked up: its origin (:func:`origin_of`), then
    its path and query as given (the fragment dropped)."""
    return origin_of(url) + path_and_query(url)


def with_normalized_host(url: str) -> str:
    """``url`` with its authority written as the URL Standard writes it (host parsed,
    default port dropped, userinfo kept) - what the crawler requests; unchanged when its
    host cannot be parsed."""
    parts = _split(url)
    if parts is None:
        return url
    scheme, authority, rest = parts
    userinfo, at, _hostport = authority.rpartition("@")
    try:
        origin = parse_origin(url)
    except HostError:
        return url
    # the request keeps a trailing dot the standard keeps (origin_of drops it)
    host = origin.host
    raw_host = _hostport.partition(":")[0]
    if raw_host.endswith(".") and not host.startswith("[") and not _ends_in_a_number(host):
        host += "."
    port = f":{origin.port}" if origin.port is not None else ""
    return f"{scheme}://{userinfo}{at}{host}{port}{rest}"


__all__ = ["SPECIAL_PORTS", "HostError", "Origin", "domain_to_ascii", "hostname_of",
           "normalize_host", "origin_of", "parse_host", "parse_origin", "path_and_query",
           "url_key", "with_normalized_host"]
