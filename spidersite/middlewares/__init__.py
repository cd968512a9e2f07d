"""The project's Scrapy middlewares, one module each.

Downloader middlewares (priorities in ``spidersite/settings.py``):

- :mod:`.servers` — per-server proxy, basic auth, read timeout, robots switch, slot,
  ``max_size``, ``max_pages``; requests of servers cut off dropped;
- :mod:`.robots` — Scrapy's robots.txt middleware, with typed failures in the crawl log;
- :mod:`.crawldelay` — robots.txt ``Crawl-delay`` and per-server ``crawl_delay`` applied;
- :mod:`.neterrors` — ``max_net_errors`` cut-off;
- :mod:`.conditional` — If-None-Match / If-Modified-Since on re-visits;
- :mod:`.charset` — each HTML/text page's encoding decided (and detected);
- :mod:`.redirectloop` — redirect loops, over-long chains and bad ``Location``s ended;
- :mod:`.concurrency` — per-server ``concurrency`` held around the download.

Spider middlewares:

- :mod:`.hops` — ``maxhops`` per server;
- :mod:`.topic` — the topic gate of a focused crawl.
"""
