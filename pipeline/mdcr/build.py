"""Build an MDCR-style benchmark from a corpus's field-level pools and runs (MDCR §4).

For every query of a field-level test pool: `positives` papers sampled from its cited papers in
the pool, and `per_type` negatives of each type:
- one type per chosen model: sampled from the model's top `top` on the field-level pool;
- `graph`: by the overlap O(q, c) = |OC_q ∩ (OC_c ∪ IC_c)| / |OC_q| of each cited paper c,
  visited by decreasing O, adding c's citation neighbours that q does not cite;
- `most_cited`: sampled from the field's `top` most cited prefiltered papers;
- `random`: sampled from all prefiltered papers.
A negative is never the query or a paper it cites (the paper says "excluding positives"; an
unsampled cited paper labelled negative would be wrong, so all cited papers are excluded).
Sampling is seeded per (seed, type, query). A type that cannot give `per_type` negatives for a
query gives what it has, and the pool's manifest counts the shortfall and says why.
"""

from __future__ import annotations

import zlib
from itertools import combinations
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.errors import InputError
from pipeline.core.repair import HERE, Placeholder, Repair, Where
from pipeline.corpus.files import corpus_file
from pipeline.corpus.install import claim_corpus
from pipeline.evaluation.evaluate import POSITIVE_TYPE
from pipeline.glossary import id_key
from pipeline.layout import CITATIONS, PREFILTERED, Place, parse_pool_name, pool_names
from pipeline.mdcr.benchmark import write_benchmark
from pipeline.pools.build import load_pool, pool_manifest
from pipeline.retrieval.runs import load_run

FIXED_TYPES = ("graph", "most_cited", "random")
WHY_SHORT = {
    "graph": "the cited papers' citation neighbours hold fewer papers that the query does not "
             "cite",
    "most_cited": "fewer of the field's most cited papers are neither the query nor cited by it",
    "random": "fewer prefiltered papers are neither the query nor cited by it",
    "model": "fewer of the model's top-ranked papers are not cited by the query",
}


def field_pools(corpus_dir: Path, seed: int = 0) -> dict[str, str]:
    """field -> the field-level test pool a benchmark is built from: repeat 0 of `seed`, the
    largest size when there are several."""
    chosen: dict[str, tuple[int, str]] = {}
    for name in pool_names(corpus_dir):
        info = pool_manifest(corpus_dir, name)
        parsed = parse_pool_name(name)
        if (info.get("level") != "field" or parsed.split != "test" or parsed.repeat != 0
                or parsed.seed != seed):
            continue
        field = info["parameters"]["field"]
        if field not in chosen or parsed.size > chosen[field][0]:
            chosen[field] = (parsed.size, name)
    if not chosen:
        raise InputError(f"no field-level test pools of seed {seed} under {corpus_dir}/pools: "
                         "build them first", Repair("pool", corpus_dir.name, variables=(
                             ("FIELD", "all"), ("SIZE", "100k"),
                             *((("SEED", str(seed)),) if seed else ()))))
    return {field: name for field, (_, name) in sorted(chosen.items())}


def _with_keys(frame: pl.DataFrame, seed: int, kind: str) -> pl.DataFrame:
    """`frame` with a column `_r`: a uniform key per row from a generator seeded by (seed, type,
    query), so sorting by it shuffles each query's rows independently of the other queries."""
    kind_key = zlib.crc32(kind.encode())
    frame = frame.sort(frame.columns)  # keys follow the rows' content, not their order
    keys = np.empty(frame.height)
    groups = frame.with_row_index("_i").group_by("query").agg("_i")
    for query, idx in groups.iter_rows():
        keys[np.asarray(idx)] = np.random.default_rng([seed, kind_key, id_key(query)]).random(
            len(idx))
    return frame.with_columns(_r=pl.Series(keys))


def _sample(frame: pl.DataFrame, n: int, seed: int, kind: str) -> pl.DataFrame:
    """Up to n rows (query, doc) per query of `frame`, sampled without replacement, seeded."""
    return (_with_keys(frame, seed, kind).sort("query", "_r")
            .group_by("query", maintain_order=True).head(n).select("query", "doc"))


