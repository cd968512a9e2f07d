"""`python -m search eval`: trec_eval's measures on a tiny qrels and run worked out by hand."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest

from search.cli import main
from search.commands._common import EXIT_USAGE, CLIError
from search.commands.eval import parse_sweep
from search.evaluation import (
    Evaluation,
    cross_validate,
    doc_name,
    evaluate,
    ranked,
    repeat_cross_validation,
)
from search.ranking import DEFAULT

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


def test_parse_sweep_grid() -> None:
    names, grid = parse_sweep("k1=0.6:1.0:0.2, b=0.4/0.75", DEFAULT)
    assert names == ["k1", "b"]
    assert [(p.k1, p.b) for p in grid] == [
        (0.6, 0.4),
        (0.6, 0.75),
        (0.8, 0.4),
        (0.8, 0.75),
        (1.0, 0.4),
        (1.0, 0.75),
    ]
    assert all(p.fb_docs == DEFAULT.fb_docs for p in grid)
    _, grid = parse_sweep("expansion=rm3/none,fb_docs=5", DEFAULT)
    assert [(p.expansion, p.fb_docs) for p in grid] == [("rm3", 5), ("none", 5)]
    _, grid = parse_sweep("bm25f=per-field/merged,b_title=0:0.5:0.5", DEFAULT)
    assert [(p.bm25f, p.b_title) for p in grid] == [
        ("per-field", 0.0),
        ("per-field", 0.5),
        ("merged", 0.0),
        ("merged", 0.5),
    ]
    _, grid = parse_sweep("model=bm25/dph,expansion=bo1", DEFAULT)
    assert [(p.model, p.expansion) for p in grid] == [("bm25", "bo1"), ("dph", "bo1")]
    _, grid = parse_sweep("model=bm25/lgd,lgd_c=0.1/1", DEFAULT)
    assert [(p.model, p.lgd_c) for p in grid] == [
        ("bm25", 0.1),
        ("bm25", 1.0),
        ("lgd", 0.1),
        ("lgd", 1.0),
    ]


def test_ranking_options_give_the_model_and_the_fusion() -> None:
    import argparse

    from search.commands.query import add_ranking_options, ranking_params

    parser = argparse.ArgumentParser()
    add_ranking_options(parser)
    params = ranking_params(parser.parse_args(["--model", "dph", "--fuse", "bm25"]))
    assert (params.model, params.fuse) == ("dph", "bm25")
    params = ranking_params(parser.parse_args(["--model", "lgd", "--lgd-c", "0.5"]))
    assert (params.model, params.lgd_c) == ("lgd", 0.5)
    assert ranking_params(parser.parse_args([])).lgd_c == 1.0
    with pytest.raises(CLIError):
        ranking_params(parser.parse_args(["--lgd-c", "0"]))
    assert ranking_params(parser.parse_args(["--expansion", "bo1"])).expansion == "bo1"
    with pytest.raises(CLIError):
        ranking_params(parser.parse_args(["--fuse", "bm25"]))  # the model itself


def test_ranking_options_give_the_bm25f_form_and_each_sections_b() -> None:
    import argparse

    from search.commands.query import add_ranking_options, ranking_params

    parser = argparse.ArgumentParser()
    add_ranking_options(parser)
    params = ranking_params(parser.parse_args(["--b", "0.5", "--b-title", "0.2"]))
    assert params.bm25f == "per-field"
    assert params.section_b() == (0.5, 0.2, 0.5, 0.5, 0.5, 0.5)
    assert ranking_params(parser.parse_args(["--bm25f", "merged"])).section_b() is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--bm25f", "fielded"])
    params = ranking_params(parser.parse_args(["--w-title", "2", "--w-boilerplate", "0"]))
    assert params.section_scale() == (1, 2, 1, 1, 1, 0)
    with pytest.raises(CLIError):
        ranking_params(parser.parse_args(["--w-title", "2", "--bm25f", "merged"]))


@pytest.mark.parametrize(
    "spec", ["k1", "k1=", "k3=1", "k1=1:0:0.1", "k1=0:1:0", "b=2", "k1=1,k1=2", "k1=a:b:c"]
)
def test_parse_sweep_refuses(spec: str) -> None:
    with pytest.raises(CLIError) as refused:
        parse_sweep(spec, DEFAULT)
    assert refused.value.code == EXIT_USAGE  # a usage error, as argparse's are


def _evaluation(maps: dict[str, float]) -> Evaluation:
    per_query = {q: {"MAP": v, "nDCG@10": v, "P@10": v} for q, v in maps.items()}
    return Evaluation(len(maps), {}, per_query)


def test_cross_validation_by_hand() -> None:
    # Two folds, round robin in query order: {1, 3} and {2, 4}.
    grid = [DEFAULT.with_values(k1=k) for k in (1, 2)]
    evaluations = [
        _evaluation({"1": 0.9, "2": 0.1, "3": 0.9, "4": 0.1}),  # good on fold 1 only
        _evaluation({"1": 0.5, "2": 0.5, "3": 0.5, "4": 0.5}),
    ]
    folds, held_out = cross_validate(grid, evaluations, 2)
    # Fold 1 is scored with what fold 2 prefers (k1=2: 0.5 > 0.1), and the other way round.
    assert [f.queries for f in folds] == [["1", "3"], ["2", "4"]]
    assert [f.params.k1 for f in folds] == [2.0, 1.0]
    assert [f.fitted for f in folds] == pytest.approx([0.5, 0.9])
    assert [f.held_out["MAP"] for f in folds] == pytest.approx([0.5, 0.1])
    assert held_out["MAP"] == pytest.approx(0.3)


def test_repeated_cross_validation_by_hand() -> None:
    """Each random deal of the queries is a cross-validation of its own: its held-out
    figure is :func:`cross_validate`'s over that order; the deals are the seed's (the same
    each time), and the mean and percentiles are of their held-out figures."""
    grid = [DEFAULT.with_values(k1=k) for k in (1, 2)]
    evaluations = [
        _evaluation({"1": 0.9, "2": 0.1, "3": 0.9, "4": 0.1}),
        _evaluation({"1": 0.5, "2": 0.5, "3": 0.5, "4": 0.5}),
    ]
    repeated = repeat_cross_validation(grid, evaluations, 2, 200, seed=7)
    assert repeated.repeats == len(repeated.held_out) == 200
    # The deal in query order ({1, 3}, {2, 4}) holds out 0.3; dealt {1, 2}, {3, 4}, each
    # fold chooses k1=1 (0.5 on the other against 0.5: the first among equals) and holds
    # out 0.5; every deal gives one of the two.
    values = sorted({round(h["MAP"], 6) for h in repeated.held_out})
    assert values == [0.3, 0.5]
    for h in repeated.held_out:
        assert h["nDCG@10"] == pytest.approx(h["MAP"])
    mean = sum(h["MAP"] for h in repeated.held_out) / 200
    assert repeated.mean["MAP"] == pytest.approx(mean) and 0.3 < mean < 0.5
    assert repeated.low["MAP"] == pytest.approx(0.3) and repeated.high["MAP"] == pytest.approx(0.5)
    again = repeat_cross_validation(grid, evaluations, 2, 200, seed=7)
    assert again.held_out == repeated.held_out
    order = ["2", "1", "4", "3"]  # {2, 4} and {1, 3}: the deal in query order, swapped
    assert cross_validate(grid, evaluations, 2, order)[1]["MAP"] == pytest.approx(0.3)


def _tiny_data_dir(data: Path, texts: list[str]) -> None:
    """A data folder whose index holds *texts* as the bodies of http://h/d1, /d2 …"""
    from search import db
    from search.analysis import analyze_document
    from search.index import Index, IndexDoc

    db.connect(f"sqlite:///{data / 'spidersite.db'}", upgrade=True).dispose()
    with Index(data / "index").writer() as w:
        for i, text in enumerate(texts, 1):
            records = analyze_document({"title": "", "body": text})
            w.add(IndexDoc.from_records(i, f"http://h/d{i}", "h", records.values()))


