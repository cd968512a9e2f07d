"""search.termspace: the array postings' terms looked up without decoding them all.

An index generation's term ids are given to the terms looked up (a query's stems, the
feedback documents' terms), found by binary search over each segment's sorted bytes; none
is decoded when the index is opened.  The rankings these give are compared with the
reference by tests/test_unit_arrays.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from search import arrayreader, termspace
from search.analysis import analyze_document
from search.index import Index, IndexDoc
from search.query import parse_query
from search.termspace import SegmentTerms, TermSpace

#: Terms whose byte order is not their first byte's: accents, Chinese, Greek, prefixes of
#: one another, and longer than the searched prefix (16 bytes) with a shared one.
TERMS = [
    "a",
    "ab",
    "caf",
    "cafe",
    "café",
    "cafés",
    "x" * 15,
    "x" * 16,
    "x" * 16 + "a",
    "x" * 16 + "b",
    "x" * 40,
    "zebra",
    "ö",
    "αβγ",
    "中",
    "中文",
    "中文字典",
    "\U0001f600",
]
ABSENT = ["", "0", "aa", "caff", "cafè", "x" * 17, "x" * 16 + "c", "中国", "zzz", "\ud800"]


def _segment(terms: list[str]) -> SegmentTerms:
    raws = sorted(t.encode() for t in terms)
    starts = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raws], out=starts[1:])
    return SegmentTerms(np.frombuffer(b"".join(raws), dtype=np.uint8), starts)


def test_byte_order_is_string_order() -> None:
    # Whoosh sorts terms by their UTF-8 bytes; ties in the ranking are broken by the
    # strings' order: the same (UTF-8 keeps the order of code points).
    assert [r.decode() for r in sorted(t.encode() for t in TERMS)] == sorted(TERMS)


def test_segment_finds_every_term_and_no_other() -> None:
    seg = _segment(TERMS)
    ordered = sorted(TERMS)
    assert seg.all() == ordered
    for i, term in enumerate(ordered):
        assert seg.find(term.encode()) == i
        assert seg.decode(i) == term
    raws = [t.encode() for t in ordered]
    assert seg.find_many(raws).tolist() == list(range(len(ordered)))
    absent = [t.encode("utf-8", "surrogatepass") for t in ABSENT]
    assert [seg.find(r) for r in absent] == [-1] * len(absent)
    assert seg.find_many(absent).tolist() == [-1] * len(absent)
    assert seg.find_many([]).tolist() == []
    empty = _segment([])
    assert empty.find(b"a") == -1 and empty.find_many([b"a"]).tolist() == [-1]


def test_keys_are_the_terms_bytes_fixed_width() -> None:
    # Any subset, in any order, repeats included: each key is its term's bytes (NUL-padded
    # to the longest chosen), so keys sort and compare as the terms do.
    seg = _segment(TERMS)
    raws = sorted(t.encode() for t in TERMS)
    rng = random.Random(3)
    for _ in range(20):
        numbers = [rng.randrange(len(raws)) for _ in range(rng.randint(1, 12))]
        keys = seg.keys(np.array(numbers))
        assert keys.dtype.itemsize == max(len(raws[n]) for n in numbers)
        assert keys.tolist() == [raws[n] for n in numbers]
        assert np.argsort(keys, kind="stable").tolist() == sorted(
            range(len(numbers)), key=lambda i: raws[numbers[i]]
        )
    assert seg.keys(np.array([], dtype=np.int64)).tolist() == []


def test_ids_are_given_on_look_up_only() -> None:
    first, second = sorted(TERMS[::2]), sorted([*TERMS[1::3], "extra"])
    # Each term's postings: term i of a segment has i + 1 of them.
    starts = [np.cumsum([0] + [i + 1 for i in range(len(t))]) for t in (first, second)]
    space = TermSpace([_segment(first), _segment(second)], starts)
    assert len(space) == 0

    def df(stem: str) -> int:
        return sum(seg.index(stem) + 1 for seg in (first, second) if stem in seg)

    # Many at a time, without ids (a spelling correction's candidates).
    probes = [*TERMS, *ABSENT, "extra"]
    assert space.frequencies(probes).tolist() == [df(t) for t in probes]
    assert len(space) == 0 and space.frequencies([]).tolist() == []
    for stem in ABSENT:
        assert space.get(stem) is None and stem not in space
        with pytest.raises(KeyError):
            space[stem]
    assert len(space) == 0  # an absent stem gets no id
    both = sorted(set(first) & set(second))
    assert both
    gid = space["" + both[0]]
    assert space.texts[gid] == both[0]
    assert space.df[gid] == first.index(both[0]) + 1 + second.index(both[0]) + 1
    assert space.local(0)[gid] == first.index(both[0])
    assert space.local(1)[gid] == second.index(both[0])
    assert space.to_global(1)[second.index(both[0])] == gid
    # The terms of a segment by number (the forward index's): ids consistent with the
    # look-ups, the document frequency over both segments.
    numbers = np.arange(len(second))[::-1]
    gids = space.ids_of(1, numbers)
    assert [space.texts[g] for g in gids] == [second[i] for i in numbers]
    assert gids[numbers.tolist().index(second.index(both[0]))] == gid
    for stem in second:
        expected = (first.index(stem) + 1 if stem in first else 0) + second.index(stem) + 1
        assert space.df[space[stem]] == expected
    assert space["extra"] == space.get("extra")
    assert 7 not in space
    only_first = next(t for t in first if t not in second)
    assert space.local(1)[space[only_first]] == -1


def test_terms_of_several_segments_get_their_ids_at_once() -> None:
    """``ids_of_terms`` (a relevance model's heaviest terms, each of one of the segments
    that hold it) gives the ids one look-up per segment gives: the same id for a term of
    two segments, ids kept by terms that had one, the document frequency over both."""
    first, second = sorted(TERMS[::2]), sorted([*TERMS[1::3], "extra"])
    starts = [np.cumsum([0] + [i + 1 for i in range(len(t))]) for t in (first, second)]

    def space() -> TermSpace:
        return TermSpace([_segment(first), _segment(second)], starts)

    both = sorted(set(first) & set(second))
    one, many = space(), space()
    known = many[both[0]]  # an id given before
    pairs = [(0, first.index(t)) for t in first] + [
        (1, second.index(t)) for t in second if t not in first
    ]
    segments = np.array([s for s, _ in pairs], dtype=np.int64)
    numbers = np.array([n for _, n in pairs], dtype=np.int64)
    gids = many.ids_of_terms(segments, numbers)
    assert [many.texts[g] for g in gids.tolist()] == [[first, second][s][n] for s, n in pairs]
    assert gids[first.index(both[0])] == known
    assert len(set(gids.tolist())) == len(pairs) == len(many)
    for term, gid in zip([[first, second][s][n] for s, n in pairs], gids.tolist(), strict=True):
        alone = one[term]  # (before .df: its length is the ids given)
        assert many.df[gid] == one.df[alone]
        assert many.local(1)[gid] == (second.index(term) if term in second else -1)
    assert many.ids_of_terms(segments[:0], numbers[:0]).tolist() == []
    assert many.ids_of_terms(segments, numbers).tolist() == gids.tolist()


def test_many_look_ups_use_the_prefixes() -> None:
    rng = random.Random(3)
    words = sorted(
        {"".join(rng.choice("abcé中") for _ in range(rng.randint(1, 12))) for _ in range(3000)}
    )
    seg = _segment(words)
    raws = [w.encode() for w in words]
    assert seg.find_many(raws).tolist() == list(range(len(words)))
    assert seg.prefixes().dtype == np.dtype(f"S{termspace.PREFIX}")


def _words(seed: int, count: int) -> list[str]:
    """*count* distinct random words: short and long ones (past the prefix, sharing it),
    accented and Chinese."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < count:
        word = "".join(rng.choice("abcé中") for _ in range(rng.randint(1, 12)))
        words.add(word if rng.random() < 0.8 else "x" * 15 + word)
    return sorted(words)


