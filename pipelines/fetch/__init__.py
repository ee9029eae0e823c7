"""``afm fetch``: URL lists fetched politely on Beam workers (the crawler's batch fetcher,
``afm.crawler.batch``, wired into a pipeline)."""
