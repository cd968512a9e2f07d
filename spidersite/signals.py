"""Signals of the project's own components (sent through ``crawler.signals``)."""

#: A server reached ``max_net_errors``; args: ``server`` (its URL), ``errors``, ``reason``.
server_disabled = object()
