"""afm.crawler: a polite, robots.txt-exact, resumable web crawler on Scrapy.

Modules, one job each:

* ``robots``      RFC 9309 parsing/matching and the fetch-status policy (no Scrapy).
* ``training``    the training-use policy (training token, ``noai``, TDMRep) with evidence.
* ``directives``  ``X-Robots-Tag`` / meta robots / TDMRep values a page carries.
* ``tdmrep``      the W3C TDM Reservation Protocol (``tdmrep.json``, header, meta).
* ``snapshots``   robots.txt / tdmrep.json snapshots: kept, merged into a store, resolved.
* ``urls``        canonical URLs for de-duplication; crawler-trap rules.
* ``netguard``    refusal of private/loopback/link-local/metadata addresses at connect time.
* ``middlewares`` Scrapy glue: robots.txt + Crawl-delay, size/bomb/content-type guards, progress.
* ``spider``      scheduling rules, page handling (meta robots, links, sitemaps), outcomes.
* ``warc``        rotating WARC writer + Parquet index.
* ``warc_reader`` a WARC/ARC reader that survives damaged files (every record met once).
* ``state``       the durable frontier that makes restarts lose nothing.
* ``config``      ``CrawlConfig`` and its Scrapy settings; ``run`` runs one crawl in-process.
* ``api``         ``crawl(...)`` for programs (runs ``run`` in a child process).
* ``testsite``    ``LocalSites``: a multi-host loopback web site for tests, demo, benchmarks.
* ``cli_crawl``   ``afm crawl``, ``afm crawler daemon``, ``afm robots check``.
* ``bench``       pages/s against a bare Scrapy spider.
"""
