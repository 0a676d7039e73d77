"""The sample of unjudged candidates to judge, per pool and query: stratified by rank depth,
with known inclusion probabilities (docs/evaluation.md, "Beyond citations: judged samples").

The sampling frame of a query is every candidate that one of the named models ranks in its
top `depth` (DEPTH: 100) and that the citation qrels leave unjudged (a candidate the qrels
judge, cited or not, is never drawn: the citations stay as they are, judged relevant). Each
candidate's `best_rank` is its best rank over those models; the strata cut the best rank at
STRATA's upper edges (1-10, 11-30, 31-100; clipped to `depth`). The budget `n` (SAMPLE: pairs
per query) is spread over a query's strata by this rule:

- a stratum's rate is proportional to 1 / sqrt(its upper edge): 1-10 is sampled 3.2 times
  as densely as 31-100, 11-30 1.8 times. Capped at 1 (a stratum sampled whole); the budget
  of a capped stratum goes to the others, by the same ratios ("water-filling"), so
  sum(rate x size) = n, or the whole frame where it holds n or fewer candidates. Denser at
  the top, where precision and nDCG at small cut-offs are decided, but not so thin in the
  deepest stratum, which holds most of the frame and most of the relevant candidates the
  citations miss: with rates proportional to 1 / edge (20% : 6.7% : 2%) the estimated number
  of relevant candidates R, every AP's denominator, varied so much that the AP estimates'
  ratio bias was 2 to 4 times as large (the simulation in tests/judging/test_inferred.py);
- the expected counts are rounded to whole numbers by largest remainder (ties: the shallower
  stratum), with at least two draws from every stratum of two or more candidates (one from a
  stratum of one), so that no candidate has an inclusion probability of 0 (an estimator can
  only weight what can be drawn) and jkAP's stratified jackknife (inferred.py), which can
  only correct a stratum with 2 judged pairs, reaches every stratum: the budget of a query is
  then max(n, those minimums), at most 2 x the strata (SAMPLE 3: 6 pairs); `n` must be at
  least the number of strata.

Within a stratum the n_h drawn are a simple random sample without replacement of its N_h
candidates: each candidate's inclusion probability is n_h / N_h, exactly, what the
estimators (pipeline/judging/inferred.py) weight by. The draw uses permanent random numbers:
each (query, candidate) pair gets a uniform number from a hash of (seed, query id, candidate
id) (`unit_numbers`), and a stratum takes its n_h candidates with the smallest; the n_h
smallest of N_h independent uniforms are a simple random sample, and since a pair's number does
not depend on the pool, nested pools and their draws share the pairs they can (judged once).
No random state is carried from one query to the next, so the sample is the same for a seed
whatever the order, the threads or the pools drawn with it.

The frame (SAMPLE_SCHEMA) holds every candidate of the sampling frame, drawn or not
(`sampled`): the estimators need the undrawn ones' strata to know what lies above a relevant
candidate in a ranking. The pairs to judge are `pairs_to_judge(sample)`. Its file is
layout.sample_path (runs/<corpus>/<pool>/judgments/sample.parquet).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from pipeline.core.errors import InputError
from pipeline.glossary import id_key

log = logging.getLogger(__name__)

DEPTH = 100  # the rank depth of each named model's list that the frame takes
STRATA = (10, 30, 100)  # the strata's upper edges in best rank: 1-10, 11-30, 31-100
SAMPLE_SCHEMA = {"pool": pl.String, "query": None, "doc": None, "best_rank": pl.Int32,
                 "stratum": pl.String, "probability": pl.Float64, "sampled": pl.Boolean,
                 "seed": pl.Int64}  # None: the ids' own type (the qrels')
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def strata_edges(depth: int = DEPTH, strata: Sequence[int] = STRATA) -> tuple[int, ...]:
    """The strata's upper edges for a frame of `depth`: STRATA's below it, then `depth`
    (depth 50: 10, 30, 50; depth 20: 10, 20)."""
    if depth < 1:
        raise InputError(f"depth {depth}: give a rank depth of 1 or more, such as {DEPTH}")
    return (*(edge for edge in strata if edge < depth), depth)


def stratum_labels(edges: Sequence[int]) -> list[str]:
    """'1-10', '11-30', '31-100' for edges (10, 30, 100)."""
    lows = [1, *(edge + 1 for edge in edges[:-1])]
    return [f"{low}-{high}" for low, high in zip(lows, edges, strict=True)]


def allocate(sizes: np.ndarray, n: int, edges: Sequence[int]) -> np.ndarray:
    """Draws per stratum (same shape as `sizes`: one row per query, one column per stratum,
    its N_h) by the module's rule: rates proportional to 1 / sqrt(edge), capped at 1,
    summing to the budget max(min(n, N), the minimums); rounded by largest remainder, at
    least min(N_h, 2) in each stratum (the jackknife's 2 judged pairs)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    weight = 1.0 / np.sqrt(np.asarray(edges, dtype=np.float64))  # the rates' ratios
    least = np.minimum(sizes, 2)  # 2 from a stratum of 2 or more, 1 from a stratum of 1
    target = np.maximum(np.minimum(n, sizes.sum(axis=1)), least.sum(axis=1))
    budget = target.astype(np.float64)
    capped = np.zeros(sizes.shape, dtype=bool)
    for _ in range(sizes.shape[1] + 1):  # water-filling: cap a stratum whose rate passes 1
        free = np.where(capped, 0.0, sizes * weight)
        left = budget - np.where(capped, sizes, 0).sum(axis=1)
        scale = np.divide(left, free.sum(axis=1), out=np.zeros_like(left),
                          where=free.sum(axis=1) > 0)
        over = ~capped & (scale[:, None] * weight >= 1) & (sizes > 0)
        if not over.any():
            break
        capped |= over
    expected = np.where(capped, sizes, np.minimum(sizes, scale[:, None] * weight * sizes))
    drawn = np.minimum(np.maximum(np.floor(expected + 1e-9), least), sizes).astype(np.int64)
    order = np.arange(sizes.shape[1])
    # the floors leave at most one per stratum to add, the minimums at most two to take off
    for _ in range(int(sizes.shape[1]) * 3 + 1):
        gap = target - drawn.sum(axis=1)
        if not gap.any():
            break
        remainder = expected - drawn
        # a row short of its budget: +1 where the remainder is largest (shallower on ties)
        room = np.where(drawn < sizes, remainder - order * 1e-12, -np.inf)
        add = (gap > 0)[:, None] & (order == room.argmax(axis=1)[:, None])
        # a row over it (the minimums): -1 where the remainder is smallest (deeper on ties)
        spare = np.where(drawn > least, remainder - order * 1e-12, np.inf)
        cut = (gap < 0)[:, None] & (order == spare.argmin(axis=1)[:, None])
        drawn = drawn + add - cut
    return drawn


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64s (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _keys(ids: pl.Series) -> np.ndarray:
    """Ids as uint64 keys: an integer id itself, a string id its crc32 (glossary.id_key)."""
    if ids.dtype.is_integer():
        return ids.cast(pl.Int64).to_numpy().astype(np.uint64)
    return np.array([id_key(str(value)) for value in ids.to_list()], dtype=np.uint64)


def unit_numbers(seed: int, queries: pl.Series, docs: pl.Series) -> np.ndarray:
    """The permanent random number of each (query, doc) pair for `seed`: uniform in [0, 1),
    from a hash of the three, the same in every pool and process."""
    with np.errstate(over="ignore"):
        state = _mix(np.full(len(queries), np.uint64(seed & 0xFFFFFFFFFFFFFFFF)))
        state = _mix(state ^ _keys(queries))
        state = _mix(state + np.uint64(0x9E3779B97F4A7C15) ^ _keys(docs))
    return (state >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def sampling_frame(qrels: pl.DataFrame, runs: Mapping[str, pl.DataFrame],
                   depth: int = DEPTH) -> pl.DataFrame:
    """query, doc, best_rank: the candidates some run of `runs` (model -> query, doc, rank)
    ranks in its top `depth` that `qrels` (query, doc, rel) does not judge, for the queries
    of `qrels` with a relevant document."""
    evaluated = qrels.filter(pl.col("rel") > 0)["query"].unique()
    tops = [run.filter(pl.col("rank") <= depth).select("query", "doc", "rank")
            for run in runs.values()]
    if not tops:
        raise InputError("no run to sample from: name the models whose top ranks to judge")
    union = (pl.concat(tops).filter(pl.col("query").is_in(evaluated.implode()))
             .group_by("query", "doc").agg(best_rank=pl.col("rank").min().cast(pl.Int32)))
    return (union.join(qrels.select("query", "doc"), on=["query", "doc"], how="anti")
            .sort("query", "best_rank", "doc"))


def draw_sample(pool: str, qrels: pl.DataFrame, runs: Mapping[str, pl.DataFrame], n: int,
                seed: int = 0, depth: int = DEPTH, strata: Sequence[int] = STRATA
                ) -> pl.DataFrame:
    """The sample of one pool (SAMPLE_SCHEMA, sorted by query, best rank, doc): `n` pairs per
    query (SAMPLE) drawn from the candidates that `runs` (model -> a run: query, doc, rank)
    rank in their top `depth` and `qrels` (the pool's citations: query, doc, rel) leave
    unjudged, stratified by best rank (module doc), seeded by `seed`."""
    edges = strata_edges(depth, strata)
    if isinstance(n, bool) or not isinstance(n, int) or n < len(edges):
        raise InputError(f"SAMPLE={n!r}: give a whole number of pairs per query of at least "
                         f"{len(edges)}, one per stratum ({', '.join(stratum_labels(edges))}), "
                         "such as 20")
    frame = sampling_frame(qrels, runs, depth)
    stratum = np.searchsorted(np.asarray(edges), frame["best_rank"].to_numpy(), side="left")
    # queries sorted by id: a row's query is its dense rank among them
    row_query = frame.select(i=pl.col("query").rank("dense") - 1)["i"].to_numpy()
    queries = int(row_query.max()) + 1 if frame.height else 0
    sizes = np.bincount(row_query * len(edges) + stratum,
                        minlength=queries * len(edges)).reshape(queries, len(edges))
    drawn = allocate(sizes, n, edges)
    within = drawn[row_query, stratum]
    size = sizes[row_query, stratum]
    u = unit_numbers(seed, frame["query"], frame["doc"])
    ranked = (frame.select("query", "doc").with_columns(h=pl.Series(stratum), u=pl.Series(u))
              .with_row_index("row")
              .sort("query", "h", "u", "doc")
              .with_columns(place=pl.int_range(pl.len()).over("query", "h"))
              .sort("row")["place"].to_numpy())
    labels = stratum_labels(edges)
    out = frame.select(
        pl.lit(pool, dtype=pl.String).alias("pool"), "query", "doc", "best_rank",
        stratum=pl.Series([labels[h] for h in stratum], dtype=pl.String),
        probability=pl.Series(within / np.maximum(size, 1), dtype=pl.Float64),
        sampled=pl.Series(ranked < within, dtype=pl.Boolean),
        seed=pl.lit(seed, dtype=pl.Int64))
    log.info(f"[sample] {pool}: {int(out['sampled'].sum())} of {out.height} unjudged "
             f"candidates drawn over {queries} queries ({n} per query, strata "
             f"{', '.join(labels)}, seed {seed})")
    return out.sort("query", "best_rank", "doc")


def pairs_to_judge(sample: pl.DataFrame) -> pl.DataFrame:
    """The drawn pairs of a sample (query, doc), sorted: what an assessor judges."""
    return sample.filter(pl.col("sampled")).select("query", "doc").sort("query", "doc")
