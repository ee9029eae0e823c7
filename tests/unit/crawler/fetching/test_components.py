"""The one constructor wiring of the crawler's Scrapy components: config, stats and every
``@on`` receiver connected, a subclass's override answering in its base's place."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scrapy import signals
from scrapy.signalmanager import SignalManager

from afm.crawler.config import CrawlConfig
from afm.crawler.fetching.components import CONFIG_SETTING, CrawlerComponent, connect_signals, on


def fake_crawler(cfg: CrawlConfig) -> Any:
    return SimpleNamespace(settings={CONFIG_SETTING: cfg}, signals=SignalManager(), stats=object())


class Recorder(CrawlerComponent):
    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        self.seen: list[str] = []

    @on(signals.spider_opened)
    def opened(self, spider: Any) -> None:
        self.seen.append("opened")

    @on(signals.spider_closed, signals.spider_idle)
    def stopping(self, spider: Any) -> None:
        self.seen.append("stopping")


class Override(Recorder):
    def opened(self, spider: Any) -> None:  # not marked again: the base's mark still holds
        self.seen.append("override")


def test_from_crawler_keeps_the_config_and_stats_and_connects_every_marked_method() -> None:
    cfg = CrawlConfig(out_dir="somewhere")
    crawler = fake_crawler(cfg)
    component = Recorder.from_crawler(crawler)
    assert component.cfg is cfg and component.stats is crawler.stats and component.crawler is crawler
    for signal in (signals.spider_opened, signals.spider_idle, signals.spider_closed):
        crawler.signals.send_catch_log(signal, spider=None)
    assert component.seen == ["opened", "stopping", "stopping"]


def test_an_override_answers_once_in_place_of_the_marked_method() -> None:
    crawler = fake_crawler(CrawlConfig())
    component = Override.from_crawler(crawler)
    crawler.signals.send_catch_log(signals.spider_opened, spider=None)
    assert component.seen == ["override"]


def test_any_object_can_be_connected() -> None:
    class Plain:
        def __init__(self) -> None:
            self.calls = 0

        @on(signals.spider_idle)
        def idle(self, spider: Any) -> None:
            self.calls += 1

    crawler = fake_crawler(CrawlConfig())
    plain = Plain()
    connect_signals(crawler, plain)
    crawler.signals.send_catch_log(signals.spider_idle, spider=None)
    assert plain.calls == 1


def test_spider_reads_html_as_curate_does():
    """No Content-Type: the MIME Sniffing rule (afm.consent.directives.is_html), so an HTML5
    page without <html> is HTML to the crawler as to curate's optout stage."""
    from scrapy.http import HtmlResponse, Response, TextResponse

    from afm.crawler.fetching.spider import _is_html

    body = b'<!doctype html><meta name="robots" content="noai"><p>x'
    assert _is_html(TextResponse("https://e.example/", body=body))
    assert _is_html(Response("https://e.example/", body=body))
    assert not _is_html(TextResponse("https://e.example/", body=b"plain text"))
    assert _is_html(HtmlResponse("https://e.example/", body=b"x",
                                 headers={"Content-Type": "text/html"}))
