"""afm.crawler: a polite, robots.txt-exact, resumable web crawler on Scrapy.

The front door is at the top (``config``: ``CrawlConfig``; ``run``: one crawl in this
process and its Scrapy settings; ``api``: ``crawl(...)`` in a child process;
``testsite``: a loopback web for tests, the demo and benchmarks). The rest is rooms, bottom
to top: ``storage`` (WARC files and their index), ``consent`` (robots.txt, training use,
snapshots; no Scrapy), ``frontier`` (URLs, the durable and the Redis frontier),
``rules`` (what every fetch follows, no Scrapy), ``fetching`` (the spider and the Scrapy
components), ``batch`` (``afm fetch``'s asyncio fetcher, no Scrapy), ``operations`` (the stats line,
/metrics, /healthz, ``afm crawler status``). ``README.md`` names every module.
"""
