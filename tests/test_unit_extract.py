"""Unit tests for spidersite.extract: HTML extraction, file URLs, HTTP dates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from spidersite.extract import (
    Extracted,
    absolute_link,
    extract_html,
    is_file_url,
    normalize_space,
    parse_http_date,
    robots_header,
    url_suffix,
)
from spidersite.items import LinkRecord

PAGE = "http://ex.example/dir/page.html"


def extract(html: str | bytes, url: str = PAGE, encoding: str | None = "utf-8") -> Extracted:
    body = html.encode("utf-8") if isinstance(html, str) else html
    return extract_html(url, body, encoding)


def urls(out: Extracted) -> list[str]:
    return [link.url for link in out.links]


# --- head: title, meta, language ------------------------------------------------------------


def test_title_whitespace_normalized() -> None:
    out = extract("<html><head><title>  My\n   Title\t</title></head><body>x</body></html>")
    assert out.title == "My Title"


def test_empty_title_is_none() -> None:
    assert extract("<html><head><title>  </title></head><body>x</body></html>").title is None


def test_no_title() -> None:
    assert extract("<html><body>x</body></html>").title is None


def test_meta_keywords_and_description_case_insensitive() -> None:
    out = extract(
        '<html><head><META NAME="Keywords" CONTENT="vacuum,  analyze">'
        '<meta name="DESCRIPTION" content="  How to\n vacuum  "></head><body>x</body></html>'
    )
    assert out.keywords == "vacuum, analyze"
    assert out.description == "How to vacuum"


def test_meta_without_content_is_ignored() -> None:
    out = extract('<html><head><meta name="description"></head><body>x</body></html>')
    assert out.description is None


@pytest.mark.parametrize(
    ("content", "noindex", "nofollow"),
    [
        ("noindex, nofollow", True, True),
        ("NOINDEX,NOFOLLOW", True, True),
        ("noindex", True, False),
        ("nofollow", False, True),
        ("none", True, True),
        ("index, follow", False, False),
        ("all", False, False),
    ],
)
def test_meta_robots(content: str, noindex: bool, nofollow: bool) -> None:
    out = extract(
        f'<html><head><meta name="Robots" content="{content}"></head><body>x</body></html>'
    )
    assert (out.noindex, out.nofollow) == (noindex, nofollow)


def test_meta_spidersite_directive_counts_like_robots() -> None:
    out = extract(
        '<html><head><meta name="spidersite" content="noindex"></head><body></body></html>'
    )
    assert out.noindex and not out.nofollow


@pytest.mark.parametrize(
    ("values", "noindex", "nofollow"),
    [
        ([], False, False),
        ([b"noindex"], True, False),
        ([b"NoFollow"], False, True),
        ([b"none"], True, True),
        ([b"noindex, nofollow"], True, True),
        ([b"noarchive", b"nofollow"], False, True),  # one directive per header line
        ([b"all"], False, False),
        ([b"unavailable_after: 25 Jun 2010 15:00:00 PST"], False, False),
        ([b"max-snippet: 20, noindex"], True, False),
        # The user-agent form: only our agent's directives, and those for every agent.
        ([b"spidersite: noindex"], True, False),
        ([b"SpiderSite: none"], True, True),
        ([b"googlebot: noindex"], False, False),
        ([b"googlebot: noindex", b"nofollow"], False, True),
        ([b"googlebot: noindex, spidersite: nofollow"], False, True),
        ([b"spidersite: noindex, googlebot: nofollow"], True, False),
    ],
)
def test_x_robots_tag_header(values: list[bytes], noindex: bool, nofollow: bool) -> None:
    assert robots_header(values) == (noindex, nofollow)


def test_no_robots_meta_means_index_and_follow() -> None:
    out = extract("<html><body>x</body></html>")
    assert not out.noindex
    assert not out.nofollow


def test_html_lang() -> None:
    assert extract('<html lang=" en-GB "><body>x</body></html>').language == "en-GB"


def test_content_language_when_no_html_lang() -> None:
    out = extract(
        '<html><head><meta http-equiv="Content-Language" content="fr, en"></head>'
        "<body>x</body></html>"
    )
    assert out.language == "fr"


def test_html_lang_wins_over_content_language() -> None:
    out = extract(
        '<html lang="de"><head><meta http-equiv="content-language" content="fr"></head>'
        "<body>x</body></html>"
    )
    assert out.language == "de"


def test_no_language() -> None:
    assert extract("<html><body>x</body></html>").language is None


# --- body text -----------------------------------------------------------------------------


def test_body_text_excludes_script_style_noscript_and_head() -> None:
    out = extract(
        "<html><head><title>T</title><style>.x{color:red}</style>"
        "<script>var inHead = 1;</script></head>"
        "<body><h1>Hello</h1><script>evil()</script><noscript>enable js</noscript>"
        "<style>p{}</style><template>tmpl</template>"
        "<p>World <b>bold</b></p><!-- a comment --></body></html>"
    )
    assert out.text == "Hello World bold"
    for hidden in ("evil", "enable", "color", "inHead", "tmpl", "comment", "T "):
        assert hidden not in out.text


def test_text_after_a_script_is_kept() -> None:
    out = extract("<html><body><p>before <script>x()</script> after</p></body></html>")
    assert out.text == "before after"


def test_text_whitespace_normalized() -> None:
    out = extract("<html><body>\n  a \t\n b   <div>  c </div></body></html>")
    assert out.text == "a b c"


def test_text_without_html_element() -> None:
    assert extract("<p>just a fragment</p>").text == "just a fragment"


def test_entities_decoded() -> None:
    assert extract("<html><body>fish &amp; chips &lt;3</body></html>").text == "fish & chips <3"


# --- links ---------------------------------------------------------------------------------


def test_links_are_absolute() -> None:
    out = extract(
        "<html><body>"
        '<a href="/root">r</a><a href="rel">rel</a><a href="../up">up</a>'
        '<a href="//cdn.example/x">cdn</a><a href="https://other.example/y">o</a>'
        '<a href="?q=1">q</a>'
        "</body></html>"
    )
    assert urls(out) == [
        "http://ex.example/root",
        "http://ex.example/dir/rel",
        "http://ex.example/up",
        "http://cdn.example/x",
        "https://other.example/y",
        "http://ex.example/dir/page.html?q=1",
    ]


def test_base_href_is_honoured() -> None:
    out = extract(
        '<html><head><base href="http://cdn.example/root/"></head>'
        '<body><a href="x">x</a><a href="/y">y</a></body></html>'
    )
    assert urls(out) == ["http://cdn.example/root/x", "http://cdn.example/y"]


def test_relative_base_href_is_resolved_against_page() -> None:
    out = extract('<html><head><base href="/other/"></head><body><a href="x">x</a></body></html>')
    assert urls(out) == ["http://ex.example/other/x"]


def test_fragments_dropped_and_deduplicated() -> None:
    out = extract(
        '<html><body><a href="/a#one">First</a><a href="/a#two">Second</a>'
        '<a href="/a">Third</a></body></html>'
    )
    assert out.links == [LinkRecord("http://ex.example/a", "First", False)]


@pytest.mark.parametrize(
    "href",
    [
        "javascript:void(0)",
        "JavaScript:alert(1)",
        "mailto:a@b.example",
        "data:text/plain,hi",
        "tel:+123",
        "#top",
        "#",
        "",
        "   ",
    ],
)
def test_unusable_links_ignored(href: str) -> None:
    out = extract(f'<html><body><a href="{href}">x</a></body></html>')
    assert out.links == []


def test_anchor_without_href_ignored() -> None:
    assert extract("<html><body><a name='x'>x</a></body></html>").links == []


def test_rel_nofollow_flagged() -> None:
    out = extract(
        '<html><body><a href="/f" rel="NoFollow noopener">nf</a><a href="/g">g</a></body></html>'
    )
    assert out.links == [
        LinkRecord("http://ex.example/f", "nf", True),
        LinkRecord("http://ex.example/g", "g", False),
    ]


def test_followed_duplicate_unflags_nofollow_but_keeps_first_anchor() -> None:
    out = extract(
        '<html><body><a href="/z" rel="nofollow">first</a><a href="/z">second</a></body></html>'
    )
    assert out.links == [LinkRecord("http://ex.example/z", "first", False)]


def test_nofollow_duplicate_keeps_followed_link() -> None:
    out = extract(
        '<html><body><a href="/z">first</a><a href="/z" rel="nofollow">second</a></body></html>'
    )
    assert out.links == [LinkRecord("http://ex.example/z", "first", False)]


def test_anchor_text_normalized() -> None:
    out = extract('<html><body><a href="/a">  Read\n  <b>more</b>  </a></body></html>')
    assert out.links[0].anchor == "Read more"


def test_anchor_text_truncated_to_500() -> None:
    out = extract(f'<html><body><a href="/a">{"x" * 800}</a></body></html>')
    assert len(out.links[0].anchor) == 500


def test_iframe_and_frame_src_followed() -> None:
    out = extract(
        '<html><body><iframe src="/frame.html"></iframe>'
        '<frameset><frame src="f2.html"></frameset></body></html>'
    )
    assert "http://ex.example/frame.html" in urls(out)
    assert "http://ex.example/dir/f2.html" in urls(out)
    assert all(link.anchor == "" for link in out.links)


def test_area_href_followed_with_alt_as_anchor() -> None:
    out = extract('<html><body><map name="m"><area href="/zone" alt="Zone A"></map></body></html>')
    assert out.links == [LinkRecord("http://ex.example/zone", "Zone A", False)]


def test_links_in_document_order() -> None:
    out = extract(
        '<html><body><a href="/3">3</a><a href="/1">1</a><a href="/2">2</a></body></html>'
    )
    assert urls(out) == ["http://ex.example/3", "http://ex.example/1", "http://ex.example/2"]


# --- robustness ----------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"   \n\t", b"\n"])
def test_empty_body(body: bytes) -> None:
    assert extract_html(PAGE, body, None) == Extracted()


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body><p>unclosed <div><a href=x>lnk",
        b"<<<>>>",
        b"</p></div></body>",
        b"<html><head><title>t",
        b"\x00\x01\x02",
        b"<a href='http://[::1'>bad ipv6</a>",
        b"<html><body>" + b"<div>" * 300 + b"deep",
    ],
)
def test_malformed_html_does_not_raise(body: bytes) -> None:
    out = extract_html(PAGE, body, None)
    assert isinstance(out, Extracted)


def test_unclosed_tags_still_give_text_and_links() -> None:
    out = extract_html(PAGE, b"<html><body><p>unclosed <div><a href=x>lnk", None)
    assert out.text == "unclosed lnk"
    assert urls(out) == ["http://ex.example/dir/x"]


def test_gbk_encoded_page() -> None:
    html = (
        '<html lang="zh-CN"><head><title>数据库管理</title>'
        '<meta name="description" content="中文描述"></head>'
        '<body><p>中文内容</p><a href="/链接">链接文字</a></body></html>'
    )
    out = extract_html(PAGE, html.encode("gbk"), "gbk")
    assert out.title == "数据库管理"
    assert out.description == "中文描述"
    assert out.language == "zh-CN"
    assert out.text == "中文内容 链接文字"
    assert out.links[0].anchor == "链接文字"


def test_default_encoding_is_utf8() -> None:
    out = extract_html(PAGE, "<html><body>café</body></html>".encode(), None)
    assert out.text == "café"


# --- helpers -------------------------------------------------------------------------------


def test_normalize_space() -> None:
    assert normalize_space("  a\n\t b  ") == "a b"
    assert normalize_space("") == ""
    # Control characters (C0, DEL, C1) are spaces: never in a title or indexed text.
    assert normalize_space("a\x1b]0;x\x07b\x00c\x7fd\u009be\u0085f") == "a ]0;x b c d e f"


def test_control_characters_are_not_extracted() -> None:
    page = (
        "<html><head><title>Okapi\x1b]0;PWNED\x07</title>"
        '<meta name="description" content="shy\x1b[31m"></head>'
        "<body><a href='/x'>an\u009bchor</a> forest\x1b[0m</body></html>"
    ).encode()
    out = extract_html(PAGE, page, "utf-8")
    assert out.title == "Okapi ]0;PWNED"
    assert out.description == "shy [31m"
    assert out.links[0].anchor == "an chor"
    assert out.text == "an chor forest [0m"


@pytest.mark.parametrize(
    ("base", "href", "expected"),
    [
        ("http://a.example/b/c", "d", "http://a.example/b/d"),
        ("http://a.example/b/c", "  /d#f  ", "http://a.example/d"),
        ("http://a.example/b/c", "https://x.example/", "https://x.example/"),
        ("http://a.example/b/c", "ftp://f.example/x", "ftp://f.example/x"),
        ("http://a.example/b/c", "#frag", None),
        ("http://a.example/b/c", "mailto:x@y", None),
        ("http://a.example/b/c", "ABOUT:blank", None),
        ("http://a.example/b/c", "gopher://g.example/", None),
        ("http://a.example/b/c", "", None),
    ],
)
def test_absolute_link(base: str, href: str, expected: str | None) -> None:
    assert absolute_link(base, href) == expected


def test_paths_from_the_root_join_as_urljoin_joins_them() -> None:
    """absolute_link joins a plain path from the root without urljoin; on random paths of
    the characters urljoin treats specially its URL is urljoin's."""
    import random
    from urllib.parse import urljoin

    def reference(base: str, href: str) -> str | None:
        href = href.strip()
        if not href or href.startswith("#"):
            return None
        url = urljoin(base, href).split("#", 1)[0]
        return url if url.startswith(("http://", "https://", "ftp://")) else None

    def outcome(join: Any, base: str, href: str) -> str | None:
        try:
            return join(base, href)
        except ValueError:  # e.g. a base of a bracketed host that is no IP address
            return "ValueError"

    bases = [
        "http://h/x/y.html",
        "https://u:p@H.example:8080/a/b/",
        "http://h",
        "HTTP://h/a",
        "ftp://h/d/",
        "http://[::1]:80/a?q=1#f",
        "http://[h]/a",
        "http://h/a;p?q",
        "file:///x",
    ]
    alphabet = [*"ab/.?#;%:@ \\=&~-_[]\x00\x0b\x1f\u3000\r\n\t", "..", "./", "//", "é", "%2e"]
    rng = random.Random(7)
    for _ in range(20_000):
        base = rng.choice(bases)
        href = "/" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert outcome(absolute_link, base, href) == outcome(reference, base, href), (base, href)