def test_cli_sweep_and_folds(tmp_path: Path) -> None:
    texts = [
        "vacuum full lock table",
        "vacuum analyze statistics",
        "lock contention table rows",
        "write ahead log checkpoint",
        "checkpoint interval log",
        "table partition rows",
    ]
    _tiny_data_dir(tmp_path, texts)
    (tmp_path / "q.tsv").write_text("1\tvacuum lock\n2\tcheckpoint log\n3\ttable rows\n")
    (tmp_path / "qrels.txt").write_text("1 0 /d1 1\n2 0 /d4 1\n3 0 /d6 1\n")
    args = ["eval", "--data-dir", str(tmp_path), "--queries", str(tmp_path / "q.tsv")]
    args += ["--qrels", str(tmp_path / "qrels.txt"), "--sweep", "k1=0.5:1.5:0.5,b=0/1"]
    out = io.StringIO()
    assert main([*args, "--folds", "2"], out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["k1", "b", "MAP", "nDCG@10", "P@10"]
    assert [line.split()[:2] for line in lines[1:7]] == [
        [k, b] for k in ("0.5", "1.0", "1.5") for b in ("0.0", "1.0")
    ]
    assert sum(line.endswith("*") for line in lines) == 1
    assert any(line.startswith("held out, all 3 queries: MAP") for line in lines)
    out = io.StringIO()
    assert main([*args, "--folds", "3", "--json"], out) == 0
    data = json.loads(out.getvalue())
    assert len(data["grid"]) == 6 and data["grid"][0]["params"] == {"k1": 0.5, "b": 0.0}
    assert len(data["folds"]) == 3 and set(data["held_out"]) == {"MAP", "nDCG@10", "P@10"}
    assert "repeated" not in data
    out = io.StringIO()
    assert main([*args, "--folds", "2", "--repeats", "50"], out) == 0
    line = next(x for x in out.getvalue().splitlines() if x.startswith("held out over"))
    assert line.startswith("held out over 50 random deals into 2 folds, mean")
    out = io.StringIO()
    assert main([*args, "--folds", "2", "--repeats", "50", "--json"], out) == 0
    repeated = json.loads(out.getvalue())["repeated"]
    assert repeated["repeats"] == 50
    for measure in ("MAP", "nDCG@10", "P@10"):
        low, mean, high = (repeated[k][measure] for k in ("p05", "mean", "p95"))
        assert low - 1e-9 <= mean <= high + 1e-9  # (a mean of equal figures: rounding)


def test_cli_folds_need_a_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    args = ["eval", "--qrels", str(tmp_path / "qrels.txt"), "--queries", "q.tsv"]
    assert main([*args, "--folds", "2"]) == 2
    assert "--folds needs --sweep" in capsys.readouterr().err
    assert main([*args, "--sweep", "k1=1/2", "--repeats", "10"]) == 2
    assert "--repeats needs --folds" in capsys.readouterr().err
    assert main([*args, "--sweep", "k1=1/2", "--folds", "2", "--repeats", "-1"]) == 2
    assert "--repeats must be between 0 and 10000" in capsys.readouterr().err
    assert main([*args, "--b", "3"]) == 2
    assert "b must be between 0 and 1" in capsys.readouterr().err


def test_cli_reads_judged_queries_as_words(tmp_path: Path) -> None:
    # A judged query is a description: its quotes, a leading "-" and "site:" are words (a
    # quoted word would otherwise be a phrase every hit must hold, and "-lock" would drop
    # the relevant page); --query-syntax reads them as `query` does.
    texts = ["vacuum full lock table", "checkpoint interval log", "vacuum statistics"]
    _tiny_data_dir(tmp_path, texts)
    (tmp_path / "q.tsv").write_text('1\tthe "vacuum" of a -lock\n2\t"checkpoint log" vacuum\n')
    (tmp_path / "qrels.txt").write_text("1 0 /d1 1\n2 0 /d3 1\n")
    args = ["eval", "--data-dir", str(tmp_path), "--queries", str(tmp_path / "q.tsv")]
    args += ["--qrels", str(tmp_path / "qrels.txt"), "--json", "--per-query"]

    def per_query(*extra: str) -> dict[str, float]:
        out = io.StringIO()
        assert main([*args, *extra], out) == 0
        data = json.loads(out.getvalue())
        return {q: m["MAP"] for q, m in data["per_query"].items()}

    # As words: q1 finds /d1 first (vacuum and lock); q2 finds /d3 (vacuum) after /d2.
    assert per_query() == {"1": 1.0, "2": 0.5}
    # As syntax: "-lock" removes /d1; the phrase "checkpoint log" keeps /d2 alone.
    assert per_query("--query-syntax") == {"1": 0.0, "2": 0.0}
