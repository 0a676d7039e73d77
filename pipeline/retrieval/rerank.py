"""Reranked runs: a first stage's top RERANK_DEPTH of a pool, scored again by a reranker.

A reranked model is named `rerank--<reranker>--<first stage>` (`make rerank MODEL=<reranker>
FIRST_STAGE=bm25` builds it; models.reranked_name); it is searched like any model, from the
first stage's run of the same pool, and evaluated like any other run. The reranker is any model
of a kind in models.RERANKERS: a cross-encoder or a decoder reranker (pipeline/encoding/
cross.py), a late-interaction model (MaxSim, pipeline/encoding/late.py) or a reranker served
at a /rerank endpoint (pipeline/encoding/served_rerank.py); the first stage any
model with a run of the pool (BM25, a dense model, a fused or a reranked one, a run imported
under its own name).

Each query's top RERANK_DEPTH (the first stage's ranks) is scored by the reranker and ordered
by that score; below it, the first stage's order is kept, so the run is as deep as the first
stage's (at most K): there a row's score is the query's lowest reranked score minus its place
below the depth (1, 2, ...), a rank, not a score of either model. The run records the first
stage's run among its inputs and the reranker's weights identity among its details, so it is
stale when either changes (runs.identity_problem); RERANK_DEPTH is in its identity. A
RERANK_DEPTH above the first stage's K is refused in one line.
"""

from __future__ import annotations

import logging
from importlib import import_module

import polars as pl

from pipeline.core.errors import InputError, OptionError
from pipeline.corpus.files import corpus_file
from pipeline.encoding.families import routed
from pipeline.encoding.identity import model_identity
from pipeline.glossary import RERANK_DEPTH
from pipeline.layout import PREFILTERED, model_digests_path, run_paths
from pipeline.models import RERANKERS, ModelEntry, get_model, rerank_parts
from pipeline.pools.queries import query_texts
from pipeline.retrieval.base import Query, Retriever
from pipeline.retrieval.runs import RERANKER_IDENTITY, RERANKER_PATH, load_run

log = logging.getLogger(__name__)


def scorer(entry: ModelEntry, model_path: str | None):
    """The reranker `entry` loaded as its kind's scorer (models.RERANKERS)."""
    module, _, name = RERANKERS[entry.kind].partition(":")
    return getattr(import_module(module), name)(entry, model_path=model_path)


def reranker_of(name: str, model_path: str | None) -> tuple[ModelEntry, str]:
    """The reranker of the reranked model `name` (routed to its folder's kind: an st: folder of
    a CrossEncoder is a cross-encoder) and its first stage's name; a model that reranks
    nothing refused in one line."""
    reranker, first = rerank_parts(name)
    entry = routed(get_model(reranker), model_path)
    if entry.kind not in RERANKERS:
        raise InputError(f"MODEL {reranker} is a {entry.kind} model on its folder, which "
                         "reranks nothing: give a CrossEncoder, a decoder reranker's or a PyLate "
                         "folder, or rerank-api:<model>")
    return entry, first


class Rerank(Retriever):
    """A reranked model: its first stage's run of the same pool, its top RERANK_DEPTH scored
    again by the reranker."""

    searches_variants = False
    #: how deep the reranker goes, and a local copy of the reranker's weights
    OPTIONS = {"rerank_depth": RERANK_DEPTH, "model_path": None}

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        place, pool, options = query.place, query.pool, query.options
        entry, first = reranker_of(query.entry.name, options["model_path"])
        depth = int(options["rerank_depth"])
        run = load_run(place, pool, first)  # refuses a missing or stale run in one line
        paths = run_paths(place.runs_root, place.corpus, pool, first)
        query.read([paths.parquet])
        first_k = int(run.group_by("query").len()["len"].max() or 0)
        if depth > first_k:
            raise OptionError("{RERANK_DEPTH=} is above the first stage's K: " + first +
                              f"'s run of pool {pool} holds at most {first_k} per query; give "
                              f"one of at most {first_k}, or search {first} with a larger K",
                              {"RERANK_DEPTH": depth})
        ranked = run.sort(["query", "rank"]).with_columns(
            place=pl.int_range(pl.len()).over("query"))
        top = ranked.filter(pl.col("place") < depth)
        model = scorer(entry, options["model_path"])
        texts = query.texts if query.texts is not None else query_texts(place.corpus_dir,
                                                                         query.queries)
        docs = (pl.scan_parquet(corpus_file(place.corpus_dir, PREFILTERED))
                .join(top.lazy().select(corpusid="doc").unique(), on="corpusid", how="semi")
                .select("corpusid", "title", "abstract").collect())
        query.read([place.corpus_dir / PREFILTERED])
        as_text = {name: {i: model.text(t, a) for i, t, a in frame.iter_rows()}
                   for name, frame in (("queries", texts), ("docs", docs))}
        pairs = top.filter(pl.col("query").is_in(texts["corpusid"].implode()))
        scores = model.score(as_text["queries"], as_text["docs"],
                             list(pairs.select("query", "doc").iter_rows()))
        reranked = pairs.select("query", "doc", score=pl.Series(scores, dtype=pl.Float64))
        below = (ranked.filter(pl.col("place") >= depth)
                 .join(reranked.group_by("query").agg(lowest=pl.col("score").min()),
                       on="query")
                 .select("query", "doc",
                         score=pl.col("lowest") - (pl.col("place") - depth + 1)))
        identity = model_identity(entry, options["model_path"],
                                  cache=model_digests_path(place.index_root))
        log.info(f"[rerank] {pool}: {pairs.height} pairs of {first}'s top {depth} scored by "
                 f"{entry.name}; {below.height} rows below kept in {first}'s order")
        return pl.concat([reranked, below]), {
            "first_stage": first, "reranker": entry.name, "reranker_kind": entry.kind,
            "rerank_depth": depth, "reranked_pairs": pairs.height,
            "below_depth": f"{first}'s order kept (scores: the lowest reranked score minus "
                           "the place below the depth)",
            RERANKER_IDENTITY: identity, RERANKER_PATH: options["model_path"],
            **getattr(model, "details", dict)()}  # a served reranker's fingerprint


class RerankerAlone(Retriever):
    """A cross-encoder or decoder reranker named as a model to search: it scores pairs, it
    ranks no pool alone (search.model_to_search refuses it, naming make rerank)."""

    ranks_alone = False


RETRIEVER = Rerank()
ALONE = RerankerAlone()
