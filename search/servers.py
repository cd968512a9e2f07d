"""Per-server configuration (the design documents' CServer), shared by the crawler and the
web admin (it does not import Scrapy).

Every server the crawler visits has one frozen :class:`ServerConfig`, built once from

1. the built-in defaults (:data:`DEFAULTS`),
2. the ``SERVER_DEFAULTS`` Scrapy setting (a dict of field -> value),
3. the ``[defaults]`` table of the sites file,
4. the server's own ``[[server]]`` table in the sites file.

Seeds whose server the sites file does not name get a server with the defaults.  A bad
sites file is refused with the file, the line, the server and the field named.

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
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from search.analysis import DEFAULT_WEIGHTS, is_known_language


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


#: The port of a URL of each scheme that names none.
DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21, "news": 119, "nntp": 119}


def origin(url: str) -> str:
    """``scheme://host:port/`` of a URL: what identifies a server."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    default = DEFAULT_PORTS.get(scheme)
    port = parts.port or default
    netloc = f"[{host}]" if ":" in host else host
    if port and port != default:
        netloc = f"{netloc}:{port}"
    return f"{scheme}://{netloc}/"


#: The schemes a crawl may fetch (news and nntp: spidersite.nntp): a seed, a server or a
#: sites-file URL of any other scheme (``file:``, ``data:``, ``s3:``, ``javascript:`` …)
#: is refused, so no sites file and no admin form can point the crawler at the machine it
#: runs on.
URL_SCHEMES = ("http", "https", "ftp", "news", "nntp")
#: The schemes of a proxy (Scrapy's HttpProxyMiddleware speaks HTTP to it).
PROXY_SCHEMES = ("http", "https")


def has_scheme(url: Any, schemes: Iterable[str] = URL_SCHEMES) -> bool:
    """Whether *url* is absolute with one of *schemes* (case-insensitive), with nothing
    before its scheme that a browser would skip (spaces, control characters)."""
    if not isinstance(url, str) or not url[:1].isalpha():
        return False
    try:
        return urlsplit(url).scheme.lower() in schemes
    except ValueError:
        return False


#: Longest URL accepted (Scrapy's ``URLLENGTH_LIMIT`` default, the limit of old browsers).
MAX_URL_LENGTH = 2083


