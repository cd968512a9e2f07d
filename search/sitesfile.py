"""The servers of a crawl and where they come from: the sites file (TOML), the seeds
given as arguments or in a seeds file (:class:`ServerRegistry`).

Every server the crawler visits has one frozen :class:`search.servers.ServerConfig`, built
once from the built-in defaults, the ``SERVER_DEFAULTS`` setting, the sites file's
``[defaults]`` and its own ``[[server]]`` table.  A bad sites file is refused with the file,
the line, the server and the field named.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from search.servers import DEFAULTS, ConfigError, ServerConfig, _validate_field, build
from search.urls import check_url, origin


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
