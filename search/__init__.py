"""spidersite's search library: analyzer, storage, full-text index, query and ranking.

This package never imports Scrapy: the crawler depends on it, not the other way round.
"""

__version__ = "0.1.0"
