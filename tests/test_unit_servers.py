"""Unit tests for search.servers: durations, URLs, field validation, sites and seeds files."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from search.servers import DEFAULTS, FIELD_NAMES, ConfigError, ServerConfig, build, parse_duration
from search.sitesfile import ServerRegistry, parse_seeds, read_seeds_file
from search.urls import check_url, origin

URL = "https://a.example/"

# --- parse_duration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90", 90),
        (90, 90),
        (90.0, 90),
        ("30m", 1800),
        ("12h", 43200),
        ("7d", 604800),
        ("2w", 1209600),
        ("45s", 45),
        ("1.5m", 90),
        (" 3 h ", 10800),
    ],
)
def test_parse_duration(value: Any, seconds: int) -> None:
    result = parse_duration(value)
    assert result == seconds
    assert type(result) is int


@pytest.mark.parametrize(
    "value", ["abc", 0, -1, True, False, "0", "-5", "", None, "12x", "h", "1 2h", [1]]
)
def test_parse_duration_rejects(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize("value", [0.5, "0.5", "0.9s"], ids=["float", "str", "seconds"])
def test_parse_duration_subsecond_is_not_zero(value: Any) -> None:
    try:
        result = parse_duration(value)
    except ValueError:
        return
    assert result > 0


# --- origin / check_url --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM:80/a?b#c", "http://example.com/"),
        ("https://x.org:443", "https://x.org/"),
        ("https://X.org/path", "https://x.org/"),
        ("https://x.org:8443/p", "https://x.org:8443/"),
        ("http://x.org:443/", "http://x.org:443/"),
        ("ftp://files.example:21/pub", "ftp://files.example/"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
        ("http://user:pw@Host.example/", "http://host.example/"),
    ],
)
def test_origin(url: str, expected: str) -> None:
    assert origin(url) == expected


@pytest.mark.parametrize(
    "url", ["http://a.example/", "https://a.example:8443/x?y=1", "ftp://f.example/pub/"]
)
def test_check_url_accepts(url: str) -> None:
    assert check_url(url) == url


def test_check_url_strips_surrounding_space() -> None:
    assert check_url("  http://ok.example/ \n") == "http://ok.example/"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty URL"),
        ("   ", "empty URL"),
        (None, "empty URL"),
        (42, "empty URL"),
        ("ftp:/x", "has no host"),
        ("mailto:a@b", "not an http, https, ftp, news or nntp URL"),
        ("http://", "has no host"),
        ("notaurl", "not an http, https, ftp, news or nntp URL"),
        ("javascript:alert(1)", "not an http, https, ftp, news or nntp URL"),
        ("http://exa mple.com/", "contains spaces"),
        ("http://a.example/x y", "contains spaces"),
        ("http://a.example/x\u00a0y", "contains spaces"),  # no-break space
        ("http://a.example/x\u3000y", "contains spaces"),  # ideographic space
        ("http://a.example/x\u2028y", "contains spaces"),  # line separator
        ("http://a..b/", "invalid host"),  # an empty label
        ("http://" + "a" * 64 + ".example/", "invalid host"),  # a label of 64 characters
        ("http://h:99999/", "cannot be parsed"),
        ("http://h:abc/", "cannot be parsed"),
        # nothing that reads the machine the crawler runs on, or anything but the network
        ("file:///etc/passwd", "not an http, https, ftp, news or nntp URL"),
        ("FILE://localhost/etc/passwd", "not an http, https, ftp, news or nntp URL"),
        ("data:text/html,<h1>x</h1>", "not an http, https, ftp, news or nntp URL"),
        ("s3://bucket/key", "not an http, https, ftp, news or nntp URL"),
        ("news:comp.lang.python", "has no host"),
        ("vbscript:msgbox(1)", "not an http, https, ftp, news or nntp URL"),
        # urlsplit drops these before reading the scheme: refused as given
        ("\x01file:///etc/passwd", "control characters"),
        ("\x00http://a.example/", "control characters"),
        ("fi\tle:///etc/passwd", "control characters"),
        ("http://a.example/\nx", "control characters"),
        ("http://a.example/\x7f", "control characters"),
    ],
)
def test_check_url_rejects(url: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        check_url(url)


def test_check_url_character_classes_are_pythons() -> None:
    """The regular expressions of check_url find exactly the characters ``str.isspace``
    and the C0/DEL test find, over every code point."""
    from search.urls import _CONTROL, _SPACE

    for code in range(0x110000):
        char = chr(code)
        assert bool(_SPACE.search(char)) == char.isspace(), hex(code)
        assert bool(_CONTROL.search(char)) == (code < 0x20 or code == 0x7F), hex(code)


# --- build: every field --------------------------------------------------------------------


def test_build_minimal_uses_defaults() -> None:
    config = build({"url": "https://A.example/some/page"})
    assert config.url == URL  # the URL is reduced to its origin
    for name, value in DEFAULTS.items():
        assert getattr(config, name) == value, name
    assert config.seeds == ()
    assert config.weights == {
        "body": 1.0,
        "title": 4.0,
        "url": 2.0,
        "desc": 2.0,
        "keywords": 2.0,
        "boilerplate": 0.2,
    }


def test_field_names() -> None:
    assert "url" in FIELD_NAMES
    assert "seeds" in FIELD_NAMES
    assert not any(name.startswith("_") for name in FIELD_NAMES)
    assert set(DEFAULTS) <= FIELD_NAMES


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("bodyweight", 0, 0.0),
        ("titleweight", 10, 10.0),
        ("urlweight", 0.5, 0.5),
        ("descweight", 3, 3.0),
        ("keywordweight", 0.0, 0.0),
        ("boilerplateweight", 0.5, 0.5),
        ("crawl_delay", 0, 0.0),
        ("crawl_delay", 1.5, 1.5),
        ("read_timeout", 0.1, 0.1),
        ("maxhops", 0, 0),
        ("maxhops", 5, 5),
        ("max_net_errors", 0, 0),
        ("concurrency", 1, 1),
        ("period", "12h", 43200),
        ("period", 60, 60),
        ("userobots", False, False),
        ("proxy", "proxy.example:3128", "proxy.example:3128"),
        ("proxy", "http://proxy.example:3128", "http://proxy.example:3128"),
        ("proxy", "", None),
        ("proxy", None, None),
        ("basic_auth", "bob:secret", "bob:secret"),
        ("basic_auth", "bob:pa:ss", "bob:pa:ss"),
        ("basic_auth", None, None),
        ("language", "en", "en"),
        ("language", "de-AT", "de-AT"),
        ("language", "zh-CN", "zh-CN"),
        ("language", "", None),
        ("allow", "^https://a", ("^https://a",)),
        ("allow", ["/docs/", "/blog/"], ("/docs/", "/blog/")),
        ("deny", ["\\.pdf$"], ("\\.pdf$",)),
        ("seeds", "https://a.example/x", ("https://a.example/x",)),
        (
            "seeds",
            ["https://a.example/x", "https://a.example/y"],
            (
                "https://a.example/x",
                "https://a.example/y",
            ),
        ),
    ],
)
def test_build_accepts(name: str, value: Any, expected: Any) -> None:
    config = build({"url": URL, name: value})
    result = getattr(config, name)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("bodyweight", -0.1, "must be ≥ 0"),
        ("titleweight", "4", "must be a number"),
        ("urlweight", True, "must be a number"),
        ("descweight", None, "must be a number"),
        ("keywordweight", -1, "must be ≥ 0"),
        ("boilerplateweight", -0.2, "must be ≥ 0"),
        ("crawl_delay", -1, "must be ≥ 0"),
        ("read_timeout", 0, "must be > 0"),
        ("read_timeout", -3, "must be > 0"),
        ("read_timeout", "30", "must be a number"),
        ("maxhops", -1, "must be ≥ 0"),
        ("maxhops", 1.0, "must be a whole number"),
        ("maxhops", True, "must be a whole number"),
        ("maxhops", "3", "must be a whole number"),
        ("max_net_errors", -1, "must be ≥ 0"),
        ("concurrency", 0, "must be ≥ 1"),
        ("concurrency", 2.5, "must be a whole number"),
        ("period", "abc", "not a duration"),
        ("period", 0, "at least 1 second"),
        ("userobots", "yes", "must be true or false"),
        ("userobots", 1, "must be true or false"),
        ("proxy", "proxy.example", "host:port"),
        ("proxy", "proxy.example:abc", "host:port"),
        ("proxy", 3128, "host:port"),
        ("proxy", "file://proxy.example:3128", "not an http or https proxy"),
        ("proxy", "socks5://proxy.example:1080", "not an http or https proxy"),
        ("proxy", "proxy.example:3128\r\nX-Evil: 1", "host:port"),
        ("url", "file:///etc/", "not an http, https, ftp, news or nntp URL"),
        ("seeds", ["file:///etc/passwd"], "not an http, https, ftp, news or nntp URL"),
        ("basic_auth", "bob", "user:password"),
        ("basic_auth", 5, "user:password"),
        ("language", "xx", "not a language"),
        ("language", 5, "not a language"),
        ("allow", "(", "not a valid regular expression"),
        ("allow", [1], "list of regular expressions"),
        ("deny", ["ok", "["], "not a valid regular expression"),
        ("deny", 5, "list of regular expressions"),
        ("seeds", ["notaurl"], "not an http, https, ftp, news or nntp URL"),
        ("seeds", 5, "must be a list of URLs"),
        ("bogus", 1, "unknown field"),
    ],
)
def test_build_rejects_with_field_named(name: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build({"url": URL, name: value}, where="here")
    text = str(info.value)
    assert text.startswith(f"here: field '{name}': ")
    assert message in text


def test_build_rejects_bad_url() -> None:
    with pytest.raises(ConfigError, match=r"^field 'url': 'mailto:x@y' is not an http"):
        build({"url": "mailto:x@y"})


def test_unknown_field_lists_known_fields() -> None:
    with pytest.raises(ConfigError, match=r"known fields: allow, basic_auth, .*userobots"):
        build({"url": URL, "max_hops": 3})


def test_config_error_is_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    "name", ["bodyweight", "titleweight", "boilerplateweight", "read_timeout", "crawl_delay"]
)
def test_build_rejects_nan(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        build({"url": URL, name: math.nan})


def test_build_without_url_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="url"):
        build({"maxhops": 1})


# --- ServerConfig --------------------------------------------------------------------------


def test_allows_without_patterns_allows_everything() -> None:
    assert build({"url": URL}).allows("https://a.example/anything")


def test_allows_allow_and_deny_deny_wins() -> None:
    config = build({"url": URL, "allow": ["/docs/"], "deny": ["/docs/old/"]})
    assert config.allows("https://a.example/docs/x")
    assert not config.allows("https://a.example/docs/old/x")  # allowed and denied: deny wins
    assert not config.allows("https://a.example/blog/")  # not allowed


def test_allows_deny_only() -> None:
    config = build({"url": URL, "deny": [r"\.pdf$"]})
    assert config.allows("https://a.example/a.html")
    assert not config.allows("https://a.example/a.pdf")


def test_allows_patterns_are_searched_not_matched() -> None:
    config = build({"url": URL, "allow": "docs"})
    assert config.allows("https://a.example/x/docs/y")


def test_proxy_url() -> None:
    assert build({"url": URL}).proxy_url is None
    assert build({"url": URL, "proxy": "p.example:3128"}).proxy_url == "http://p.example:3128"
    assert build({"url": URL, "proxy": "https://p.example:3128"}).proxy_url == (
        "https://p.example:3128"
    )


def test_as_dict_hides_password() -> None:
    config = build(
        {
            "url": URL,
            "basic_auth": "bob:s3cret:x",
            "allow": ["/a"],
            "seeds": ["https://a.example/s"],
        }
    )
    data = config.as_dict()
    assert data["basic_auth"] == "bob:***"
    assert "s3cret" not in repr(data)
    assert data["allow"] == ["/a"]
    assert data["deny"] == []
    assert data["seeds"] == ["https://a.example/s"]
    assert "_allow_re" not in data
    assert "_deny_re" not in data
    assert set(data) == FIELD_NAMES
    assert config.basic_auth == "bob:s3cret:x"  # the config itself keeps it


def test_as_dict_without_auth() -> None:
    assert build({"url": URL}).as_dict()["basic_auth"] is None


def test_server_config_is_frozen() -> None:
    config = build({"url": URL})
    with pytest.raises(AttributeError):
        config.maxhops = 3  # type: ignore[misc]


def test_equal_configs_compare_equal_ignoring_compiled_patterns() -> None:
    assert build({"url": URL, "allow": "x"}) == ServerConfig(url=URL, allow=("x",))


# --- ServerRegistry ------------------------------------------------------------------------


def test_registry_defaults_apply_and_server_values_win() -> None:
    registry = ServerRegistry({"maxhops": 3, "period": "1d"})
    a = registry.add({"url": "https://a.example/"})
    b = registry.add({"url": "https://b.example/", "maxhops": 9})
    assert (a.maxhops, a.period) == (3, 86400)
    assert (b.maxhops, b.period) == (9, 86400)
    assert len(registry) == 2
    assert list(registry) == [a, b]


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        ({"maxhops": "x"}, "defaults: field 'maxhops': must be a whole number"),
        ({"bogus": 1}, "defaults: field 'bogus': unknown field"),
        ({"url": URL}, "defaults: field 'url' belongs to a [[server]] table"),
        ({"seeds": [URL]}, "defaults: field 'seeds' belongs to a [[server]] table"),
    ],
)
def test_registry_rejects_bad_defaults(defaults: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        ServerRegistry(defaults)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"url": URL, "bodyweight": -1}, "bodyweight"),
        ({"url": URL, "maxhops": 2.5}, "maxhops"),
        ({"url": URL, "read_timeout": 0}, "read_timeout"),
        ({"url": URL, "concurrency": 0}, "concurrency"),
        ({"url": URL, "userobots": "no"}, "userobots"),
        ({"url": URL, "proxy": "nohost"}, "proxy"),
        ({"url": URL, "basic_auth": "nopass"}, "basic_auth"),
        ({"url": URL, "language": "xx"}, "language"),
        ({"url": URL, "allow": ["("]}, "allow"),
        ({"url": URL, "deny": ["("]}, "deny"),
        ({"url": URL, "nope": 1}, "nope"),
        ({"url": "notaurl"}, "url"),
    ],
)
def test_registry_add_validates(values: dict[str, Any], field: str) -> None:
    registry = ServerRegistry()
    with pytest.raises(ConfigError, match=rf"^where: field '{field}': "):
        registry.add(values, where="where")
    assert len(registry) == 0


def test_registry_ensure_and_get() -> None:
    registry = ServerRegistry({"maxhops": 4})
    config = registry.ensure("HTTP://Foo.example:80/page")
    assert config.url == "http://foo.example/"
    assert config.maxhops == 4
    assert registry.ensure("http://foo.example/other") is config
    assert registry.get("http://foo.example/x") is config
    assert registry.get("http://foo.example:8080/x") is None
    assert registry.get("https://foo.example/x") is None


def test_registry_seeds() -> None:
    registry = ServerRegistry()
    registry.add({"url": "https://a.example/", "seeds": ["https://a.example/1"]})
    registry.add({"url": "https://b.example/", "seeds": ["https://b.example/2"]})
    assert registry.seeds == ["https://a.example/1", "https://b.example/2"]


# --- load_file -----------------------------------------------------------------------------

GOOD = """\
# The sites file
[defaults]
maxhops = 8
period = "7d"
bodyweight = 2

