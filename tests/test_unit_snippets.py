"""Unit tests for search.snippets (snippets, phrases) and search.results (hits)."""

from __future__ import annotations

import random
from collections.abc import Collection

import pytest

from search import analysis
from search.analysis import get_analyzer
from search.query import parse_query
from search.results import Hit, Segment
from search.snippets import (
    SCAN_LIMIT,
    TextWords,
    _query_words,
    contains_phrase,
    make_snippet,
    scanned,
    word_stems,
)


def hit(snippet: list[Segment]) -> Hit:
    return Hit(1, 2.5, 7, "http://a.example/", "Title", None, "text/html", snippet)


def marked(segments: list[Segment]) -> list[str]:
    return [s.text for s in segments if s.match]


# --- word_stems / contains_phrase -------------------------------------------------------------


def testword_stems_blanks_stop_words_and_keeps_offsets() -> None:
    text = "PostgreSQL is the best database"
    words = word_stems(text, None)
    assert [w[2] for w in words] == ["postgresql", "", "", "best", "databas"]
    assert [text[s:e] for s, e, _ in words] == ["PostgreSQL", "is", "the", "best", "database"]


def test_contains_phrase_skips_stop_words() -> None:
    words = word_stems("PostgreSQL is the best database", None)
    assert contains_phrase(words, ["postgresql", "best"])  # "is the" in between are stop words
    assert contains_phrase(words, ["best", "databas"])
    assert contains_phrase(words, ["postgresql", "best", "databas"])
    assert not contains_phrase(words, ["best", "postgresql"])  # order matters
    assert not contains_phrase(words, ["postgresql", "databas"])  # not adjacent
    assert not contains_phrase(words, ["databas", "missing"])  # runs off the end


def test_contains_phrase_with_parsed_query_phrase() -> None:
    q = parse_query('"vacuuming the tables"')
    assert contains_phrase(word_stems("We vacuum tables nightly.", None), q.phrases[0])
    assert not contains_phrase(word_stems("Tables we vacuum.", None), q.phrases[0])


def test_contains_phrase_empty_words() -> None:
    assert not contains_phrase([], ["a"])


def test_contains_phrase_chinese() -> None:
    words = word_stems("PostgreSQL数据库管理系统", None)
    stems = [w[2] for w in words]
    assert contains_phrase(words, stems[:2])
    assert not contains_phrase(words, list(reversed(stems[:2])))


def test_phrase_check_agrees_with_query_for_dotted_capital_i() -> None:
    q = parse_query('"İstanbul Büyükşehir"', language="tr")
    assert q.phrases
    assert contains_phrase(word_stems("Welcome to İstanbul Büyükşehir", "tr"), q.phrases[0])


# --- make_snippet ----------------------------------------------------------------------------


def test_snippet_empty_text() -> None:
    assert make_snippet("", {"vacuum"}) == []


def test_snippet_text_without_words() -> None:
    assert make_snippet("!!! ???", {"vacuum"}) == [Segment("!!! ???", False)]


def test_snippet_short_text_all_shown_with_matches_marked() -> None:
    segments = make_snippet("Vacuuming tables is good.", {"vacuum", "tabl"})
    assert segments == [
        Segment("Vacuuming", True),
        Segment(" ", False),
        Segment("tables", True),
        Segment(" is good", False),
    ]
    # No ellipses: the whole text fits (the trailing "." is after the last word).
    assert "".join(s.text for s in segments) == "Vacuuming tables is good"


def test_snippet_no_match_shows_start() -> None:
    text = " ".join(f"w{i}" for i in range(10))
    segments = make_snippet(text, {"vacuum"}, size=4)
    assert segments == [Segment("w0 w1 w2 w3", False), Segment(" …", False)]


def test_snippet_window_with_most_distinct_stems_and_ellipses() -> None:
    words = [f"w{i}" for i in range(20)]
    # One "vacuum" early, then "vacuum" and "tables" together later: the later window has
    # two distinct query stems and wins; the words around them share the rest of it.
    words[2] = "vacuum"
    words[12] = "vacuum"
    words[14] = "tables"
    text = " ".join(words)
    segments = make_snippet(text, {"vacuum", "tabl"}, size=5)
    assert segments[0] == Segment("… ", False)
    assert segments[-1] == Segment(" …", False)
    assert marked(segments) == ["vacuum", "tables"]
    body = "".join(s.text for s in segments[1:-1])
    assert body == "w11 vacuum w13 tables w15"
    assert len(body.split()) == 5


