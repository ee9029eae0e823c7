"""Reading a crawled page's bytes: the charset decision, binary sniffing, and the bound on
the words any extraction can return. The extraction stage (``filters/extract.py``) and the
selector's tables and features (this room) both start here, so it sits at the bottom of the
room and imports nothing else of the project.

Decoding picks the charset from, in order, a byte-order mark, the HTTP ``Content-Type``
header, the page's ``<meta>`` declaration, strict UTF-8, lenient UTF-8 (a few corrupt
bytes), and finally charset-normalizer's detection. A declared charset that fails to decode
is ignored rather than trusted (mislabelled pages are common).
"""

from __future__ import annotations

import codecs
import html as html_lib
import re
from typing import Any

WORD = re.compile(r"\w+")
TAG = re.compile(r"<[^>]+>")
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:\-]+)", re.I)
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([\w.:\-]+)", re.I)
_INVISIBLE_BLOCKS = re.compile(
    r"<(script|style|noscript|template)\b.*?</\1\s*>|<!--.*?-->", re.I | re.S)

_ASCII = bytes(range(128))
BINARY_MAGIC = (
    b"%PDF", b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"PK\x03\x04", b"\x1f\x8b", b"BZh",
    b"\x7fELF", b"RIFF", b"OggS", b"ID3", b"\x00\x00\x01\x00", b"wOFF", b"wOF2",
)


def _normalise_codec(name: str) -> str | None:
    """A Python codec for a declared charset name, or None if unknown."""
    name = name.strip().strip("\"'").lower()
    # WHATWG: pages labelled latin-1/ascii are decoded as windows-1252.
    if name in ("iso-8859-1", "latin1", "latin-1", "us-ascii", "ascii", "iso8859-1"):
        name = "cp1252"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def header_value(headers: Any, key: str) -> str:
    """A header value from a dict or a list of (name, value) pairs (warcio's shape)."""
    try:
        items = list(headers.items()) if hasattr(headers, "items") else list(headers or [])
    except TypeError:
        return ""
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            continue
        k, v = item
        if str(k).lower() == key:
            if isinstance(v, bytes):
                return v.decode("latin-1")
            return str(v)
    return ""


_CONTROL_BYTES = bytes(b for b in range(32) if b < 9 or 13 < b)


def looks_binary(body: bytes) -> bool:
    """True for bodies that are not text: known magic numbers or many NUL/control bytes."""
    head = body[:4096]
    if head.startswith(BINARY_MAGIC):
        return True
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 BOM: text, decoded later
        return False
    if not head:
        return False
    if b"\x00" in head:
        return True
    control = len(head) - len(head.translate(None, _CONTROL_BYTES))  # C speed, not a loop
    return control / len(head) > 0.1


def meta_charset(body: bytes) -> str | None:
    """The charset a page's own ``<meta>`` declares in its first 8 KiB, as written (None: none)."""
    match = _META_CHARSET.search(body[:8192])
    return match.group(1).decode("ascii", "ignore") if match else None


def decode_html(body: bytes, headers: dict[str, Any] | None = None) -> tuple[str, str, str]:
    """Decode a page body; returns ``(text, codec, source)`` where ``source`` says how the
    charset was found (bom/header/meta/utf-8/utf-8-lenient/detected). Raises UnicodeError if nothing works."""
    for bom, codec in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                       (codecs.BOM_UTF16_BE, "utf-16")):
        if body.startswith(bom):
            return body.decode(codec, errors="replace"), codec, "bom"
    candidates: list[tuple[str, str]] = []
    match = _HEADER_CHARSET.search(header_value(headers, "content-type"))
    if match:
        candidates.append((match.group(1), "header"))
    declared = meta_charset(body)
    if declared:
        candidates.append((declared, "meta"))
    candidates.append(("utf-8", "utf-8"))
    for name, source in candidates:
        codec = _normalise_codec(name)
        if codec is None:
            continue
        try:
            return body.decode(codec), codec, source
        except (UnicodeDecodeError, LookupError):
            continue
    # UTF-8 with a few corrupt bytes (truncated downloads, bit rot) stays UTF-8: a detector
    # would pick a single-byte codec and garble every non-ASCII character instead.
    # Single-byte text (cp1252...) fails on nearly every non-ASCII byte; corrupt UTF-8 on few.
    lenient = body.decode("utf-8", errors="replace")
    non_ascii = len(body.translate(None, _ASCII))
    if non_ascii and lenient.count("\ufffd") <= 0.05 * non_ascii:
        return lenient, "utf-8", "utf-8-lenient"
    from charset_normalizer import from_bytes

    best = from_bytes(body[:200_000]).best()
    if best is None or best.encoding is None:
        raise UnicodeError("no charset decodes this body")
    return body.decode(best.encoding, errors="replace"), best.encoding, "detected"


def page_words(html: str) -> int:
    """An upper bound of the words any extraction of the page can return: every word of
    its markup-free text (scripts, styles and comments removed; tags become spaces, so
    words are split, never joined)."""
    text = TAG.sub(" ", _INVISIBLE_BLOCKS.sub(" ", html))
    return len(WORD.findall(html_lib.unescape(text)))