[[server]]
url = "https://www.postgresql.org/docs/"
seeds = ["https://www.postgresql.org/docs/current/"]
read_timeout = 20
crawl_delay = 1.5
allow = ['^https://www\\.postgresql\\.org/docs/']

[[server]]
url = "http://Example.COM:8080"
seeds = [
  "http://example.com:8080/a",
  "http://example.com:8080/b",
]
maxhops = 2
basic_auth = "bob:secret"
"""


def write(tmp_path: Path, text: str, name: str = "sites.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> tuple[Path, str]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        ServerRegistry().load_file(path)
    return path, str(info.value)


def test_load_good_file(tmp_path: Path) -> None:
    registry = ServerRegistry()
    registry.load_file(write(tmp_path, GOOD))
    pg, ex = list(registry)
    assert len(registry) == 2

    assert pg.url == "https://www.postgresql.org/"
    assert pg.seeds == ("https://www.postgresql.org/docs/current/",)
    assert pg.read_timeout == 20.0
    assert pg.crawl_delay == 1.5
    assert pg.maxhops == 8  # from [defaults]
    assert pg.period == 7 * 86400
    assert pg.bodyweight == 2.0  # from [defaults]
    assert pg.allows("https://www.postgresql.org/docs/current/sql.html")
    assert not pg.allows("https://www.postgresql.org/about/")

    assert ex.url == "http://example.com:8080/"
    assert ex.maxhops == 2  # the server's own value wins
    assert ex.bodyweight == 2.0
    assert ex.read_timeout == DEFAULTS["read_timeout"]
    assert ex.basic_auth == "bob:secret"
    assert ex.as_dict()["basic_auth"] == "bob:***"

    assert registry.seeds == [
        "https://www.postgresql.org/docs/current/",
        "http://example.com:8080/a",
        "http://example.com:8080/b",
    ]
    assert registry.get("https://www.postgresql.org/x") is pg
    assert registry.defaults["maxhops"] == 8


def test_load_empty_file(tmp_path: Path) -> None:
    registry = ServerRegistry()
    registry.load_file(write(tmp_path, "# nothing\n"))
    assert len(registry) == 0


def test_load_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="cannot read the sites file"):
        ServerRegistry().load_file(path)


def test_load_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin.toml"
    path.write_bytes(b'[defaults]\nlanguage = "fran\xe7ais"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        ServerRegistry().load_file(path)


@pytest.mark.parametrize(
    ("table", "line"),
    [
        ('url = "file:///etc/"', 2),
        ('url = "http://a.example/"\nseeds = ["file:///etc/passwd"]', 3),
        ('url = "http://a.example/"\nseeds = ["http://a.example/", "data:,x"]', 3),
        ('url = "http://a.example/"\nproxy = "file://p.example:1"', 3),
    ],
)
def test_sites_file_refuses_non_network_schemes(tmp_path: Path, table: str, line: int) -> None:
    path, message = load_error(tmp_path, f"[[server]]\n{table}\n")
    assert message.startswith(f"{path}:{line}: server "), message
    assert "not an http" in message


def test_load_invalid_toml(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, "[defaults\nmaxhops = 3\n")
    assert message.startswith(f"{path}: not valid TOML")


def test_load_unknown_top_level_table(tmp_path: Path) -> None:
    path, message = load_error(
        tmp_path,
        '[defaults]\nmaxhops = 3\n\n[crawler]\nperiod = "1d"\n',
    )
    assert message.startswith(f"{path}:4: unknown table or key 'crawler'")
    assert "[defaults] and [[server]]" in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[defaults]\nmaxhops = 3\n\n[[servers]]\nurl = "https://a.example/"\n', "servers"),
        ('[defaults]\nmaxhops = 3\n\n[default]\nperiod = "1d"\n', "default"),
    ],
    ids=["array-of-tables", "prefix-of-defaults"],
)
def test_load_unknown_table_line_number(tmp_path: Path, text: str, key: str) -> None:
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}:4: unknown table or key '{key}'")


def test_load_unknown_top_level_scalar(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, "# x\n\nmaxhops = 3\n")
    assert message.startswith(f"{path}:3: unknown table or key 'maxhops'")


BAD_SECOND_SERVER = """\
[defaults]
maxhops = 8

