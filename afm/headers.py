"""HTTP header fields as they were received: every field line kept, in order.

Why not a dict: RFC 9110 section 5.3 lets a server send one field as several field lines
(``X-Robots-Tag: noai`` then ``X-Robots-Tag: noarchive``), and a proxy may combine them
into one line, comma-separated (``tdm-reservation: 1, 1``); both mean the same. A dict
keeps one line per name and loses the rest, so a page the crawler saw opted out reads as
allowed once re-read from its WARC. :class:`Headers` is the one representation the WARC
reader, the crawler and curate share:

* :meth:`Headers.lines` - every value of a name, one per field line, in order;
* :meth:`Headers.combined` - RFC 9110 5.3: the field lines joined with ``", "``, the
  value a list-based field (and an RFC 9651 structured field) is parsed from;
* :meth:`Headers.members` - RFC 9110 5.6.1: the elements of a comma-separated list over
  every field line, empty elements dropped, commas inside quoted strings kept.

Obsolete line folding (RFC 9112 section 5.2: a field line continued on the next line
after a space or tab) is undone when values are read: each fold becomes one space.

Records keep headers as a JSON-able list of ``[name, value]`` pairs (:meth:`Headers.pairs`);
:meth:`Headers.of` reads that, a dict (a value may be a list of field lines), or warcio's
list of tuples.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

_FOLD = re.compile(r"\r?\n[ \t]+|\r[ \t]+")


def unfold(value: str) -> str:
    """RFC 9112 5.2: replace each obs-fold (CRLF followed by space or tab) with one space,
    and trim the whitespace around the value (RFC 9110 5.5)."""
    return _FOLD.sub(" ", value).strip(" \t\r\n")


def list_members(value: str) -> list[str]:
    """RFC 9110 5.6.1: the elements of a comma-separated list, whitespace around each
    trimmed, empty elements dropped; a comma inside a quoted string does not split."""
    out: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for ch in value:
        if escaped:
            current.append(ch)
            escaped = False
        elif quoted and ch == "\\":
            current.append(ch)
            escaped = True
        elif ch == '"':
            current.append(ch)
            quoted = not quoted
        elif ch == "," and not quoted:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return [m.strip(" \t") for m in out if m.strip(" \t")]


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)


class Headers:
    """One message's header section: ``(name, value)`` field lines, names compared
    without case (RFC 9110 5.1), values as received (folds undone when read)."""

    __slots__ = ("_lines",)

    def __init__(self, lines: Iterable[tuple[str, str]] = ()) -> None:
        self._lines = [(_text(k), _text(v)) for k, v in lines]

    @classmethod
    def of(cls, headers: Any) -> Headers:
        """Headers from what a record holds: a list of pairs (warcio's tuples, JSON's
        lists), a dict (whose value may be a list of field lines), or nothing."""
        if isinstance(headers, Headers):
            return headers
        if headers is None:
            return cls()
        if isinstance(headers, Mapping):
            items: Iterable[Any] = headers.items()
        elif isinstance(headers, (list, tuple)):
            items = headers
        else:
            return cls()
        lines: list[tuple[str, str]] = []
        for item in items:
            if not isinstance(item, (list, tuple)) or len(item) != 2:
                continue
            name, value = item
            if isinstance(value, (list, tuple)):
                lines.extend((_text(name), _text(v)) for v in value)
            elif value is not None:
                lines.append((_text(name), _text(value)))
        return cls(lines)

    # ---- reading ---------------------------------------------------------------------------
    def lines(self, name: str) -> list[str]:
        """Every value of ``name``, one per field line, in the order received."""
        low = name.lower()
        return [unfold(v) for k, v in self._lines if k.strip().lower() == low]

    def combined(self, name: str) -> str | None:
        """RFC 9110 5.3: the field lines of ``name`` as one value (``", "``-joined); None
        when the field is absent."""
        values = self.lines(name)
        return ", ".join(values) if values else None

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first field line's value (for singleton fields such as ``Location``)."""
        values = self.lines(name)
        return values[0] if values else default

    def members(self, name: str) -> list[str]:
        """RFC 9110 5.6.1: the list elements of ``name`` over all its field lines."""
        return [m for value in self.lines(name) for m in list_members(value)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(k.strip().lower() == name.lower()
                                             for k, _ in self._lines)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Headers) and other._lines == self._lines

    def __repr__(self) -> str:
        return f"Headers({self._lines!r})"

    def pairs(self) -> list[list[str]]:
        """The field lines as JSON-able ``[name, value]`` pairs (a record's ``headers``)."""
        return [[k, v] for k, v in self._lines]


__all__ = ["Headers", "list_members", "unfold"]
