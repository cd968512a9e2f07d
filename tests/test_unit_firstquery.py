"""What the first query of a new process reads of the Whoosh index: not a copy of its
segments' files (Whoosh copies each file of a mapped compound segment into memory when it
opens it; search.indexquery.open_searcher has Whoosh read them as files)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from whoosh.filedb import structfile

from search.analysis import analyze_document
from search.index import Index, IndexDoc
from search.indexquery import open_searcher
from search.query import parse_query
from search.searchsession import SearchSession


def test_the_searcher_does_not_copy_the_segment_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ix = Index(tmp_path / "index")
    rng = random.Random(2)
    words = [f"word{i}" for i in range(50)]
    for start in (0, 30):
        with ix.writer() as w:
            for docid in range(start, start + 30):
                text = " ".join(rng.choice(words) for _ in range(40))
                records = analyze_document({"title": "", "body": text})
                host = "a.example" if docid % 2 else "b.example"
                url = f"http://{host}/{docid}"
                w.add(IndexDoc.from_records(docid, url, host, records.values()), update=False)
    copies: list[int] = []
    real = structfile.BufferFile.__init__

    def counting(self: structfile.BufferFile, buf: bytes, *args: object, **kw: object) -> None:
        copies.append(len(buf))
        real(self, buf, *args, **kw)

    monkeypatch.setattr(structfile.BufferFile, "__init__", counting)
    with open_searcher(ix) as s:
        assert all(r.segment().is_compound() for r, _ in s.reader().leaf_readers())
        session = SearchSession(s)
        hits = session.rank(parse_query("word1 word2 site:a.example"), 5)
        assert hits and all(h.url.startswith("http://a.example/") for h in hits)
        assert "word1" in session.terms_within("word11", 1)  # spelling reads the terms
    assert copies == []