def _graph_negatives(queries: pl.Series, citations: pl.LazyFrame, allowed: pl.LazyFrame,
                     n: int, seed: int) -> pl.DataFrame:
    """MDCR §4 graph type: visit the query's cited papers c by decreasing O(q, c) (ties: lower
    id first), adding c's neighbours (OC_c ∪ IC_c; in a seeded order within one c) that are
    not the query, not cited by it and in the prefiltered corpus, until n are added."""
    edges = citations.filter(pl.col("citing") != pl.col("cited"))
    cited = edges.join(pl.LazyFrame({"citing": queries}), on="citing", how="semi").select(
        query="citing", c="cited")
    cs = cited.select("c").unique()  # neighbours of the cited papers only, not every edge
    neighbours = pl.concat([
        edges.join(cs, left_on="citing", right_on="c", how="semi").select(c="citing", doc="cited"),
        edges.join(cs, left_on="cited", right_on="c", how="semi").select(c="cited", doc="citing"),
    ]).unique()
    reach = cited.join(neighbours, on="c")  # (query, c, doc)
    cited_docs = cited.select("query", doc="c")
    overlap = (reach.join(cited_docs, on=["query", "doc"], how="semi")
               .group_by("query", "c").agg(common=pl.len())
               .join(cited.group_by("query").agg(n_cited=pl.len()), on="query")
               .select("query", "c", o=pl.col("common") / pl.col("n_cited")))
    ranked = (reach.join(overlap, on=["query", "c"], how="left")
              .with_columns(pl.col("o").fill_null(0.0))
              .join(cited_docs, on=["query", "doc"], how="anti")
              .filter(pl.col("doc") != pl.col("query"))
              .join(allowed, left_on="doc", right_on="corpusid", how="semi")
              .collect())
    if ranked.is_empty():
        return pl.DataFrame(schema={"query": queries.dtype, "doc": queries.dtype})
    order = dict(by=["query", "o", "c", "_r"], descending=[False, True, False, False])
    return (_with_keys(ranked, seed, "graph").sort(**order)
            .unique(["query", "doc"], keep="first", maintain_order=True)
            .group_by("query", maintain_order=True).head(n).select("query", "doc"))


def _pool_sampler(population: np.ndarray, queries: pl.DataFrame, excluded: pl.DataFrame,
                  n: int, seed: int, kind: str) -> pl.DataFrame:
    """n papers per query sampled from `population` (sorted ids) minus the query's exclusions:
    draws with rejection from one seeded generator per (seed, type, query)."""
    kind_key = zlib.crc32(kind.encode())
    blocked = dict(excluded.group_by("query").agg("doc").iter_rows())
    rows_q, rows_d = [], []
    for query in queries["corpusid"].to_list():
        banned = set(blocked.get(query, [])) | {query}
        rng = np.random.default_rng([seed, kind_key, id_key(query)])
        picked: list = []
        if len(population) - len(banned) <= 4 * n:  # small population: shuffle it whole
            order = population[rng.permutation(len(population))]
            picked = [d for d in order.tolist() if d not in banned][:n]
        else:
            seen: set = set()
            while len(picked) < n:
                doc = population[rng.integers(len(population))].item()
                if doc not in banned and doc not in seen:
                    seen.add(doc)
                    picked.append(doc)
        rows_q += [query] * len(picked)
        rows_d += picked
    dtype = queries["corpusid"].dtype
    return pl.DataFrame({"query": pl.Series(rows_q, dtype=dtype),
                         "doc": pl.Series(rows_d, dtype=dtype)})


def build_mdcr(place: Place, out_dir: Path, models: list[str], seed: int = 0, positives: int = 5,
               per_type: int = 10, top: int = 200, replace: bool = False) -> dict:
    """Write the benchmark of the corpus at `place` as the corpus `out_dir` (see the module
    doc): a new corpus, or in place of a benchmark with other contents only with `replace`."""
    if out_dir.resolve() == place.corpus_dir.resolve():
        raise InputError(f"MDCR={out_dir.name} names the source corpus itself: give the "
                         "benchmark another corpus name (default <corpus>-mdcr)")
    claim_corpus(out_dir, "make mdcr")
    if not models:
        raise InputError("MDCR_MODELS is empty: name the models whose top-ranked papers give "
                         "the model-based negatives, e.g. MDCR_MODELS=bm25,minilm")
    clash = sorted(set(models) & {*FIXED_TYPES, POSITIVE_TYPE})
    if clash:
        raise InputError(f"MDCR_MODELS {','.join(clash)}: these names are candidate types of "
                         "their own; choose other models")
    pools = field_pools(place.corpus_dir, seed)
    prefiltered = pl.scan_parquet(corpus_file(place.corpus_dir, PREFILTERED))
    citations = pl.scan_parquet(corpus_file(place.corpus_dir, CITATIONS))
    all_ids = prefiltered.select("corpusid").sort("corpusid").collect()["corpusid"].to_numpy()
    tables, extra = [], {}
    for field, pool in pools.items():
        queries, _, qrels = load_pool(place.corpus_dir, pool)
        cites = (citations.join(pl.LazyFrame({"citing": queries["corpusid"]}), on="citing",
                                how="semi").select(query="citing", doc="cited").collect())
        excluded = pl.concat([cites, qrels.select("query", "doc")]).unique()
        parts = {POSITIVE_TYPE: _sample(qrels.select("query", "doc"), positives, seed,
                                        POSITIVE_TYPE)}
        for model in models:
            run = load_run(place, pool, model)
            ranked = (run.filter(pl.col("rank") <= top).sort("query", "rank")
                      .select("query", "doc").join(excluded, on=["query", "doc"], how="anti"))
            parts[model] = _sample(ranked, per_type, seed, model)
        parts["graph"] = _graph_negatives(queries["corpusid"], citations,
                                          prefiltered.select("corpusid"), per_type, seed)
        cited_most = (prefiltered.filter(pl.col("fields").list.contains(field))
                      .sort(["n_inbound", "corpusid"], descending=[True, False]).head(top)
                      .select("corpusid").sort("corpusid").collect()["corpusid"].to_numpy())
        parts["most_cited"] = _pool_sampler(cited_most, queries, excluded, per_type, seed,
                                            "most_cited")
        parts["random"] = _pool_sampler(all_ids, queries, excluded, per_type, seed, "random")
        frame = pl.concat([p.with_columns(type=pl.lit(t)) for t, p in parts.items()])
        tables.append(frame.with_columns(field=pl.lit(field)))
        extra[field] = {"source_pool": pool,
                        "short": _shortfalls(parts, queries, positives, per_type)}
    table = pl.concat(tables).select("field", "query", "doc", "type")
    papers = prefiltered.select("corpusid", "title", "abstract").join(
        pl.concat([table["query"], table["doc"]]).unique().to_frame("corpusid").lazy(),
        on="corpusid", how="semi").collect()
    parameters = {"source_corpus": place.corpus, "models": list(models), "seed": seed,
                  "positives": positives, "per_type": per_type, "top": top}
    return write_benchmark(out_dir, papers, table, "mdcr", parameters, seed=seed, extra=extra,
                           replace=replace,
                           derived=place.sibling(out_dir.name).derived)


