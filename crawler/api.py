"""Programmatic crawling: ``crawl(...)`` runs the crawler in a child process.

Scrapy's Twisted reactor cannot be restarted inside one process, so a program (the
demo, tests, notebooks) that may crawl several times calls this, which runs
:mod:`afm.crawler.run` in a fresh interpreter and returns its summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from afm.config import to_dict
from afm.crawler.config import CrawlConfig


class CrawlError(RuntimeError):
    """The crawl process failed; the message carries the end of its log."""


def crawl(
    seeds: list[str],
    out_dir: Path,
    *,
    max_pages: int = 1000,
    user_agent: str = "afmbot",
    allow_private: bool = False,
    extra_settings: dict | None = None,
    config: dict[str, Any] | None = None,
    timeout: float | None = None,
    show_output: bool = False,
) -> dict:
    """Crawl ``seeds`` (URLs or seed files) into ``out_dir``; return the summary dict.

    The summary has at least ``pages``, ``bytes``, ``robots_denied``, ``warc_files``,
    ``index_path`` (a directory of Parquet shards, read by
    :func:`afm.crawler.storage.warc.read_index`), ``status_counts`` and ``outcomes``. ``config`` sets
    any other :class:`~afm.crawler.config.CrawlConfig` field; ``extra_settings`` are raw
    Scrapy settings (JSON-serialisable). ``show_output`` lets the child's config print,
    progress lines and summary through to this process's stderr.
    """
    out_dir = Path(out_dir)
    values = dict(config or {})
    values.update(
        seeds=[str(s) for s in seeds],
        out_dir=str(out_dir),
        max_pages=max_pages,
        user_agent=user_agent,
        allow_private=allow_private,
    )
    cfg = CrawlConfig(**values)
    return run_in_subprocess(cfg, extra_settings, timeout=timeout, show_output=show_output)


def _die_with_parent() -> None:
    """Linux: the crawl gets SIGTERM (a clean stop) if the calling process dies."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def run_in_subprocess(
    cfg: CrawlConfig,
    extra_settings: dict | None = None,
    timeout: float | None = None,
    show_output: bool = False,
) -> dict:
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary_path = out_dir / "summary.json"
    summary_path.unlink(missing_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"config": to_dict(cfg), "extra_settings": extra_settings or {}}, fh)
        config_path = fh.name
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "afm.crawler.run", config_path],
            stdout=None if show_output else subprocess.PIPE,
            stderr=None if show_output else subprocess.STDOUT,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    finally:
        os.unlink(config_path)
    if proc.returncode != 0 or not summary_path.exists():
        tail = "\n".join((proc.stdout or "(output shown above)").splitlines()[-40:])
        raise CrawlError(f"crawl process exited with {proc.returncode}:\n{tail}")
    return json.loads(summary_path.read_text())
