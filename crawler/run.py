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

from scrapy.crawler import CrawlerProcess

from afm.config import load_config
from afm.consent.robots import is_valid_product_token
from afm.crawler.config import CrawlConfig
from afm.crawler.fetching.components import CONFIG_SETTING
from afm.crawler.fetching.spider import AfmSpider
from afm.crawler.fetching.stopping import stop_fetching
from afm.crawler.frontier.seeds import read_seeds
from afm.crawler.rules.responses import MAX_REDIRECTS, RETRY_HTTP_CODES


def scrapy_settings(cfg: CrawlConfig) -> dict:
    """Scrapy settings for ``cfg`` (the crawler's own middlewares replace Scrapy's robots one)."""
    return {
        "BOT_NAME": cfg.user_agent,
        "USER_AGENT": cfg.header_user_agent(),
        "ROBOTSTXT_OBEY": False,  # ours: crawler/fetching/middlewares.py RobotsMiddleware
        "CONCURRENT_REQUESTS": cfg.concurrent_requests,
        "CONCURRENT_REQUESTS_PER_DOMAIN": cfg.per_host_concurrency,
        "DOWNLOAD_DELAY": cfg.download_delay,
        "AUTOTHROTTLE_ENABLED": cfg.autothrottle,
        "AUTOTHROTTLE_START_DELAY": max(cfg.download_delay, 0.0),
        "AUTOTHROTTLE_TARGET_CONCURRENCY": cfg.autothrottle_target_concurrency,
        "AUTOTHROTTLE_MAX_DELAY": cfg.autothrottle_max_delay,
        "DOWNLOAD_MAXSIZE": cfg.max_response_bytes,
        "DOWNLOAD_WARNSIZE": 0,
        "DOWNLOAD_TIMEOUT": cfg.download_timeout,
        "DNS_TIMEOUT": cfg.dns_timeout,
        "RETRY_TIMES": cfg.retry_times,  # robots.txt / tdmrep.json only: pages retry after a backoff
        "RETRY_HTTP_CODES": list(RETRY_HTTP_CODES),  # afm.crawler.rules.responses, as afm fetch
        "REDIRECT_MAX_TIMES": MAX_REDIRECTS,
        "URLLENGTH_LIMIT": cfg.max_url_length,
        "DEPTH_LIMIT": 0,  # enforced when scheduling, so resumed requests keep their depth
        "HTTPERROR_ALLOW_ALL": True,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": cfg.log_level,
        "LOGSTATS_INTERVAL": 0,
        "TWISTED_DNS_RESOLVER": "afm.crawler.fetching.netguard.GuardedResolver",
        "AFM_ALLOW_PRIVATE": cfg.allow_private,
        "DOWNLOADER_MIDDLEWARES": {
            "afm.crawler.fetching.netguard.PrivateAddressMiddleware": 50,
            "afm.crawler.fetching.middlewares.RobotsMiddleware": 100,
            "afm.crawler.fetching.middlewares.BombGuardMiddleware": 595,
            "afm.crawler.fetching.stopping.StopGate": 1000,
        },
        "DOWNLOAD_HANDLERS": {  # cancellable on SIGTERM (crawler/fetching/stopping.py)
            "http": "afm.crawler.fetching.stopping.CancellableHTTPDownloadHandler",
            "https": "afm.crawler.fetching.stopping.CancellableHTTPDownloadHandler",
        },
        "EXTENSIONS": {
            "afm.crawler.fetching.middlewares.ContentGuard": 0,
            "afm.crawler.operations.progress.Progress": 0,
            "afm.crawler.operations.metrics.MetricsEndpoint": 0,
        },
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
    }


def redis_settings(cfg: CrawlConfig) -> dict[str, Any]:
    """scrapy-redis: one shared priority queue and duplicate filter for every daemon."""
    return {
        "SCHEDULER": "afm.crawler.frontier.redis.DurableRedisScheduler",
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
    settings[CONFIG_SETTING] = cfg  # what every component reads (fetching/components.py)
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


class _StoppingCrawlerProcess(CrawlerProcess):
    """Scrapy's process, whose first SIGTERM / Ctrl-C also cancels what is in flight
    (:func:`afm.crawler.fetching.stopping.stop_fetching`) before the graceful stop."""

    def _signal_shutdown(self, signum: int, frame: Any) -> None:
        from twisted.internet import reactor

        for crawler in list(self.crawlers):
            reactor.callFromThread(stop_fetching, crawler)
        super()._signal_shutdown(signum, frame)


def run_crawl(cfg: CrawlConfig, extra_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Crawl per ``cfg`` in this process; return (and save) the summary."""
    if not is_valid_product_token(cfg.user_agent):
        raise ValueError(f"user agent {cfg.user_agent!r} is not a product token ([A-Za-z_-]+)")
    if cfg.fallback_agent and not is_valid_product_token(cfg.fallback_agent):
        raise ValueError(f"fallback agent {cfg.fallback_agent!r} is not a product token ([A-Za-z_-]+)")
    cfg.check_consent()  # an unknown training token, preset or directive: before any fetch
    read_seeds(cfg.seeds)  # a missing seed file is an error before anything starts
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    process = _StoppingCrawlerProcess(build_settings(cfg, extra_settings))
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
    if len(argv) != 1:
        print("usage: python -m afm.crawler.run CONFIG.json", file=sys.stderr)
        return 2
    payload = json.loads(Path(argv[0]).read_text())
    cfg = load_config(CrawlConfig, payload["config"])
    run_crawl(cfg, payload.get("extra_settings"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
