"""How the crawler's own Scrapy components are built: one constructor wiring for all of them.

Scrapy builds every middleware and extension with ``from_crawler(crawler)``, and each of
ours needed the same things from it: the crawler, the crawl's
:class:`~afm.crawler.config.CrawlConfig` (handed over in the ``AFM_CONFIG`` setting),
its stats, and some of its own methods connected to Scrapy signals. That wiring was
written out by hand in every class (and a forgotten ``connect`` is a component that
silently never runs), so it is done here once:

* :class:`CrawlerComponent` is the base: ``from_crawler`` builds it, ``__init__`` keeps
  ``crawler``, ``cfg`` and ``stats`` and connects every method marked with :func:`on`;
  a component states only what it reads from ``cfg`` and which methods answer which
  signals;
* :func:`on` marks a method as a signal's receiver (``@on(signals.spider_closed)``);
* :func:`connect_signals` connects the marked methods of any object (the spider, which
  Scrapy builds through ``Spider.from_crawler``, uses it directly);
* :func:`crawl_config` is the one reader of the ``AFM_CONFIG`` setting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

CONFIG_SETTING = "AFM_CONFIG"  # the Scrapy setting that carries the crawl's CrawlConfig
_SIGNALS = "_afm_signals"  # where :func:`on` records a method's signals

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound="CrawlerComponent")


def crawl_config(crawler: Crawler) -> Any:
    """The crawl's ``CrawlConfig``, as ``run.build_settings`` handed it to Scrapy."""
    return crawler.settings[CONFIG_SETTING]


def on(*signals: object) -> Callable[[F], F]:
    """Mark a method to receive ``signals`` (Scrapy signal objects) once its object is
    wired to a crawler (:class:`CrawlerComponent`, :func:`connect_signals`)."""

    def mark(method: F) -> F:
        setattr(method, _SIGNALS, (*getattr(method, _SIGNALS, ()), *signals))
        return method

    return mark


def connect_signals(crawler: Crawler, obj: object) -> None:
    """Connect every method of ``obj`` marked with :func:`on` to its signals. The method
    is looked up on ``obj``, so a subclass's override of a marked method is what answers
    (marked or not), and each (method, signal) pair is connected once."""
    pairs: dict[tuple[str, object], None] = {}
    for klass in type(obj).__mro__:
        for name, value in vars(klass).items():
            for signal in getattr(value, _SIGNALS, ()):
                pairs[(name, signal)] = None
    for name, signal in pairs:
        crawler.signals.connect(getattr(obj, name), signal=signal)


class CrawlerComponent:
    """Base of the crawler's Scrapy middlewares and extensions (see the module docstring).

    A subclass that reads settings extends ``__init__`` (``super().__init__(crawler)``
    first, then its fields from ``self.cfg``) and marks its signal receivers with
    :func:`on`; it writes no ``from_crawler`` of its own."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.cfg = crawl_config(crawler)
        self.stats = crawler.stats
        connect_signals(crawler, self)

    @classmethod
    def from_crawler(cls: type[C], crawler: Crawler) -> C:
        return cls(crawler)


__all__ = ["CONFIG_SETTING", "CrawlerComponent", "connect_signals", "crawl_config", "on"]