def test_snippet_distinct_stems_beat_repeats() -> None:
    # "vacuum vacuum vacuum" early has 1 distinct stem; "vacuum ... analyze" later has 2.
    text = "vacuum vacuum vacuum a1 a2 a3 a4 a5 a6 vacuum analyze a7 a8 a9"
    segments = make_snippet(text, {"vacuum", "analyz"}, size=3)
    assert marked(segments) == ["vacuum", "analyze"]
    assert segments[0] == Segment("… ", False)


def test_snippet_window_at_start_has_no_leading_ellipsis() -> None:
    text = "vacuum tables " + " ".join(f"w{i}" for i in range(10))
    segments = make_snippet(text, {"vacuum", "tabl"}, size=4)
    assert segments[0] == Segment("vacuum", True)
    assert segments[-1] == Segment(" …", False)
    assert "".join(s.text for s in segments) == "vacuum tables w0 w1 …"


def test_snippet_window_at_end_has_no_trailing_ellipsis() -> None:
    text = " ".join(f"w{i}" for i in range(10)) + " vacuum"
    segments = make_snippet(text, {"vacuum"}, size=3)
    assert segments == [Segment("… ", False), Segment("w8 w9 ", False), Segment("vacuum", True)]


def test_snippet_keeps_original_case_and_punctuation_between_words() -> None:
    text = "Use VACUUM, then ANALYZE; done."
    segments = make_snippet(text, {"vacuum", "analyz"})
    assert segments == [
        Segment("Use ", False),
        Segment("VACUUM", True),
        Segment(", then ", False),
        Segment("ANALYZE", True),
        Segment("; done", False),
    ]


def test_snippet_stop_words_are_never_marked() -> None:
    stems = set(parse_query("the vacuum").stems)
    assert stems == {"vacuum"}
    segments = make_snippet("The vacuum of the table", stems)
    assert marked(segments) == ["vacuum"]


def test_snippet_chinese() -> None:
    text = "PostgreSQL是一个数据库管理系统"
    segments = make_snippet(text, {"数据库", "postgresql"})
    assert marked(segments) == ["PostgreSQL", "数据库"]
    assert "".join(s.text for s in segments) == text


def test_snippet_uses_given_words() -> None:
    text = "alpha beta gamma"
    words = [(0, 5, "x"), (6, 10, "y"), (11, 16, "x")]
    segments = make_snippet(text, {"y"}, words=words)
    assert segments == [Segment("alpha ", False), Segment("beta", True), Segment(" gamma", False)]


def test_snippet_language() -> None:
    segments = make_snippet("Die Häuser sind alt", {"haus"}, language="de")
    assert marked(segments) == ["Häuser"]
    assert get_analyzer("de").stem("häuser") == "haus"


