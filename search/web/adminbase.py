"""What the admin's views share: their blueprint (``/admin``), the application's crawl
runner and settings, and reading a row or answering 404.

The views are routes of the one blueprint :data:`bp`, in three modules:
:mod:`search.web.admin` (login, overview, crawl log; it imports the other two, so that
importing it registers every route), :mod:`search.web.adminservers` (servers and seeds),
:mod:`search.web.admincrawls` (crawls).
"""

from __future__ import annotations

from typing import Any, TypeVar

from flask import Blueprint, abort, current_app
from sqlalchemy.orm import Session

from search.web import runners

bp = Blueprint("admin", __name__, url_prefix="/admin")

_Row = TypeVar("_Row")


def runner() -> runners.Runner:
    return current_app.extensions["spidersite.runner"]


def settings() -> Any:
    return current_app.config["SPIDERSITE"]


def get_or_404(session: Session, model: type[_Row], key: int, description: str) -> _Row:
    """The row of *model* with primary key *key*, else a 404 answer saying *description*."""
    row = session.get(model, key)
    if row is None:
        abort(404, description=description)
    return row