def test_unparsable_links_are_counted() -> None:
    with pytest.raises(ValueError):
        absolute_link("http://a.example/", "http://[::1")
    body = b'<html><body><a href="http://[::1">x</a><a href="/ok">ok</a></body></html>'
    out = extract_html("http://a.example/", body, "utf-8")
    assert [link.url for link in out.links] == ["http://a.example/ok"]
    assert out.links_invalid == 1


@pytest.mark.parametrize(
    ("url", "is_file"),
    [
        ("http://a.example/x.pdf", True),
        ("http://a.example/X.PNG", True),
        ("http://a.example/x.tar.gz", True),
        ("http://a.example/x.zip?download=1", True),
        ("http://a.example/x.pdf?y=1.html", True),
        ("http://a.example/x.pdf#page=2", True),
        ("http://a.example/x.html", False),
        ("http://a.example/x.htm", False),
        ("http://a.example/x.html?f=a.pdf", False),
        ("http://a.example/dir.pdf/", False),
        ("http://a.example/", False),
        ("http://a.example/readme", False),
        ("http://a.example/x.php", False),
    ],
)
def test_is_file_url(url: str, is_file: bool) -> None:
    assert is_file_url(url) is is_file


def test_url_suffix() -> None:
    assert url_suffix("http://a.example/x.tar.gz") == "gz"
    assert url_suffix("http://a.example/x.PDF?a=b.c") == "pdf"
    assert url_suffix("http://a.example/x") == ""


