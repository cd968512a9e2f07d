"""The crawl's servers, with one owner: the registry of their configurations, the servers
cut off and why, and the network errors counted per server.

Every component reads them through :func:`server_state` (one :class:`ServerState` per
crawler): the spider fills the registry from its arguments when it is created, the
net-error middleware counts errors and cuts servers off, the server-config and concurrency
middlewares drop the requests of servers cut off, the hops and crawl-delay middlewares and
the store read the servers' configurations.
"""

from __future__ import annotations

import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from search.servers import ServerConfig
from search.sitesfile import ServerRegistry


@dataclass
class ServerState:
    #: The configuration of every server of the crawl (the design documents' CServer).
    registry: ServerRegistry = field(default_factory=ServerRegistry)
    #: Server URL -> why it was cut off (``max_net_errors`` reached).
    disabled: dict[str, str] = field(default_factory=dict)
    #: Server URL -> network errors counted in this crawl.
    errors: Counter[str] = field(default_factory=Counter)
    #: Server URL -> the seconds between requests its 429 and 503 answers asked for
    #: (``Retry-After``, capped at ``CRAWLDELAY_MAX``; the longest asked in this crawl).
    retry_after: dict[str, float] = field(default_factory=dict)

    def server(self, url: str) -> ServerConfig | None:
        """The configured server of *url*, or None when the crawl does not cover it."""
        return self.registry.get(url)

    def disable(self, server: str, reason: str) -> bool:
        """Cut *server* off; False when it already was."""
        if server in self.disabled:
            return False
        self.disabled[server] = reason
        return True


_states: weakref.WeakKeyDictionary[Any, ServerState] = weakref.WeakKeyDictionary()


def server_state(crawler: Any) -> ServerState:
    """The servers of *crawler*'s crawl (empty until the spider fills the registry)."""
    state = _states.get(crawler)
    if state is None:
        state = _states[crawler] = ServerState()
    return state
