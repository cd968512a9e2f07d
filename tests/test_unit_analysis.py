"""Unit tests for search.analysis: tokenizing, stop words, stemming, CJK, sections."""

from __future__ import annotations

import functools
import itertools
import random
import re
import sys

import pytest

from search import analysis
from search.analysis import (
    CHINESE_STOP_WORDS,
    DEFAULT_WEIGHTS,
    ENGLISH_STOP_WORDS,
    MAX_TOKEN_LENGTH,
    SECTIONS,
    Analyzer,
    Token,
    WordRecord,
    analyze_document,
    get_analyzer,
    is_known_language,
    snowball_language,
    url_words,
)


def stems(text: str, language: str | None = None) -> list[str]:
    return [t.stem for t in get_analyzer(language).tokens(text)]


def surfaces(text: str, language: str | None = None) -> list[str]:
    return [t.surface for t in get_analyzer(language).tokens(text)]


# --- tokenizing, lowercasing, stop words, stemming -----------------------------------------


def test_tokens_are_lowercased_and_stemmed_with_surface_kept() -> None:
    tokens = list(get_analyzer().tokens("Vacuuming RUNNING Databases"))
    assert tokens == [
        Token("vacuum", "vacuuming"),
        Token("run", "running"),
        Token("databas", "databases"),
    ]


@pytest.mark.parametrize(
    ("word", "stem"),
    [("vacuuming", "vacuum"), ("running", "run"), ("vacuumed", "vacuum"), ("tables", "tabl")],
)
def test_snowball_english_stems(word: str, stem: str) -> None:
    assert get_analyzer("en").stem(word) == stem


def test_underscored_identifier_is_one_token() -> None:
    tokens = list(get_analyzer().tokens("set max_connections high"))
    assert [t.surface for t in tokens] == ["set", "max_connections", "high"]
    # The whole identifier is stemmed as one word.
    assert tokens[1].stem == get_analyzer().stem("max_connections")
    assert tokens[1].stem.startswith("max_connect")


def test_digits_are_tokens_and_punctuation_splits() -> None:
    assert surfaces("PostgreSQL 16, version 3.14!") == [
        "postgresql",
        "16",
        "version",
        "3",
        "14",
    ]


def test_english_stop_words_are_dropped() -> None:
    assert stems("The tables of the database are in a schema") == ["tabl", "databas", "schema"]
    assert {"the", "of", "and", "a"} <= ENGLISH_STOP_WORDS


def test_stop_words_only_gives_nothing() -> None:
    assert stems("the of and to be") == []


def test_words_include_stop_words_but_tokens_do_not() -> None:
    analyzer = get_analyzer()
    assert list(analyzer.words("The Cat")) == ["the", "cat"]
    assert [t.surface for t in analyzer.tokens("The Cat")] == ["cat"]


def test_is_stop_word_is_case_insensitive_and_knows_chinese() -> None:
    analyzer = get_analyzer()
    assert analyzer.is_stop_word("The")
    assert analyzer.is_stop_word("的")
    assert not analyzer.is_stop_word("vacuum")


def test_non_english_analyzer_has_no_english_stop_words() -> None:
    # Only English has a stop list: "the" is an ordinary word for the German analyzer.
    assert stems("the", "de") == ["the"]


def test_german_stemmer_used_for_german() -> None:
    assert stems("Häuser laufen", "de") == ["haus", "lauf"]


def test_overlong_tokens_are_dropped() -> None:
    blob = "x" * (MAX_TOKEN_LENGTH + 1)
    ok = "y" * MAX_TOKEN_LENGTH
    assert surfaces(f"alpha {blob} {ok}") == ["alpha", ok]


def test_surface_is_the_lowercased_word_of_each_occurrence() -> None:
    assert list(get_analyzer().tokens("Vacuum vacuuming")) == [
        Token("vacuum", "vacuum"),
        Token("vacuum", "vacuuming"),
    ]


def test_stem_cache_returns_same_value() -> None:
    analyzer = Analyzer("english")
    assert analyzer.stem("running") == "run"
    assert analyzer.stem("running") == "run"


def test_stem_cache_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The analyzer's cache of stems stays under STEM_CACHE_BYTES (it starts again empty,
    in place), counting each entry's strings; every word is still stemmed right."""
    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", 5_000)
    analyzer = Analyzer("english")
    known = analyzer.known_stems
    words = [f"zq{i:04d}running" for i in range(400)]
    for word in words:
        assert analyzer.stem(word) == word[:-4]
        size = sum(
            analysis.STEM_ENTRY_BYTES + sys.getsizeof(w) + sys.getsizeof(s)
            for w, s in known.items()
        )
        assert size == analyzer.known_bytes <= 5_000
    assert analyzer.known_stems is known
    assert 0 < len(known) < 5_000 // 100
    assert analyzer.stem(words[-1]) == words[-1][:-4]