TEXTS = [
    "The lion hunts zebras at night. Lions sleep all day; the zebra runs.",
    "The ﬁnal ＰＤＦ of the Zebra\u0301 oﬃce: हिन्दी lions, in\u00adformation ﬀ lion",
    "我们的搜索引擎很快，数据库管理系统也是 zebra 搜索",
    "İstanbul ist groß: ISTANBUL, istanbul and the Straße of it",
    "PostgreSQL是一个数据库管理系统 and PostgreSQL runs it",
    "the a of and to " * 30 + "vacuum full lock " + "filler words here " * 40 + "vacuuming",
    "",
    "no query word at all in this text",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(
    "stems",
    [
        {"lion", "zebra"},
        {"istanbul"},
        {"数据库"},
        {"vacuum", "lock"},
        {"nothing"},
        {""},
        {"搜索", "final", "pdf"},
        {"引擎", "zebrá"},
    ],
)
def test_text_words_read_from_the_text_are_word_stems(text: str, stems: set[str]) -> None:
    """Reading only the words (each distinct one stemmed once) finds the same words, query
    matches and offsets as word_stems, so the snippet is the same."""
    fast = TextWords(text, stems, None)
    full = TextWords.of_stems(word_stems(text, None), stems)
    assert fast.n == full.n
    assert fast.matches == full.matches
    assert fast.span_range(0, fast.n) == full.span_range(0, full.n)
    assert make_snippet(text, stems, description="a zebra description") == make_snippet(
        text, stems, words=word_stems(text, None), description="a zebra description"
    )


def test_snippet_stems_each_distinct_word_once(monkeypatch: pytest.MonkeyPatch) -> None:
    analyzer = get_analyzer(None)
    stemmed: list[str] = []
    real, real_many = analyzer.stem, analyzer.cache_stems

    def counting(word: str) -> str:
        stemmed.append(word)
        return real(word)

    def counting_many(words: Collection[str]) -> None:
        stemmed.extend(words)
        real_many(words)

    monkeypatch.setattr(analyzer, "stem", counting)
    monkeypatch.setattr(analyzer, "cache_stems", counting_many)
    monkeypatch.setattr(analyzer, "known_stems", {})  # nothing stemmed yet
    text = "zebras graze while lions watch. " * 200
    segments = make_snippet(text, {"lion"})
    assert set(marked(segments)) == {"lions"}
    assert sorted(stemmed) == sorted({"zebras", "graze", "lions", "watch"})
    stemmed.clear()
    assert make_snippet(text + " zebra", {"lion"}) == segments
    assert stemmed == ["zebra"]  # the others are cached


_FORMS = ["lion", "lions", "lioness", "zebra", "zebras", "run", "runs", "running", "ran"]


@pytest.mark.parametrize("cap", [1 << 30, 6_000, 1])
def test_query_words_are_the_words_whose_stem_is_asked(
    monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    """_query_words (found from the query stems' cached surfaces) finds the words each
    one's stem finds, with a cache that holds everything, one emptied in the middle of a
    text (read again word by word), and one that holds nothing."""
    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", cap)
    analyzer = analysis.Analyzer("english")
    reference = analysis.Analyzer("english")
    rng = random.Random(cap)
    vocabulary = _FORMS + [f"w{i}x" for i in range(300)] + ["the", "and", "of"]
    for _ in range(60):
        distinct = set(rng.sample(vocabulary, rng.randint(0, 120)))
        stems = {reference.stem(w) for w in rng.sample(vocabulary, 3)} | {"nothing"}
        if rng.random() < 0.2:
            stems.add("")  # a stop word asked for
        expected = {
            w: reference.stem(w)
            for w in distinct - analyzer.stop_words
            if reference.stem(w) in stems
        }
        if "" in stems:
            expected |= dict.fromkeys(distinct & analyzer.stop_words, "")
        assert _query_words(analyzer, distinct, stems) == expected


@pytest.mark.parametrize("surfaces", [False, True])
def test_cache_stems_is_stem_word_by_word(monkeypatch: pytest.MonkeyPatch, surfaces: bool) -> None:
    """Stemming a batch of words caches what stem() would, one by one: the same stems
    (Chinese words unchanged), the same bytes, the surfaces; past the cap the cache starts
    again empty with the batch; a batch larger than the whole cache goes word by word."""
    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", 1 << 30)
    one, many = analysis.Analyzer("english"), analysis.Analyzer("english")
    if surfaces:
        one.track_surfaces(), many.track_surfaces()
    words = [*_FORMS, "café", "naïve", "数据库", "walking", "walked", "Ωmega"]
    for word in words:
        one.stem(word)
    many.cache_stems(words)
    assert many.known_stems == one.known_stems and many.known_bytes == one.known_bytes
    assert many.known_stems["数据库"] == "数据库" and many.known_stems["walked"] == "walk"
    assert many.surfaces == one.surfaces
    batch = many.known_bytes
    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", batch + batch // 2)
    many.cache_stems([f"zq{i}x" for i in range(len(words))])  # does not fit beside: emptied
    assert many.generation == (2 if surfaces else 1) and "lions" not in many.known_stems
    assert 0 < many.known_bytes <= analysis.STEM_CACHE_BYTES
    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", 500)
    many.cache_stems([f"zq{i}running" for i in range(40)])  # larger than the cache
    assert 0 < many.known_bytes <= 500
    assert all(many.known_stems[w] == w[:-4] for w in many.known_stems)


def test_surfaces_are_kept_once_asked_for_and_count_in_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(analysis, "STEM_CACHE_BYTES", 20_000)
    analyzer = analysis.Analyzer("english")
    for word in _FORMS:
        analyzer.stem(word)
    assert analyzer.surfaces is None  # a crawl's analyzer keeps none
    before = analyzer.known_bytes
    surfaces = analyzer.track_surfaces()
    assert analyzer.known_stems == {} and analyzer.generation == 1  # starts again empty
    assert analyzer.track_surfaces() is surfaces  # once
    for word in _FORMS:
        analyzer.stem(word)
    assert analyzer.known_bytes > before  # the surfaces count
    assert surfaces["lion"] == ("lion", "lions")
    for i in range(400):
        analyzer.stem(f"zq{i}walking")
        assert analyzer.known_bytes <= 20_000
        assert all(w in surfaces[s] for w, s in analyzer.known_stems.items())
    assert analyzer.generation > 1  # emptied on the way


# --- Hit -------------------------------------------------------------------------------------


def test_snippet_text_marks() -> None:
    h = hit([Segment("use ", False), Segment("VACUUM", True), Segment(" now", False)])
    assert h.snippet_text() == "use [VACUUM] now"
    assert h.snippet_text(("**", "**")) == "use **VACUUM** now"
    assert h.snippet_text(("", "")) == "use VACUUM now"


def test_snippet_html_escapes_text() -> None:
    h = hit(
        [
            Segment("<script>alert('x')</script> ", False),
            Segment("a&b<i>", True),
            Segment(' "q"', False),
        ]
    )
    html = h.snippet_html()
    assert html == (
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; <b>a&amp;b&lt;i&gt;</b> &quot;q&quot;"
    )
    assert "<script>" not in html


def test_empty_snippet() -> None:
    h = hit([])
    assert h.snippet_text() == ""
    assert h.snippet_html() == ""


def test_hit_as_dict() -> None:
    h = hit([Segment("<x> ", False), Segment("vacuum", True)])
    data = h.as_dict()
    assert data == {
        "rank": 1,
        "score": 2.5,
        "docid": 7,
        "url": "http://a.example/",
        "title": "Title",
        "description": None,
        "content_type": "text/html",
        "snippet": "<x> vacuum",
        "snippet_html": "&lt;x&gt; <b>vacuum</b>",
        "matches": ["vacuum"],
    }


# --- the best passage: closest together, two fragments, the description ----------------------


def text_of(segments: list[Segment]) -> str:
    return "".join(s.text for s in segments)


def filler(start: int, count: int) -> list[str]:
    return [f"w{i}" for i in range(start, start + count)]


def test_snippet_prefers_query_words_closest_together() -> None:
    # Both windows of 10 words hold "vacuum" and "analyze"; the second holds them side by
    # side and wins, though the first comes earlier.
    words = ["vacuum", *filler(0, 7), "analyze", *filler(10, 20), "vacuum", "analyze"]
    words += filler(40, 20)
    segments = make_snippet(" ".join(words), {"vacuum", "analyz"}, size=10)
    assert marked(segments) == ["vacuum", "analyze"]
    assert "vacuum analyze" in text_of(segments)
    # The words around them share the window: four before, four after.
    assert text_of(segments) == "… w26 w27 w28 w29 vacuum analyze w40 w41 w42 w43 …"


def test_snippet_two_fragments_when_the_words_are_far_apart() -> None:
    words = [*filler(0, 20), "vacuum", *filler(100, 40), "analyze", *filler(200, 20)]
    segments = make_snippet(" ".join(words), {"vacuum", "analyz"}, size=10)
    assert marked(segments) == ["vacuum", "analyze"]
    assert text_of(segments) == "… w18 w19 vacuum w100 w101 … w138 w139 analyze w200 w201 …"
    # Five words each: the two fragments share the snippet's length.
    assert len(text_of(segments).replace("…", "").split()) == 10


def test_snippet_one_window_when_it_holds_every_query_word() -> None:
    words = [*filler(0, 20), "vacuum", "w", "analyze", *filler(100, 40), "vacuum"]
    segments = make_snippet(" ".join(words), {"vacuum", "analyz"}, size=10)
    assert text_of(segments).count("…") == 2  # one fragment, text left out on both sides
    assert marked(segments) == ["vacuum", "analyze"]


def test_snippet_has_at_most_two_fragments() -> None:
    words = ["alpha", *filler(0, 30), "beta", *filler(100, 30), "gamma", *filler(200, 30)]
    segments = make_snippet(" ".join(words), {"alpha", "beta", "gamma"}, size=10)
    assert len(marked(segments)) == 2
    assert text_of(segments).count(" … ") == 1


def test_snippet_uses_the_description_when_it_matches_better() -> None:
    text = "Routine maintenance: vacuum the tables. " + " ".join(filler(0, 40))
    description = "VACUUM — garbage-collect and optionally analyze a database"
    segments = make_snippet(text, {"vacuum", "analyz"}, description=description)
    assert text_of(segments) == description
    assert marked(segments) == ["VACUUM", "analyze"]
    # As good a match in the text: the text's passage.
    segments = make_snippet(text, {"vacuum"}, description=description)
    assert text_of(segments).startswith("Routine maintenance: vacuum")


def test_snippet_of_a_page_without_text_is_its_description() -> None:
    segments = make_snippet("", {"vacuum"}, description="All about vacuum")
    assert segments == [Segment("All about ", False), Segment("vacuum", True)]
    assert make_snippet("", {"vacuum"}, description=None) == []


# --- the characters a snippet reads ----------------------------------------------------------


def test_scanned_cuts_at_the_limit_without_cutting_a_word() -> None:
    assert scanned("short text", 100) == "short text"
    assert scanned("alpha beta gamma", 8) == "alpha "  # "be" of beta is not kept
    assert scanned("alpha beta gamma", 11) == "alpha beta "  # the limit falls on a space
    assert scanned("alpha beta, gamma", 10) == "alpha beta"  # on the comma: beta is whole
    assert scanned("x" * 200, 100) == "x" * 100  # a "word" too long to move back over
    assert scanned("数据库" * 50, 20) == ("数据库" * 50)[:20]


def test_a_snippet_reads_the_first_scan_limit_characters_of_a_long_page() -> None:
    """A query word only past SCAN_LIMIT characters is not looked for (a long page costs
    what its first SCAN_LIMIT characters do); one before it is found, and the snippet says
    that the text goes on."""
    filler = "plain filler words " * (SCAN_LIMIT // 19 + 10)
    late = filler + "zebra stripes at the end"
    snippet = make_snippet(late, {"zebra"})
    assert marked(snippet) == []
    assert "".join(s.text for s in snippet).startswith("plain filler words")
    early = "zebra stripes " + filler
    snippet = make_snippet(early, {"zebra"})
    assert marked(snippet) == ["zebra"]
    assert snippet[-1].text == " …"
    # A passage that ends where the reading stopped says the text goes on.
    near_end = "w " * ((SCAN_LIMIT - 20) // 2) + "zebra " + "more " * 1000
    snippet = make_snippet(near_end, {"zebra"})
    assert marked(snippet) == ["zebra"] and snippet[-1].text == " …"
    # A word cut in two by the limit is not read as a shorter word.
    cut = "a" * (SCAN_LIMIT - 5) + " lionesses"  # the limit falls after "lion"
    assert TextWords(cut, {"lion"}, None).matches == []
    assert TextWords(cut, {"lioness"}, None).matches == []


def test_a_phrase_check_reads_words_past_the_snippets_limit() -> None:
    """The phrase check's limit is in words (PHRASE_WORDS): a page holding the phrase past
    SCAN_LIMIT characters still holds it."""
    text = "plain filler words " * (SCAN_LIMIT // 19 + 10) + "zebra stripes"
    assert contains_phrase(word_stems(text, None), ["zebra", "stripe"])


# --- Unicode: folded words, Chinese compounds ------------------------------------------------


def test_snippet_marks_folded_words_as_they_are_written() -> None:
    """Words that folding changes (a ligature, full-width letters, a decomposed accent, a
    soft hyphen) are found by their plain form and marked as the page writes them, the
    text between them kept: offsets into the original text, whatever folding did to the
    lengths (ﬁ is two letters, ＰＤＦ three of another width, e + U+0301 one)."""
    text = "The ﬁnal ＰＤＦ of the oﬃce: Cafe\u0301 menu, in\u00adformation, हिन्दी text, ＰＤＦ."
    query = parse_query("final pdf office café information हिन्दी")
    segments = make_snippet(text, set(query.stems))
    assert marked(segments) == [
        "ﬁnal", "ＰＤＦ", "oﬃce", "Cafe\u0301", "in\u00adformation", "हिन्दी", "ＰＤＦ",
    ]  # fmt: skip
    assert "".join(s.text for s in segments) == text[:-1]  # to the last word
    # The same, typed in another form: NFD, full-width, the ligature itself.
    again = parse_query("ＦＩＮＡＬ pdf oﬃce cafe\u0301 information हिन्दी")
    assert set(again.stems) == set(query.stems)
    assert make_snippet(text, set(again.stems)) == segments
    # Folded words in the description too.
    desc = make_snippet("nothing", set(query.stems), description="The ﬁnal ＰＤＦ")
    assert marked(desc) == ["ﬁnal", "ＰＤＦ"]


def test_snippet_marks_the_part_of_a_chinese_compound_a_query_asked_for() -> None:
    """A page found by a part of a Chinese compound (the index counts 搜索引擎 as 搜索,
    索引 and 引擎 too) shows that part marked within the compound."""
    text = "我们的搜索引擎很快。"
    assert get_analyzer().words(text).count("搜索引擎") == 1  # one word in default mode
    for query, expected in [("搜索", ["搜索"]), ("引擎", ["引擎"]), ("搜索引擎", ["搜索引擎"])]:
        stems = set(parse_query(query).stems)
        segments = make_snippet(text, stems)
        assert marked(segments) == expected, query
        assert "".join(s.text for s in segments) == text[:-1]  # to the last word
        # The same from the words read for a phrase check.
        assert make_snippet(text, stems, words=word_stems(text, None)) == segments
    # Two parts that overlap (搜索, 索引) are one mark; two apart, two marks.
    assert marked(make_snippet(text, {"搜索", "索引"})) == ["搜索引"]
    assert marked(make_snippet("搜索引擎", {"搜索", "引擎"})) == ["搜索", "引擎"]
    # A word that only holds the query's characters, not as one of its words, is no match.
    assert analysis.cjk_subwords("数据库管理系统")
    assert "库管" not in analysis.cjk_subwords("数据库管理系统")
    assert marked(make_snippet("数据库管理系统", {"库管"})) == []


#: Pieces of the texts the window offsets are checked on: words that hold one another,
#: separators ASCII and not, a combining mark (before a word: no word's; after one: part
#: of it), the soft hyphen (inside a word, folded away), a ligature (folded to "fi"),
#: a letter that is a word character but not ASCII.
_OFFSET_PIECES = [
    "loop",
    "loops",
    "eventloop",
    "loop",
    "event",
    "fil",
    "\ufb01l",
    "caf\u00e9",
    " ",
    " ",
    " ",
    ", ",
    ". ",
    "\u00b6 ",
    " \u2014 ",
    "\u2019",
    "_",
    "\u0301",
    "lo\u00adop",
    "\u00a0",
    "(",
    ")",
    "9",
]


def test_a_windows_offsets_found_from_its_query_word_are_those_read_from_the_start() -> None:
    """A snippet's window past the text's start has its words' offsets found from one of
    its query words' occurrences (analysis.offsets_around), not by reading every word
    before it: on random texts of words that hold one another, marks, joiners, folded
    ligatures and separators of every kind, what it returns is always what reading from
    the start gives (analysis._word_offsets), and it declines only where it cannot be
    sure."""
    rng = random.Random(3)
    answered = declined = 0
    for _ in range(3000):
        text = "".join(rng.choice(_OFFSET_PIECES) for _ in range(rng.randint(5, 80)))
        words = get_analyzer("english").words(text, cjk=False)
        if not words:
            continue
        lo = rng.randrange(len(words))
        hi = lo + rng.randint(1, 12)
        anchor = rng.randrange(lo, min(hi, len(words)))
        got = analysis.offsets_around(text, words, lo, hi, anchor)
        if got is None:
            declined += 1
            continue
        answered += 1
        assert got == analysis._word_offsets(text, lo, min(hi, len(words))), (text, lo, hi)
    # Both outcomes occur: the test is not vacuous either way.
    assert answered > 1000 and declined > 100, (answered, declined)


def test_a_snippet_deep_in_a_long_page_is_the_one_read_from_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """make_snippet with the offsets found around the window's query word, against the
    same with every offset read from the text's start."""
    rng = random.Random(5)
    filler = ["alpha", "beta", "gamma", "delta\u00b6", "epsilon,", "zeta \u2014", "eta."]
    for trial in range(40):
        words = [rng.choice(filler) for _ in range(3000)]
        for _ in range(rng.randint(1, 4)):
            words.insert(rng.randrange(len(words)), rng.choice(["loops", "loop", "Loop\u00b6"]))
        text = " ".join(words)
        stems = {"loop", "zeta"} if trial % 2 else {"loop"}
        fast = make_snippet(text, stems, "english")
        monkeypatch.setattr(analysis, "offsets_around", lambda *a: None)
        monkeypatch.setattr("search.snippets.offsets_around", lambda *a: None)
        slow = make_snippet(text, stems, "english")
        monkeypatch.undo()
        assert fast == slow
