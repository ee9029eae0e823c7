"""The Scrapy crawl itself: the spider, the crawler's own Scrapy components and their one construction helper, and the private-address guard."""
