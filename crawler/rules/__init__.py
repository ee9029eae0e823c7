"""The rules every fetch of the crawler follows, with no Scrapy: the private-address guard,
response limits (content type, size, decompression), redirects and retries, what a page
says about itself (noindex, nofollow, its training use), and the outcome names. The Scrapy
daemon (``fetching/``) and the batch fetcher (``batch/``, ``afm fetch``'s Beam workers)
both apply these, so the two cannot drift apart."""
