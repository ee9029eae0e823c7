"""Seed lists: URLs given directly or in files (one URL a line, ``#`` comments).

Its own light module (no Scrapy), so ``afm crawl`` refuses a missing, binary or empty seed
file in about a second, before the crawler is imported; the spider reads its seeds and
the daemon's inbox files through the same function.
"""

from __future__ import annotations

from pathlib import Path


def read_seeds(items: list[str]) -> list[str]:
    """URLs given directly or in files (one URL a line, ``#`` comments). Raises
    ``FileNotFoundError`` for an item that is neither a URL nor a file, ``ValueError``
    for a file that is not text."""
    out: list[str] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            out.append(item)
            continue
        path = Path(item)
        if not path.is_file():
            raise FileNotFoundError(f"seed is neither a URL nor a file: {item}")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"seed file {item} is not text (binary data); expected one URL a line") from None
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


__all__ = ["read_seeds"]
