"""The issue's loopback web for ``afm fetch`` against ``afm crawl`` (issue 53): 200 hosts of
100 pages (20,000 pages), every kind of the mixed web (:data:`afm.app.bench.crawler.fetch.KINDS`)
on many hosts: the same pages fetched and training-use decisions as the crawler, every
host's requests spaced by its Crawl-delay or the default interval in the server's own log,
robots.txt asked once per host, URLs in = outcomes out. ``make test`` runs the same checks
on one host of each kind (``tests/integration/pipelines/fetch/test_fetch_loopback.py``)."""

from __future__ import annotations

import pytest

from tests.integration.pipelines.fetch.test_fetch_loopback import (
    check_accounting,
    check_politeness,
    check_same_as_crawl,
    compare,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]
HOSTS, PAGES = 200, 100


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    # 100 pages a host at 0.2 s (Crawl-delay hosts 0.5 s): each host needs 20-50 s of its
    # own spacing; the run is bound by how many hosts are fetched at once.
    run = compare((HOSTS, PAGES), interval=0.2, delay=0.5, tmp=tmp_path_factory.mktemp("fetch-full"),
                  timeout=5000)
    assert len(run["urls"]) == HOSTS * PAGES and len(run["web"]) == HOSTS
    return run


def test_full_web_fetch_stores_what_the_crawler_stores(full) -> None:
    check_same_as_crawl(full)


def test_full_web_fetch_is_polite_by_the_server_log(full) -> None:
    worst = check_politeness(full)
    print(f"\ncloser than the interval, worst host: {min(worst.values()):.3f} x its interval")


def test_full_web_every_url_ends_as_one_outcome(full) -> None:
    check_accounting(full)
