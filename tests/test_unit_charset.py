"""Unit tests for spidersite.middlewares.charset: undeclared Latin-script pages (windows-1252
unless another encoding is clearly better), UTF-16 and UTF-32 declarations and bodies.

Chinese pages (GBK, GB18030, Big5) are tested in tests/test_chinese.py."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse
from scrapy.utils.test import get_crawler

from spidersite.middlewares.charset import CharsetMiddleware, choose_encoding, decodes

#: Short texts of Western European languages, each with a few accented letters.
WESTERN = {
    "it": "La città di Roma è la capitale d'Italia. Però il caffè è più buono a Napoli, così "
    "dicono. Perché? Perché l'acqua è diversa. Qualità e novità ogni giorno.",
    "fr": "Le café est très bon. Ça coûte cher à Noël, déjà vu, naïve résumé. Élève français "
    "garçon où.",
    "fr2": "Où est la bibliothèque ? Elle se trouve près de l’église, à côté du marché – "
    "c’est très pratique.",
    "de": "Größere Häuser übernehmen die Straße. Müller fährt über die Brücke, während Jürgen "
    "schläft. Schöne Grüße aus München.",
    "pt": "A configuração não está disponível. Informações sobre a região e o coração da "
    "nação; você já sabe, irmão.",
    "es": "El niño comió una manzana en la montaña. ¿Dónde está la estación? Mañana iré a "
    "España con mi corazón.",
    "nl": "Het café aan de overkant heeft een geïnteresseerde eigenaar. Reeël en coördinatie, "
    "één keer per week. Ruïne.",
    "sv": "Björnen går över ån och äter blåbär. Där är många små öar i skärgården. Hej då, vi "
    "ses på måndag.",
    "da": "Jeg har købt et æble og en pære på torvet. Søren går til skolen hver dag, og han er "
    "glad for sine lærere.",
}

RUSSIAN = "Привет мир. Это тестовая страница на русском языке. Москва столица России."
CZECH = "Příliš žluťoučký kůň úpěl ďábelské ódy. Čeština je krásný jazyk, řekl pán v Brně."
POLISH = "Zażółć gęślą jaźń. Pchnąć w tę łódź jeża lub ośm skrzyń fig. Łódź jest dużym miastem."
HUNGARIAN = "Árvíztűrő tükörfúrógép. A magyar nyelv nagyon szép, főleg ősszel, amikor hűvös."


def page(title: str, text: str, head: str = "", html: str = "<html>") -> str:
    return f"{html}<head>{head}<title>{title}</title></head><body><p>{text}</p></body></html>"


@pytest.fixture
def middleware() -> CharsetMiddleware:
    crawler = get_crawler(settings_dict={})
    crawler.stats.open_spider()
    return CharsetMiddleware.from_crawler(crawler)


def fetch(mw: CharsetMiddleware, body: bytes, content_type: str = "text/html") -> TextResponse:
    url = "http://example.org/page.html"
    request = Request(url)
    response = HtmlResponse(url, body=body, headers={"Content-Type": content_type}, request=request)
    out = mw.process_response(request, response)
    assert isinstance(out, TextResponse)
    return out


@pytest.mark.parametrize("language", sorted(WESTERN))
def test_undeclared_western_page_is_windows_1252(
    middleware: CharsetMiddleware, language: str
) -> None:
    html = page("Pagina", WESTERN[language])
    response = fetch(middleware, html.encode("cp1252"))
    assert response.encoding == "cp1252"
    assert response.text == html


def test_western_page_declared_utf8_is_corrected_to_windows_1252(
    middleware: CharsetMiddleware,
) -> None:
    html = page("Français", WESTERN["fr"])
    response = fetch(middleware, html.encode("latin-1"), "text/html; charset=utf-8")
    assert response.text == html
    assert middleware.stats.get_value("charset/corrected") == 1


@pytest.mark.parametrize(
    ("encoding", "text"),
    [("cp1251", RUSSIAN), ("koi8-r", RUSSIAN), ("cp1250", CZECH), ("cp1250", POLISH)],
)
def test_other_undeclared_single_byte_pages_keep_their_detection(
    middleware: CharsetMiddleware, encoding: str, text: str
) -> None:
    html = page(text[:10], text)
    assert fetch(middleware, html.encode(encoding)).text == html


def test_html_lang_breaks_a_tie_between_latin_encodings(middleware: CharsetMiddleware) -> None:
    # In windows-1250, ő and ű are bytes that windows-1252 reads as õ and û: the detector
    # cannot tell; the page's language can.
    html = page("Magyar", HUNGARIAN, html='<html lang="hu">')
    assert fetch(middleware, html.encode("cp1250")).text == html
    # Without it, the Latin-script default stands.
    html = page("Magyar", HUNGARIAN)
    assert fetch(middleware, html.encode("cp1250")).encoding == "cp1252"


def test_utf16_declared_for_an_ascii_page_is_utf8(middleware: CharsetMiddleware) -> None:
    """A page cannot declare UTF-16 in its own ASCII bytes: a <meta> utf-16 means UTF-8
    (the HTML standard), and an ASCII body is not UTF-16 whatever the header says."""
    html = page("Meta utf16 ascii page", "plain ascii words", '<meta charset="utf-16">')
    assert fetch(middleware, html.encode()).text == html
    html = page("Header utf16 ascii page", "plain ascii words")
    assert fetch(middleware, html.encode(), "text/html; charset=utf-16").text == html
    html = page("Header utf16 utf8 page", "café naïve glockenspiel")
    assert fetch(middleware, html.encode(), "text/html; charset=UTF-16").text == html
    html = page("Meta utf32 page", "café", '<meta charset="utf-32le">')
    assert fetch(middleware, html.encode()).text == html


@pytest.mark.parametrize(
    ("declared", "encoding"),
    [
        ("utf-16", "utf-16-le"),
        ("utf-16le", "utf-16-le"),
        ("utf-16", "utf-16-be"),
        ("utf-16be", "utf-16-be"),
        ("utf-32", "utf-32-le"),
    ],
)
def test_utf16_body_without_bom_declared_in_the_header(
    middleware: CharsetMiddleware, declared: str, encoding: str
) -> None:
    html = page("UTF sixteen declared", WESTERN["fr"])
    response = fetch(middleware, html.encode(encoding), f"text/html; charset={declared}")
    assert response.text == html


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_with_a_bom(middleware: CharsetMiddleware, encoding: str) -> None:
    html = page("BOM", WESTERN["fr"])
    body = html.encode(encoding)
    if encoding == "utf-16-be":
        body = b"\xfe\xff" + body
    assert fetch(middleware, body, "text/html; charset=iso-8859-1").text.lstrip("\ufeff") == html


def test_decodes_is_false_for_a_utf16_body_without_bom() -> None:
    # Python's utf-16 codec raises a plain UnicodeError for a body without a BOM.
    assert not decodes("<p>x</p>".encode("utf-16-le"), "utf-16")
    assert not decodes("<p>x</p>".encode("utf-32-le"), "utf-32")
    assert decodes("<p>x</p>".encode("utf-16"), "utf-16")


def test_choose_encoding_for_a_cp1252_page_without_content_type() -> None:
    body = page("Città", WESTERN["it"]).encode("cp1252")
    assert choose_encoding(None, body) == ("cp1252", "detected")