def test_one_shared_analyzer_a_language_whatever_the_tag() -> None:
    """A page's language tag, as written, does not make an analyzer (and a cache of
    stems) of its own: ``en``, ``en-US``, ``EN``, ``en_gb`` and none are one analyzer."""
    english = analysis.get_analyzer(None)
    for tag in ("en", "en-US", "EN", "en_gb", "english", "x-unknown"):
        assert analysis.get_analyzer(tag) is english
    assert analysis.get_analyzer("de-AT") is analysis.get_analyzer("german") is not english


def test_shared_analyzers_hold_one_budget_of_stems(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared analyzers of all languages hold STEM_CACHE_BYTES together, not each."""
    budget = analysis.StemBudget()
    analyzers = [Analyzer(lang, budget) for lang in ("english", "german", "french", "dutch")]
    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", 20_000)
    for i in range(300):
        for analyzer in analyzers:
            analyzer.stem(f"zq{i:04d}wort")
            assert budget.used == sum(a.known_bytes for a in analyzers) <= 20_000
    assert all(a.known_stems for a in analyzers[1:])


def test_only_the_analyzer_caches_stems() -> None:
    # PyStemmer's own cache (purged by sorting its 10,000 words) would stand behind the
    # analyzer's and cost a new word 1.3 µs instead of 0.3.
    stemmer = Analyzer("english")._stemmer
    if hasattr(stemmer, "maxCacheSize"):
        assert stemmer.maxCacheSize == 0
    assert Analyzer("english").stem("caches") == "cach"


def test_get_analyzer_is_cached_per_language() -> None:
    assert get_analyzer("en") is get_analyzer("en")
    assert get_analyzer("de").language == "german"
    assert get_analyzer(None).language == "english"


# --- language names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "name"),
    [
        ("en", "english"),
        ("en-US", "english"),
        ("EN_gb", "english"),
        ("de", "german"),
        ("de-AT", "german"),
        ("german", "german"),
        (" fr ", "french"),
        ("pt_BR", "portuguese"),
        ("nb", "norwegian"),
        ("zh-CN", "english"),
        ("ja", "english"),
        ("xx", "english"),
        ("klingon", "english"),
        ("", "english"),
        (None, "english"),
    ],
)
def test_snowball_language(tag: str | None, name: str) -> None:
    assert snowball_language(tag) == name


@pytest.mark.parametrize(
    ("tag", "known"),
    [
        ("en", True),
        ("en-US", True),
        ("DE", True),
        ("german", True),
        ("zh-CN", True),
        ("zh", True),
        ("ja", True),
        ("ko", True),
        ("pt_BR", True),
        ("xx", False),
        ("klingon", False),
        ("", False),
    ],
)
def test_is_known_language(tag: str, known: bool) -> None:
    assert is_known_language(tag) is known


# --- CJK -----------------------------------------------------------------------------------


def test_chinese_sentence_is_segmented_into_several_words() -> None:
    tokens = list(get_analyzer().tokens("数据库管理系统"))
    assert len(tokens) >= 2
    assert "".join(t.surface for t in tokens) == "数据库管理系统"
    assert "数据库" in [t.surface for t in tokens]


def test_chinese_words_are_not_stemmed() -> None:
    for token in get_analyzer().tokens("数据库管理系统"):
        assert token.stem == token.surface
    assert get_analyzer().stem("数据库") == "数据库"


def test_mixed_latin_and_chinese() -> None:
    tokens = list(get_analyzer().tokens("PostgreSQL数据库"))
    assert tokens[0] == Token("postgresql", "postgresql")
    assert len(tokens) >= 2
    assert "".join(t.surface for t in tokens[1:]) == "数据库"


def test_chinese_stop_words_dropped() -> None:
    words = [t.surface for t in get_analyzer().tokens("数据库的管理")]
    assert "的" in CHINESE_STOP_WORDS
    assert "的" not in words
    assert "数据库" in words


def test_japanese_and_korean_runs_are_tokens() -> None:
    assert surfaces("東京タワー") != []
    assert "".join(surfaces("한국어")) == "한국어"


# --- limits --------------------------------------------------------------------------------


def test_words_limit() -> None:
    assert list(get_analyzer().words("a b c d e", limit=3)) == ["a", "b", "c"]


def test_tokens_limit_counts_stop_words() -> None:
    # The limit caps words *read*: "the" is read (and dropped), so only "cat" remains.
    assert surfaces("the cat sat down", None) == ["cat", "sat"]
    assert [t.surface for t in get_analyzer().tokens("the cat sat down", limit=2)] == ["cat"]


def test_limit_counts_cjk_words_after_segmentation() -> None:
    all_words = list(get_analyzer().words("数据库管理系统"))
    assert len(all_words) >= 2
    assert list(get_analyzer().words("数据库管理系统", limit=1)) == all_words[:1]


# --- spans ---------------------------------------------------------------------------------


def test_spans_point_at_original_substrings() -> None:
    text = "Hello, Max_Connections = 100; World!"
    spans = list(get_analyzer().spans(text))
    assert [w for _, _, w in spans] == ["hello", "max_connections", "100", "world"]
    for start, end, word in spans:
        assert text[start:end].lower() == word
    assert text[spans[1][0] : spans[1][1]] == "Max_Connections"


def test_spans_for_cjk_point_at_original_substrings() -> None:
    text = "Intro: PostgreSQL数据库管理系统 and more"
    spans = list(get_analyzer().spans(text))
    for start, end, word in spans:
        assert text[start:end].lower() == word
    words = [w for _, _, w in spans]
    assert words[:2] == ["intro", "postgresql"]
    assert words[-2:] == ["and", "more"]
    cjk = [(s, e) for s, e, w in spans if "\u4e00" <= w[0] <= "\u9fff"]
    assert len(cjk) >= 2
    # The CJK pieces tile the CJK run exactly.
    assert cjk[0][0] == text.index("数")
    assert cjk[-1][1] == text.index("统") + 1
    for (_, end), (start, _) in itertools.pairwise(cjk):
        assert end == start


def test_spans_agree_with_words_for_ascii_and_cjk() -> None:
    text = "Running PostgreSQL数据库管理系统, max_connections 16"
    analyzer = get_analyzer()
    assert [w for _, _, w in analyzer.spans(text)] == list(analyzer.words(text))


@pytest.mark.parametrize(
    "text",
    [
        "Lions and ZEBRAS_2, at night: max_connections=16; PostgreSQL's WAL-E x86_64",
        "MiXeD CaSe\tTabs\nand\rreturns ...  trailing_",
        "",
    ],
)
def test_words_of_an_ascii_text_are_its_spans_words(text: str) -> None:
    """ASCII texts are lowered whole before they are split (a faster path): the same
    words as the token stream's, with or without a limit."""
    analyzer = get_analyzer()
    words = [w for _, _, w in analyzer.spans(text)]
    assert analyzer.words(text) == words
    assert analyzer.words(text, 3) == words[:3]


def test_spans_limit() -> None:
    assert [w for _, _, w in get_analyzer().spans("a b c d", limit=2)] == ["a", "b"]


def test_spans_agree_with_words_for_dotted_capital_i() -> None:
    analyzer = get_analyzer("tr")
    text = "İstanbul Büyükşehir"
    assert [w for _, _, w in analyzer.spans(text)] == list(analyzer.words(text))


# --- url_words -----------------------------------------------------------------------------


def test_url_words_drop_noise() -> None:
    assert url_words("https://www.example.com/docs/index.html") == "example com docs"
    assert url_words("http://example.org/a/page.htm?x=1") == "example org a page x 1"


def test_url_words_split_underscores_and_lowercase() -> None:
    assert url_words("HTTP://Example.COM/Max_Connections.PHP") == "example com max connections"


def test_url_words_read_percent_escapes_and_keep_marks_in_words() -> None:
    """A URL's escaped characters are its words (not the hex of their bytes), and a word
    of a script with combining marks stays whole, as in a page's text."""
    url = "http://example.org/wiki/%E0%A4%B9%E0%A4%BF%E0%A4%A8%E0%A5%8D%E0%A4%A6%E0%A5%80_भाषा"
    assert url_words(url) == "example org wiki हिन्दी भाषा"
    assert url_words("http://example.org/caf%C3%A9s%20and%2Fmore") == "example org cafés and more"
    assert url_words("http://example.org/%FF%FEbad") == "example org bad"


def test_url_words_empty() -> None:
    assert url_words("") == ""


# --- analyze_document ----------------------------------------------------------------------


def test_word_record_helpers() -> None:
    rec = WordRecord("vacuum", "vacuum")
    assert rec.counts == [0] * len(SECTIONS)
    rec.counts[SECTIONS.index("title")] = 2
    rec.counts[SECTIONS.index("body")] = 3
    assert rec.count("title") == 2
    assert rec.total == 5


def test_sections_order() -> None:
    assert SECTIONS == ("body", "title", "url", "desc", "keywords", "boilerplate")
    assert set(DEFAULT_WEIGHTS) == set(SECTIONS)


def test_analyze_document_counts_and_weights_by_hand() -> None:
    weights = {"body": 1.0, "title": 10.0, "url": 3.0, "desc": 0.5, "keywords": 0.0}
    records = analyze_document(
        {
            "body": "Vacuum the tables. Vacuuming helps.",
            "title": "Vacuum guide",
            "url": "https://www.example.com/vacuum/index.html",
            "desc": "How to vacuum tables",
            "keywords": "vacuum",
        },
        weights=weights,
    )
    # vacuum: body 2 (vacuum, vacuuming), title 1, url 1, desc 1, keywords 1
    #   weight = 2×1 + 1×10 + 1×3 + 1×0.5 + 1×0 = 15.5
    vacuum = records["vacuum"]
    assert vacuum.counts == [2, 1, 1, 1, 1, 0]
    assert vacuum.weight == pytest.approx(15.5)
    assert vacuum.surface == "vacuum"  # first seen (body), not "vacuuming"
    # tabl: body 1, desc 1 -> 1×1 + 1×0.5 = 1.5
    assert records["tabl"].counts == [1, 0, 0, 1, 0, 0]
    assert records["tabl"].weight == pytest.approx(1.5)
    # help: body only -> 1
    assert records["help"].counts == [1, 0, 0, 0, 0, 0]
    assert records["help"].weight == pytest.approx(1.0)
    # guid: title only -> 10
    assert records["guid"].counts == [0, 1, 0, 0, 0, 0]
    assert records["guid"].weight == pytest.approx(10.0)
    # URL words: "example com vacuum" (https, www, index, html dropped) -> 3 each
    assert records["exampl"].counts == [0, 0, 1, 0, 0, 0]
    assert records["exampl"].weight == pytest.approx(3.0)
    assert records["com"].weight == pytest.approx(3.0)
    # stop words ("the", "how", "to") and URL noise are not records
    assert set(records) == {"vacuum", "tabl", "help", "guid", "exampl", "com"}
    for noise in ("the", "how", "to", "www", "html", "index", "https"):
        assert noise not in records


def test_analyze_document_default_weights() -> None:
    records = analyze_document({"body": "vacuum", "title": "vacuum"})
    # 1×1.0 (body) + 1×4.0 (title)
    assert records["vacuum"].weight == pytest.approx(5.0)


def test_analyze_document_partial_weights_merge_with_defaults() -> None:
    records = analyze_document({"body": "vacuum", "title": "vacuum"}, weights={"title": 2})
    # 1×1.0 (default body) + 1×2 (given title)
    assert records["vacuum"].weight == pytest.approx(3.0)


def test_analyze_document_surface_is_first_seen_in_section_order() -> None:
    # Sections are read in SECTIONS order (body before title), whatever the dict order.
    records = analyze_document({"title": "Running", "body": "runs"})
    assert records["run"].surface == "runs"


def test_analyze_document_max_words_limits_body_and_boilerplate_only() -> None:
    records = analyze_document(
        {
            "body": "alpha beta gamma delta",
            "title": "delta epsilon",
            "boilerplate": "zeta eta theta",
        },
        max_words=2,
    )
    assert set(records) == {"alpha", "beta", "delta", "epsilon", "zeta", "eta"}
    assert records["delta"].counts == [0, 1, 0, 0, 0, 0]


def test_analyze_document_max_words_counts_stop_words() -> None:
    records = analyze_document({"body": "the alpha beta"}, max_words=2)
    assert set(records) == {"alpha"}


def test_analyze_document_empty_and_missing_sections() -> None:
    assert analyze_document({}) == {}
    assert analyze_document({"body": "", "title": None}) == {}  # type: ignore[dict-item]


def test_analyze_document_language() -> None:
    records = analyze_document({"body": "die Häuser"}, language="de")
    assert "haus" in records
    assert "die" in records  # no German stop list


def test_analyze_document_chinese() -> None:
    records = analyze_document({"body": "数据库管理系统", "title": "数据库"})
    assert records["数据库"].counts[:2] == [1, 1]
    assert records["数据库"].weight == pytest.approx(1.0 + 4.0)


@pytest.mark.parametrize(
    "text",
    ["Lions and ZEBRAS, at night.", "İstanbul groß", "PostgreSQL是一个数据库管理系统 ok", ""],
)
def test_offsets_are_the_spans_offsets(text: str) -> None:
    analyzer = get_analyzer(None)
    spans = [(s, e) for s, e, _ in analyzer.spans(text)]
    assert analyzer.offsets(text) == spans
    assert analyzer.offsets(text, 2) == spans[:2]


@pytest.mark.parametrize("language", ["english", "german", "french"])
def test_stems_are_snowballs_whichever_stemmer_runs(language: str) -> None:
    """The analyzer's stemmer (Snowball's C stemmers through PyStemmer when installed)
    gives the stems of snowballstemmer's own Python implementation."""
    import importlib

    module = importlib.import_module(f"snowballstemmer.{language}_stemmer")
    reference = getattr(module, f"{language.capitalize()}Stemmer")()
    analyzer = get_analyzer(language)
    words = [
        "running", "generously", "dying", "skies", "häuser", "straße", "nationalité",
        "connections", "ugly", "early", "happily", "über", "relational", "agreed",
    ]  # fmt: skip
    assert [analyzer.stem(w) for w in words] == [reference.stemWord(w) for w in words]


def test_the_crawls_analysis_in_columns_reads_as_records() -> None:
    """analyze_packed (what a crawl's analysis hands on) is a mapping of stems to records,
    in the order the stems are first read; a record is a copy; pickled, it stays columns."""
    import pickle

    from search.analysis import PackedWords, analyze_packed, page_sections

    sections = page_sections(
        "http://x.example/docs/vacuum-full.html",
        "Vacuum Full",
        "Vacuuming reclaims storage; été 日本語の文章 vacuum",
        None,
        None,
        ["home", "vacuum"],
    )
    packed = analyze_packed(sections, {"title": 3.0, "boilerplate": 0.5}, None, None)
    assert isinstance(packed, PackedWords)
    assert list(packed)[:4] == ["vacuum", "reclaim", "storag", "été"]
    vacuum = packed["vacuum"]
    # body 2 ("vacuuming", "vacuum"), title 1, url 1, boilerplate 1
    assert vacuum.counts == [2, 1, 1, 0, 0, 1] and vacuum.surface == "vacuuming"
    assert vacuum.weight == 2 * 1.0 + 1 * 3.0 + 1 * DEFAULT_WEIGHTS["url"] + 1 * 0.5
    vacuum.counts[0] = 99
    assert packed["vacuum"].counts[0] == 2
    assert "vacuum" in packed and "nothing" not in packed and len(packed) == len(list(packed))
    assert packed.records() == dict(packed.items())
    back = pickle.loads(pickle.dumps(packed))
    assert isinstance(back, PackedWords) and back.records() == packed.records()


def test_lowering_a_character_to_one_character_keeps_it_a_word_character_or_not() -> None:
    """Analyzer.words lowers a whole text at once when every character lowers to one:
    exact only if no such lowering turns a character that starts a word (``\\w``) or one
    that continues it (a mark, a joiner) into another kind, or the reverse.  Checked for
    every code point of this Python's Unicode database."""
    word = re.compile(r"\w")
    inside = analysis._WORD_CHAR_RE
    changed = [
        hex(cp)
        for cp in range(sys.maxunicode + 1)
        if len(low := chr(cp).lower()) == 1
        and (
            bool(word.match(chr(cp))) != bool(word.match(low))
            or bool(inside.match(chr(cp))) != bool(inside.match(low))
        )
    ]
    assert changed == []


@pytest.mark.parametrize(
    "text",
    [
        "Ärger über Öl, STRASSE und Straße — fine",
        "İstanbul’da İZMİR",  # İ lowers to two characters: each run folded on its own
        "ΟΔΟΣ's ΟΔΟΣ, ΣΟΦΙΑ",  # Σ lowers by what follows it
        "naïve café ¶ résumé",
        "Cafe\u0301 ＰＤＦ ２０２６ ﬁnd हिन्दी in\u00adformation ½",
    ],
)
def test_words_of_a_non_ascii_text_are_each_run_folded(text: str) -> None:
    analyzer = get_analyzer(None)
    runs = analysis._WORD_RE.findall(text)
    assert analyzer.words(text) == [analysis.fold(w) for w in runs]
    assert analyzer.words(text) == [w for _, _, w in analyzer.spans(text)]
    assert analyzer.words(text, 2) == [analysis.fold(w) for w in runs[:2]]


def test_word_runs_equal_the_regular_expression_on_every_code_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """analysis._word_runs (separators made spaces on the UTF-8 bytes, the text split on
    whitespace, runs with a character that is not ASCII tokenized again) reads the same
    words as its word pattern (``\\w``, then word characters, marks and joiners) around,
    inside, beside and doubled, of every code point of this
    Python's Unicode database (a chunk holding a lone surrogate is read by the regular
    expression).  Every run is tokenized on its own here, whatever their share."""
    monkeypatch.setattr(analysis, "_NON_ASCII_RUNS", 1.0)
    word = analysis._WORD_RE
    for start in range(0, sys.maxunicode + 1, 1024):
        chars = [chr(cp) for cp in range(start, min(start + 1024, sys.maxunicode + 1))]
        text = " ".join(f"ab{c}cd {c} x{c}{c}y.{c}z" for c in chars)
        assert analysis._word_runs(text) == word.findall(text), hex(start)


def test_word_runs_read_only_the_runs_that_are_not_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    pattern = analysis._WORD_RE

    class Spy:
        def findall(self, text: str) -> list[str]:
            read.append(text)
            return pattern.findall(text)

    monkeypatch.setattr(analysis, "_WORD_RE", Spy())
    text = "the café’s menu — « prix fixe » " + "and more words " * 10
    assert analysis._word_runs(text) == pattern.findall(text)
    assert sorted(read) == sorted(["café’s", "—", "«", "»"])
    read.clear()
    assert analysis._word_runs("plain ascii, text") == ["plain", "ascii", "text"]
    assert read == []
    # Mostly runs that are not ASCII (Greek): the whole text by the regular expression.
    greek = "η γρήγορη καφέ αλεπού, πηδάει"
    assert analysis._word_runs(greek) == pattern.findall(greek)
    assert read == [greek]


def test_word_runs_of_a_text_with_a_lone_surrogate() -> None:
    text = "ab\ud800cd ef"
    assert analysis._word_runs(text) == re.findall(r"\w+", text)


def test_word_offsets_equal_the_regular_expression(monkeypatch: pytest.MonkeyPatch) -> None:
    """analysis._word_offsets (the offsets of a window of words, read from the pieces
    between spaces) gives the spans of its word pattern around, inside, beside and doubled, of
    every code point up to U+3000 (ASCII, Latin, Greek, Cyrillic, the general punctuation
    and spaces) and of one in 97 after: a piece with a character that is not ASCII is read
    by the regular expression itself, so the pieces of ASCII are what is tested here.  The
    whole text, windows near its start (read from a prefix of the text), one inside it,
    and one that runs past its end."""
    monkeypatch.setattr(analysis, "_NON_ASCII_RUNS", 1.0)
    word = analysis._WORD_RE
    points = [*range(0x3000), *range(0x3000, sys.maxunicode + 1, 97)]
    for at in range(0, len(points), 512):
        chars = [chr(cp) for cp in points[at : at + 512]]
        text = "  ".join(f"ab{c}cd {c} x{c}{c}y.{c}z" for c in chars)
        spans = [m.span() for m in word.finditer(text)]
        n = len(spans)
        windows = [(0, None), (0, 30), (40, 70), (n // 2, n // 2 + 30), (n - 5, n + 5)]
        for lo, hi in windows:
            assert analysis._word_offsets(text, lo, hi) == spans[lo:hi], (
                hex(ord(chars[0])),
                lo,
                hi,
            )


def test_word_offsets_of_ascii_texts_are_read_from_the_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ASCII text's offsets come from its bytes (analysis._ascii_offsets, numpy), not
    from its pieces, and are the spans of ``\\w+``: every ASCII character around, inside
    and beside words, separators in a row, a text that starts and ends inside a word, and
    windows near the start (a prefix read), inside, and past the end."""

    def pieces(*args: object) -> None:
        raise AssertionError("an ASCII text read piece by piece")

    monkeypatch.setattr(analysis, "_offsets_in", pieces)
    rng = random.Random(5)
    alphabet = [chr(c) for c in range(128)]
    texts = ["", " ", "a", "ab cd", "..ab,,cd..", "x" * 300 + " y"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3000))) for _ in range(40)]
    texts += [" ".join(f"w{i}" + rng.choice(alphabet) for i in range(2000))]
    for text in texts:
        spans = [m.span() for m in re.finditer(r"\w+", text)]
        n = len(spans)
        windows = [(0, None), (0, 30), (5, 6), (n // 2, n // 2 + 30), (n - 5, n + 5), (3, None)]
        for lo, hi in windows:
            lo = max(lo, 0)
            assert analysis._word_offsets(text, lo, hi) == spans[lo:hi], (text[:40], lo, hi)


def test_word_offsets_of_texts_mostly_not_ascii_and_with_a_surrogate() -> None:
    for text in ["η γρήγορη καφέ — αλεπού, πηδάει", "ab\ud800cd ef gh", "", "  ", "a"]:
        spans = [m.span() for m in re.finditer(r"\w+", text)]
        for lo in range(len(spans) + 2):
            assert analysis._word_offsets(text, lo, lo + 2) == spans[lo : lo + 2], (text, lo)
        assert analysis._word_offsets(text, 3, 1) == []


def test_set_stem_cache_bytes_caps_every_analyzer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", analysis.STEM_CACHE_BYTES)  # restored
    analyzer = Analyzer("english")
    analysis.set_stem_cache_bytes(3_000)
    for i in range(200):
        analyzer.stem(f"zq{i:04d}walking")
        assert analyzer.known_bytes <= 3_000
    with pytest.raises(ValueError):
        analysis.set_stem_cache_bytes(0)


# --- Unicode: folding, marks, ASCII as before -----------------------------------------------


def test_marks_table_is_this_pythons_unicode() -> None:
    """search.wordchars.MARKS holds exactly the code points of categories Mn, Mc and Me of
    this Python's unicodedata (on failure, the table this Python needs is printed)."""
    import unicodedata

    from search import wordchars

    marks = [
        cp
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me")
    ]
    table = [cp for a, b in wordchars.code_points(wordchars.MARKS) for cp in range(a, b + 1)]
    if table != marks:  # the table this Python needs
        starts = [cp for i, cp in enumerate(marks) if i == 0 or marks[i - 1] != cp - 1]
        ends = [cp for i, cp in enumerate(marks) if i + 1 == len(marks) or marks[i + 1] != cp + 1]
        print(
            " ".join(
                f"{a:04X}" if a == b else f"{a:04X}-{b:04X}"
                for a, b in zip(starts, ends, strict=True)
            )
        )
    assert table == marks, unicodedata.unidata_version


def test_ignorable_table_is_unicodes_default_ignorables_inside_words() -> None:
    """search.wordchars.IGNORABLE: the Default_Ignorable_Code_Point characters (as the
    regex module knows them) that can continue a word, but the Hangul fillers (letters)."""
    import unicodedata

    regex = pytest.importorskip("regex")
    from search import wordchars

    ignorable = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    expected = [
        cp
        for cp in range(sys.maxunicode + 1)
        if ignorable.match(chr(cp))
        and unicodedata.category(chr(cp)) != "Cn"  # assigned in this Python's Unicode
        and analysis._WORD_CHAR_RE.match(chr(cp))
        and not re.match(r"\w", chr(cp))
    ]
    table = [cp for a, b in wordchars.code_points(wordchars.IGNORABLE) for cp in range(a, b + 1)]
    assert table == expected


def test_fold_is_nfkc_casefold_and_folds_a_folded_word_to_itself() -> None:
    """fold() of every code point (surrogates aside) is NFKC, case folding and NFKC again
    (less the ignorables), folds to itself, and is the fold of its lower case (the words of
    a text lowered whole are folded after)."""
    import unicodedata

    nfkc = functools.partial(unicodedata.normalize, "NFKC")
    fold = analysis.fold
    for cp in itertools.chain(range(0xD800), range(0xE000, sys.maxunicode + 1)):
        c = chr(cp)
        word = "a" + c  # a word starts with a word character
        folded = fold(word)
        assert fold(folded) == folded, hex(cp)
        assert fold(word.lower()) == folded, hex(cp)
        if not analysis._IGNORED_RE.match(c):
            assert folded == nfkc(nfkc(word).casefold()), hex(cp)
        else:
            assert folded == "a", hex(cp)


@pytest.mark.parametrize(
    ("typed", "written"),
    [
        ("cafe\u0301", "café"),  # NFD query, NFC page
        ("café", "Cafe\u0301"),  # and the reverse
        ("ＰＤＦ", "pdf"),  # full-width Latin, as Chinese pages write it
        ("２０２６", "2026"),  # full-width digits
        ("ﬁnd", "find"),  # ligature
        ("ﬃ", "FFI"),
        ("Straße", "STRASSE"),  # case folding: ß is ss
        ("ὈΔΥΣΣΕΎΣ", "ὀδυσσεύς"),  # final sigma
        ("in\u00adformation", "information"),  # soft hyphen
        ("क\u094d\u200dष", "क\u094dष"),  # zero-width joiner inside a Devanagari word
        ("\u095c", "\u0921\u093c"),  # Devanagari ड़: its two forms
    ],
)
def test_a_word_and_its_other_unicode_forms_are_one_word(typed: str, written: str) -> None:
    for language in (None, "de", "hi", "el"):
        assert stems(typed, language) == stems(written, language), language
        assert len(stems(typed, language)) == 1


def test_marks_stay_inside_words() -> None:
    """Hindi, Tamil, Bengali words are words, not their letters: the vowel signs and viramas
    (categories Mn and Mc) continue a word."""
    analyzer = get_analyzer("hi")
    text = "हिन्दी भाषा, தமிழ் மொழி; বাংলা ভাষা"
    assert analyzer.words(text) == ["हिन्दी", "भाषा", "தமிழ்", "மொழி", "বাংলা", "ভাষা"]
    spans = list(analyzer.spans(text))
    assert [text[s:e] for s, e, _ in spans] == analyzer.words(text)
    # Snowball stems Hindi; a script without a stemmer keeps its words whole.
    assert stems("लड़के लड़कों", "hi") == ["लड़क", "लड़क"]
    assert stems("বাংলা", "bn") == ["বাংলা"]


def test_spans_of_folded_words_are_offsets_into_the_text() -> None:
    text = "ﬁnd the ＰＤＦ in the oﬃce, cafe\u0301 ﬀ end"
    analyzer = get_analyzer()
    spans = list(analyzer.spans(text))
    assert [w for _, _, w in spans] == [
        "find",
        "the",
        "pdf",
        "in",
        "the",
        "office",
        "café",
        "ff",
        "end",
    ]
    assert [text[s:e] for s, e, _ in spans] == [
        "ﬁnd",
        "the",
        "ＰＤＦ",
        "in",
        "the",
        "oﬃce",
        "cafe\u0301",
        "ﬀ",
        "end",
    ]
    assert analyzer.offsets(text) == [(s, e) for s, e, _ in spans]
    assert analyzer.offsets(text, 8, 5) == [(s, e) for s, e, _ in spans][5:8]


def test_ascii_text_analyzes_as_before() -> None:
    """Pages stored before folding keep their stems: an ASCII text's words are still its
    runs of ``\\w`` lowercased, and its stems Snowball's stems of those (a reference
    written out here, for random texts of every ASCII character, in several languages)."""
    import snowballstemmer

    rng = random.Random(7)
    alphabet = [chr(c) for c in range(128)] + list("etaoin shrdlu") * 8
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400))) for _ in range(300)]
    texts.append("Running CONNECTIONS, generously; max_connections=16 x86_64 The QUICK foxes")
    for language in ("english", "german", "french", "hindi"):
        analyzer = get_analyzer(language)
        stemmer = snowballstemmer.stemmer(language)
        stop = analyzer.stop_words
        for text in texts:
            words = [w.lower() for w in re.findall(r"\w+", text)]
            assert analyzer.words(text) == words
            assert [w for _, _, w in analyzer.spans(text)] == words
            assert analyzer.offsets(text) == [m.span() for m in re.finditer(r"\w+", text)]
            expected = [
                (stemmer.stemWord(w), w)
                for w in words
                if w not in stop and len(w) <= MAX_TOKEN_LENGTH
            ]
            assert [(t.stem, t.surface) for t in analyzer.tokens(text)] == expected