def built_summary(out_dir: Path, built: dict, where: Where = HERE) -> str:
    """What `build_mdcr` wrote, and the command that evaluates a model on it (for `where`)."""
    counts = built["benchmark"]["counts"]
    return (f"[mdcr] {out_dir}: {counts['fields']} fields, {counts['queries']} queries, "
            f"{counts['pairs']} query-candidate pairs; by type {counts['by_type']} "
            f"({built['installed']}); evaluate with "
            f"{Repair('eval', out_dir.name, Placeholder('model')).command(where)}")


def _shortfalls(parts: dict[str, pl.DataFrame], queries: pl.DataFrame, positives: int,
                per_type: int) -> dict:
    """Per type: queries that got fewer candidates than asked, how many are missing, and why."""
    out = {}
    for kind, frame in parts.items():
        wanted = positives if kind == POSITIVE_TYPE else per_type
        got = queries.select(query="corpusid").join(frame.group_by("query").len(), on="query",
                                                    how="left").fill_null(0)
        short = got.filter(pl.col("len") < wanted)
        if short.height:
            why = ("the query cites fewer papers in the pool" if kind == POSITIVE_TYPE
                   else WHY_SHORT.get(kind, WHY_SHORT["model"]))
            out[kind] = {"queries": short.height,
                         "missing": int((wanted - short["len"]).sum()), "why": why}
    return out


JACCARD_DEPTH = 10  # the highest-ranked negatives negative_jaccard compares by default


def negative_jaccard(place: Place, models: list[str], seed: int = 0,
                     depth: int = JACCARD_DEPTH) -> pl.DataFrame:
    """MDCR §4's choice of model-based types: for each pair of models, the Jaccard index between
    their `depth` highest-ranked negatives (papers the query does not cite), averaged over the
    queries of each field-level test pool, then over fields. Low: the models err differently."""
    if len(models) < 2:
        raise InputError("MODELS needs two models or more to compare, e.g. "
                         "MODELS=bm25,minilm,random")
    rows = []
    for field, pool in field_pools(place.corpus_dir, seed).items():
        _, _, qrels = load_pool(place.corpus_dir, pool)
        top = {m: (load_run(place, pool, m)
                   .join(qrels, on=["query", "doc"], how="anti").sort("query", "rank")
                   .group_by("query", maintain_order=True).head(depth)
                   .group_by("query").agg("doc")) for m in models}
        for a, b in combinations(models, 2):
            pair = top[a].join(top[b], on="query", suffix="_b").sort("query")  # one order
            jaccard = pair.select(
                pl.col("doc").list.set_intersection("doc_b").list.len()
                / pl.col("doc").list.set_union("doc_b").list.len())
            rows.append({"field": field, "a": a, "b": b, "queries": pair.height,
                         "jaccard": float(jaccard.to_series().mean())})
    per_field = pl.DataFrame(rows)
    return per_field.group_by("a", "b", maintain_order=True).agg(
        jaccard=pl.col("jaccard").mean(), fields=pl.len(), queries=pl.col("queries").sum())
