"""Project commands; ``crawl`` replaces Scrapy's to validate spider arguments first."""
