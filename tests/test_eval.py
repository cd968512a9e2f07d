"""`python -m search eval`: trec_eval's measures on a tiny qrels and run worked out by hand."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest

from search.cli import main
from search.commands.eval import doc_name, evaluate, ranked

# q1: /d1 and /d3 relevant; q2: /d2 relevant; q3: /d5 relevant but nothing retrieved;
# q9: judged, nothing relevant (not scored).
QRELS = """\
1 0 /d1 1
1 0 /d3 1
1 0 /d4 0
2 0 /d2 1
3 0 /d5 1
9 0 /d1 0
"""
# q2's two documents tie: trec_eval breaks ties by document name, descending, so /d2 is
# ranked first.  q7 has no judgments: not scored.
RUN = """\
1 Q0 /d1 1 3.0 t
1 Q0 /d2 2 2.0 t
1 Q0 /d3 3 1.0 t
2 Q0 /d1 1 1.0 t
2 Q0 /d2 2 1.0 t
7 Q0 /d1 1 1.0 t
"""
# q1: relevant at ranks 1 and 3: AP = (1/1 + 2/3) / 2 = 5/6; P@10 = 2/10;
#     nDCG@10 = (1 + 1/log2(4)) / (1 + 1/log2(3)).
# q2: relevant at rank 1: AP = 1, P@10 = 1/10, nDCG@10 = 1.
# q3: nothing retrieved: 0 everywhere (trec_eval -c).
NDCG1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
EXPECTED = {
    "MAP": (5 / 6 + 1 + 0) / 3,
    "nDCG@10": (NDCG1 + 1 + 0) / 3,
    "P@10": (0.2 + 0.1 + 0) / 3,
}


def parse(text: str, cols: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        parts = line.split()
        out.setdefault(parts[0], {})[parts[2]] = float(parts[cols])
    return out


def test_evaluate_by_hand() -> None:
    qrels = {q: {d: int(g) for d, g in docs.items()} for q, docs in parse(QRELS, 3).items()}
    result = evaluate(qrels, parse(RUN, 4))
    assert result.queries == 3
    for name, value in EXPECTED.items():
        assert result.mean[name] == pytest.approx(value), name
    assert result.per_query["1"]["MAP"] == pytest.approx(5 / 6)
    assert result.per_query["2"]["nDCG@10"] == pytest.approx(1.0)
    assert result.per_query["3"] == {"MAP": 0.0, "nDCG@10": 0.0, "P@10": 0.0}
    assert "7" not in result.per_query and "9" not in result.per_query


def test_map_cut_at_k() -> None:
    # With k = 2, q1's /d3 (rank 3) is not read: AP = (1/1) / 2 relevant = 0.5.
    qrels = {"1": {"/d1": 1, "/d3": 1}}
    result = evaluate(qrels, parse(RUN, 4), k=2)
    assert result.mean["MAP"] == pytest.approx(0.5)


def test_ranked_trec_eval_order_and_doc_name() -> None:
    assert ranked({"/a": 1.0, "/b": 1.0, "/c": 2.0}) == [("/c", 2.0), ("/b", 1.0), ("/a", 1.0)]
    assert doc_name("http://127.0.0.1:8000/doc/12.html") == "/doc/12.html"
    assert doc_name("http://h/x?id=3") == "/x?id=3"


def test_cli_scores_a_run_file(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    out = io.StringIO()
    code = main(
        [
            "eval",
            "--qrels",
            str(tmp_path / "qrels.txt"),
            "--run",
            str(tmp_path / "run.txt"),
            "--per-query",
            "--save-run",
            str(tmp_path / "again.txt"),
        ],
        out,
    )
    assert code == 0
    text = out.getvalue()
    assert f"MAP       {EXPECTED['MAP']:.4f}" in text
    assert f"P@10      {EXPECTED['P@10']:.4f}" in text
    assert "queries   3" in text
    assert any(line.split()[:2] == ["1", f"{5 / 6:.4f}"] for line in text.splitlines())
    # The saved run is in trec_eval order, tie broken by name.
    saved = (tmp_path / "again.txt").read_text().splitlines()
    assert saved[3].split()[:4] == ["2", "Q0", "/d2", "1"]
    out = io.StringIO()
    main(
        [
            "eval",
            "--qrels",
            str(tmp_path / "qrels.txt"),
            "--run",
            str(tmp_path / "again.txt"),
            "--json",
        ],
        out,
    )
    assert json.loads(out.getvalue())["MAP"] == pytest.approx(EXPECTED["MAP"])


def test_cli_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "qrels.txt").write_text("1 0 /d1\n")
    assert main(["eval", "--qrels", str(tmp_path / "qrels.txt"), "--run", "x"]) == 2
    assert "qrels.txt:1: expected 'qid 0 docname grade'" in capsys.readouterr().err
    assert main(["eval", "--qrels", str(tmp_path / "nope.txt"), "--run", "x"]) == 2
    assert main(["eval", "--qrels", str(tmp_path / "qrels.txt")]) == 2