def test_few_look_ups_are_binary_searches_and_make_no_prefixes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A query's expansion looks up tens of terms in each segment: making every term's
    prefix for that made a process's first expanded query cost 30-50 ms at 100,000
    documents, its binary searches ~1.  The prefixes are made once the binary searches
    have cost about as much."""
    words = _words(5, 3000)
    seg = _segment(words)
    built: list[int] = []
    make = termspace.fixed_width_rows

    def counted(*args: object, **kwargs: object) -> np.ndarray:
        built.append(1)
        return make(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(termspace, "fixed_width_rows", counted)
    rng = random.Random(6)
    short = [i for i, w in enumerate(words) if len(w.encode()) < termspace.PREFIX]
    asked = 0
    budget = termspace.STEPS_PER_TERM * len(words) / len(words).bit_length()
    while asked + 20 <= budget:
        chosen = rng.sample(short, 20)
        assert seg.find_many([words[i].encode() for i in chosen]).tolist() == chosen
        asked += 20
    assert asked and not built and seg.nbytes() < len(words) * termspace.PREFIX
    # Past the binary searches' budget, the prefixes, made once.
    chosen = rng.sample(short, 20)
    assert seg.find_many([words[i].encode() for i in chosen]).tolist() == chosen
    assert built == [1] and seg.nbytes() >= len(words) * termspace.PREFIX
    seg.find_many([w.encode() for w in words[:5]])
    assert built == [1]


@pytest.mark.parametrize("steps", [0.0, 1e9])
def test_binary_searches_and_prefixes_find_the_same(
    steps: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 0: the prefixes at once; 1e9: binary searches only.
    monkeypatch.setattr(termspace, "STEPS_PER_TERM", steps)
    words = _words(7, 2000)
    seg = _segment(words)
    number = {w.encode(): i for i, w in enumerate(words)}
    rng = random.Random(8)
    others = [w.encode() + b"q" for w in words[:200]] + [w.encode()[:-1] for w in words[:200]]
    probes = (
        [w.encode() for w in words] + others + [t.encode("utf-8", "surrogatepass") for t in ABSENT]
    )
    for _ in range(30):
        batch = rng.sample(probes, rng.randint(1, 300))
        assert seg.find_many(batch).tolist() == [number.get(p, -1) for p in batch]
    assert (seg.nbytes() >= len(words) * termspace.PREFIX) == (steps == 0.0)


def test_the_prefixes_count_in_the_term_space_s_bytes() -> None:
    words = _words(9, 1000)
    seg = _segment(words)
    space = TermSpace([seg], [np.arange(len(words) + 1)])
    before = space.nbytes()
    seg.prefixes()
    assert space.nbytes() >= before + len(words) * termspace.PREFIX
    seg.release()
    assert seg.nbytes() == 0
    assert seg.find_many([words[3].encode()]).tolist() == [3]


def _doc(docid: int, text: str) -> IndexDoc:
    records = analyze_document({"title": "", "body": text})
    return IndexDoc.from_records(docid, f"http://a.example/{docid}", "a.example", records.values())


def test_opening_an_index_decodes_no_term(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from search.searchsession import SearchSession

    ix = Index(tmp_path / "index")
    rng = random.Random(5)
    vocabulary = [f"word{i}" for i in range(300)] + ["café", "zürich", "中文", "東京"]
    for start in (0, 40):
        with ix.writer() as w:
            for docid in range(start, start + 40):
                w.add(
                    _doc(docid, " ".join(rng.choice(vocabulary) for _ in range(60))), update=False
                )
    with ix.open().searcher() as s:
        for r, _ in s.reader().leaf_readers():
            a = arrayreader.SegmentArrays.read(Path(ix.path), r.segment())
            assert a is not None
            # Whoosh's order, which the binary search relies on: sorted by bytes.
            raws = [t.encode() for t in a.terms]
            assert raws == sorted(raws) and any(len(t) != len(t.encode()) for t in a.terms)
        decoded: list[SegmentTerms] = []

        def decode_all(self: SegmentTerms) -> list[str]:
            decoded.append(self)
            return []

        monkeypatch.setattr(SegmentTerms, "all", decode_all)
        session = SearchSession(s)
        assert len(session.arrays.terms) == 0 and not decoded
        assert session.rank(parse_query("café"), 5, expand=False)
        assert session.arrays.terms.texts == ["café"]
        for text in ("café", "中文", "zürich word7"):
            q = parse_query(text)
            assert all(session.df(stem) > 0 for stem in q.stems), text
            assert session.rank(q, 5), text
        assert session.rank(parse_query("nosuchword"), 5) == []
        assert "nosuchword" not in session.arrays.terms.texts
        # Ties of the expansion are broken by the terms' order (code points, as bytes).
        texts = session.arrays.texts
        gids = np.arange(len(texts))[::-1]
        rank = session.arrays.text_rank(gids)
        assert [texts[g] for g in gids[np.argsort(rank)]] == sorted(texts)
        assert "中文" in texts and "café" in texts
        assert not decoded


def test_seek_finds_the_first_term_at_or_after_one_from_anywhere() -> None:
    rng = random.Random(7)
    words = sorted(
        {"".join(rng.choice("abcé中") for _ in range(rng.randint(1, 6))) for _ in range(500)}
    )
    seg = _segment(words)
    raws = sorted(w.encode() for w in words)
    probes = [*raws, *(t.encode("utf-8", "surrogatepass") for t in ABSENT), b"\xff"]
    for probe in probes:
        expected = sum(r < probe for r in raws)
        for lo in {0, 1, expected // 2, expected, len(raws)}:
            if lo <= expected or lo == len(raws):
                assert seg.seek(probe, lo) == max(expected, lo), (probe, lo)
    assert _segment([]).seek(b"a") == 0


def test_terms_within_walk_the_union_of_the_segments_as_whoosh_walks_each(
    tmp_path: Path,
) -> None:
    """The spelling automaton over the array files' terms finds what Whoosh's own
    ``terms_within`` finds segment by segment (its term index on disk)."""
    from search.indexquery import open_searcher

    ix = Index(tmp_path / "index")
    rng = random.Random(11)
    letters = "abcdeéfgh"
    vocabulary = sorted(
        {"".join(rng.choice(letters) for _ in range(rng.randint(3, 8))) for _ in range(1500)}
    )
    vocabulary += ["中文", "中文字", "zürich", "zurich"]
    for start in (0, 30, 60):
        with ix.writer() as w:
            for docid in range(start, start + 30):
                text = " ".join(rng.choice(vocabulary) for _ in range(80))
                w.add(_doc(docid, text), update=False)
    with open_searcher(ix) as s:
        from search.searchsession import SearchSession

        session = SearchSession(s)
        readers = [r for r, _ in s.reader().leaf_readers()]
        assert len(readers) == 3
        probes = [*rng.sample(vocabulary, 40), "abcdefg", "zurch", "中文字典", "hhhh"]
        found = 0
        for probe in probes:
            for maxdist in (1, 2):
                whoosh = set()
                for r in readers:
                    whoosh.update(r.terms_within("words", probe, maxdist, prefix=1))
                whoosh.discard(probe)
                assert session.terms_within(probe, maxdist) == whoosh, (probe, maxdist)
                found += len(whoosh)
        assert found > 100  # the comparison is not of empty sets


def test_totals_are_kept_by_id_and_survive_growth() -> None:
    words = sorted({f"w{i}" for i in range(3000)})
    starts = [np.arange(len(words) + 1, dtype=np.int64)]
    space = TermSpace([_segment(words)], starts)
    first = np.array([space[w] for w in words[:10]], dtype=np.int64)
    assert np.isnan(space.totals(first)).all()  # none counted yet
    space.keep_totals(first[:5], np.arange(5, dtype=np.float64))
    # More ids than the arrays held: they grow, the kept totals with them.
    later = np.array([space[w] for w in words[10:]], dtype=np.int64)
    assert space.totals(first[:5]).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert np.isnan(space.totals(first[5:])).all() and np.isnan(space.totals(later)).all()
    assert space.nbytes() >= 8 * len(words) * 4  # df, totals, local, to_global
