"""Per-server configuration (the design documents' CServer), shared by the crawler and the
web admin (it does not import Scrapy).

Every server the crawler visits has one frozen :class:`ServerConfig`, built once from

1. the built-in defaults (:data:`DEFAULTS`),
2. the ``SERVER_DEFAULTS`` Scrapy setting (a dict of field -> value),
3. the ``[defaults]`` table of the sites file,
4. the server's own ``[[server]]`` table in the sites file.

Seeds whose server the sites file does not name get a server with the defaults.  A bad
sites file is refused with the file, the line, the server and the field named.  The sites
file is read by :mod:`search.sitesfile`; URLs are checked by :mod:`search.urls`.

Sites file (TOML)::

    [defaults]
    maxhops = 8
    period = "7d"

    [[server]]
    url = "https://www.postgresql.org/"
    seeds = ["https://www.postgresql.org/docs/current/"]
    read_timeout = 20
    crawl_delay = 1.5
    allow = ['^https://www\\.postgresql\\.org/docs/']

    [[server]]
    url = "https://app.example/"
    render_js = true          # pages written by JavaScript: fetched through chromium
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any
from urllib.parse import urlsplit

from search.analysis import DEFAULT_WEIGHTS, is_known_language
from search.urls import PROXY_SCHEMES, check_url, origin


class ConfigError(ValueError):
    """A bad sites file or server setting; the message names where and what."""


#: Built-in defaults for every server.
DEFAULTS: dict[str, Any] = {
    "proxy": None,
    "basic_auth": None,
    "period": 7 * 24 * 3600,
    "min_period": 3600,
    "max_period": 90 * 24 * 3600,
    "max_net_errors": 16,
    "read_timeout": 30.0,
    "maxhops": 256,
    "userobots": True,
    # The analyzer's section weights, in the design documents' naming.
    "bodyweight": DEFAULT_WEIGHTS["body"],
    "titleweight": DEFAULT_WEIGHTS["title"],
    "urlweight": DEFAULT_WEIGHTS["url"],
    "descweight": DEFAULT_WEIGHTS["desc"],
    "keywordweight": DEFAULT_WEIGHTS["keywords"],
    "boilerplateweight": DEFAULT_WEIGHTS["boilerplate"],
    "crawl_delay": 0.0,
    "concurrency": 8,
    "max_size": 32 * 1024 * 1024,
    "max_pages": 0,
    "language": None,
    "allow": (),
    "deny": (),
    # Sitemaps read: true = robots.txt's Sitemap lines and <server>/sitemap.xml, false =
    # none, or a list of the server's sitemap URLs (read instead).
    "sitemaps": True,
    # Fetch the server's pages through a headless browser (spidersite.render).
    "render_js": False,
}

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: Any) -> int:
    """Seconds from a number or a string such as ``"90"``, ``"30m"``, ``"12h"``, ``"7d"``."""
    if isinstance(value, bool):
        raise ValueError('must be a duration such as 3600, "12h" or "7d"')
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _DURATION_RE.match(str(value))
        if not m:
            raise ValueError(f'{value!r} is not a duration such as 3600, "12h" or "7d"')
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    if not math.isfinite(seconds) or seconds < 1:
        raise ValueError(f"{value!r} is not a duration of at least 1 second")
    return int(seconds)


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?i?b?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(value: Any) -> int:
    """Bytes from a number or a string such as ``"512KB"``, ``"10MB"``, ``"1GiB"``."""
    if isinstance(value, bool):
        raise ValueError('must be a size such as 1048576 or "10MB"')
    if isinstance(value, int | float):
        size = float(value)
    else:
        m = _SIZE_RE.match(str(value))
        if not m:
            raise ValueError(f'{value!r} is not a size such as 1048576 or "10MB"')
        size = float(m.group(1)) * _SIZE_UNITS[m.group(2)[:1].lower()]
    if not math.isfinite(size) or size < 1:
        raise ValueError(f"{value!r} is not a size of at least 1 byte")
    return int(size)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The effective settings of one server."""

    url: str
    proxy: str | None = DEFAULTS["proxy"]
    basic_auth: str | None = DEFAULTS["basic_auth"]
    period: int = DEFAULTS["period"]
    min_period: int = DEFAULTS["min_period"]
    max_period: int = DEFAULTS["max_period"]
    max_net_errors: int = DEFAULTS["max_net_errors"]
    read_timeout: float = DEFAULTS["read_timeout"]
    maxhops: int = DEFAULTS["maxhops"]
    userobots: bool = DEFAULTS["userobots"]
    bodyweight: float = DEFAULTS["bodyweight"]
    titleweight: float = DEFAULTS["titleweight"]
    urlweight: float = DEFAULTS["urlweight"]
    descweight: float = DEFAULTS["descweight"]
    keywordweight: float = DEFAULTS["keywordweight"]
    boilerplateweight: float = DEFAULTS["boilerplateweight"]
    crawl_delay: float = DEFAULTS["crawl_delay"]
    concurrency: int = DEFAULTS["concurrency"]
    max_size: int = DEFAULTS["max_size"]
    max_pages: int = DEFAULTS["max_pages"]
    language: str | None = DEFAULTS["language"]
    allow: tuple[str, ...] = DEFAULTS["allow"]
    deny: tuple[str, ...] = DEFAULTS["deny"]
    sitemaps: bool | tuple[str, ...] = DEFAULTS["sitemaps"]
    render_js: bool = DEFAULTS["render_js"]
    seeds: tuple[str, ...] = ()
    _allow_re: tuple[re.Pattern[str], ...] = field(default=(), repr=False, compare=False)
    _deny_re: tuple[re.Pattern[str], ...] = field(default=(), repr=False, compare=False)

    @property
    def weights(self) -> dict[str, float]:
        """Section weights in the analyzer's naming."""
        return {
            "body": self.bodyweight,
            "title": self.titleweight,
            "url": self.urlweight,
            "desc": self.descweight,
            "keywords": self.keywordweight,
            "boilerplate": self.boilerplateweight,
        }

    @property
    def proxy_url(self) -> str | None:
        if not self.proxy:
            return None
        return self.proxy if "://" in self.proxy else f"http://{self.proxy}"

    def allows(self, url: str) -> bool:
        """Whether the allow/deny patterns let *url* through (deny wins)."""
        if any(p.search(url) for p in self._deny_re):
            return False
        return not self._allow_re or any(p.search(url) for p in self._allow_re)

    def as_dict(self) -> dict[str, Any]:
        """The effective settings, as stored in the ``servers`` table."""
        data = asdict(self)
        for key in ("_allow_re", "_deny_re"):
            data.pop(key)
        for key in ("allow", "deny", "seeds"):
            data[key] = list(data[key])
        if isinstance(data["sitemaps"], tuple):
            data["sitemaps"] = list(data["sitemaps"])
        if data["basic_auth"]:
            data["basic_auth"] = data["basic_auth"].split(":", 1)[0] + ":***"
        return data


