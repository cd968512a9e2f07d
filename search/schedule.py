"""When to visit a page again: an adaptive revisit schedule, as pure functions.

A page starts with its server's ``period``.  Each re-visit that finds it unchanged (304 Not
Modified, or the same content checksum) multiplies its interval by :data:`SLOWER`; each
visit that finds it changed divides it by :data:`FASTER`; the result stays within the
server's ``min_period`` and ``max_period`` (Nutch's AdaptiveFetchSchedule works the same
way).  Pages that change often are visited often; pages that never change, rarely.
"""

from __future__ import annotations

#: Interval growth after a visit that found the page unchanged.
SLOWER = 1.5
#: Interval shrink after a visit that found the page changed.
FASTER = 2.0


def next_interval(
    previous: int | None, changed: bool, period: int, min_period: int, max_period: int
) -> int:
    """Seconds until the next visit of a page, after a visit that found it *changed* or not.

    *previous* is the page's current interval (None for a page seen for the first time,
    which gets *period*).
    """
    low, high = min(min_period, max_period), max(min_period, max_period)
    if previous is None or previous <= 0:
        interval = float(period)
    elif changed:
        interval = previous / FASTER
    else:
        interval = previous * SLOWER
    return int(max(low, min(high, interval)))
