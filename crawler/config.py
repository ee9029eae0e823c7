"""The crawl's typed configuration, shared by ``afm crawl``, the daemon and the API.

One dataclass, loadable from YAML (``afm.config.load_config``), turned into Scrapy
settings by :func:`afm.crawler.run.scrapy_settings` so every knob has one name and one
default. (The settings live beside the runner, not here: they name the Scrapy components
of ``fetching/`` and ``operations/``, whose spider reads this config, and the area's
rooms form no cycle.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afm.config import check_number
from afm.consent.training import ConsentSettings, TrainingPolicy

DEFAULT_CONTENT_TYPES = [
    "text/html",
    "application/xhtml+xml",
    "text/plain",
    "application/xml",
    "text/xml",
]


@dataclass
class CrawlConfig(ConsentSettings):
    """Every crawl setting. The training-use settings (``training_agents``,
    ``fallback_agent``, ``fallback_first``, ``tdmrep``, ``directives``,
    ``content_signals``, ``content_usage``, ...) are :class:`ConsentSettings`, the same
    fields curate's ``optout`` stage has, so both decide with one policy."""

    seeds: list[str] = field(default_factory=list)  # URLs, or files with one URL a line
    out_dir: str = "crawl"
    max_pages: int = 1000  # pages scheduled in total (per daemon with Redis)
    per_host_budget: int = 10_000  # pages scheduled per host
    max_depth: int = 20  # link hops from a seed
    user_agent: str = "afmbot"  # our robots.txt product token (the crawl token)
    user_agent_header: str = ""  # full User-Agent header; default "<token>/0.1 (+afm)"
    allow_private: bool = False  # allow loopback/private/link-local/metadata addresses
    follow_links: bool = True
    same_host_only: bool = False  # follow links to other hosts too by default
    # politeness
    concurrent_requests: int = 32
    per_host_concurrency: int = 2
    download_delay: float = 0.0  # minimum delay per host (AutoThrottle never goes below)
    autothrottle: bool = True
    autothrottle_target_concurrency: float = 2.0
    autothrottle_max_delay: float = 30.0
    robots_cache_seconds: float = 24 * 3600
    robots_retry_seconds: float = 600.0
    # training use (afm.consent.training, ConsentSettings): decided and recorded per page;
    # `afm curate`'s optout stage applies it again with the newest snapshots. With
    # `tdmrep` the crawler also fetches /.well-known/tdmrep.json once per host.
    optout_directives: list[str] | None = None  # earlier name of `directives` (wins when set)
    snapshots: bool = True  # keep every robots.txt / tdmrep.json response in <out>/robotstxt/
    # safety
    max_response_bytes: int = 10 * 1024 * 1024
    max_compression_ratio: float = 100.0  # decompressed/compressed beyond this is a bomb
    content_types: list[str] = field(default_factory=lambda: list(DEFAULT_CONTENT_TYPES))
    download_timeout: float = 30.0
    dns_timeout: float = 10.0
    # a fetch that failed for a reason that may pass (timeout, refused connection, DNS, HTTP
    # 429 / 5xx) is tried again this many times, retry_backoff_seconds after the first try
    # and doubling, at most retry_backoff_max_seconds apart; then it is recorded with its
    # reason and tried again on the next run (crawler/fetching/retry.py)
    retry_times: int = 2
    retry_backoff_seconds: float = 2.0
    retry_backoff_max_seconds: float = 120.0
    # traps
    max_url_length: int = 2000
    max_repeated_segments: int = 2  # the same path segment more than this many times
    max_path_segments: int = 30
    max_calendar_depth: int = 3  # at most this many date-like segments in one path
    # output
    warc_max_bytes: int = 256 * 1024 * 1024  # rotate the WARC file beyond this size
    warc_prefix: str = "afm"
    # daemon
    daemon: bool = False  # keep running when idle, poll the inbox for seeds
    inbox: str = ""  # directory of *.txt seed files picked up while running
    poll_seconds: float = 2.0
    redis_url: str = ""  # share frontier + dupefilter with other daemons (scrapy-redis)
    redis_key: str = "afm"
    idle_exit_seconds: float = 0.0  # daemon: exit after this long idle (0 = never)
    progress_seconds: float = 5.0  # the periodic stats line and, with Redis, the daemon's heartbeat (0 = off)
    # /metrics (Prometheus) and /healthz (afm.crawler.operations.metrics): -1 = 9410 for a daemon, off for
    # a one-shot crawl; 0 = any free port (recorded in <out>/state/endpoint.json); N = port N
    metrics_port: int = -1
    metrics_host: str = "127.0.0.1"  # loopback: expose it on purpose, behind a proxy or scraper
    log_level: str = "WARNING"
    # /healthz says "degraded" (with the reason) when the last health_recent_fetches fetches
    # all failed, or when requests wait but no fetch has ended for health_stall_seconds
    health_recent_fetches: int = 20
    health_stall_seconds: float = 300.0

    def header_user_agent(self) -> str:
        return self.user_agent_header or f"{self.user_agent}/0.1 (+https://example.invalid/afm)"

    def __post_init__(self) -> None:
        if self.optout_directives is not None:
            self.directives = list(self.optout_directives)
        check_number("retry_times", self.retry_times, low=0, integer=True)
        check_number("retry_backoff_seconds", self.retry_backoff_seconds, low=0)
        check_number("retry_backoff_max_seconds", self.retry_backoff_max_seconds, low=0)
        check_number("health_recent_fetches", self.health_recent_fetches, low=1, integer=True)
        check_number("health_stall_seconds", self.health_stall_seconds, low=0, low_open=True)

    def training_policy(self, crawl_agent: str | None = None) -> TrainingPolicy:
        """The training-use policy of this crawl (the crawl token plus the training tokens)."""
        return super().training_policy(crawl_agent or self.user_agent)