def test_parse_http_date_rfc1123() -> None:
    expected = datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)
    assert parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == expected
    assert parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT") == expected


def test_parse_http_date_is_aware() -> None:
    parsed = parse_http_date("Sun, 06 Nov 1994 08:49:37")
    assert parsed is not None
    assert parsed.tzinfo is not None
    assert parsed == datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)


def test_parse_http_date_with_offset() -> None:
    parsed = parse_http_date("Sun, 06 Nov 1994 08:49:37 +0200")
    assert parsed == datetime(1994, 11, 6, 8, 49, 37, tzinfo=timezone(timedelta(hours=2)))


@pytest.mark.parametrize(
    "value", [None, "", b"", "garbage", b"garbage", "Mon, 99 Foo 1994 99:99:99 GMT", "2024"]
)
def test_parse_http_date_invalid(value: str | bytes | None) -> None:
    assert parse_http_date(value) is None


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
def test_utf16_and_utf32_pages(encoding: str) -> None:
    html = "<html><head><title>Café sixteen</title></head><body><p>bassoon</p></body></html>"
    out = extract(html.encode(encoding), encoding=encoding)
    assert (out.title, out.text) == ("Café sixteen", "bassoon")
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}.get(encoding, b"")
    assert extract(bom + html.encode(encoding), encoding=encoding).title == "Café sixteen"
