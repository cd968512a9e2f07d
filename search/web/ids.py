"""Database ids as the web application reads them from URLs and forms: whole numbers that
a database row may have (SQLite's and PostgreSQL's 64-bit integers).  Anything else names
no row: a 404, or a value ignored, never a database error (500)."""

from __future__ import annotations

from typing import Any

from werkzeug.routing import IntegerConverter

#: The largest id a database row may have.
MAX_ID = (1 << 63) - 1


class DatabaseId(IntegerConverter):
    """``<int:…>`` of the application's routes: a whole number from 0 to :data:`MAX_ID`
    (Werkzeug's own takes any number of digits)."""

    def __init__(self, url_map: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min", 0)
        kwargs.setdefault("max", MAX_ID)
        super().__init__(url_map, *args, **kwargs)


def database_id(text: str | None) -> int | None:
    """The id *text* writes (ASCII digits, at most :data:`MAX_ID`), else None."""
    if not text or not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if value <= MAX_ID else None
