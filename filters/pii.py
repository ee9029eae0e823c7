"""Personal data: detect, replace with typed placeholders, drop documents made of it.

Detectors favour precision: every candidate found by a regular expression must also pass
a validity check before it is replaced, so version numbers, dates, ISBNs, prices and
documentation addresses survive.

=========  ==============================================================  =============
kind       how a match is confirmed                                       placeholder
=========  ==============================================================  =============
email      RFC-ish address; documentation/reserved domains (example.com,   ``<EMAIL>``
           ``.test``, ``.invalid``, localhost) and file names kept
phone      ``phonenumbers`` validity (numbering-plan aware), per region    ``<PHONE>``
ip         IPv4/IPv6 that parse and are globally routable (private and     ``<IP>``
           documentation ranges kept); not after "version"/"v"
card       13-19 digits, known issuer prefix, Luhn checksum                ``<CARD>``
iban       country code + length table + ISO 7064 mod-97 checksum          ``<IBAN>``
ssn        US ``AAA-GG-SSSS`` with the SSA's never-issued ranges excluded  ``<SSN>``
address    US street line: number, street name + suffix, city, state, ZIP  ``<ADDRESS>``
=========  ==============================================================  =============

A document whose characters are mostly personal data (a directory, a leaked list) is
dropped with reason ``mostly_pii`` instead of being kept as a page of placeholders.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from afm.filters.base import Decision
from afm.schema import Document

KINDS = ("email", "phone", "ip", "card", "iban", "ssn", "address")
# When two detections overlap, the earlier kind in this order wins.
PRIORITY = {k: i for i, k in enumerate(("email", "iban", "card", "ssn", "address", "ip", "phone"))}

_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]{0,63})@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,24}(?![\w-])"
)
_RESERVED_EMAIL_DOMAINS = ("example.com", "example.org", "example.net", "localhost")
_RESERVED_TLDS = ("example", "test", "invalid", "localhost", "local")
_FILE_TLDS = ("png", "jpg", "jpeg", "gif", "svg", "webp", "js", "css", "ts", "py", "json", "html")

_PHONE_CANDIDATE = re.compile(r"(?<![\w.])\+?\(?\d[\d\s().\-/]{5,22}\d(?![\w.]*\d)")
_IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.]*\d)"
)
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_VERSION_CONTEXT = re.compile(r"(?:\bv|\bver\.?|\bversion|\brelease|\bbuild|\bfirmware)\s*$", re.I)
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")
# Cheap necessary conditions: every match of a detector's pattern contains a match of its
# hint, so a text without the hint cannot hold that kind and the detector is skipped. The
# hints have no lookbehind at their start, so the regex engine scans for their first
# character instead of trying the whole pattern at every position (most documents hold no
# personal data: the detectors' scans were most of this stage's cost).
_HINTS: dict[str, Any] = {
    "email": lambda text: "@" in text,
    "phone": re.compile(r"\d[\d\s().\-/]{5,22}\d").search,
    "card": re.compile(r"(?:\d[ -]?){12}\d").search,
    "iban": re.compile(r"[A-Z]{2}\d{2}").search,
    "ssn": re.compile(r"\d{3}-\d{2}-\d{4}").search,
    "address": re.compile(r"[A-Z]{2}\s+\d{5}").search,
}
_IPV4_HINT = re.compile(r"\d\.\d{1,3}\.\d{1,3}\.\d")
_IPV6_HINT = re.compile(r":[0-9A-Fa-f]{0,4}:")
_STREET_SUFFIX = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|"
    r"Terrace|Ter|Parkway|Pkwy|Highway|Hwy|Circle|Cir|Square|Sq)\.?"
)
_US_STATES = (
    "AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ "
    "NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY DC"
).split()
_ADDRESS = re.compile(
    r"\b\d{1,6}\s+(?:[NSEW]\.?\s+)?(?:[A-Z0-9][A-Za-z0-9'.-]*\s+){1,4}" + _STREET_SUFFIX
    + r"(?:\s+(?:NE|NW|SE|SW|N|S|E|W)\.?)?"
    r"(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|#)\.?\s*[\w-]+)?"
    r",?\s+(?:[A-Z][A-Za-z.'-]+\s+){0,3}[A-Z][A-Za-z.'-]+,?\s+(?:" + "|".join(_US_STATES)
    + r")\s+\d{5}(?:-\d{4})?\b"
)

# ISO 13616 IBAN lengths per country (the common registry; unknown countries rejected).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26,
    "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


@dataclass
class PiiConfig:
    """Which kinds to replace, phone regions, and when a document is "mostly PII"."""

    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    phone_regions: list[str] = field(default_factory=lambda: ["US", "GB"])
    placeholder: str = "<{KIND}>"  # {KIND} -> EMAIL, PHONE, ...; {kind} -> email, ...
    drop_mostly_pii: bool = True
    max_pii_char_ratio: float = 0.25  # share of non-space characters that are PII
    min_items_for_drop: int = 5  # a short note with one address is not a directory
    max_chars: int = 2_000_000  # longer texts are scanned up to here (bounded time)


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str
    value: str


# ---------------------------------------------------------------------------- validators


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) checksum of a digit string."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_prefix_ok(digits: str) -> bool:
    """Issuer prefixes of the major networks (Visa, Mastercard, Amex, Discover, JCB,
    Diners, UnionPay, Maestro) with their lengths; ISBNs and phone runs fail here."""
    n = len(digits)
    two, four = int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if digits.startswith(("6011", "65")) or 644 <= int(digits[:3]) <= 649:
        return 16 <= n <= 19
    if 3528 <= four <= 3589:
        return 16 <= n <= 19
    if two in (36, 38, 39) or 300 <= int(digits[:3]) <= 305:
        return 14 <= n <= 19
    if two == 62:
        return 16 <= n <= 19
    if digits.startswith(("50", "56", "57", "58", "67")):
        return 12 <= n <= 19
    return False


def iban_ok(candidate: str) -> bool:
    """Country length and the ISO 7064 mod-97 checksum of an IBAN."""
    iban = candidate.replace(" ", "").upper()
    if IBAN_LENGTHS.get(iban[:2]) != len(iban):
        return False
    moved = iban[4:] + iban[:4]
    digits = "".join(str(int(ch, 36)) for ch in moved)
    return int(digits) % 97 == 1


def email_is_personal(address: str) -> bool:
    """False for documentation/reserved domains and for asset names like ``logo@2x.png``."""
    domain = address.rsplit("@", 1)[1].lower().rstrip(".")
    tld = domain.rsplit(".", 1)[-1]
    if tld in _RESERVED_TLDS or tld in _FILE_TLDS:
        return False
    return not any(domain == d or domain.endswith("." + d) for d in _RESERVED_EMAIL_DOMAINS)


def ip_is_personal(value: str) -> bool:
    """Globally routable addresses only: private, loopback, link-local, multicast and the
    documentation ranges (192.0.2.0/24, 2001:db8::/32...) are not about a person."""
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return False
    return bool(ip.is_global) and not ip.is_multicast


# ---------------------------------------------------------------------------- detection


class PiiDetector:
    """Finds PII spans in text (no replacement); one instance is reusable and cheap."""

    def __init__(self, kinds: list[str] | tuple[str, ...] = KINDS, phone_regions: list[str] | None = None):
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown PII kinds {sorted(unknown)}; known: {list(KINDS)}")
        self.kinds = tuple(kinds)
        self.phone_regions = list(phone_regions or ["US"])

    def _emails(self, text: str) -> list[Span]:
        return [
            Span(m.start(), m.end(), "email", m.group())
            for m in _EMAIL.finditer(text)
            if email_is_personal(m.group())
        ]

    def _phones(self, text: str) -> list[Span]:
        import phonenumbers
        from phonenumbers import Leniency, PhoneNumberMatcher

        spans: list[Span] = []
        for cand in _PHONE_CANDIDATE.finditer(text):
            digits = sum(ch.isdigit() for ch in cand.group())
            if not 7 <= digits <= 15:
                continue
            chunk = cand.group()
            seen: set[tuple[int, int]] = set()
            for region in self.phone_regions:
                try:
                    matches = list(PhoneNumberMatcher(chunk, region, leniency=Leniency.VALID))
                except phonenumbers.NumberParseException:
                    continue
                for m in matches:
                    key = (cand.start() + m.start, cand.start() + m.end)
                    if key not in seen:
                        seen.add(key)
                        spans.append(Span(key[0], key[1], "phone", m.raw_string))
        return spans

    def _ips(self, text: str) -> list[Span]:
        spans = []
        for pattern, hint in ((_IPV4, _IPV4_HINT), (_IPV6, _IPV6_HINT)):
            if not hint.search(text):
                continue
            for m in pattern.finditer(text):
                value = m.group()
                if pattern is _IPV6 and (value.count(":") < 2 or sum(c.isalnum() for c in value) < 4):
                    continue
                if _VERSION_CONTEXT.search(text[max(0, m.start() - 12) : m.start()]):
                    continue
                if ip_is_personal(value):
                    spans.append(Span(m.start(), m.end(), "ip", value))
        return spans

    def _cards(self, text: str) -> list[Span]:
        spans = []
        for m in _CARD.finditer(text):
            digits = re.sub(r"\D", "", m.group())
            if 13 <= len(digits) <= 19 and card_prefix_ok(digits) and luhn_ok(digits):
                spans.append(Span(m.start(), m.end(), "card", m.group()))
        return spans

    def _ibans(self, text: str) -> list[Span]:
        return [Span(m.start(), m.end(), "iban", m.group()) for m in _IBAN.finditer(text) if iban_ok(m.group())]

    def _ssns(self, text: str) -> list[Span]:
        return [Span(m.start(), m.end(), "ssn", m.group()) for m in _SSN.finditer(text)]

    def _addresses(self, text: str) -> list[Span]:
        return [Span(m.start(), m.end(), "address", m.group()) for m in _ADDRESS.finditer(text)]

    def find(self, text: str) -> list[Span]:
        """Non-overlapping PII spans, in text order."""
        found: list[Span] = []
        detectors = {
            "email": self._emails, "phone": self._phones, "ip": self._ips, "card": self._cards,
            "iban": self._ibans, "ssn": self._ssns, "address": self._addresses,
        }
        for kind in self.kinds:
            hint = _HINTS.get(kind)
            if hint is None or hint(text):
                found.extend(detectors[kind](text))
        # Resolve overlaps: higher-priority kind first, then the longer span.
        found.sort(key=lambda s: (PRIORITY[s.kind], -(s.end - s.start), s.start))
        taken: list[Span] = []
        for span in found:
            if all(span.end <= t.start or span.start >= t.end for t in taken):
                taken.append(span)
        return sorted(taken, key=lambda s: s.start)


def redact(text: str, spans: list[Span], placeholder: str = "<{KIND}>") -> str:
    """Replace each span with its typed placeholder."""
    parts: list[str] = []
    pos = 0
    for span in spans:
        parts.append(text[pos : span.start])
        parts.append(placeholder.format(KIND=span.kind.upper(), kind=span.kind))
        pos = span.end
    parts.append(text[pos:])
    return "".join(parts)


class PiiFilter:
    """Redacts PII with typed placeholders; drops documents that are mostly PII.

    Sets ``pii_redactions`` (count per kind, only kinds found) on the document.
    """

    name = "pii"

    def __init__(self, cfg: PiiConfig | None = None) -> None:
        self.cfg = cfg or PiiConfig()
        self.detector = PiiDetector(self.cfg.kinds, self.cfg.phone_regions)

    def scan(self, text: str) -> tuple[str, dict[str, int], dict[str, float]]:
        """``(redacted_text, counts, signals)`` of one text."""
        head, tail = text[: self.cfg.max_chars], text[self.cfg.max_chars :]
        spans = self.detector.find(head)
        counts: dict[str, int] = {}
        for span in spans:
            counts[span.kind] = counts.get(span.kind, 0) + 1
        pii_chars = sum(len(re.sub(r"\s", "", s.value)) for s in spans)
        total_chars = max(len(re.sub(r"\s", "", text)), 1)
        signals = {"items": float(len(spans)), "char_ratio": pii_chars / total_chars}
        return redact(head, spans, self.cfg.placeholder) + tail, counts, signals

    def __call__(self, doc: Document) -> Decision:
        text = doc.get("text") or ""
        redacted, counts, signals = self.scan(text)
        out: dict[str, Any] = dict(doc)
        out["pii_redactions"] = counts
        out["text"] = redacted
        if (
            self.cfg.drop_mostly_pii
            and signals["items"] >= self.cfg.min_items_for_drop
            and signals["char_ratio"] >= self.cfg.max_pii_char_ratio
        ):
            return Decision(False, "mostly_pii", signals, out,  # type: ignore[arg-type]
                            {"counts": counts, "char_ratio": round(signals["char_ratio"], 4),
                             "threshold": self.cfg.max_pii_char_ratio})
        return Decision(True, None, signals, out)  # type: ignore[arg-type]
