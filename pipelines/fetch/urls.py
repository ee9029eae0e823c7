"""URL lists in, one item per URL met: the URL (cleaned, with its de-duplication key and
its place in the input) or the outcome that ends it before any request.

Formats (by name; gzip allowed):

* text (``.txt``, ``.urls``, ``.lst``, anything else): one URL a line, ``#`` comments,
  blank lines ignored; a Common Crawl CDXJ line (``SURT TIMESTAMP {json}``) counts as its
  JSON's ``url``;
* JSONL (``.jsonl``, ``.json``): a JSON object with a ``url`` field (Common Crawl's CDX
  API output as it is), or a JSON string;
* Parquet: a ``url`` column (Common Crawl's columnar index as it is: its other columns
  are ignored).

JSONL and Parquet go through the one reader of each format (:mod:`afm.readers`), so a
damaged line or row group is an outcome (``bad_url``), never a lost URL. The rules that
end a URL before any request are the crawler's (:mod:`afm.crawler.frontier.urls`): a URL
that cannot be cleaned, a scheme other than http(s), a crawler trap."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

from afm import fs
from afm.crawler.batch.config import FetchConfig
from afm.crawler.batch.fetcher import outcome_row
from afm.crawler.frontier.urls import canonical_url, clean_url, trap_reason
from afm.crawler.rules import outcomes
from afm.readers import Failure, Record, Skipped, file_format, read_file

URL, END = "url", "end"


def list_format(path: str) -> str:
    """``jsonl`` | ``parquet`` | ``text``."""
    fmt = file_format(path)
    if fmt == "warc":
        raise ValueError(f"{path}: a WARC file is not a URL list (curate reads WARC files)")
    if fmt is None and path.lower().endswith((".json", ".json.gz")):
        return "jsonl"
    return fmt or "text"


def resolve_lists(patterns: list[str]) -> list[str]:
    """The files named by paths, directories (every file in them, hidden ones left out) and
    globs; an error naming what matched nothing. A remote pattern this machine has no
    filesystem for is kept as it is."""
    files: list[str] = []
    for pattern in patterns:
        if not fs.reachable(pattern):
            # No filesystem here for this scheme (gs:// without Beam's GCP extra): kept as
            # given, as curate keeps it; only a dry run gets this far (the option check
            # refuses to submit without the extra).
            found = [pattern]
        elif fs.has_glob(pattern):
            found = sorted(fs.glob(pattern))
        elif fs.isdir(pattern):
            found = sorted(f for f in fs.list_files(pattern)
                           if not fs.basename(f).startswith((".", "_")))
        elif fs.exists(pattern):
            found = [pattern]
        else:
            found = []
        if not found:
            raise FileNotFoundError(f"--urls {pattern}: no such file (or nothing matches)")
        files += found
    return list(dict.fromkeys(files))


def _text_urls(path: str) -> Iterator[tuple[int, str | None, str]]:
    """``(line number, url or None, the line)`` of a text list."""
    with fs.open_read(path) as raw:
        head = raw.read(2)
    opener = (lambda: gzip.open(fs.open_read(path))) if head == b"\x1f\x8b" else (lambda: fs.open_read(path))
    with opener() as fh:
        for number, raw_line in enumerate(fh, 1):
            line = raw_line.decode("utf-8", errors="replace").strip()
            if " {" in line:  # CDXJ: SURT TIMESTAMP {json}
                try:
                    value = json.loads(line[line.index(" {") + 1:]).get("url")
                except (ValueError, AttributeError):
                    value = None
                yield number, value if isinstance(value, str) else None, line
                continue
            line = line.split("#", 1)[0].strip()
            if line:
                yield number, line.split()[0], line


def _record_url(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        url = value.get("url")
        return url if isinstance(url, str) else None
    return None


def read_url_items(path: str, file_no: int, cfg: FetchConfig) -> Iterator[tuple[str, Any]]:
    """Every URL of one list file: ``(URL, (key, {"url", "request_url", "order"}))`` or
    ``(END, outcome row)``."""
    if list_format(path) == "text":
        try:
            for number, url, line in _text_urls(path):
                yield item(url if url is not None else line, (file_no, number), cfg,
                           bad=url is None, where=f"{path}:{number}")
        except OSError as exc:
            yield END, outcome_row(f"{path}", outcomes.BAD_URL, reason=f"unreadable list: {exc}")
        return
    for n, got in enumerate(read_file(path)):
        if isinstance(got, Skipped):
            continue
        if isinstance(got, Failure):
            yield END, outcome_row(got.url or f"{path}#{n}", outcomes.BAD_URL,
                                   reason=f"{got.reason}: {got.error}"[:300])
            continue
        assert isinstance(got, Record)
        url = _record_url(got.value)
        yield item(url if url is not None else "", (file_no, n), cfg, bad=url is None,
                   where=got.where.describe())


def item(url: str, order: tuple[int, int], cfg: FetchConfig, *, bad: bool = False,
         where: str = "") -> tuple[str, Any]:
    """One URL of a list: cleaned and keyed, or its outcome (the crawler's scheduling
    rules, :meth:`afm.crawler.fetching.spider.AfmSpider.schedule`, before any request)."""
    if bad or not url:
        return END, outcome_row(url or where, outcomes.BAD_URL, reason=f"no URL at {where}")
    try:
        clean = clean_url(url)
    except Exception as exc:  # noqa: BLE001 - any malformed URL is an outcome
        return END, outcome_row(url, outcomes.BAD_URL, reason=f"{type(exc).__name__}: {exc}")
    if not clean.startswith(("http://", "https://")):
        return END, outcome_row(url, outcomes.SCHEME, reason=clean.split(":", 1)[0])
    trap = trap_reason(clean, max_length=cfg.max_url_length,
                       max_repeated_segments=cfg.max_repeated_segments,
                       max_path_segments=cfg.max_path_segments,
                       max_calendar_depth=cfg.max_calendar_depth)
    if trap:
        return END, outcome_row(clean, outcomes.TRAP_PREFIX + trap)
    return URL, (canonical_url(clean), {"url": clean, "order": order})


__all__ = ["END", "URL", "item", "list_format", "read_url_items", "resolve_lists"]
