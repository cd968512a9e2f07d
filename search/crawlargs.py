"""Values of the ``site`` spider's arguments that both the crawler and the web admin check:
the re-crawl modes and the topic threshold.

The spider (through :mod:`spidersite.arguments`) and the admin's crawl form parse them with
the same functions, so a value the form accepts is one the spider accepts.  This module does
not import Scrapy.
"""

from __future__ import annotations

import math

from search.servers import ConfigError

#: Values of ``-a recrawl``: the stored pages due for a visit, every stored page, or every
#: stored page fetched whole and analyzed again even when it did not change (after a
#: version that analyzes pages differently).
RECRAWL_MODES = ("due", "all", "reanalyze")

#: Default score a page needs against the topic to be kept (A = 4·B + C > threshold).
DEFAULT_TOPIC_THRESHOLD = 2.0


def parse_recrawl(value: str | None) -> str | None:
    """``-a recrawl``: one of :data:`RECRAWL_MODES`, or None (no re-crawl)."""
    if value is None or value == "":
        return None
    mode = str(value).strip().lower()
    if mode not in RECRAWL_MODES:
        raise ConfigError(f"recrawl: {value!r} is not one of: {', '.join(RECRAWL_MODES)}")
    return mode


def parse_threshold(value: str | float | None) -> float:
    """``-a topic_threshold``: a finite number ≥ 0 (default :data:`DEFAULT_TOPIC_THRESHOLD`)."""
    if value is None or value == "":
        return DEFAULT_TOPIC_THRESHOLD
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"topic_threshold: {value!r} is not a number") from None
    if not math.isfinite(threshold) or threshold < 0:
        raise ConfigError(f"topic_threshold: must be a number ≥ 0, not {value!r}")
    return threshold
