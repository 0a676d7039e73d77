"""A simulation of judged samples under the pipeline's design, in vectorised numpy: queries
with their citations, nested pools of two sizes drawn three times (the same queries in each
draw, MDCR §3), two models ranking each pool, relevance planted among the uncited candidates
at known rates that fall with a candidate's topicality (so with its rank), the sampling frame
and its stratified sample as pipeline/judging/sample.py draws it (its `allocate`; a stratum's
n_h candidates with the smallest uniform numbers), and the estimators of
pipeline/judging/inferred.py (its `list_metrics`) on each model's ranked list.

Each data set gives, per pool size, model and metric, three Q x R matrices: the truth (every
frame candidate judged: what the estimators estimate), the citations alone, and the estimate.
Two kinds of design: `budget` pairs per query spread by sample.py's `allocate` (SAMPLE), or
`rate` of every stratum with at least 2 pairs per stratum (the stratified jackknife of jkAP
needs 2; at 2% a stratum of 40 candidates still gets 2). The lists of one data set's pool draw
form one group (`Lists.group`: what pool_values pools P@k's fallback share over).

Planted relevance of an uncited candidate with topicality t ~ N(0, 1) (the default world;
`Design.relevance` and `cited_*` set others): 40% for t > 2.05 (the top 2%), 20% for 1.64 < t
<= 2.05, 8% for 1.04 < t <= 1.64, 2% below, each times the query's own factor exp(N(0,
0.5^2)) (capped at 90%); grades 1-3, higher for higher t. Citations: 2 + Poisson(4) per
query, topicality N(1.5, 1), grade 1, in every pool and draw of the query. A model scores t +
its noise (scale 1.0 or 1.3, times the query's difficulty U(0.6, 1.4)); the second also
favours cited papers (+0.6), as a model trained on citations might. WORLDS: the worlds jkAP's
thin-sample flag is measured in (benchmarks/jkap_flag.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.stats import norm

from pipeline.evaluation.variance import (
    difference_interval,
    half_widths,
    interval_power,
    mean_squares,
)
from pipeline.judging.inferred import Lists, list_metrics, thin_mask
from pipeline.judging.sample import allocate, strata_edges

EDGES = strata_edges(100)
RUN_DEPTH = 120  # each model's ranked list
SIZES = (150, 300)  # random candidates of the nested pools (the citations besides)
GRADES = 3
METRICS = ("jkAP", "infAP", "statAP", "infP@10", "infNDCG@10")


@dataclass(frozen=True)
class Design:
    """One simulated design: `queries` x `draws`, the budget per query (None: `rate` of
    every stratum, at least two candidates); and the world it samples: `relevance`, the
    planted rates of an uncited candidate by topicality band (t > 2.05, > 1.64, > 1.04,
    below: the module doc's 40/20/8/2%), and the citations per query, `cited_min` +
    Poisson(`cited_mean`)."""

    queries: int = 30
    draws: int = 3
    budget: int | None = 12
    rate: float | None = None
    relevance: tuple[float, float, float, float] = (0.4, 0.2, 0.08, 0.02)
    cited_min: int = 2
    cited_mean: float = 4.0


def _take(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, order, axis=-1)


def _counts(member: np.ndarray, stratum: np.ndarray, grade: np.ndarray,
            cited_count: np.ndarray) -> np.ndarray:
    """(B * R, H + 1, G + 1): the citations (stratum 0, grade 1) and the `member`s of each
    frame stratum, by grade (Lists.counts)."""
    b, r = member.shape[:2]
    out = np.zeros((b, r, len(EDGES) + 1, GRADES + 1))
    out[..., 0, 1] = cited_count[:, None]
    for h in range(1, len(EDGES) + 1):
        for g in range(GRADES + 1):
            out[..., h, g] = (member & (stratum == h) & (grade == g)).sum(axis=2)
    return out.reshape(b * r, len(EDGES) + 1, GRADES + 1)


def simulate(rng: np.random.Generator, sets: int, design: Design,
             metrics: tuple[str, ...] = METRICS
             ) -> dict[tuple[int, int, str, str], np.ndarray]:
    """`sets` data sets at once: {(size, model, kind, metric): array (sets, Q, R)} with kind
    truth, cited, inferred, for each of `metrics`; {(size, -1, "rates", "")} and {(size, -1,
    "drawn", "")}: each stratum's sampling rate and judged pairs (sets * Q * R, strata); and
    {(size, -1, "thin", "")}: (sets, R, strata), whether each pool draw's sample leaves the
    stratum thinner than jkAP needs (inferred.thin_mask: the report's flag, the draw's queries
    as one pool's)."""
    b, q, r = sets * design.queries, design.queries, design.draws
    size_max = max(SIZES)
    cited_count = design.cited_min + rng.poisson(design.cited_mean, b)
    c_max = int(cited_count.max())
    factor = np.exp(rng.normal(0, 0.5, b))
    difficulty = rng.uniform(0.6, 1.4, b)
    cited_t = np.broadcast_to(rng.normal(1.5, 1.0, (b, 1, c_max)), (b, r, c_max))
    present_c = np.broadcast_to((np.arange(c_max) < cited_count[:, None])[:, None], (b, r, c_max))
    t = rng.normal(0, 1, (b, r, size_max))
    rate = np.select([t > 2.05, t > 1.64, t > 1.04], list(design.relevance[:3]),
                     design.relevance[3])
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
            drawn = np.minimum(sizes, np.maximum(np.round(sizes * design.rate), 2)
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

        cited_counts = np.zeros((b * r, len(EDGES) + 1, GRADES + 1))
        cited_counts[:, 0, 1] = n_cited.reshape(-1)
        kinds = {"truth": (cited | frame, all_sizes, _counts(frame, stratum, grade, cited_count)),
                 "cited": (cited, None, cited_counts),
                 "inferred": (cited | sampled, all_drawn,
                              _counts(sampled, stratum, grade, cited_count))}
        code_all = np.where(cited, 0, stratum)
        # the lists of one data set's draw share a pool: the estimators pool over them
        group = ((np.arange(b * r) // (q * r)) * r + np.arange(b * r) % r).astype(np.int64)
        for model in range(2):
            def ranked(values: np.ndarray, by: np.ndarray = order[model]) -> np.ndarray:
                return _take(values, by).reshape(b * r, RUN_DEPTH)

            code, grades = ranked(code_all), ranked(grade)
            for kind, (known, judged, count) in kinds.items():
                seen = ranked(known)
                lists = Lists(code if judged is not None else np.where(seen, 0, -1),
                              np.where(seen, grades, -1),
                              all_sizes if judged is not None else np.ones_like(all_sizes),
                              judged if judged is not None else np.ones_like(all_sizes),
                              count, group)
                values = list_metrics(lists, (10,), metrics)
                for metric in metrics:
                    out[size, model, kind, metric] = values[metric].reshape(sets, q, r)
        out[size, -1, "rates", ""] = (drawn / np.maximum(sizes, 1)).reshape(-1, len(EDGES))
        out[size, -1, "drawn", ""] = drawn.reshape(-1, len(EDGES)).astype(np.float64)
        # per data set and draw (its queries one pool): queries on the second-to-last axis
        out[size, -1, "thin", ""] = thin_mask(
            sizes.reshape(sets, q, r, -1).swapaxes(1, 2),
            drawn.reshape(sets, q, r, -1).swapaxes(1, 2))
    return out


DESIGNS = {"rate 2%": Design(budget=None, rate=0.02), "rate 5%": Design(budget=None, rate=0.05),
           "rate 10%": Design(budget=None, rate=0.10), "rate 20%": Design(budget=None, rate=0.20),
           "SAMPLE 8": Design(budget=8), "SAMPLE 20": Design(budget=20)}


SEED = 20261126

# jkAP's thin-sample flag (issue 71; benchmarks/jkap_flag.py): the worlds it is measured in,
# Design's world fields. dense: the module doc's planted rates and citations; sparse: a quarter
# of those rates and 1 + Poisson(1) citations a query, so that the drawn relevant make much of
# R; flat: 1% at every topicality (the models' ranks say nothing of the uncited relevant, which
# lie mostly in the deepest stratum) and 1 + Poisson(1) citations.
WORLDS: dict[str, dict[str, Any]] = {
    "dense": {},
    "sparse": {"relevance": (0.1, 0.05, 0.02, 0.005), "cited_min": 1, "cited_mean": 1.0},
    "flat": {"relevance": (0.01, 0.01, 0.01, 0.01), "cited_min": 1, "cited_mean": 1.0},
}
# the designs: the rates of DESIGNS, and SAMPLE (the pipeline's setting) from 4 to 40
FLAG_DESIGNS = {**{name: design for name, design in DESIGNS.items() if name.startswith("rate")},
                **{f"SAMPLE {n}": Design(budget=n) for n in (4, 8, 12, 16, 20, 24, 30, 40)}}
FLAG_SEED = 20270113


def flag_design(world: str, name: str) -> tuple[Design, int]:
    """The design `name` of FLAG_DESIGNS in the world `world` of WORLDS, and its seed (the
    benchmark's and the tests')."""
    seed = FLAG_SEED + 100 * list(WORLDS).index(world) + list(FLAG_DESIGNS).index(name)
    return replace(FLAG_DESIGNS[name], **WORLDS[world]), seed


def design_seed(name: str) -> int:
    """The seed of a design of DESIGNS: the benchmark's and the slow test's, so the two give
    the same numbers."""
    return SEED + sorted(DESIGNS).index(name)


def interval_covers(values: np.ndarray, target: float) -> bool:
    """Whether the report's queries-and-draws interval of the mean of `values` (Q x R)
    holds `target`."""
    interval = difference_interval(values, np.zeros_like(values))
    return bool(interval.low <= target <= interval.high)


Z = float(norm.ppf(0.975))  # the known-spread interval's normal quantile


def coverages(values: np.ndarray, target: float) -> dict[str, float]:
    """Three coverages of `target` by the data sets' means of `values` (sets x Q x R):
    `covered`, the share whose report interval (`half_widths`' queries and draws, as
    `interval_covers`) holds it; `expected`, the level that interval has under the crossed
    normal model at the components of the mean squares averaged over the data sets (1 -
    `interval_power` at a difference of 0), what `covered` should be whatever the interval's
    slack; `known`, the share within z x the SD of the means over the data sets, the
    interval an oracle that knew the spread would give: 95% for an unbiased normal mean, less
    where the estimate is biased, whatever the report's interval does."""
    mean, ms_q, ms_r, ms_e = mean_squares(values)
    q, r = values.shape[-2:]
    half = half_widths(ms_q, ms_r, ms_e, q, r)[1]
    avg_q, avg_r, avg_e = (float(ms.mean()) for ms in (ms_q, ms_r, ms_e))
    level = 1 - interval_power(q, 0.0, max((avg_q - avg_e) / r, 0.0),
                               max((avg_r - avg_e) / q, 0.0), avg_e, r)
    spread = Z * float(mean.std(ddof=1))
    return {"covered": float(np.mean((mean - half <= target) & (target <= mean + half))),
            "expected": level, "known": float(np.mean(np.abs(mean - target) <= spread))}


def summarise(result: dict[tuple[int, int, str, str], np.ndarray],
              metrics: tuple[str, ...] = METRICS) -> list[dict[str, float | int | str]]:
    """Per pool size, model and metric of `run`'s result: the truth's and the citations'
    mean, the bias (mean over data sets of estimate - truth, each a Q x R mean) and its Monte
    Carlo error, and the coverages of the population mean (the truth's mean over every data
    set) by the estimate (`coverages`: the report interval's `coverage`, the level it should
    have at the estimate's components `expected_coverage`, and `known_coverage` from the
    spread over data sets, which bias lowers) and by the truth (every candidate judged:
    `truth_coverage`, `truth_expected_coverage`); and the largest and smallest single-query
    estimate."""
    rows: list[dict[str, float | int | str]] = []
    for size in SIZES:
        for model in (0, 1):
            for metric in metrics:
                truth, est = (result[size, model, kind, metric] for kind in ("truth", "inferred"))
                error = (est - truth).mean(axis=(1, 2))
                target = float(truth.mean())
                sampled, judged = coverages(est, target), coverages(truth, target)
                rows.append({
                    "size": size, "model": model + 1, "metric": metric, "sets": len(error),
                    "truth": target, "cited": float(result[size, model, "cited", metric].mean()),
                    "bias": float(error.mean()),
                    "mc_error": float(error.std(ddof=1) / np.sqrt(len(error))),
                    "coverage": sampled["covered"], "expected_coverage": sampled["expected"],
                    "known_coverage": sampled["known"], "truth_coverage": judged["covered"],
                    "truth_expected_coverage": judged["expected"],
                    "largest": float(est.max()), "smallest": float(est.min())})
    return rows


def run(seed: int, sets: int, design: Design, chunk: int = 25,
        metrics: tuple[str, ...] = METRICS) -> dict[tuple[int, int, str, str], np.ndarray]:
    """`simulate` in chunks of `chunk` data sets (bounded memory), concatenated."""
    rng = np.random.default_rng(seed)
    parts = [simulate(rng, min(chunk, sets - done), design, metrics)
             for done in range(0, sets, chunk)]
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
