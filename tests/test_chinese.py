"""Chinese pages: charset detection (GBK, GB18030, Big5, undeclared or declared wrong), and
a crawl of the Debian Reference plus a GBK transcoding of one of its chapters."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import Response, TextResponse
from scrapy.utils.test import get_crawler
from w3lib.encoding import html_body_declared_encoding

from spidersite.middlewares.charset import CharsetMiddleware, choose_encoding
from tests import test_unit_charset
from tests.conftest import CrawlResult, Site, run_crawl

# The charset middleware of each test, and a page through it: test_unit_charset's.
middleware = test_unit_charset.middleware
fetch = test_unit_charset.fetch

TEXT = (
    "第 8 章 国际化和本地化。多语种（M17N）或本地语言支持的应用软件，"
    "可以通过配置来满足不同地区用户的需要。繁體中文與简体中文混排，"
    "Debian 软件包管理系统支持 UTF-8 编码，也支持 GBK 和 Big5 等传统编码。"
)
TRADITIONAL = (
    "第八章 國際化和本地化。多語種或本地語言支援的應用軟體，可以透過設定來滿足不同地區"
    "使用者的需要。Debian 套件管理系統支援 UTF-8 編碼，也支援 Big5 等傳統編碼。"
)


def page(text: str, head: str = "") -> str:
    return (
        f"<!DOCTYPE html><html><head>{head}<title>{text[:12]}</title></head>"
        f"<body><h1>{text[:12]}</h1><p>{text}</p><p>{text}</p></body></html>"
    )


@pytest.mark.parametrize(
    ("encoding", "text"),
    [("gbk", TEXT), ("gb18030", TEXT + "𠀀𠀁"), ("big5", TRADITIONAL)],
)
def test_undeclared_chinese_encoding_is_detected(
    middleware: CharsetMiddleware, encoding: str, text: str
) -> None:
    html = page(text)
    response = fetch(middleware, html.encode(encoding))
    assert response.text == html
    assert middleware.stats.get_value("charset/detected") == 1
    assert not middleware.stats.get_value("charset/corrected")


@pytest.mark.parametrize(
    ("encoding", "text", "declared"),
    [
        ("gbk", TEXT, "utf-8"),  # strict decoding fails
        ("gb18030", TEXT, "utf-8"),
        ("big5", TRADITIONAL, "iso-8859-1"),  # decodes, but to Latin mojibake
        ("gbk", TEXT, "windows-1252"),
    ],
)
def test_wrong_declared_encoding_is_corrected(
    middleware: CharsetMiddleware, encoding: str, text: str, declared: str
) -> None:
    # Declared in the header …
    html = page(text)
    response = fetch(middleware, html.encode(encoding), f"text/html; charset={declared}")
    assert response.text == html
    # … and in <meta charset>.
    html = page(text, f'<meta charset="{declared}">')
    response = fetch(middleware, html.encode(encoding))
    assert response.text == html
    assert middleware.stats.get_value("charset/corrected") == 2


def test_utf8_declared_as_gbk_is_corrected(middleware: CharsetMiddleware) -> None:
    html = page(TEXT, '<meta http-equiv="Content-Type" content="text/html; charset=gbk">')
    assert fetch(middleware, html.encode("utf-8")).text == html


def test_right_declarations_are_kept(middleware: CharsetMiddleware) -> None:
    html = page(TEXT)
    assert fetch(middleware, html.encode("gbk"), "text/html; charset=GBK").encoding == "gb18030"
    big5 = page(TRADITIONAL, '<meta charset="big5">')
    assert fetch(middleware, big5.encode("big5")).text == big5
    latin = page("Ça coûte très cher, déjà à Noël — garçon!", '<meta charset="iso-8859-1">')
    assert fetch(middleware, latin.encode("cp1252")).text == latin
    # A UTF-8 page with one stray byte keeps its declaration.
    broken = page(TEXT).encode("utf-8").replace(b"<p>", b"<p>\xff", 1)
    assert fetch(middleware, broken, "text/html; charset=utf-8").encoding == "utf-8"
    assert middleware.stats.get_value("charset/declared") == 4
    assert not middleware.stats.get_value("charset/detected")


def test_bom_wins(middleware: CharsetMiddleware) -> None:
    html = page(TEXT)
    body = b"\xef\xbb\xbf" + html.encode("utf-8")
    assert fetch(middleware, body, "text/html; charset=gbk").encoding == "utf-8"


def test_other_responses_are_left_alone(middleware: CharsetMiddleware) -> None:
    request = Request("http://example.org/a.png")
    binary = Response(request.url, body=TEXT.encode("gbk"), request=request)
    assert middleware.process_response(request, binary) is binary
    css = TextResponse(request.url, body=TEXT.encode("gbk"), headers={"Content-Type": "text/css"})
    assert middleware.process_response(request, css) is css
    ascii_page = fetch(middleware, page("plain ASCII words").encode())
    assert ascii_page.text == page("plain ASCII words")
    assert not middleware.stats.get_value("charset/detected")


def test_choose_encoding_without_declaration_or_content_type() -> None:
    assert choose_encoding(None, page(TEXT).encode("gbk")) == ("gb18030", "detected")
    assert choose_encoding(None, page(TEXT).encode("utf-8")) == ("utf-8", "detected")


def test_switched_off() -> None:
    crawler = get_crawler(settings_dict={"CHARSET_ENABLED": False})
    with pytest.raises(NotConfigured):
        CharsetMiddleware.from_crawler(crawler)


# -- the Debian Reference, in UTF-8 and transcoded to GBK --------------------------------

DEBIAN = "debian-reference-zh-cn"
CHAPTER = "ch08.zh-cn.html"  # 第 8 章 国际化和本地化
_META_CHARSET = re.compile(rb"<meta[^>]*charset[^>]*>", re.IGNORECASE)
_XML_ENCODING = re.compile(rb'(<\?xml[^>]*?) encoding="[^"]*"')


@pytest.fixture(scope="module")
def debian_crawl(
    corpus_root: Path, corpus_url: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[CrawlResult, str]:
    from tests.conftest import _serve_site

    source = (corpus_root / DEBIAN / CHAPTER).read_text(encoding="utf-8")
    # Neither <meta charset> nor the XML declaration's encoding is left.
    gbk = _META_CHARSET.sub(b"", source.encode("gbk", "replace"), count=1)
    gbk = _XML_ENCODING.sub(rb"\1", gbk, count=1)
    assert html_body_declared_encoding(gbk) is None
    serving = _serve_site()
    site: Site = next(serving)
    try:
        # No charset in the header either; gzip-compressed, so the encoding is decided on
        # the body HttpCompressionMiddleware decompressed (the middleware's priority).
        site.add(
            "/gbk/chapter8.html",
            gzip.compress(gbk),
            content_type="text/html",
            headers={"Content-Encoding": "gzip"},
        )
        # Another chapter in GBK that still declares UTF-8 (a wrong declaration).
        wrong = (corpus_root / DEBIAN / "ch03.zh-cn.html").read_text(encoding="utf-8")
        site.add("/gbk/chapter3.html", wrong.encode("gbk", "replace"), content_type="text/html")
        data = tmp_path_factory.mktemp("debian")
        result = run_crawl(
            data,
            "-a",
            f"seeds={corpus_url}{DEBIAN}/index.html,{site.url}gbk/chapter8.html,"
            f"{site.url}gbk/chapter3.html",
            settings={"LOG_LEVEL": "INFO"},
        )
    finally:
        serving.close()
    assert result.returncode == 0, result.stderr[-3000:]
    return result, f"{site.url}gbk/chapter8.html"


def test_gbk_page_is_decoded_and_stored(debian_crawl: tuple[CrawlResult, str]) -> None:
    result, gbk_url = debian_crawl
    rows = result.rows("SELECT title, charset FROM documents WHERE url = :u", u=gbk_url)
    assert rows, result.urls()
    title, charset = rows[0].title, rows[0].charset
    # "第 8 章 国际化和本地化" (GBK has no no-break space: those became "?").
    assert re.fullmatch(r"第.8.章.国际化和本地化", title), title
    assert charset == "gb18030"
    assert result.stats.get("charset/detected", 0) >= 2


def test_gbk_page_declared_utf8_is_corrected(debian_crawl: tuple[CrawlResult, str]) -> None:
    result, gbk_url = debian_crawl
    url = gbk_url.replace("chapter8", "chapter3")
    row = result.rows("SELECT title, charset FROM documents WHERE url = :u", u=url)[0]
    title, charset = row.title, row.charset
    assert re.fullmatch(r"第.3.章.系统初始化", title), title
    assert charset == "gb18030"
    assert result.stats.get("charset/corrected", 0) >= 1


def test_chinese_query_finds_the_chapter_in_both_encodings(
    debian_crawl: tuple[CrawlResult, str], corpus_url: str
) -> None:
    result, gbk_url = debian_crawl
    assert f"{corpus_url}{DEBIAN}/{CHAPTER}" in result.urls()
    proc = result.search("国际化 本地化", "-n", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    top = [hit["url"] for hit in json.loads(proc.stdout)["hits"]]
    assert f"{corpus_url}{DEBIAN}/{CHAPTER}" in top, top
    assert gbk_url in top, top


def test_a_word_inside_a_chinese_compound_finds_its_page(site: Site, crawl) -> None:
    """jieba reads 搜索引擎 ("search engine") and 北京大学 ("Peking University") as one word
    each; a page is indexed with the words they are made of too (search mode), so a
    query of 搜索 or 北京 finds it, and the compound still finds it."""
    site.page("/", "首页", "网站", ["/zh.html", "/other.html"], head='<meta charset="utf-8">')
    site.page("/zh.html", "介绍", "我们的搜索引擎在北京大学开发。")
    site.page("/other.html", "其他", "这是一个关于天气的页面。")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    for query in ("搜索", "引擎", "北京", "搜索引擎", "北京大学"):
        proc = result.search(query, "--json")
        assert proc.returncode == 0, proc.stderr
        hits = [h["url"] for h in json.loads(proc.stdout)["hits"]]
        assert hits == [site.url + "zh.html"], (query, hits)


def test_full_width_decomposed_and_hindi_words_and_compounds_are_found_and_marked(
    site: Site, crawl
) -> None:
    """A Chinese page writes Latin letters and digits full-width (ＰＤＦ, ２０２６): a query
    typed plain finds them, and the other way round; its snippet marks them as written,
    and marks the part of a compound a query asked for (搜索 in 搜索引擎).  The same
    folding for a decomposed accent, and a Hindi word read whole."""
    site.page(
        "/", "首页", "网站", ["/zh.html", "/en.html", "/hi.html"], head='<meta charset="utf-8">'
    )
    site.page("/zh.html", "介绍", "我们的搜索引擎支持ＰＤＦ文件，２０２６年发布。")
    site.page("/en.html", "Plain", "Export the report as pdf in 2026, at the café.")
    site.page("/hi.html", "भाषा", "हिन्दी भारत की राजभाषा है।", head='<meta charset="utf-8">')
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr

    def found(query: str) -> dict[str, str]:
        proc = result.search(query, "--json")
        assert proc.returncode == 0, proc.stderr
        return {h["url"]: h["snippet_html"] for h in json.loads(proc.stdout)["hits"]}

    zh, en = site.url + "zh.html", site.url + "en.html"
    for query in ("pdf", "ＰＤＦ", "Pdf"):
        hits = found(query)
        assert set(hits) == {zh, en}, (query, hits)
        assert "<b>ＰＤＦ</b>" in hits[zh] and "<b>pdf</b>" in hits[en]
    assert set(found("２０２６")) == {zh, en}
    hits = found("搜索")
    assert list(hits) == [zh] and "<b>搜索</b>引擎" in hits[zh], hits
    # A query typed decomposed (e + U+0301) finds the composed word; a Hindi word is a
    # word, not its letters (ह alone finds nothing).
    hits = found("cafe\u0301")
    assert list(hits) == [en] and "<b>café</b>" in hits[en], hits
    hits = found("हिन्दी")
    assert list(hits) == [site.url + "hi.html"] and "<b>हिन्दी</b>" in hits[site.url + "hi.html"]
    assert found("ह") == {}
