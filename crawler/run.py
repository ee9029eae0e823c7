"""Run one crawl in this process (Scrapy's reactor can start only once per process).

``run_crawl(cfg)`` is what ``afm crawl`` and the daemon call; :mod:`afm.crawler.api`
runs it in a child process (``python -m afm.crawler.run CONFIG.json``) so a program
can crawl more than once. The summary is also written to ``out_dir/summary.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from afm.crawler.config import CrawlConfig, scrapy_settings


def redis_settings(cfg: CrawlConfig) -> dict[str, Any]:
    """scrapy-redis: one shared priority queue and duplicate filter for every daemon."""
    return {
        "SCHEDULER": "afm.crawler.redisfrontier.DurableRedisScheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "SCHEDULER_QUEUE_KEY": f"{cfg.redis_key}:requests",
        "SCHEDULER_DUPEFILTER_KEY": f"{cfg.redis_key}:dupefilter",
        "REDIS_URL": cfg.redis_url,
        "SCHEDULER_IDLE_BEFORE_CLOSE": 0,  # never block the reactor on an empty queue
    }


def build_settings(cfg: CrawlConfig, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    settings = scrapy_settings(cfg)
    if cfg.redis_url:
        settings.update(redis_settings(cfg))
    settings["AFM_CONFIG"] = cfg
    if extra:
        settings.update(extra)
    return settings


def summarize(stats: dict[str, Any], out_dir: Path, elapsed: float) -> dict[str, Any]:
    pages = int(stats.get("afm/pages", 0))
    refused = {k.split("/", 2)[2]: v for k, v in stats.items() if k.startswith("afm/outcome/")}
    skipped = {k.split("/", 2)[2]: v for k, v in stats.items() if k.startswith("afm/skipped/")}
    warc_files = sorted(str(p) for p in (out_dir / "warc").glob("*.warc.gz"))
    return {
        "pages": pages,
        "bytes": int(stats.get("afm/bytes", 0)),
        "elapsed_s": round(elapsed, 3),
        "pages_per_s": round(pages / elapsed, 3) if elapsed > 0 else 0.0,
        "status_counts": {k.rsplit("/", 1)[1]: v for k, v in stats.items() if k.startswith("afm/status/")},
        "robots_denied": int(stats.get("afm/robots_denied", 0)),
        "robots_fetches": int(stats.get("afm/robots_fetches", 0)),
        "noindex": int(stats.get("afm/noindex", 0)),
        "training_optout": int(stats.get("afm/training/optout", 0)),
        "tdmrep_fetches": int(stats.get("afm/tdmrep_fetches", 0)),
        "control_file_snapshots": int(stats.get("afm/control_file_snapshots", 0)),
        "scheduled": int(stats.get("afm/scheduled", 0)),
        "resumed_pending": int(stats.get("afm/resumed_pending", 0)),
        "outcomes": refused,
        "skipped": skipped,
        "warc_files": warc_files,
        "index_path": str(out_dir / "index"),
        "close_reason": stats.get("afm/close_reason", ""),
    }


def run_crawl(cfg: CrawlConfig, extra_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Crawl per ``cfg`` in this process; return (and save) the summary."""
    from afm.crawler.robots import is_valid_product_token
    from afm.crawler.spider import AfmSpider, read_seeds
    from scrapy.crawler import CrawlerProcess

    if not is_valid_product_token(cfg.user_agent):
        raise ValueError(f"user agent {cfg.user_agent!r} is not a product token ([A-Za-z_-]+)")
    if cfg.fallback_agent and not is_valid_product_token(cfg.fallback_agent):
        raise ValueError(f"fallback agent {cfg.fallback_agent!r} is not a product token ([A-Za-z_-]+)")
    cfg.check_consent()  # an unknown training token, preset or directive: before any fetch
    read_seeds(cfg.seeds)  # a missing seed file is an error before anything starts
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    process = CrawlerProcess(build_settings(cfg, extra_settings))
    crawler = process.create_crawler(AfmSpider)
    start = time.monotonic()
    process.crawl(crawler)
    process.start()
    summary = summarize(crawler.stats.get_stats(), out_dir, time.monotonic() - start)
    tmp = out_dir / ".summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    tmp.replace(out_dir / "summary.json")
    return summary


def main(argv: list[str]) -> int:
    from afm.config import load_config

    if len(argv) != 1:
        print("usage: python -m afm.crawler.run CONFIG.json", file=sys.stderr)
        return 2
    payload = json.loads(Path(argv[0]).read_text())
    cfg = load_config(CrawlConfig, payload["config"])
    run_crawl(cfg, payload.get("extra_settings"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
