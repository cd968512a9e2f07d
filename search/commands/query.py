"""``python -m search query WORDS``: ranked search (the default command)."""

from __future__ import annotations

import argparse
import os
from typing import Any, TextIO

from search.commands._common import (
    EXIT_USAGE,
    CLIError,
    open_engine,
    open_index,
    printable,
    write_json,
)

NAME = "query"


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="search (the default command)",
        description="Ranked search. Words typed first weigh more. "
        'Syntax: words, "quoted phrases", -excluded, site:host.',
    )
    p.add_argument("words", nargs="+", help="query words")
    p.add_argument(
        "-n", "--limit", type=int, default=10, metavar="N", help="results per page (default: 10)"
    )
    p.add_argument("--page", type=int, default=1, metavar="P", help="page of results (default: 1)")
    p.add_argument(
        "--all",
        dest="require_all",
        action="store_true",
        help="every word must match (default: any word)",
    )
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.add_argument(
        "--explain",
        action="store_true",
        help="show each hit's score, term by term (the formula of README 'Ranking')",
    )
    add_ranking_options(p)
    common(p)


def add_ranking_options(p: argparse.ArgumentParser, *, language: bool = True) -> None:
    """Options of how queries are analyzed and ranked (shared with ``eval`` and
    ``serve``); README "Ranking" gives the formula, :class:`search.ranking.Params` the
    defaults.  *language*: with ``--language`` (not for ``serve``, whose queries say
    their own language)."""
    from search.ranking import (
        BM25F_FORMS,
        DEFAULT,
        EXPANSIONS,
        FUSIONS,
        MODELS,
        SECTION_B,
        SECTION_W,
    )

    p.add_argument(
        "--k1", type=float, default=DEFAULT.k1, help=f"BM25's k1 (default: {DEFAULT.k1})"
    )
    p.add_argument("--b", type=float, default=DEFAULT.b, help=f"BM25's b (default: {DEFAULT.b})")
    p.add_argument(
        "--model",
        choices=MODELS,
        default=DEFAULT.model,
        help="weighting model: bm25 (BM25F), dph (Amati's parameter-free divergence from "
        "randomness) or lgd (Clinchant and Gaussier's log-logistic information model) "
        f"(default: {DEFAULT.model})",
    )
    p.add_argument(
        "--lgd-c",
        type=float,
        default=DEFAULT.lgd_c,
        metavar="C",
        help="LGD's c, of its length normalisation tf · log2(1 + c · avglen / len) "
        f"(default: {DEFAULT.lgd_c:g}, the published value)",
    )
    p.add_argument(
        "--fuse",
        choices=FUSIONS,
        default=DEFAULT.fuse,
        help="fuse the ranking with this other model's (each with its own expansion) by "
        f"reciprocal rank fusion; none: no fusion (default: {DEFAULT.fuse})",
    )
    p.add_argument(
        "--bm25f",
        choices=BM25F_FORMS,
        default=DEFAULT.bm25f,
        help="per-field: each section length-normalised by its own length, then one "
        f"saturation; merged: the sections merged, one length (default: {DEFAULT.bm25f})",
    )
    for names, metavar, what in (
        (SECTION_B, "B", "the {} section's b (default: --b)"),
        (SECTION_W, "W", "multiply the servers' weight of the {} section by W (default: 1)"),
    ):
        for section, name in names.items():
            p.add_argument(
                f"--{name.replace('_', '-')}",
                dest=name,
                type=float,
                default=getattr(DEFAULT, name),
                metavar=metavar,
                help="per-field BM25F: " + what.format(section),
            )
    p.add_argument(
        "--decay",
        type=float,
        default=DEFAULT.decay,
        help="how much less later query words weigh: 1 / (1 + decay · min(position, 4)) "
        f"(default: {DEFAULT.decay})",
    )
    p.add_argument(
        "--decay-words",
        type=int,
        default=DEFAULT.decay_words,
        metavar="N",
        help="the decay applies to queries of at most N distinct words; 0: to every query "
        f"(default: {DEFAULT.decay_words})",
    )
    p.add_argument(
        "--expansion",
        choices=EXPANSIONS,
        default=DEFAULT.expansion,
        help=f"query expansion of long queries (default: {DEFAULT.expansion})",
    )
    p.add_argument(
        "--no-expand",
        dest="expansion",
        action="store_const",
        const="none",
        help="no query expansion (pseudo-relevance feedback): --expansion none",
    )
    p.add_argument(
        "--fb-docs",
        type=int,
        default=DEFAULT.fb_docs,
        metavar="N",
        help=f"feedback documents of the expansion (default: {DEFAULT.fb_docs})",
    )
    p.add_argument(
        "--fb-terms",
        type=int,
        default=DEFAULT.fb_terms,
        metavar="N",
        help=f"terms the expansion adds (default: {DEFAULT.fb_terms})",
    )
    p.add_argument(
        "--fb-weight",
        type=float,
        default=DEFAULT.fb_weight,
        metavar="W",
        help=f"RM3: weight of the query as typed (default: {DEFAULT.fb_weight})",
    )
    p.add_argument(
        "--fb-min-words",
        type=int,
        default=DEFAULT.fb_min_words,
        metavar="N",
        help="expand only queries of at least N distinct words; 1: every query "
        f"(default: {DEFAULT.fb_min_words})",
    )
    p.add_argument(
        "--fb-min-docs",
        type=int,
        default=DEFAULT.fb_min_docs,
        metavar="N",
        help="expand only on an index of at least N documents; 0: any "
        f"(default: {DEFAULT.fb_min_docs})",
    )
    p.add_argument(
        "--fb-skip-held",
        type=int,
        choices=(0, 1),
        default=DEFAULT.fb_skip_held,
        metavar="{0,1}",
        help="1: do not expand a query whose first ranking's best page holds every one of "
        f"its words; 0: expand it all the same (default: {DEFAULT.fb_skip_held})",
    )
    p.add_argument(
        "--linkrank",
        type=float,
        default=DEFAULT.linkrank,
        metavar="W",
        help="weight of the link-graph prior, W · s / (s + 1) of a page's PageRank s "
        f"(mean 1); 0: off (default: {DEFAULT.linkrank})",
    )
    p.add_argument(
        "--proximity",
        type=float,
        default=DEFAULT.proximity,
        metavar="W",
        help="weight of the term-proximity bonus (BM25TP) of queries of 2+ words, computed "
        f"on the stored text of the best candidates; 0: off (default: {DEFAULT.proximity:g})",
    )
    p.add_argument(
        "--proximity-depth",
        type=int,
        default=DEFAULT.proximity_depth,
        metavar="N",
        help=f"candidates the proximity bonus re-ranks (default: {DEFAULT.proximity_depth})",
    )
    p.add_argument(
        "--proximity-window",
        type=int,
        default=DEFAULT.proximity_window,
        metavar="N",
        help="most words apart two query words count as a pair; 0: any distance "
        f"(default: {DEFAULT.proximity_window})",
    )
    if language:
        p.add_argument(
            "--language",
            metavar="LANG",
            help="language of the query words for stemming (default: English)",
        )