def test_pages_in_either_unicode_form_analyze_alike() -> None:
    """A page and its NFD form (or its full-width form) give the same records."""
    import unicodedata

    title = "Café Résumé ＰＤＦ"
    body = "Les cafés de Montréal, ﬁchiers ＰＤＦ ２０２６, hindi: हिन्दी"
    plain = analyze_document({"title": title, "body": body}, language="fr")
    nfd = unicodedata.normalize("NFD", body)
    assert nfd != body
    other = analyze_document(
        {"title": unicodedata.normalize("NFD", title), "body": nfd}, language="fr"
    )
    assert other == plain
    assert {"caf", "pdf", "2026", "fichi", "हिन्दी"} <= set(plain)


def test_cjk_runs_without_the_characters_folding_changes_are_not_folded() -> None:
    """The words of a CJK run are folded only when the run holds a character that folding
    changes or that combines with the one before it (analysis._CJK_FOLDED_RE): checked on
    every CJK code point; and a run that holds one is folded."""
    import unicodedata

    cjk = re.compile(f"[{analysis._CJK}]")
    missed = [
        hex(cp)
        for cp in range(sys.maxunicode + 1)
        if cjk.match(c := chr(cp))
        and (analysis.fold(c) != c or unicodedata.combining(c))
        and not analysis._CJK_FOLDED_RE.match(c)
    ]
    assert missed == []
    # A CJK compatibility ideograph is its unified ideograph; a kana and a combining voiced
    # mark are the voiced kana.
    analyzer = get_analyzer("zh")
    assert analyzer.words("\uf900") == analyzer.words("\u8c48")
    assert analyzer.words("か\u3099") == analyzer.words("が")


def test_the_cache_of_folded_words_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """fold() keeps the folds of words that are not ASCII, in at most FOLD_CACHE_BYTES
    (emptied when full), and gives the same folds from it."""
    monkeypatch.setattr(analysis, "FOLD_CACHE_BYTES", 5_000)
    monkeypatch.setattr(analysis, "_FOLDED", {})
    monkeypatch.setattr(analysis, "_folded_bytes", 0)
    words = [f"ＷＯＲＤ{i}ﬁ" for i in range(300)]
    first = [analysis.fold(w) for w in words]
    assert first == [f"word{i}fi" for i in range(300)]
    assert 0 < analysis._folded_bytes <= 5_000
    assert len(analysis._FOLDED) < 300
    cached = words[-1]
    assert cached in analysis._FOLDED and analysis.fold(cached) == "word299fi"
    assert analysis.fold("plain") == "plain" and "plain" not in analysis._FOLDED
