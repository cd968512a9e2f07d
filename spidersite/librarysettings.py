"""Scrapy's own settings, and scrapy-playwright's, checked as the project's own are.

:func:`check_library_settings` checks the library settings the project sets or reads (the
README's "Scrapy settings the project changes") before Scrapy starts, through
:func:`spidersite.arguments.check_arguments`: a bad value is refused with one line naming
it, as :meth:`spidersite.crawlsettings.CrawlSettings.from_settings` refuses the project's.

:class:`CookiesAddon` (in ``ADDONS``) puts Scrapy's cookies middleware, which the project's
``DOWNLOADER_MIDDLEWARES_BASE`` leaves out, back when ``COOKIES_ENABLED`` is on.
"""

from __future__ import annotations

from typing import Any

from spidersite.settingparsers import Parser, flag, number, parse_each, whole

#: Where Scrapy lists its cookies middleware (``DOWNLOADER_MIDDLEWARES_BASE``).
COOKIES_ORDER = 700


class CookiesAddon:
    """Add-on: with ``COOKIES_ENABLED`` on, Scrapy's cookies middleware is added to
    ``DOWNLOADER_MIDDLEWARES`` at its usual place (unless named there already).  The
    project's ``DOWNLOADER_MIDDLEWARES_BASE`` leaves it out because Scrapy imports every
    listed middleware, and that one imports tldextract and requests, even when it is off."""

    def update_settings(self, settings: Any) -> None:
        if not settings.getbool("COOKIES_ENABLED"):
            return
        from scrapy.downloadermiddlewares.cookies import CookiesMiddleware

        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", CookiesMiddleware, COOKIES_ORDER
        )


def check_library_settings(settings: Any, rendering: bool = False) -> None:
    """Check Scrapy's own settings the project sets or reads (README, "Scrapy settings the
    project changes") and, when the crawl renders pages, scrapy-playwright's, as the
    project's own are checked: ConfigError with one line per bad value, naming it."""
    from scrapy.utils.misc import load_object

    def integer(settings: Any, name: str) -> int:
        try:
            return int(settings.getint(name))
        except (TypeError, ValueError):
            raise ValueError("must be a whole number") from None

    def positive(settings: Any, name: str) -> float:
        try:
            value = float(number(0)(settings, name))
        except ValueError:
            value = 0.0
        if value == 0:
            raise ValueError("must be a number of seconds > 0")
        return value

    def json_object(settings: Any, name: str) -> dict[str, Any]:
        try:
            return dict(settings.getdict(name))
        except (TypeError, ValueError):
            raise ValueError("must be a JSON object") from None

    def imported(settings: Any, name: str, value: Any = None) -> Any:
        value = settings.get(name) if value is None else value
        try:
            found = load_object(value)
        except Exception:  # ImportError, NameError, ValueError, or the module's own
            raise ValueError("must be the import path of an object (package.module.name)") from None
        if not callable(found):
            raise ValueError("must be the import path of a function or class")
        return found

    def handlers(settings: Any, name: str) -> None:
        for scheme, path in json_object(settings, name).items():
            if path is not None:
                try:
                    imported(settings, name, path)
                except ValueError:
                    raise ValueError(f"{scheme!r}: {path!r} cannot be imported") from None

    parsers: dict[str, Parser] = {
        "ROBOTSTXT_OBEY": flag,
        "COOKIES_ENABLED": flag,
        "TELNETCONSOLE_ENABLED": flag,
        "REMOTE_CONTROL_ENABLED": flag,
        "WARN_ON_GENERATOR_RETURN_VALUE": flag,
        "CONCURRENT_REQUESTS": whole(1),
        "CONCURRENT_REQUESTS_PER_DOMAIN": whole(1),
        "SCRAPER_SLOT_MAX_ACTIVE_SIZE": whole(1),
        "DOWNLOAD_MAXSIZE": whole(0, zero_means_none=True),
        "DOWNLOAD_WARNSIZE": whole(0, zero_means_none=True),
        "DOWNLOAD_TIMEOUT": positive,
        "RETRY_TIMES": whole(0),
        "DEPTH_LIMIT": whole(0, zero_means_none=True),
        "DEPTH_PRIORITY": integer,
        "SCHEDULER_DISK_QUEUE": imported,
        "SCHEDULER_MEMORY_QUEUE": imported,
        "DOWNLOAD_HANDLERS": handlers,
    }
    if rendering:
        parsers["PLAYWRIGHT_LAUNCH_OPTIONS"] = json_object
        parsers["PLAYWRIGHT_MAX_CONTEXTS"] = whole(0, zero_means_none=True)
        parsers["PLAYWRIGHT_MAX_PAGES_PER_CONTEXT"] = whole(1)
        parsers["PLAYWRIGHT_ABORT_REQUEST"] = imported
    parse_each(
        settings, {n: parse for n, parse in parsers.items() if settings.get(n) not in (None, "")}
    )