[[server]]
url = "https://a.example/"
maxhops = 3
crawl_delay = 1

[[server]]
url = "https://b.example/"
seeds = ["https://b.example/start"]
crawl_delay = 1
maxhops = -2
"""


def test_load_bad_field_in_second_server(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, BAD_SECOND_SERVER)
    # maxhops = -2 is on line 13 (1-based); server #1 also has a maxhops on line 6.
    line = BAD_SECOND_SERVER.splitlines().index("maxhops = -2") + 1
    assert line == 13
    assert str(path) in message
    assert message.startswith(f"{path}:13: ")
    assert "'https://b.example/'" in message
    assert "field 'maxhops'" in message
    assert "must be ≥ 0, not -2" in message


def test_load_bad_field_line_number_with_quoted_key(tmp_path: Path) -> None:
    text = (
        '[[server]]\nurl = "https://a.example/"\n\n'
        '[[server]]\nurl = "https://b.example/"\n"read_timeout" = 0\n'
    )
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}:6: server 'https://b.example/': field 'read_timeout'")


def test_load_bad_url_in_server(tmp_path: Path) -> None:
    text = '[[server]]\nurl = "https://a.example/"\n\n[[server]]\nmaxhops = 1\nurl = "nope"\n'
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}:6: server 'nope': field 'url': ")


def test_load_bad_seed_in_server(tmp_path: Path) -> None:
    text = '[[server]]\nurl = "https://a.example/"\nseeds = ["https://a.example/", "x y"]\n'
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}:3: server 'https://a.example/': field 'seeds': ")


def test_load_missing_url(tmp_path: Path) -> None:
    text = '[[server]]\nurl = "https://a.example/"\n\n# second\n[[server]]\nmaxhops = 2\n'
    path, message = load_error(tmp_path, text)
    assert message == f"{path}:5: server #2: field 'url' is required"


def test_load_duplicate_server(tmp_path: Path) -> None:
    text = (
        '[[server]]\nurl = "https://a.example/"\n\n'
        '[[server]]\nurl = "HTTPS://A.example:443/other"\n'
    )
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}:4: server 'HTTPS://A.example:443/other': ")
    assert "configured twice" in message


def test_load_bad_field_in_defaults(tmp_path: Path) -> None:
    text = '# head\n\n[defaults]\nmaxhops = 3\nconcurrency = 0\n\n[[server]]\nurl = "https://a.example/"\n'
    path, message = load_error(tmp_path, text)
    assert message.startswith(f"{path}:5: [defaults]: field 'concurrency': must be ≥ 1")


def test_load_unknown_field_in_defaults(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, "[defaults]\nmax_hops = 3\n")
    assert message.startswith(f"{path}:2: [defaults]: field 'max_hops': unknown field")


def test_load_url_in_defaults(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, '[defaults]\nurl = "https://a.example/"\n')
    assert message.startswith(f"{path}:2: [defaults]: field 'url' belongs to a [[server]] table")


def test_load_defaults_not_a_table(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, "defaults = 3\n")
    assert message == f"{path}: 'defaults' must be a table ([defaults])"


def test_load_server_not_an_array(tmp_path: Path) -> None:
    path, message = load_error(tmp_path, '[server]\nurl = "https://a.example/"\n')
    assert message == f"{path}: 'server' must be an array of tables ([[server]])"


def test_load_defaults_applied_to_servers_of_same_file_after_it(tmp_path: Path) -> None:
    # [defaults] written after the servers still applies to them: TOML is read as a whole.
    text = '[[server]]\nurl = "https://a.example/"\n\n[defaults]\nmaxhops = 1\n'
    registry = ServerRegistry()
    registry.load_file(write(tmp_path, text))
    assert next(iter(registry)).maxhops == 1


# --- seeds ---------------------------------------------------------------------------------


def test_parse_seeds() -> None:
    good, bad = parse_seeds(
        ["https://a.example/", " http://b.example/x ", "nope", "", "mailto:x@y", "ftp://f.example/"]
    )
    assert good == ["https://a.example/", "http://b.example/x", "ftp://f.example/"]
    assert bad == [
        "invalid seed: 'nope' is not an http, https, ftp, news or nntp URL",
        "invalid seed: empty URL",
        "invalid seed: 'mailto:x@y' is not an http, https, ftp, news or nntp URL",
    ]


def test_parse_seeds_empty() -> None:
    assert parse_seeds([]) == ([], [])


def test_read_seeds_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "# seeds\n\nhttps://a.example/\n   # indented comment\n\t\n"
        "  http://b.example/x#frag  \n#http://commented.example/\nhttps://c.example/\n",
        "seeds.txt",
    )
    assert read_seeds_file(path) == [
        "https://a.example/",
        "http://b.example/x#frag",  # a fragment is not a comment
        "https://c.example/",
    ]


def test_read_seeds_file_empty(tmp_path: Path) -> None:
    assert read_seeds_file(write(tmp_path, "", "seeds.txt")) == []


def test_read_seeds_file_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the seeds file"):
        read_seeds_file(tmp_path / "missing.txt")


def test_read_seeds_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "seeds.txt"
    path.write_bytes(b"http://a.example/\xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_seeds_file(path)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1000, 1000),
        ("1000", 1000),
        ("512KB", 524288),
        ("10MB", 10485760),
        ("1GiB", 1 << 30),
        ("2 mb", 2 << 20),
    ],
)
def test_parse_size(value: Any, expected: int) -> None:
    from search.servers import parse_size

    assert parse_size(value) == expected


@pytest.mark.parametrize("value", ["", "ten", "5XB", 0, 0.5, True, -3])
def test_parse_size_rejects(value: Any) -> None:
    from search.servers import parse_size

    with pytest.raises(ValueError):
        parse_size(value)


def test_max_size_max_pages_and_periods_are_validated() -> None:
    config = build(
        {"url": URL, "max_size": "1MB", "max_pages": 10, "min_period": "2h", "max_period": "30d"}
    )
    assert (config.max_size, config.max_pages) == (1 << 20, 10)
    assert (config.min_period, config.max_period) == (7200, 30 * 86400)
    with pytest.raises(ConfigError, match="max_pages"):
        build({"url": URL, "max_pages": -1})
