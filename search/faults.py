"""Fault injection for the crash tests: kill the crawl at a named moment, as ``kill -9``, or
hold it there.

Off unless the environment variable ``SPIDERSITE_KILL_AT`` (or ``SPIDERSITE_HOLD_AT``) is
set (the tests set it; a user never needs it).  ``SPIDERSITE_KILL_AT=NAME`` or ``NAME:N``
makes the process that reaches the point *NAME* for the *N*-th time (1 by default; each
process counts its own) kill its whole process group with SIGKILL: the crawler, its
worker and its indexer die at once, at that moment, as when an operator kills the
crawl's process group.  The points:

- ``download``: a response reaches the spider (the crawler process);
- ``store_commit``: a batch is written into the database, its transaction not yet
  committed (the worker);
- ``index_commit``: a Whoosh commit has written its new segment's files, not yet the
  table of contents that makes them part of the index (the indexer);
- ``index_committed``: a Whoosh commit is complete, its documents not yet marked
  ``indexed`` in the database (the indexer);
- ``merge``: a Whoosh commit is merging older segments into the one it writes (the
  indexer).

``SPIDERSITE_HOLD_AT=NAME`` or ``NAME:N`` (the same points) makes the process that reaches
*NAME* for the *N*-th time wait there until the file ``SPIDERSITE_HOLD_UNTIL`` names
exists, then remove it and go on: a test makes that moment last as long as it needs (a
commit that takes longer than a wait of the crawl's), and knows when it is over (the file
is gone).

With the variables unset, :func:`point` is two comparisons with None.
"""

from __future__ import annotations

import os
import signal
import time

#: The environment variable: ``NAME`` or ``NAME:N``.
ENV = "SPIDERSITE_KILL_AT"
POINTS = ("download", "store_commit", "index_commit", "index_committed", "merge")


#: The environment variables of a hold: ``NAME`` or ``NAME:N``, and the file it waits for.
HOLD_ENV = "SPIDERSITE_HOLD_AT"
HOLD_UNTIL_ENV = "SPIDERSITE_HOLD_UNTIL"


def _parse(spec: str | None, env: str = ENV) -> tuple[str, int] | None:
    if not spec:
        return None
    name, _, nth = spec.partition(":")
    if name not in POINTS:
        raise ValueError(f"{env}={spec}: the points are {', '.join(POINTS)}")
    return name, int(nth or 1)


_target = _parse(os.environ.get(ENV))
_reached = 0
_hold = _parse(os.environ.get(HOLD_ENV), HOLD_ENV)
_held = 0


def point(name: str) -> None:
    """The crawl has reached the moment *name*: with ``SPIDERSITE_HOLD_AT`` naming it (for
    the N-th time), wait for the file ``SPIDERSITE_HOLD_UNTIL`` (removed then); with
    ``SPIDERSITE_KILL_AT`` naming it (for the N-th time), kill this process group with
    SIGKILL."""
    global _reached, _held
    if _hold is not None and _hold[0] == name:
        _held += 1
        if _held == _hold[1]:
            _wait_for(os.environ[HOLD_UNTIL_ENV])
    if _target is None or _target[0] != name:
        return
    _reached += 1
    if _reached >= _target[1]:
        os.killpg(os.getpgrp(), signal.SIGKILL)


def _wait_for(path: str) -> None:
    """Wait until the file *path* exists; remove it."""
    while not os.path.exists(path):
        time.sleep(0.05)
    os.unlink(path)
