"""spidersite: the Scrapy side of the project (spider, middlewares, pipelines)."""
