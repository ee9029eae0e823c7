"""What is left to crawl: URL canonicalisation and trap rules, the durable local frontier, the shared Redis frontier."""
