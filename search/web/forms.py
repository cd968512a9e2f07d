"""The admin's forms: text fields in, validated values out.

:class:`ServerForm`, a server's configuration: validation is
:func:`search.servers._validate_field` / :func:`search.servers.build`, the same as for a
sites file, so the admin never stores a value a crawl would refuse.  :class:`CrawlForm`, a
crawl to start: its mode is checked with :mod:`search.crawlargs`, as the spider checks its
arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from search import crawlargs
from search.servers import ConfigError, _validate_field, build, check_sitemaps
from search.web.ids import database_id

#: Form fields in display order: name, label, kind, help.
FIELDS: list[tuple[str, str, str, str]] = [
    ("url", "Server URL", "text", "scheme, host and port, e.g. https://docs.example/"),
    ("period", "Re-index period", "text", 'seconds, or "30m", "12h", "7d", "2w"'),
    ("min_period", "Shortest revisit interval", "text", 'of the adaptive re-crawl, e.g. "1h"'),
    ("max_period", "Longest revisit interval", "text", 'of the adaptive re-crawl, e.g. "90d"'),
    ("max_size", "Largest page", "text", 'bytes, or "512KB", "10MB"; larger ones are cut off'),
    ("max_pages", "Page cap", "int", "pages stored per crawl (≥ 0; 0 = no cap)"),
    ("maxhops", "Max hops", "int", "links followed from a seed (≥ 0)"),
    ("read_timeout", "Read timeout", "number", "seconds (> 0)"),
    ("max_net_errors", "Max network errors", "int", "0 = never cut off"),
    ("crawl_delay", "Crawl delay", "number", "seconds between requests (≥ 0)"),
    ("concurrency", "Concurrency", "int", "requests in flight (≥ 1)"),
    ("userobots", "Obey robots.txt", "bool", ""),
    ("render_js", "Render JavaScript", "bool", "fetch pages through headless chromium"),
    ("proxy", "Proxy", "text", '"host:port" or a proxy URL'),
    ("basic_auth", "Basic auth", "secret", '"user:password"; leave empty to keep'),
    ("language", "Language", "text", "stemming language (en, de, zh, …); empty = from page"),
    ("bodyweight", "Body weight", "number", "≥ 0"),
    ("titleweight", "Title weight", "number", "≥ 0"),
    ("urlweight", "URL weight", "number", "≥ 0"),
    ("descweight", "Description weight", "number", "≥ 0"),
    ("keywordweight", "Keywords weight", "number", "≥ 0"),
    (
        "boilerplateweight",
        "Boilerplate weight",
        "number",
        "words outside the main content: navigation, header, footer (≥ 0)",
    ),
    ("allow", "Allow patterns", "lines", "regular expressions, one a line"),
    ("deny", "Deny patterns", "lines", "regular expressions, one a line"),
    (
        "sitemaps",
        "Sitemaps",
        "sitemaps",
        "empty: robots.txt's and /sitemap.xml; \"false\": none; else the server's sitemap "
        "URLs, one a line",
    ),
]
#: What the sitemaps field takes for "read none".
_OFF = ("false", "off", "no", "none")
KIND = {name: kind for name, _, kind, _ in FIELDS}


def _number(raw: str) -> Any:
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw  # the validator names it: "must be a number, not 'abc'"


@dataclass
class ServerForm:
    """Raw text of each field (to show again), validated values, and errors by field."""

    raw: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    has_auth: bool = False

    @classmethod
    def from_config(cls, url: str, config: Mapping[str, Any]) -> ServerForm:
        form = cls()
        form.raw["url"] = url
        for name, kind in KIND.items():
            if name == "url" or name not in config or config[name] is None:
                continue
            value = config[name]
            if kind == "sitemaps":
                form.raw[name] = (
                    "" if value is True else "false" if value is False else "\n".join(value)
                )
            elif kind == "lines":
                form.raw[name] = "\n".join(value)
            elif kind == "bool":
                form.raw[name] = "on" if value else ""
            elif kind == "secret":
                form.has_auth = bool(value)
            else:
                form.raw[name] = str(value)
        if "userobots" not in config:
            form.raw["userobots"] = "on"
        return form

    @classmethod
    def from_request(
        cls, data: Mapping[str, str], old: Mapping[str, Any] | None = None
    ) -> ServerForm:
        """Parse and validate posted fields; *old* is the stored config (for basic_auth)."""
        form = cls()
        for name, kind in KIND.items():
            multiline = kind in ("lines", "sitemaps")
            text = (data.get(name) or "").strip() if not multiline else data.get(name) or ""
            if kind == "secret":
                if text:
                    value: Any = text
                elif data.get("clear_basic_auth"):
                    continue
                elif old and old.get(name):
                    form.has_auth = True
                    form.values[name] = old[name]
                    continue
                else:
                    continue
            elif kind == "bool":
                form.raw[name] = "on" if text else ""
                value = bool(text)
            elif multiline:
                form.raw[name] = text
                lines = [line.strip() for line in text.splitlines() if line.strip()]
                if not lines:
                    continue
                value = lines
                if kind == "sitemaps" and len(lines) == 1 and lines[0].lower() in _OFF:
                    value = False
            else:
                form.raw[name] = text
                if not text:
                    if name == "url":
                        form.errors[name] = "empty URL: give the server's URL"
                    continue
                value = _number(text) if kind in ("int", "number") else text
            try:
                typed = _validate_field(name, value)
            except ValueError as exc:
                form.errors[name] = str(exc)
                continue
            if isinstance(typed, tuple):
                typed = list(typed)
            form.values[name] = typed
        if "url" in form.values and "sitemaps" in form.values:
            try:
                check_sitemaps(form.url, form.values["sitemaps"])
            except ValueError as exc:
                form.errors["sitemaps"] = str(exc)
        if not form.errors:
            try:
                build(form.values)
            except ConfigError as exc:  # pragma: no cover - fields were checked one by one
                form.errors["url"] = str(exc)
        return form

    @property
    def url(self) -> str:
        return str(self.values.get("url", ""))

    @property
    def config(self) -> dict[str, Any]:
        """What is stored in ``servers.admin_config`` (every field but the URL)."""
        return {k: v for k, v in self.values.items() if k != "url"}


@dataclass
class CrawlForm:
    """The admin's form that starts a crawl: the servers, and a mode: ``normal``,
    ``topic`` (with its words and an optional threshold) or ``recrawl-<mode>`` (one of
    :data:`search.crawlargs.RECRAWL_MODES`)."""

    server_ids: list[int] = field(default_factory=list)
    topic: str | None = None
    threshold: float | None = None
    recrawl: str | None = None
    #: What is wrong with the form, else None.
    error: str | None = None

    @classmethod
    def from_request(cls, data: Any) -> CrawlForm:
        """Parse and check the posted form (*data*: a werkzeug ``MultiDict``)."""
        ids = (database_id(v) for v in data.getlist("server"))
        form = cls(server_ids=[i for i in ids if i is not None])
        mode = data.get("mode", "normal")
        if mode == "topic":
            form.topic = (data.get("topic") or "").strip() or None
            if not form.topic:
                form.error = "topic: give one or more words for a topic crawl"
            raw = (data.get("topic_threshold") or "").strip()
            if raw:
                try:
                    form.threshold = crawlargs.parse_threshold(raw)
                except ConfigError as exc:
                    form.error = str(exc)
        recrawl = mode.removeprefix("recrawl-")
        if mode.startswith("recrawl-") and recrawl in crawlargs.RECRAWL_MODES:
            form.recrawl = recrawl
        elif mode not in ("normal", "topic"):
            form.error = f"unknown crawl mode {mode!r}"
        return form