def ranking_params(args: argparse.Namespace) -> Any:
    """The :class:`search.ranking.Params` of the ranking options (a usage error if out of
    range)."""
    from search.ranking import SECTION_B, SECTION_W, Params

    try:
        return Params(
            k1=args.k1,
            b=args.b,
            bm25f=args.bm25f,
            model=args.model,
            fuse=args.fuse,
            lgd_c=args.lgd_c,
            **{name: getattr(args, name) for name in SECTION_B.values()},
            **{name: getattr(args, name) for name in SECTION_W.values()},
            decay=args.decay,
            decay_words=args.decay_words,
            expansion=args.expansion,
            fb_docs=args.fb_docs,
            fb_terms=args.fb_terms,
            fb_weight=args.fb_weight,
            fb_min_words=args.fb_min_words,
            fb_min_docs=args.fb_min_docs,
            fb_skip_held=args.fb_skip_held,
            linkrank=args.linkrank,
            proximity=args.proximity,
            proximity_depth=args.proximity_depth,
            proximity_window=args.proximity_window,
        )
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None


def ranking_options(params: Any) -> list[str]:
    """The ranking options that give *params* (:class:`search.ranking.Params`), as
    typed: only those of a parameter not at its default (none for the defaults)."""
    from dataclasses import fields

    from search.ranking import DEFAULT

    options = []
    for f in fields(params):
        value = getattr(params, f.name)
        if value != getattr(DEFAULT, f.name):
            # A float as short as it reads back the same: 0, not 0.0.
            text = f"{value:g}" if isinstance(value, float) else str(value)
            if isinstance(value, float) and float(text) != value:
                text = repr(value)
            options += [f"--{f.name.replace('_', '-')}", text]
    return options


def run(args: argparse.Namespace, out: TextIO) -> int:
    from search.query import QueryError, parse_query
    from search.searcher import Searcher

    params = ranking_params(args)
    if args.limit < 1:
        raise CLIError("-n must be at least 1", EXIT_USAGE)
    if args.page < 1:
        raise CLIError("--page must be at least 1", EXIT_USAGE)
    text = " ".join(args.words)
    try:
        parsed = parse_query(text, require_all=args.require_all, language=args.language)
    except QueryError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    index = open_index(args)
    if not index.exists():
        raise CLIError(
            f"no search index at {index.path} yet: crawl a site first "
            f"(scrapy crawl site -a seeds=URL) or rebuild it (python -m search reindex)"
        )
    engine = open_engine(args, upgrade=False)
    try:
        result = Searcher(engine, index, params).search(
            parsed, page=args.page, per_page=args.limit, explain=args.explain
        )
    except QueryError as exc:  # beyond what a query may ask for
        raise CLIError(str(exc), EXIT_USAGE) from None
    if args.json:
        write_json(result.as_dict(), out)
        return 0
    color = out.isatty() and not os.environ.get("NO_COLOR")
    mark = ("\033[1m", "\033[0m") if color else ("[", "]")
    if result.suggestion is not None:
        out.write(f"Did you mean: {printable(result.suggestion)}\n")
    total = f"{result.total}" if result.total_exact else f"about {result.total}"
    if not result.hits and result.total:  # a page past the last
        pages = -(-result.total // args.limit)
        out.write(
            f"No results on page {args.page} for {text!r}: {total} results, "
            f"{pages} page{'s' if pages != 1 else ''} of {args.limit}.\n"
        )
        return 0
    if not result.hits:
        out.write(f"No results for {text!r} ({result.seconds * 1000:.0f} ms).\n")
        return 0
    first = result.hits[0].rank
    last = result.hits[-1].rank
    out.write(
        f"Results {first}-{last} of {total} for {text!r} ({result.seconds * 1000:.0f} ms)\n\n"
    )
    # What was crawled is printed through printable(): a page may hold terminal escapes.
    for hit in result.hits:
        title = printable(hit.title) if hit.title else "(no title)"
        out.write(f"{hit.rank:>3}. {title}  [score {hit.score:.3f}]\n")
        out.write(f"     {printable(hit.url)}\n")
        snippet = hit.snippet_text(mark, printable)
        if snippet:
            out.write(f"     {snippet}\n")
        if hit.explanation is not None:
            for line in hit.explanation.lines():
                out.write(f"     {printable(line)}\n")
        out.write("\n")
    return 0
