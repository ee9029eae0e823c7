"""What a crawl keeps: rotating WARC files with a Parquet index."""