def check_url(url: Any, max_length: int | None = MAX_URL_LENGTH) -> str:
    """The URL if it is an absolute http, https, ftp, news or nntp URL with a valid host,
    at most *max_length* characters and no control characters, else ValueError."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("empty URL")
    url = url.strip()
    if max_length and len(url) > max_length:
        raise ValueError(f"{url[:60]!r}… is longer than {max_length} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        # urlsplit drops tabs, newlines and leading control characters before it reads
        # the scheme: check the text as given, not what urlsplit makes of it.
        raise ValueError(f"{url!r} contains control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ValueError(f"{url!r} cannot be parsed: {exc}") from None
    if parts.scheme.lower() not in URL_SCHEMES:
        raise ValueError(f"{url!r} is not an http, https, ftp, news or nntp URL")
    if not parts.hostname:
        raise ValueError(f"{url!r} has no host")
    if ":" not in parts.hostname:  # an IPv6 literal is checked by urlsplit
        try:
            parts.hostname.encode("idna")
        except UnicodeError:
            raise ValueError(f"{url!r} has an invalid host") from None
    if any(c.isspace() for c in url):
        raise ValueError(f"{url!r} contains spaces")
    return url


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
    if name in ("bodyweight", "titleweight", "urlweight", "descweight", "keywordweight"):
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


def _server_only(name: str, value: Any) -> bool:
    """Whether a field cannot be a default of every server (a URL, seeds, sitemap URLs)."""
    return name in ("url", "seeds") or (name == "sitemaps" and not isinstance(value, bool))


class ServerRegistry:
    """The servers of one crawl: configured ones, plus those of the seeds."""

    def __init__(self, defaults: Mapping[str, Any] | None = None, source: str = "defaults") -> None:
        """*defaults* (field -> value, from *source*) apply to every server."""
        self.defaults: dict[str, Any] = dict(DEFAULTS)
        if defaults:
            for name, value in defaults.items():
                if _server_only(name, value):
                    raise ConfigError(f"{source}: field '{name}' belongs to a [[server]] table")
                try:
                    self.defaults[name] = _validate_field(name, value)
                except ValueError as exc:
                    raise ConfigError(f"{source}: field '{name}': {exc}") from None
        self._servers: dict[str, ServerConfig] = {}

    def __iter__(self) -> Any:
        return iter(self._servers.values())

    def __len__(self) -> int:
        return len(self._servers)

    def add(self, values: Mapping[str, Any], where: str = "") -> ServerConfig:
        merged = {**self.defaults, **values}
        config = build(merged, where)
        self._servers[config.url] = config
        return config

    def ensure(self, url: str) -> ServerConfig:
        """The server of *url*, added with the defaults if it is not configured yet."""
        key = origin(url)
        config = self._servers.get(key)
        if config is None:
            config = self.add({"url": key})
        return config

    def get(self, url: str) -> ServerConfig | None:
        """The configured server of *url*, or None when the crawl must not go there."""
        return self._servers.get(origin(url))

    @property
    def seeds(self) -> list[str]:
        return [seed for server in self._servers.values() for seed in server.seeds]

    def load_file(self, path: str | Path) -> None:
        """Read a sites file; raise :class:`ConfigError` naming file, line, server, field."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the sites file: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: the sites file is not UTF-8 text") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        lines = text.splitlines()

        unknown = set(data) - {"defaults", "server"}
        if unknown:
            name = sorted(unknown)[0]
            raise ConfigError(
                f"{path}:{_line_of(lines, name, 0)}: unknown table or key '{name}' "
                f"(a sites file has [defaults] and [[server]] tables)"
            )
        defaults = data.get("defaults", {})
        if not isinstance(defaults, dict):
            raise ConfigError(f"{path}: 'defaults' must be a table ([defaults])")
        start = _line_of(lines, "[defaults]", 0, header=True)
        for name, value in defaults.items():
            if _server_only(name, value):
                raise ConfigError(
                    f"{path}:{_line_of(lines, name, start)}: [defaults]: "
                    f"field '{name}' belongs to a [[server]] table"
                )
            try:
                self.defaults[name] = _validate_field(name, value)
            except ValueError as exc:
                raise ConfigError(
                    f"{path}:{_line_of(lines, name, start)}: [defaults]: field '{name}': {exc}"
                ) from None

        servers = data.get("server", [])
        if not isinstance(servers, list):
            raise ConfigError(f"{path}: 'server' must be an array of tables ([[server]])")
        header = 0
        for number, table in enumerate(servers, 1):
            header = _line_of(lines, "[[server]]", header, header=True)
            label = f"server #{number}"
            if "url" not in table:
                raise ConfigError(f"{path}:{header}: {label}: field 'url' is required")
            label = f"server {table['url']!r}" if isinstance(table["url"], str) else label
            for name, value in table.items():
                try:
                    _validate_field(name, value)
                except ValueError as exc:
                    raise ConfigError(
                        f"{path}:{_line_of(lines, name, header)}: {label}: field '{name}': {exc}"
                    ) from None
            key = origin(table["url"])
            if key in self._servers:
                raise ConfigError(f"{path}:{header}: {label}: this server is configured twice")
            self.add(table, f"{path}:{header}: {label}")
            header += 1


def _line_of(lines: list[str], key: str, start: int, header: bool = False) -> int:
    """1-based number of the first line at or after *start* (0-based) defining *key*."""
    for i in range(max(start - 1, 0), len(lines)):
        line = lines[i].split("#", 1)[0].strip()
        if header:
            if line.replace(" ", "") == key:
                return i + 1
        elif re.match(rf'^"?{re.escape(key)}"?\s*=', line) or re.match(
            rf'^\[\[?\s*"?{re.escape(key)}"?\s*\]', line
        ):
            return i + 1
    return max(start, 1)


def parse_seeds(values: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split raw seed strings into (valid URLs, one error line per invalid seed)."""
    good: list[str] = []
    bad: list[str] = []
    for raw in values:
        try:
            good.append(check_url(raw))
        except ValueError as exc:
            bad.append(f"invalid seed: {exc}")
    return good, bad


def read_seeds_file(path: str | Path) -> list[str]:
    """Seed URLs from a file: one a line, blank lines and ``#`` comments ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the seeds file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the seeds file is not UTF-8 text") from None
    seeds = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if line:
            seeds.append(line)
    return seeds
