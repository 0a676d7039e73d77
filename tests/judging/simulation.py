"""A simulation of judged samples under the pipeline's design, in vectorised numpy: queries
with their citations, nested pools of two sizes drawn three times (the same queries in each
draw, MDCR §3), two models ranking each pool, relevance planted among the uncited candidates
at known rates that fall with a candidate's topicality (so with its rank), the sampling frame
and its stratified sample as pipeline/judging/sample.py draws it (its `allocate`; a stratum's
n_h candidates with the smallest uniform numbers), and the estimators of
pipeline/judging/inferred.py (its `list_metrics`) on each model's ranked list.

Each data set gives, per pool size, model and metric, three Q x R matrices: the truth (every
frame candidate judged: what the estimators estimate), the citations alone, and the estimate.

Planted relevance of an uncited candidate with topicality t ~ N(0, 1): 40% for t > 2.05 (the
top 2%), 20% for 1.64 < t <= 2.05, 8% for 1.04 < t <= 1.64, 2% below, each times the query's
own factor exp(N(0, 0.5^2)) (capped at 90%); grades 1-3, higher for higher t. Citations: 2 +
Poisson(4) per query, topicality N(1.5, 1), grade 1, in every pool and draw of the query. A
model scores t + its noise (scale 1.0 or 1.3, times the query's difficulty U(0.6, 1.4)); the
second also favours cited papers (+0.6), as a model trained on citations might.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.judging.inferred import Lists, list_metrics
from pipeline.judging.sample import allocate, strata_edges

EDGES = strata_edges(100)
RUN_DEPTH = 120  # each model's ranked list
SIZES = (150, 300)  # random candidates of the nested pools (the citations besides)
GRADES = 3
METRICS = ("infAP", "statAP", "infP@10")


@dataclass(frozen=True)
class Design:
    """One simulated design: `queries` x `draws`, the budget per query (None: `rate` of
    every stratum, at least one candidate)."""

    queries: int = 30
    draws: int = 3
    budget: int | None = 12
    rate: float | None = None


def _take(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, order, axis=-1)


def simulate(rng: np.random.Generator, sets: int, design: Design
             ) -> dict[tuple[int, int, str, str], np.ndarray]:
    """`sets` data sets at once: {(size, model, kind, metric): array (sets, Q, R)} with kind
    truth, cited, inferred; and {(size, -1, "rates", "")}: each stratum's sampling rate
    (sets * Q * R, strata)."""
    b, q, r = sets * design.queries, design.queries, design.draws
    size_max = max(SIZES)
    cited_count = 2 + rng.poisson(4, b)
    c_max = int(cited_count.max())
    factor = np.exp(rng.normal(0, 0.5, b))
    difficulty = rng.uniform(0.6, 1.4, b)
    cited_t = np.broadcast_to(rng.normal(1.5, 1.0, (b, 1, c_max)), (b, r, c_max))
    present_c = np.broadcast_to((np.arange(c_max) < cited_count[:, None])[:, None], (b, r, c_max))
    t = rng.normal(0, 1, (b, r, size_max))
    rate = np.select([t > 2.05, t > 1.64, t > 1.04], [0.4, 0.2, 0.08], 0.02)
    planted = rng.random(t.shape) < np.minimum(0.9, rate * factor[:, None, None])
    grade_u = np.where(planted, 1 + (rng.random(t.shape) < 0.4)
                       + (t > 2.0) * (rng.random(t.shape) < 0.5), 0)
    noise = rng.normal(0, 1, (2, b, r, c_max + size_max))
    out: dict[tuple[int, int, str, str], np.ndarray] = {}
    for size in SIZES:
        width = c_max + size
        topical = np.concatenate([cited_t, t[..., :size]], axis=2)
        present = np.concatenate([present_c, np.ones((b, r, size), bool)], axis=2)
        cited = np.concatenate([present_c, np.zeros((b, r, size), bool)], axis=2)
        grade = np.concatenate([present_c.astype(int), grade_u[..., :size]], axis=2)
        scale, favour = np.array([1.0, 1.3]), np.array([0.0, 0.6])
        score = (topical[None] + scale[:, None, None, None] * difficulty[None, :, None, None]
                 * noise[..., :width] + favour[:, None, None, None] * cited[None])
        score = np.where(present[None], score, -np.inf)
        top = np.argpartition(-score, RUN_DEPTH, axis=3)[..., :RUN_DEPTH]
        order = _take(top, np.argsort(-_take(score, top), axis=3, kind="stable"))
        rank = np.full((2, b, r, width), 10**6)
        np.put_along_axis(rank, order, np.broadcast_to(np.arange(1, RUN_DEPTH + 1),
                                                       order.shape), axis=3)
        best = rank.min(axis=0)
        frame = (best <= EDGES[-1]) & ~cited & present
        stratum = np.where(frame, np.searchsorted(np.asarray(EDGES), best) + 1, -1)
        sizes = np.stack([(stratum == h).sum(axis=2) for h in range(1, len(EDGES) + 1)], 2)
        if design.budget is not None:
            drawn = allocate(sizes.reshape(-1, len(EDGES)), design.budget, EDGES
                             ).reshape(sizes.shape)
        else:
            drawn = np.where(sizes > 0, np.maximum(np.round(sizes * design.rate), 1), 0
                             ).astype(np.int64)
        # a stratum's n_h candidates with the smallest uniform numbers: a simple random sample
        key = np.where(frame, stratum + rng.random(stratum.shape), np.inf)
        place = np.empty(key.shape, dtype=np.int64)
        np.put_along_axis(place, np.argsort(key, axis=2, kind="stable"),
                          np.broadcast_to(np.arange(width), key.shape), axis=2)
        start = np.concatenate([np.zeros((b, r, 1), np.int64), np.cumsum(sizes, 2)[..., :-1]],
                               axis=2)
        h0 = np.maximum(stratum, 1) - 1
        sampled = frame & (place - _take(start, h0) < _take(drawn, h0))
        n_cited = np.broadcast_to(cited_count[:, None, None], (b, r, 1)).astype(np.float64)
        all_sizes = np.concatenate([n_cited, sizes], axis=2).reshape(b * r, -1)
        all_drawn = np.concatenate([n_cited, drawn], axis=2).reshape(b * r, -1)
        weight = np.where(sampled, _take(np.divide(sizes, drawn, out=np.zeros(sizes.shape),
                                                   where=drawn > 0), h0), 0.0)

        def totals(counted: np.ndarray, grade: np.ndarray = grade) -> np.ndarray:
            return np.stack([np.where(grade == g, counted, 0.0).sum(axis=2)
                             for g in range(1, GRADES + 1)], axis=2).reshape(b * r, GRADES)

        kinds = {"truth": (cited | frame, all_sizes, totals((cited | frame) * 1.0)),
                 "cited": (cited, None, totals(cited * 1.0)),
                 "inferred": (cited | sampled, all_drawn, totals(cited + weight))}
        code_all = np.where(cited, 0, stratum)
        for model in range(2):
            def ranked(values: np.ndarray, by: np.ndarray = order[model]) -> np.ndarray:
                return _take(values, by).reshape(b * r, RUN_DEPTH)

            code, grades = ranked(code_all), ranked(grade)
            for kind, (known, judged, total) in kinds.items():
                seen = ranked(known)
                lists = Lists(code if judged is not None else np.where(seen, 0, -1),
                              np.where(seen, grades, -1),
                              all_sizes if judged is not None else np.ones_like(all_sizes),
                              judged if judged is not None else np.ones_like(all_sizes),
                              total)
                values = list_metrics(lists, (10,))
                for metric in METRICS:
                    out[size, model, kind, metric] = values[metric].reshape(sets, q, r)
        out[size, -1, "rates", ""] = (drawn / np.maximum(sizes, 1)).reshape(-1, len(EDGES))
    return out


def run(seed: int, sets: int, design: Design, chunk: int = 25
        ) -> dict[tuple[int, int, str, str], np.ndarray]:
    """`simulate` in chunks of `chunk` data sets (bounded memory), concatenated."""
    rng = np.random.default_rng(seed)
    parts = [simulate(rng, min(chunk, sets - done), design) for done in range(0, sets, chunk)]
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
