"""The batch fetcher: a URL list fetched host by host with asyncio and aiohttp, no Scrapy.
``afm fetch`` runs it inside Beam workers (``afm.pipelines.fetch``); it follows the same
rules as the Scrapy daemon (``rules/``), decides with the same consent code, and writes
the same WARC files, index and snapshots (``storage/``)."""
