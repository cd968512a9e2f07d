"""How one setting is read and checked, and the line that names a bad one.

The parsers of :class:`spidersite.crawlsettings.CrawlSettings` and of
:func:`spidersite.librarysettings.check_library_settings`: a parser gets (settings, name)
and returns the typed value, or raises ValueError saying what the value must be;
:func:`problem` turns that into the line of a :class:`~search.servers.ConfigError` that
names the setting.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

from search.servers import ConfigError, parse_size

#: A parser gets (settings, name) and returns the typed value, or raises ValueError saying
#: what the value must be (the caller adds the setting's name and the value given).
Parser = Callable[[Any, str], Any]


def flag(settings: Any, name: str) -> bool:
    try:
        return bool(settings.getbool(name))
    except ValueError:
        raise ValueError("must be true or false (True, False, 1 or 0)") from None


def whole(minimum: int, zero_means_none: bool = False) -> Parser:
    what = f"a whole number ≥ {minimum}" + (" (0: no limit)" if zero_means_none else "")

    def parse(settings: Any, name: str) -> int | None:
        raw = settings.get(name)
        try:
            value = settings.getint(name)
        except (TypeError, ValueError):
            raise ValueError(f"must be {what}") from None
        if isinstance(raw, float) and not raw.is_integer():
            raise ValueError(f"must be {what}")
        if value < minimum:
            raise ValueError(f"must be {what}")
        return None if zero_means_none and value == 0 else value

    return parse


def number(minimum: float) -> Parser:
    def parse(settings: Any, name: str) -> float:
        try:
            value = settings.getfloat(name)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value) or value < minimum:
            raise ValueError(f"must be a number of seconds ≥ {minimum:g}")
        return value

    return parse


def size(settings: Any, name: str) -> int:
    try:
        return parse_size(settings.get(name))
    except ValueError:
        raise ValueError('must be a size in bytes ≥ 1, such as 1048576 or "10MB"') from None


def text(settings: Any, name: str) -> str | None:
    value = settings.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str | os.PathLike):
        raise ValueError("must be a path or a name")
    return str(value)


def choice(*choices: str) -> Parser:
    def parse(settings: Any, name: str) -> str:
        value = str(settings.get(name)).strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


def problem(settings: Any, name: str, exc: ValueError) -> str:
    """The line that names the setting (and the value given, unless the message says
    what was wrong itself: URLs are not repeated, they may hold a password)."""
    message = str(exc)
    if name in FROM_ENV and not settings.get(name):
        name = f"{name} (from ${FROM_ENV[name]})"
    elif message.startswith("must be"):
        message = f"{message}, not {settings.get(name)!r}"
    return f"{name}: {message}"


def parse_each(settings: Any, parsers: Mapping[str, Parser]) -> dict[str, Any]:
    """Each setting named in *parsers* read by its parser; a :class:`ConfigError` lists
    every bad value, one a line (:func:`problem`)."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, parse in parsers.items():
        try:
            values[name] = parse(settings, name)
        except ValueError as exc:
            problems.append(problem(settings, name, exc))
    if problems:
        raise ConfigError("\n".join(problems))
    return values


#: The environment variable a setting falls back to.
FROM_ENV = {
    "STORE_DATABASE_URL": "DATABASE_URL",
    "SCALEOUT_REDIS_URL": "SPIDERSITE_REDIS_URL",
}
