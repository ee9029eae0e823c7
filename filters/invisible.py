"""Invisible format characters: the one list, for extraction's text and the n-gram index.

Soft hyphens, zero-width spaces and joiners, direction marks and embeddings, the word
joiner and invisible operators, and the byte-order mark sit *inside* words on real pages
(a German site hyphenates every long word with ``&shy;``): they print nothing of their own;
left in a text, they cut a word in two for every tokenizer and n-gram match downstream. So
they are removed, never turned into boundaries. The trade-off, taken as trafilatura takes
it (its output drops every format character): the zero-width (non-)joiner also shapes
letters and emoji (Persian "می‌خواهم" becomes "میخواهم", a family emoji its members), which
the text then loses. The bidi isolates (U+2066-2069) are not in the list: adding any
character changes the n-gram index's hashes (its ``HASH_NAME`` would have to change).
"""

from __future__ import annotations

import re
import unicodedata

INVISIBLE = ("\u00ad\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
             "\u2060\u2061\u2062\u2063\u2064\ufeff")
INVISIBLE_PATTERN = re.compile(f"[{INVISIBLE}]")


def visible_text(text: str) -> str:
    """``text`` as shown: invisible format characters removed, then composed (NFC, what
    trafilatura's output is too: a decomposed "u" + diaeresis and "ü" are one word)."""
    if text.isascii():
        return text
    text = INVISIBLE_PATTERN.sub("", text)
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)