#: The field of each section weight of :data:`search.analysis.SECTIONS`.
WEIGHT_FIELDS: dict[str, str] = {
    "body": "bodyweight",
    "title": "titleweight",
    "url": "urlweight",
    "desc": "descweight",
    "keywords": "keywordweight",
    "boilerplate": "boilerplateweight",
}

FIELD_NAMES = frozenset(f.name for f in fields(ServerConfig) if not f.name.startswith("_"))


def _number(value: Any, minimum: float, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"must be a number, not {value!r}")
    if value < minimum or (strict and value == minimum):
        raise ValueError(f"must be {'>' if strict else '≥'} {minimum:g}, not {value!r}")
    return float(value)


def _integer(value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number, not {value!r}")
    if value < minimum:
        raise ValueError(f"must be ≥ {minimum}, not {value!r}")
    return value


def _patterns(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of regular expressions")
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
    return tuple(value)


def _validate_field(name: str, value: Any) -> Any:
    """The typed value of one field, or ValueError saying what is wrong."""
    if name in WEIGHT_FIELDS.values():
        return _number(value, 0)
    if name in ("read_timeout",):
        return _number(value, 0, strict=True)
    if name == "crawl_delay":
        return _number(value, 0)
    if name == "maxhops":
        return _integer(value, 0)
    if name == "max_net_errors":
        return _integer(value, 0)
    if name == "concurrency":
        return _integer(value, 1)
    if name == "max_size":
        return parse_size(value)
    if name == "max_pages":
        return _integer(value, 0)
    if name in ("period", "min_period", "max_period"):
        return parse_duration(value)
    if name in ("userobots", "render_js"):
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, not {value!r}")
        return value
    if name == "proxy":
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError('must be "host:port" or a proxy URL')
        candidate = value if "://" in value else f"http://{value}"
        parts = urlsplit(candidate)
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or not port:
            raise ValueError(f'{value!r} is not "host:port" or a proxy URL with a port')
        if parts.scheme.lower() not in PROXY_SCHEMES or any(ord(c) < 33 for c in value):
            raise ValueError(f"{value!r} is not an http or https proxy")
        return value
    if name == "basic_auth":
        if value is None or value == "":
            return None
        if not isinstance(value, str) or ":" not in value:
            raise ValueError('must be "user:password"')
        return value
    if name == "language":
        if value is None or value == "":
            return None
        if not isinstance(value, str) or not is_known_language(value):
            raise ValueError(f'{value!r} is not a language this analyzer knows (try "en")')
        return value
    if name in ("allow", "deny"):
        return _patterns(value)
    if name == "sitemaps":
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple):
            raise ValueError("must be true, false or a list of sitemap URLs")
        return tuple(check_url(v) for v in value) or False
    if name == "seeds":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple):
            raise ValueError("must be a list of URLs")
        return tuple(check_url(v) for v in value)
    if name == "url":
        return origin(check_url(value))
    raise ValueError(f"unknown field (known fields: {', '.join(sorted(FIELD_NAMES))})")


def check_sitemaps(server: str, sitemaps: Any) -> None:
    """ValueError unless every URL of a server's list of *sitemaps* is on the *server*
    (as the sitemaps protocol has it; robots.txt may list sitemaps of other servers)."""
    if isinstance(sitemaps, list | tuple):
        for url in sitemaps:
            if origin(url) != server:
                raise ValueError(f"{url} is not on the server {server}")


def build(values: Mapping[str, Any], where: str = "") -> ServerConfig:
    """A validated :class:`ServerConfig` from raw field values."""
    prefix = f"{where}: " if where else ""
    if "url" not in values:
        raise ConfigError(f"{prefix}field 'url' is required")
    typed: dict[str, Any] = {}
    for name, value in values.items():
        try:
            typed[name] = _validate_field(name, value)
        except ValueError as exc:
            raise ConfigError(f"{prefix}field '{name}': {exc}") from None
    config = ServerConfig(**typed)
    try:
        check_sitemaps(config.url, config.sitemaps)
    except ValueError as exc:
        raise ConfigError(f"{prefix}field 'sitemaps': {exc}") from None
    return replace(
        config,
        _allow_re=tuple(re.compile(p) for p in config.allow),
        _deny_re=tuple(re.compile(p) for p in config.deny),
    )
