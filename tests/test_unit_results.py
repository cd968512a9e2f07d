"""A hit's and a page's JSON (search.results): every field of the hit, its snippet as
text, HTML and matches, its explanation only when it has one."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from search.results import Explanation, Hit, ResultPage, Segment, TermExplanation


def old_as_dict(hit: Hit) -> dict[str, Any]:
    """What Hit.as_dict gave when it was dataclasses.asdict with fields taken out."""
    data = asdict(hit)
    data.pop("snippet")
    if hit.explanation is None:
        data.pop("explanation")
    data["snippet"] = hit.snippet_text(("", ""))
    data["snippet_html"] = hit.snippet_html()
    data["matches"] = [s.text for s in hit.snippet if s.match]
    return data


def test_a_hit_as_a_dict_has_every_field_in_order() -> None:
    snippet = [Segment("the ", False), Segment("Kestrel", True), Segment(" <hovers>", False)]
    explanation = Explanation(
        3.5,
        120.0,
        98.2,
        1.2,
        0.75,
        [TermExplanation("kestrel", 1.0, 2.1, 3.0, {"body": 3}, 3.5)],
        expanded=False,
        prior=0.25,
    )
    hits = [
        Hit(1, 3.5, 42, "http://h/p", "Birds", None, "text/html", snippet),
        Hit(2, 1.0, 43, "http://h/q", None, "d", None, [], explanation),
    ]
    for hit in hits:
        got = hit.as_dict()
        assert got == old_as_dict(hit)
        assert list(got) == list(old_as_dict(hit))
    assert hits[0].as_dict()["snippet_html"] == "the <b>Kestrel</b> &lt;hovers&gt;"
    assert "explanation" not in hits[0].as_dict()
    assert hits[1].as_dict()["explanation"]["terms"][0]["counts"] == {"body": 3}
    page = ResultPage("kestrel", 2, 1, 10, 0.01234567, hits)
    assert json.loads(json.dumps(page.as_dict()))["hits"] == [old_as_dict(h) for h in hits]
