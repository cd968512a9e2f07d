"""Signals of the project's own components (sent through ``crawler.signals``).

Every signal the project defines lives here; Scrapy's own are in :mod:`scrapy.signals`.
"""

#: A server reached ``max_net_errors``; args: ``server`` (its URL), ``errors``, ``reason``.
server_disabled = object()

#: The worker committed a batch (or failed to); args: ``report``
#: (a :class:`search.worker.Report`, already applied to the crawler's stats).
store_flushed = object()

#: The store's last batch is committed and the indexer has stopped, before the spider is
#: closed; args: ``report`` (the indexer's final figures, applied to the stats).
store_closed = object()
