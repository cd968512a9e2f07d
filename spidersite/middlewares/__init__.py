"""The project's Scrapy middlewares, one module each.

Downloader middlewares (priorities in ``spidersite/settings.py``):

- :mod:`.servers` — per-server proxy, basic auth, read timeout, robots switch, slot;
- :mod:`.crawldelay` — robots.txt ``Crawl-delay`` and per-server ``crawl_delay`` applied;
- :mod:`.neterrors` — ``max_net_errors`` cut-off.

Spider middlewares:

- :mod:`.hops` — ``maxhops`` per server.
"""
