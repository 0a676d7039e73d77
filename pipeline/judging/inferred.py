"""Metrics that count a judged sample beside the citations, with the sample's inclusion
probabilities, and whether the ranking of models changes (docs/evaluation.md, "Beyond
citations: judged samples").

What is estimated, per (pool, model, query): each metric as it would be were every candidate
of the sampling frame judged (the candidates some named model ranks in its top `depth`,
pipeline/judging/sample.py), the citations counting as the qrels grade them and everything
outside the frame not relevant (the pooling assumption). A candidate's judgment counts
relevant from grade 1 (trec_eval's level 1).

- AP, the report's headline (`jkAP`): statAP (Aslam, Pavlu & Yilmaz 2006, "A statistical
  method for system evaluation using incomplete judgments"; below) corrected for its ratio
  bias by the stratified delete-one jackknife (Quenouille 1956, "Notes on bias in
  estimation"; Jones 1974, "Jackknife estimation of functions of stratum means"; Cochran,
  Sampling Techniques, 3rd ed. 1977, ch. 6 on the ratio estimator's bias), with the
  finite-population factor: theta - sum_h (n_h - 1)(1 - n_h / N_h)(mean_j theta_(hj) -
  theta), theta_(hj) statAP with the j-th judged candidate of stratum h left out (its weight
  and the stratum's N_h / (n_h - 1), R re-estimated). AP is a ratio of two estimated totals,
  whose bias falls as 1 / n_h; the correction takes that term away, so a stratum needs 2
  judged pairs (one with fewer, or judged whole, is left as it is). Where a stratum has 3 or
  more, the second-order jackknife (Schucany, Gray & Owen 1971, "On bias reduction in
  estimation") takes the 1 / n_h^2 term away too: statAP with every pair of its judged
  candidates left out as well, and the three estimates (n_h, n_h - 1, n_h - 2 judged) read
  as a parabola in 1/m - 1/N_h at 0 (`_weights`); in the simulation it took the largest bias
  left at SAMPLE 8 from +0.012 to +0.009 and at 5% from +0.009 to +0.005 (docs/evaluation.md).
  The replicates are not recomputed one by one: statAP's numerator and R are sums, and
  leaving out candidates of one stratum changes them by each candidate's own terms (and, for
  two, one term they share), so every delete-one and delete-two replicate of a stratum is a
  few array sums (`replicate_means`; equal to recomputing statAP per replicate to float
  rounding: tests/judging/test_inferred.py), and the cost no longer grows with the pairs.
  A sample's draws give every stratum of 2 or more candidates 2 (sample.py's `allocate`); at
  2 judged only the delete-one term is taken away. Where a stratum has few judged pairs the
  correction falls short (docs/evaluation.md, the simulation): statAP's same-stratum pairs
  form a U-statistic of degree 2, whose jackknife needs 3 judged and its second order 4
  (Arvesen 1969, "Jackknifing U-statistics"), so a top stratum of 2 or 3 is left low; and a
  deep stratum of 2 whose relevant are rare is high, a bias no correction from the sample's
  own spread removes (from n draws only polynomials of degree n in the stratum's relevant
  count have unbiased estimators). A single query's value
  may leave [0, 1] (a replicate that loses the one relevant drawn deep moves R by N_h / n_h);
  the means are what it estimates (docs/evaluation.md, the simulation).
- `statAP` itself: each judged relevant candidate weighted by 1 / its inclusion probability,
  and at each the relevant above it, each weighted by 1 / its probability of being drawn given
  that this one was ((n_h - 1) / (N_h - 1) in its own stratum, n_h / N_h in another): the
  numerator is unbiased for any sample, the division by the estimated R not.
- Inferred AP (`infAP`): xinfAP's estimator (Yilmaz, Kanoulas & Aslam 2008, "A simple and
  efficient sampling method for estimating AP and NDCG"; its reference code sample_eval.pl),
  the stratified form of infAP (Yilmaz & Aslam 2006): for a judged relevant candidate at
  rank k the expected precision there, 1/k (itself) plus, for each stratum h, the candidates
  of h ranked above it times the share of relevant among the judged ones of h above it,
  (r + eps) / (n + 2 eps), over k; summed over the judged relevant candidates, each weighted
  by 1 / its inclusion probability, over the estimated number of relevant R = the relevant
  citations + sum of 1 / probability over the relevant drawn candidates (Horvitz & Thompson
  1952). eps = 1e-5 and its placement are trec_eval's (m_infAP.c). A census stratum (the
  citations, a stratum drawn whole) counts exactly, r of its own, as xinfAP counts a stratum
  judged whole, so with every candidate drawn the value is AP. It equals trec_eval's `infAP`
  only where the qrels judge nothing but one uniformly sampled stratum (no citations, no
  stratum drawn whole; a query with no relevant judged is left out here, 0 there). With the
  citations in the qrels it does not: trec_eval takes every judged document for part of one
  uniform sample, so the citations' relevance enters the share of relevant above each rank
  that stands in for the unjudged ones, and its R is the count of judged relevant (citations
  + relevant drawn, unweighted); its value is this estimator's with the citations drawn into
  the sampled stratum (tests/judging/test_infap_citations.py: equal to 1e-12, and differing
  from the pipeline's in every query, by -0.09 to +0.12). Kept for the parity without
  citations: on thin samples it over-counts (its smoothed share is 1/2 where nothing of a
  stratum above a rank is judged).
- Inferred P@k (`infP@k`): the known (the citations, the judged) relevant in the list's top
  k, plus for each stratum h the list's unjudged top-k candidates of h times the share of
  relevant among the list's own judged top-k candidates of h (a ratio estimator within the
  domain, conditionally unbiased given how many of it were drawn: Cochran ch. 2, estimates
  over subpopulations); where none
  of them was drawn, that cell's share over the group's lists (`Lists.group`: a pool's
  queries), else the stratum's. A count of at most k: the estimate is never above 1, as the
  truth is. (The Horvitz-Thompson count, each relevant drawn one weighted by 1 / its
  probability, is unbiased but was seen at 103% as a mean: the strata are by the best rank
  over several models, so 1 / probability counts candidates outside one model's top k. No
  estimator bounded by k is unbiased for every population: one is chosen that is unbiased
  within the simulation's Monte Carlo error.)
- Inferred nDCG (`infNDCG`, `infNDCG@k`): the Horvitz-Thompson DCG (each judged candidate's
  gain weighted by 1 / its inclusion probability; unbiased for any design) over the ideal DCG
  of the estimated counts per grade, with trec_eval's gains (the grade itself, linear) and
  discount (1 / log2(rank + 1)), the ideal list filled with fractional counts (a count of 2.5
  fills two places and half the third); with integer counts exactly trec_eval's `ndcg` /
  `ndcg_cut_k`. Capped at 1, as the truth is. It is a ratio, biased upwards on thin samples
  (the simulation); an unjudged candidate imputed at its stratum's mean grade was as biased
  and let one model's judged candidates stand in for another's (the strata are shared).
- The same metrics from the citations alone (`cited`: AP, P@k, nDCG as trec_eval and ranx
  compute them from the qrels) beside each inferred value.
- The relevant candidates the citations miss per query (`missed`: the Horvitz-Thompson
  total over the frame) with the stratified sample's variance and a normal interval.
- Each model's mean and each pair's difference over these values, with their intervals and
  what they support about a pair's order: pipeline/judging/intervals.py.

The cut-offs are those of the report's metric sets (glossary.METRIC_SETS: large-scale's R@30,
MDCR's R@5, BEIR's nDCG@10 and R@100): CUTOFFS. A drawn pair the judgments lack (an assessor
gave no grade) is taken as not drawn: its stratum's probability is recomputed from the judged
pairs (missing at random, assumed), and counted in a log line; a judgment of a pair the sample
did not draw (another pool's, say) is not used. What is not estimated: relevance outside the
frame (below every named model's depth, or never ranked), and whether the assessor is right
(pipeline/judging/agreement.py measures that).

All sums run over arrays in a fixed order (queries by id as strings, ranks), so the values are
the same whatever the threads.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.annotations import Judgments, Qrels, Run, Sample
from pipeline.core.errors import InputError
from pipeline.core.files import read_parquet
from pipeline.core.repair import Repair
from pipeline.evaluation.variance import LEVEL
from pipeline.glossary import METRIC_SETS
from pipeline.judging.sample import allocate

log = logging.getLogger(__name__)

EPSILON = 1e-5  # trec_eval's INFAP_EPSILON: the share (r + eps) / (n + 2 eps)
# the report's cut-offs: those of its metric sets (R@30, R@5, nDCG@10, R@100)
CUTOFFS = tuple(sorted({int(metric.partition("@")[2]) for name in ("large-scale", "mdcr", "beir")
                        for metric in METRIC_SETS[name] if "@" in metric}))
RELEVANT = 1  # the lowest grade that counts relevant (trec_eval's relevance level)
CITED = 0  # the code of a candidate the qrels judge (a census: every one known)
OUTSIDE = -1  # the code of a candidate neither judged by the qrels nor in the frame


def metric_names(cutoffs: tuple[int, ...] = CUTOFFS) -> list[str]:
    """jkAP (the headline AP), infAP, statAP, infNDCG, then infNDCG@k and infP@k for each
    cut-off."""
    return ["jkAP", "infAP", "statAP", "infNDCG", *(f"infNDCG@{k}" for k in cutoffs),
            *(f"infP@{k}" for k in cutoffs)]


# ---- the estimators on arrays: one row per ranked list, one column per rank -----------------
@dataclass(frozen=True)
class Lists:
    """Ranked lists (one row each: a model's run for one query) as padded arrays.

    code: (L, D) int, per rank: OUTSIDE, CITED, or the stratum h >= 1 of a frame candidate;
    grade: (L, D) int, the known grade (the qrels', or the judged one of a drawn candidate),
      -1 where unknown (not drawn, outside, or past the list's end);
    sizes, judged: (L, H + 1) float, each stratum's candidates N_h in the list's query and
      how many of them are judged, n_h (CITED: the qrels' judged candidates, all known, 1 of
      1); a known candidate of stratum h weighs N_h / n_h (1 / its inclusion probability);
    counts: (L, H + 1, G + 1) float, the judged candidates of each stratum in the query, by
      grade 0..G, whether the list ranks them or not (CITED: the qrels' relevant ones by
      grade); each frame stratum's row sums to n_h (the jackknife deletes from them);
    group: (L,) int, or None for one group: the lists over which infP@k's stand-in share
      is pooled where a list has none of its own (pool_values: one model's queries of a
      pool; the simulation: one data set's pool draw)."""

    code: np.ndarray
    grade: np.ndarray
    sizes: np.ndarray
    judged: np.ndarray
    counts: np.ndarray
    group: np.ndarray | None = None

    # computed once per Lists (the arrays are not changed after it is made): the estimators
    # and the jackknife's replicates read each several times
    @functools.cached_property
    def per(self) -> np.ndarray:
        """(L, H + 1): N_h / n_h, 0 where nothing is judged."""
        return np.divide(self.sizes, self.judged, out=np.zeros(self.sizes.shape),
                         where=self.judged > 0)

    @functools.cached_property
    def weight(self) -> np.ndarray:
        """(L, D): 1 / the inclusion probability of each known candidate, 0 where unknown."""
        at = np.take_along_axis(self.per, np.maximum(self.code, 0), axis=1)
        return np.where(self.grade >= 0, at, 0.0)

    @functools.cached_property
    def totals(self) -> np.ndarray:
        """(L, G): the estimated number of candidates of grade g = 1..G in the query's qrels
        and frame (Horvitz-Thompson: each stratum's judged count times N_h / n_h; the ideal
        DCG's counts, their sum R)."""
        return np.einsum("lh,lhg->lg", self.per, self.counts[:, :, 1:])

    @functools.cached_property
    def relevant_above(self) -> tuple[np.ndarray, np.ndarray]:
        """(L, D) each, per rank: xinfAP's and statAP's estimated relevant candidates ranked
        above it (`_relevant_above`)."""
        known = self.grade >= 0
        return _relevant_above(self, known, known & (self.grade >= RELEVANT))


def _above(flags: np.ndarray) -> np.ndarray:
    """How many of `flags` (booleans) lie strictly above each rank (an exclusive cumulative
    sum), as float64. Counted in int32 (exact, as float64's), then converted: numpy's
    cumulative sum casting booleans to float64 takes about three times as long."""
    counts = np.cumsum(flags, axis=1, dtype=np.int32)
    counts -= flags
    return counts.astype(np.float64)


def _cumulative_discount(top: int) -> np.ndarray:
    """F(i) for i = 0..top: the sum of trec_eval's discounts 1 / log2(r + 1) over r <= i."""
    return np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, top + 2)))])


def _filled(cumulative: np.ndarray, x: np.ndarray) -> np.ndarray:
    """F(x) for real x >= 0: the discounts of the places 1..floor(x), and the fraction of the
    next place's."""
    whole = np.floor(x).astype(np.int64)
    return cumulative[whole] + (x - whole) * (cumulative[whole + 1] - cumulative[whole])


def ideal_dcg(totals: np.ndarray, cut: int | None = None) -> np.ndarray:
    """The ideal DCG of lists whose query has totals[:, g-1] candidates of grade g (real
    counts): the grades in decreasing order, place by place, a fractional count filling part
    of a place; cut at `cut` places (None: all)."""
    grades = np.arange(1, totals.shape[1] + 1, dtype=np.float64)
    upper = np.cumsum(totals[:, ::-1], axis=1)[:, ::-1]  # places taken by grades >= g
    lower = np.concatenate([upper[:, 1:], np.zeros((len(totals), 1))], axis=1)
    if cut is not None:
        upper, lower = np.minimum(upper, cut), np.minimum(lower, cut)
    cumulative = _cumulative_discount(int(math.ceil(upper.max(initial=0.0))) + 1)
    return ((_filled(cumulative, upper) - _filled(cumulative, lower)) * grades).sum(axis=1)


def _relevant_above(lists: Lists, known: np.ndarray, relevant: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per rank, the estimated number of relevant candidates ranked above it: xinfAP's
    (the judged share above in each stratum, smoothed as trec_eval smooths it) and statAP's
    (each judged relevant one above weighted by 1 / its inclusion probability given that the
    candidate at this rank was drawn: (n_h - 1) / (N_h - 1) in its own stratum, n_h / N_h in
    another); a census stratum counts its relevant exactly in both."""
    code = lists.code
    ratio, weighted = np.zeros(code.shape), np.zeros(code.shape)
    for h in range(lists.sizes.shape[1]):
        member = code == h
        if not member.any():
            continue
        m, n, r = _above(member), _above(member & known), _above(member & relevant)
        size, judged = lists.sizes[:, h][:, None], lists.judged[:, h][:, None]
        census = judged == size
        ratio += np.where(census, r, m * (r + EPSILON) / (n + 2 * EPSILON))
        own = np.divide(judged - 1, size - 1, out=np.zeros(size.shape), where=size > 1)
        other = np.divide(judged, size, out=np.zeros(size.shape), where=size > 0)
        given = np.where(member, own, other)
        weighted += np.where(census, r, np.divide(r, given, out=np.zeros(code.shape),
                                                  where=given > 0))
    return ratio, weighted


def _share(lists: Lists) -> np.ndarray:
    """(L, H + 1): each stratum's share of relevant among its judged candidates (0 where
    none is judged)."""
    relevant = lists.counts[:, :, RELEVANT:].sum(axis=2)
    return np.divide(relevant, lists.judged, out=np.zeros(lists.judged.shape),
                     where=lists.judged > 0)


def _point(lists: Lists, cutoffs: tuple[int, ...], names: tuple[str, ...]
           ) -> dict[str, np.ndarray]:
    """The point estimates per list (module doc), before the jackknife: those of the
    families `names` asks for (AP, nDCG, P@k), the others left out."""
    code, grade = lists.code, lists.grade
    length, depth = code.shape
    known = grade >= 0
    relevant = known & (grade >= RELEVANT)
    rank = np.arange(1, depth + 1, dtype=np.float64)
    totals = lists.totals
    out: dict[str, np.ndarray] = {}
    if any(name.endswith("AP") for name in names):
        total = totals.sum(axis=1)
        hits = np.where(relevant, lists.weight, 0.0)
        for name, above in zip(("infAP", "statAP"), lists.relevant_above,
                               strict=True):
            out[name] = np.divide((hits * (1.0 + above) / rank).sum(axis=1), total,
                                  out=np.zeros(length), where=total > 0)
        out["jkAP"] = out["statAP"]  # corrected by list_metrics' jackknife
    group = np.zeros(length, dtype=np.int64) if lists.group is None else lists.group
    if any("NDCG" in name for name in names):
        # Horvitz-Thompson: each judged candidate's gain weighted by 1 / its probability,
        # the list's own judged ones only (no other model's judged share stands in)
        gains = np.where(known, np.maximum(grade, 0), 0) * lists.weight / np.log2(rank + 1)
        for cut in (None, *cutoffs):
            ideal = ideal_dcg(totals, cut)
            # capped at 1, as the truth is: a weight of N_h / n_h can count more than the
            # list holds
            out["infNDCG" if cut is None else f"infNDCG@{cut}"] = np.minimum(1.0, np.divide(
                gains[:, :cut].sum(axis=1), ideal, out=np.zeros(length), where=ideal > 0))
    if any(name.startswith("infP@") for name in names):
        share = _share(lists)
        for cut in cutoffs:
            top = slice(0, cut)
            count = relevant[:, top].sum(axis=1, dtype=np.float64)  # known: exact
            for h in range(1, lists.sizes.shape[1]):
                member = code[:, top] == h
                m = member.sum(axis=1)
                j = (member & known[:, top]).sum(axis=1).astype(np.float64)
                r = (member & relevant[:, top]).sum(axis=1).astype(np.float64)
                # none of the list's own top-k candidates of h judged: the same cell's share
                # over the group's lists, else the stratum's
                seen, found = np.bincount(group, j), np.bincount(group, r)
                pooled = np.divide(found, seen, out=np.full(seen.shape, np.nan),
                                   where=seen > 0)[group]
                fallback = np.where(np.isnan(pooled), share[:, h], pooled)
                count += (m - j) * np.divide(r, j, out=fallback, where=j > 0)
            out[f"infP@{cut}"] = count / cut
    return out


JACKKNIFED = ("jkAP",)  # the metrics whose ratio bias the jackknife corrects
PAIR_CELLS = 2_000_000  # the delete-two replicates computed at once: bounded memory


@dataclass(frozen=True)
class _Terms:
    """statAP of each list split around one frame stratum h (`_terms`), so that the estimate
    with any judged candidates of h left out is a few sums (`_left_out`).

    With w = N_h / n_h the weight of a judged candidate of h and c = (N_h - 1) / (n_h - 1)
    (0 where n_h = 1) the weight of a relevant one of h above another of h, statAP's numerator
    is rest + w (outer + inner + c pairs): outer, over the relevant ranks k outside h, of
    their weight / k times the judged relevant of h above k; inner, over the relevant judged
    ranks k of h, of (1 + the estimated relevant of the other strata above k) / k; pairs, over
    the same, of the judged relevant of h above k / k; rest the terms without h. Its
    denominator is other + w R_h (R_h: the judged relevant of h, ranked or not). Leaving out
    judged candidates a of h (m of n_h left) changes only w, c, R_h and, per candidate, these
    sums by its own terms (`_Items`): below_out (its relevance times the outer weights / k
    ranked below it), own (its inner term), pair (its pairs term plus its relevance times
    the 1 / k of the relevant of h ranked below it); and, for two left out together, the pairs
    term they share, both relevant: 1 / the lower one's rank."""

    rest: np.ndarray  # (L,)
    outer: np.ndarray
    inner: np.ndarray
    pairs: np.ndarray
    other: np.ndarray  # the denominator less stratum h's part
    relevant: np.ndarray  # R_h
    size: np.ndarray  # N_h
    judged: np.ndarray  # n_h


@dataclass(frozen=True)
class _Items:
    """(L, n_max) each: the judged candidates of one stratum per list, the ranked ones first
    in rank order, then those the list does not rank (relevant first); `valid` marks the n_h
    real ones of a row. `rank` is inf for one the list does not rank."""

    valid: np.ndarray
    relevant: np.ndarray
    rank: np.ndarray
    below_out: np.ndarray
    own: np.ndarray
    pair: np.ndarray


def _suffix(values: np.ndarray) -> np.ndarray:
    """sum of `values` strictly after each rank (an exclusive reversed cumulative sum)."""
    return values.sum(axis=1, keepdims=True) - np.cumsum(values, axis=1)


def _terms(lists: Lists, h: int, numerator: np.ndarray, above: np.ndarray
           ) -> tuple[_Terms, _Items]:
    """statAP of each list split around stratum h (`_Terms`), and its judged candidates'
    own terms (`_Items`); `numerator` and `above` are statAP's (`_stat_parts`)."""
    code, grade = lists.code, lists.grade
    depth = code.shape[1]
    rank = np.arange(1, depth + 1, dtype=np.float64)
    known = grade >= 0
    relevant = known & (grade >= RELEVANT)
    member = code == h
    size, judged = lists.sizes[:, h], lists.judged[:, h]
    weight = np.divide(size, judged, out=np.zeros(size.shape), where=judged > 0)
    own_given = np.divide(judged - 1, size - 1, out=np.zeros(size.shape), where=size > 1)
    c = np.divide(1.0, own_given, out=np.zeros(size.shape), where=own_given > 0)
    mine = _above(member & relevant)  # judged relevant of h above each rank
    hits = np.where(relevant, lists.weight, 0.0)
    out_w = np.where(member, 0.0, hits / rank)  # outer weights: relevant ranks outside h
    in_w = np.where(member & relevant, 1.0 / rank, 0.0)
    others = above - c[:, None] * mine  # the other strata's estimated relevant above
    outer = (out_w * mine).sum(axis=1)
    inner = (in_w * (1.0 + others)).sum(axis=1)
    pairs = (in_w * mine).sum(axis=1)
    rest = numerator - weight * (outer + inner + c * pairs)
    r_h = lists.counts[:, h, RELEVANT:].sum(axis=1)
    total = lists.totals.sum(axis=1)
    terms = _Terms(rest, outer, inner, pairs, total - weight * r_h, r_h, size, judged)

    # the items: the ranked judged ones of h, in rank order, then the unranked
    ranked = member & known
    count = ranked.sum(axis=1)
    width = max(int(judged.max(initial=0)), 1)
    rows, cols = np.nonzero(ranked)
    slot = (np.cumsum(ranked, axis=1) - 1)[rows, cols]
    shape = (len(code), width)
    rel = np.zeros(shape, dtype=bool)
    at = np.full(shape, np.inf)
    below_out, own, pair = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    is_rel = relevant[rows, cols]
    rel[rows, slot] = is_rel
    at[rows, slot] = rank[cols]
    below_out[rows, slot] = np.where(is_rel, _suffix(out_w)[rows, cols], 0.0)
    own[rows, slot] = (in_w * (1.0 + others))[rows, cols]
    pair[rows, slot] = ((in_w * mine) + np.where(relevant, _suffix(in_w), 0.0))[rows, cols]
    # the unranked: the relevant ones (R_h less the ranked relevant) first
    unranked_rel = r_h - (ranked & relevant).sum(axis=1)
    k = np.arange(width)[None, :] - count[:, None]
    rel |= (k >= 0) & (k < unranked_rel[:, None])
    valid = np.arange(width)[None, :] < judged[:, None]
    return terms, _Items(valid, rel & valid, at, below_out, own, pair)


def _left_out(terms: _Terms, m: np.ndarray, outer: np.ndarray, inner: np.ndarray,
              pairs: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """statAP with candidates of the stratum left out, m of its n_h judged kept: `outer`,
    `inner`, `pairs` the sums less the left-out candidates' terms, `relevant` the judged
    relevant kept (each broadcast against the lists' axis first)."""
    size = terms.size.reshape((-1,) + (1,) * (m.ndim - 1))
    w = np.divide(size, m, out=np.zeros(np.broadcast_shapes(size.shape, m.shape)), where=m > 0)
    own_given = np.divide(m - 1, size - 1, out=np.zeros(w.shape), where=size > 1)
    c = np.divide(1.0, own_given, out=np.zeros(w.shape), where=own_given > 0)
    expand = (-1,) + (1,) * (m.ndim - 1)
    numerator = terms.rest.reshape(expand) + w * (outer + inner + c * pairs)
    total = terms.other.reshape(expand) + w * relevant
    return np.divide(numerator, total, out=np.zeros(np.broadcast_shapes(numerator.shape,
                                                                        total.shape)),
                     where=total > 0)


def _stat_parts(lists: Lists) -> tuple[np.ndarray, np.ndarray]:
    """statAP's numerator per list and, per rank, its estimated relevant above (`_point`)."""
    known = lists.grade >= 0
    relevant = known & (lists.grade >= RELEVANT)
    rank = np.arange(1, lists.code.shape[1] + 1, dtype=np.float64)
    above = lists.relevant_above[1]
    hits = np.where(relevant, lists.weight, 0.0)
    return (hits * (1.0 + above) / rank).sum(axis=1), above


def _pair_mean(terms: _Terms, items: dict[str, np.ndarray]) -> np.ndarray:
    """Per list of `terms`: the mean over the pairs of its stratum's judged candidates
    (`items`, _Items' fields) of statAP with both left out."""
    a = {f: v[:, :, None] for f, v in items.items()}
    b = {f: v[:, None, :] for f, v in items.items()}
    shared = np.where(a["relevant"] & b["relevant"],
                      1.0 / np.maximum(a["rank"], b["rank"]), 0.0)
    two = _left_out(terms, terms.judged[:, None, None] - 2,
                    terms.outer[:, None, None] - a["below_out"] - b["below_out"],
                    terms.inner[:, None, None] - a["own"] - b["own"],
                    terms.pairs[:, None, None] - a["pair"] - b["pair"] + shared,
                    terms.relevant[:, None, None] - a["relevant"] - b["relevant"])
    width = two.shape[1]
    upper = np.triu(np.ones((width, width), dtype=bool), 1)[None]
    counted = upper & a["valid"] & b["valid"]
    total = np.where(counted, two, 0.0).sum(axis=(1, 2))
    return total / (terms.judged * (terms.judged - 1) / 2)


def replicate_means(lists: Lists, active: np.ndarray, second: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(L, H + 1) each: the mean over the judged candidates a of each `active` stratum of
    statAP with a left out, and the mean over the pairs of them of statAP with both left
    out (in the strata of `second`; 0 elsewhere). Closed form (`_Terms`): every replicate is
    the full sample's sums less its candidates' own terms, so all n_h and n_h (n_h - 1) / 2 of
    them are computed at once, (L, n, n) arrays per stratum, without recomputing statAP; the
    same values as recomputing it per replicate, to float rounding (tests/judging)."""
    length, strata = lists.sizes.shape
    ones, twos = np.zeros((length, strata)), np.zeros((length, strata))
    numerator, above = _stat_parts(lists)
    for h in range(1, strata):
        if not active[:, h].any():
            continue
        terms, items = _terms(lists, h, numerator, above)
        n = terms.judged[:, None]
        r = items.relevant.astype(np.float64)
        one = _left_out(terms, n - 1, terms.outer[:, None] - items.below_out,
                        terms.inner[:, None] - items.own, terms.pairs[:, None] - items.pair,
                        terms.relevant[:, None] - r)
        ones[:, h] = np.where(active[:, h], np.where(items.valid, one, 0.0).sum(axis=1)
                              / np.maximum(terms.judged, 1), 0.0)
        rows = np.flatnonzero(second[:, h])
        # the pairs of a few lists at a time: (lists, n, n) arrays of PAIR_CELLS at most
        step = max(1, PAIR_CELLS // max(int(terms.judged.max(initial=1)) ** 2, 1))
        for start in range(0, len(rows), step):
            keep = rows[start:start + step]
            twos[keep, h] = _pair_mean(
                _Terms(*(getattr(terms, f)[keep] for f in _Terms.__dataclass_fields__)),
                {f: getattr(items, f)[keep] for f in _Items.__dataclass_fields__})
    return ones, twos


def _jackknife(lists: Lists, point: np.ndarray) -> np.ndarray:
    """jkAP: statAP (`point`) corrected for its bias by the stratified jackknife (Quenouille
    1956; Jones 1974; Schucany, Gray & Owen 1971; module doc): theta + sum_h w1_h (mean_j
    theta_(hj) - theta) + w2_h (mean_jk theta_(hjk) - theta), theta_(hj) statAP with the j-th
    judged candidate of stratum h left out, theta_(hjk) with the j-th and k-th (where n_h >=
    3), the weights `_weights`' (with 2 judged: w1 = -(n_h - 1)(1 - n_h / N_h), the delete-one
    jackknife with the finite-population factor); a stratum with fewer than 2 judged, or
    judged whole, is left as it is. The replicates' means in closed form
    (`replicate_means`)."""
    sizes, judged = lists.sizes, lists.judged
    active = (judged >= 2) & (judged < sizes)
    active[:, CITED] = False
    second = active & (judged >= 3)
    ones, twos = replicate_means(lists, active, second)
    one, two = _weights(sizes, judged, active)
    shift = one * (ones - point[:, None]) + np.where(second, two * (twos - point[:, None]), 0.0)
    return point + shift.sum(axis=1)


def _weights(sizes: np.ndarray, judged: np.ndarray, active: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """(L, H + 1) each: the weights w1, w2 of the delete-one and delete-two replicates' means
    (less the estimate) in each `active` stratum's correction. The estimate's bias taken as a
    polynomial in x = 1/m - 1/N_h (m judged of N_h; x = 0: no bias), the weights extrapolate
    the estimates at m = n_h, n_h - 1 and n_h - 2 to x = 0 (Lagrange): with 2 judged, a line
    (w1 = -(n_h - 1)(1 - n_h / N_h), the delete-one jackknife, w2 = 0); with 3 or more, a
    parabola (the second-order jackknife: Schucany, Gray & Owen 1971, "On bias reduction in
    estimation")."""
    n = np.where(active, judged, 4.0)
    size = np.where(active, sizes, 5.0)
    second = active & (judged >= 3)
    with np.errstate(divide="ignore", invalid="ignore"):  # x2 where n = 2: not read
        x0, x1, x2 = (1 / (n - k) - 1 / size for k in (0, 1, 2))
        w1 = np.where(second, x0 * x2 / ((x1 - x0) * (x1 - x2)), -x0 / (x1 - x0))
        w2 = np.where(second, x0 * x1 / ((x2 - x0) * (x2 - x1)), 0.0)
    return np.where(active, w1, 0.0), np.where(active, w2, 0.0)


def list_metrics(lists: Lists, cutoffs: tuple[int, ...] = CUTOFFS,
                 names: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """Each metric of `names` (default `metric_names(cutoffs)`) per list (module doc): the
    point estimates, and the jackknife's correction for those of JACKKNIFED."""
    names = tuple(metric_names(cutoffs)) if names is None else names
    point = _point(lists, cutoffs, names)
    for name in JACKKNIFED:
        if name in names:
            point[name] = _jackknife(lists, point["statAP"])
    return {name: point[name] for name in names}


# ---- frames: a pool's qrels, runs, judgments and sample -> per-query values -----------------
def _strings(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col("query", "doc").cast(pl.String))


@dataclass(frozen=True)
class Design:
    """One pool's judged sample, per query (ids as strings): `frame` (query, doc, h: the
    stratum's number from 1, grade: the judged grade of a drawn and judged candidate, else
    null, weight: 1 / the stratum's probability for it, else 0), `strata` (query, h, size,
    judged, census), `totals` (query, one column per grade 1..G: the estimated count), the
    strata's labels and the qrels (query, doc, rel)."""

    frame: pl.DataFrame
    strata: pl.DataFrame
    totals: pl.DataFrame
    labels: list[str]
    qrels: pl.DataFrame


def _stratum_numbers(labels: list[str]) -> pl.Expr:
    """Each sample row's stratum as its number from 1 (Int32). A sample of no stratum (a
    judged-only pool's: every candidate judged, nothing drawn) maps nothing: polars would type
    an empty mapping's result as the labels' text, and the lists' arrays index by it."""
    if not labels:
        return pl.lit(None, dtype=pl.Int32)
    return pl.col("stratum").replace_strict(labels, list(range(1, len(labels) + 1)),
                                            return_dtype=pl.Int32)


def design(qrels: pl.DataFrame, judgments: pl.DataFrame, sample: pl.DataFrame) -> Design:
    """The judged sample of one pool: `sample` (sample.py's frame) with the grades of
    `judgments` (query, doc, grade) for its drawn pairs, each stratum's probability
    recomputed from the pairs judged (module doc), and each query's estimated count per grade:
    `qrels`' (query, doc, rel) relevant, plus sum of 1 / probability over the judged drawn
    candidates of each grade."""
    qrels, sample, judgments = _strings(qrels), _strings(sample), _strings(judgments)
    labels = sorted(sample["stratum"].unique().to_list(),
                    key=lambda label: int(label.split("-")[0]))
    grades = judgments.select("query", "doc", given=pl.col("grade").cast(pl.Int64))
    frame = (sample.select("query", "doc", "sampled",
                           h=_stratum_numbers(labels))
             .join(grades, on=["query", "doc"], how="left")
             .with_columns(grade=pl.when(pl.col("sampled")).then(pl.col("given"))))
    lacking = frame.filter(pl.col("sampled") & pl.col("grade").is_null()).height
    if lacking:
        log.warning(f"[inferred] {lacking} drawn pairs have no judgment: taken as not drawn, "
                    "their strata's probabilities recomputed from the judged pairs")
    strata = (frame.group_by("query", "h")
              .agg(size=pl.len(), judged=pl.col("grade").is_not_null().sum())
              .with_columns(census=pl.col("judged") == pl.col("size"))
              .sort("query", "h"))
    empty = strata.filter(pl.col("judged") == 0).height
    if empty:
        log.warning(f"[inferred] {empty} strata of a query have no judged pair: their "
                    "candidates cannot be weighted and count as not relevant (give SAMPLE "
                    "at least the number of strata, and judge every drawn pair)")
    frame = (frame.join(strata, on=["query", "h"])
             .with_columns(weight=pl.when(pl.col("grade").is_not_null())
                           .then(pl.col("size") / pl.col("judged")).otherwise(0.0))
             .select("query", "doc", "h", "grade", "weight").sort("query", "doc"))
    top = max(int(frame["grade"].max() or 0), int(qrels["rel"].max() or 0), RELEVANT)
    counted = pl.concat([
        qrels.filter(pl.col("rel") >= RELEVANT).select("query", grade="rel",
                                                       weight=pl.lit(1.0)),
        frame.filter(pl.col("grade") >= RELEVANT).select("query", "grade", "weight")],
        how="vertical_relaxed")
    sums = (counted.group_by("query", "grade").agg(pl.col("weight").sort().sum())
            .join(counted["query"].unique().sort().to_frame().with_row_index("row"),
                  on="query"))
    table = np.zeros((sums["row"].max() + 1 if sums.height else 0, top))
    table[sums["row"].to_numpy(), sums["grade"].to_numpy() - 1] = sums["weight"].to_numpy()
    totals = pl.DataFrame({"query": counted["query"].unique().sort(),
                           **{str(g): table[:, g - 1] for g in range(1, top + 1)}},
                          schema={"query": pl.String, **dict.fromkeys(
                              map(str, range(1, top + 1)), pl.Float64)})
    return Design(frame, strata, totals, labels, qrels.select("query", "doc", "rel"))


def _lists(run: pl.DataFrame, queries: pl.Series, found: Design, cited_only: bool) -> Lists:
    """The lists of `run` (query, doc, rank) for `queries` (sorted), as arrays; `cited_only`:
    the sample left out (the citations alone, everything else not relevant)."""
    position = pl.DataFrame({"query": queries,
                             "row": pl.int_range(len(queries), eager=True, dtype=pl.Int64)})
    ranked = (_strings(run).join(position, on="query")
              .sort("row", "rank", "doc")
              .with_columns(place=pl.int_range(pl.len(), dtype=pl.Int64).over("row")))
    depth = max(int(ranked["place"].max() or 0) + 1, max(CUTOFFS))
    ranked = ranked.join(found.qrels, on=["query", "doc"], how="left")
    if cited_only:
        ranked = ranked.with_columns(h=pl.lit(None, pl.Int32), grade=pl.lit(None, pl.Int64))
    else:
        ranked = ranked.join(found.frame.select("query", "doc", "h", "grade"),
                             on=["query", "doc"], how="left")
    ranked = ranked.with_columns(
        code=pl.when(pl.col("rel").is_not_null()).then(CITED)
        .when(pl.col("h").is_not_null()).then(pl.col("h")).otherwise(OUTSIDE),
        known=pl.coalesce(pl.col("rel").cast(pl.Int64), pl.col("grade"), pl.lit(-1)))
    flat = (ranked["row"].to_numpy() * depth + ranked["place"].to_numpy())
    shape = (len(queries), depth)
    code = np.full(shape, OUTSIDE, dtype=np.int32)
    grade = np.full(shape, -1, dtype=np.int64)
    code.flat[flat] = ranked["code"].to_numpy()
    grade.flat[flat] = ranked["known"].to_numpy()
    # a stratum no candidate of a query is in: 1 of 1 (never read); CITED: a census
    sizes = np.ones((len(queries), len(found.labels) + 1))
    judged = np.ones((len(queries), len(found.labels) + 1))
    top = max(found.totals.width - 1, RELEVANT)
    counts = np.zeros((len(queries), len(found.labels) + 1, top + 1))
    relevant = (found.qrels.filter(pl.col("rel") >= RELEVANT)
                .select("query", h=pl.lit(CITED, pl.Int64), grade=pl.col("rel").cast(pl.Int64)))
    if not cited_only:
        strata = found.strata.join(position, on="query")
        rows, h = strata["row"].to_numpy(), strata["h"].to_numpy()
        sizes[rows, h] = strata["size"].to_numpy()
        judged[rows, h] = strata["judged"].to_numpy()
        drawn = (found.frame.filter(pl.col("grade").is_not_null())
                 .select("query", pl.col("h").cast(pl.Int64), pl.col("grade").cast(pl.Int64)))
        relevant = pl.concat([relevant, drawn])
    table = relevant.group_by("query", "h", "grade").len().join(position, on="query")
    counts[table["row"].to_numpy(), table["h"].to_numpy(),
           table["grade"].to_numpy()] = table["len"].to_numpy()
    return Lists(code, grade, sizes, judged, counts)


def evaluated_queries(found: Design) -> pl.Series:
    """The queries with an estimated relevant candidate (a relevant citation or a judged
    relevant drawn one), sorted as strings: the others have no AP to estimate."""
    return found.totals.filter(pl.sum_horizontal(pl.exclude("query")) > 0)["query"].sort()


VALUE_SCHEMA = {"pool": pl.String, "model": pl.String, "query": pl.String, "metric": pl.String,
                "cited": pl.Float64, "inferred": pl.Float64}


def pool_values(pool: str, qrels: pl.DataFrame, runs: Mapping[str, pl.DataFrame],
                judgments: pl.DataFrame, sample: pl.DataFrame,
                cutoffs: tuple[int, ...] = CUTOFFS) -> pl.DataFrame:
    """One pool's per-query values (VALUE_SCHEMA): for each model of `runs` (model -> query,
    doc, rank) and evaluated query, each metric from the citations alone and inferred with
    the judged sample (`sample`: the pool's, sample.py; `judgments`: query, doc, grade)."""
    found = design(qrels, judgments, sample.filter(pl.col("pool") == pool)
                   if "pool" in sample.columns else sample)
    queries = evaluated_queries(found)
    parts = []
    for model in sorted(runs):
        columns = {}
        for kind, cited_only in (("cited", True), ("inferred", False)):
            values = list_metrics(_lists(runs[model], queries, found, cited_only), cutoffs)
            columns[kind] = values
        for metric in metric_names(cutoffs):
            parts.append(pl.DataFrame({"pool": pool, "model": model, "query": queries,
                                       "metric": metric, "cited": columns["cited"][metric],
                                       "inferred": columns["inferred"][metric]},
                                      schema=VALUE_SCHEMA))
    return pl.concat(parts) if parts else pl.DataFrame(schema=VALUE_SCHEMA)


# ---- how many relevant candidates the citations miss ----------------------------------------
MISSED_SCHEMA = {"pool": pl.String, "query": pl.String, "cited": pl.Int64,
                 "frame": pl.Int64, "judged": pl.Int64, "found": pl.Int64,
                 "missed": pl.Float64, "se": pl.Float64, "low": pl.Float64,
                 "high": pl.Float64}


def missed(pool: str, qrels: pl.DataFrame, judgments: pl.DataFrame, sample: pl.DataFrame,
           level: float = LEVEL) -> pl.DataFrame:
    """Per query of one pool (MISSED_SCHEMA): the relevant citations, the frame's size, the
    judged drawn candidates, the relevant ones found among them, and the estimated number of
    relevant frame candidates (the citations miss them): sum of 1 / probability over those
    found (Horvitz-Thompson), its standard error from the stratified sample's variance, sum
    over strata of N^2 (1 - n/N) s^2 / n (s^2: the relevant share's sample variance in the
    stratum; with one judged candidate, its bound 1/4), and a normal `level` interval clipped
    to what the judged pairs prove (at least those found, at most the frame less those judged
    not relevant)."""
    from scipy.stats import norm

    found = design(qrels, judgments, sample.filter(pl.col("pool") == pool)
                   if "pool" in sample.columns else sample)
    judged = found.frame.filter(pl.col("grade").is_not_null()).with_columns(
        hit=(pl.col("grade") >= RELEVANT).cast(pl.Float64))
    per_stratum = (judged.group_by("query", "h")
                   .agg(found=pl.col("hit").sum(), share_var=pl.col("hit").var(ddof=1))
                   .join(found.strata, on=["query", "h"], how="right")
                   .with_columns(pl.col("found").fill_null(0.0))
                   .with_columns(
                       estimate=pl.when(pl.col("judged") > 0)
                       .then(pl.col("found") * pl.col("size") / pl.col("judged")).otherwise(0.0),
                       variance=pl.when(pl.col("judged") > 0).then(
                           pl.col("size") ** 2 * (1 - pl.col("judged") / pl.col("size"))
                           * pl.col("share_var").fill_null(0.25) / pl.col("judged"))
                       .otherwise(0.0)))
    z = float(norm.ppf((1 + level) / 2))
    cited = (found.qrels.filter(pl.col("rel") >= RELEVANT).group_by("query")
             .agg(cited=pl.len().cast(pl.Int64)))
    out = (per_stratum.group_by("query")
           .agg(frame=pl.col("size").sum().cast(pl.Int64),
                judged=pl.col("judged").sum().cast(pl.Int64),
                found=pl.col("found").sum().cast(pl.Int64),
                missed=pl.col("estimate").sort().sum(), se=pl.col("variance").sort().sum().sqrt())
           .join(judged.group_by("query").agg(negative=(pl.col("hit") == 0).sum()),
                 on="query", how="left")
           .join(cited, on="query", how="full", coalesce=True)
           .with_columns(pl.col("cited", "frame", "judged", "found").fill_null(0),
                         pl.col("missed", "se").fill_null(0.0),
                         pl.col("negative").fill_null(0))
           .with_columns(low=pl.max_horizontal(pl.col("missed") - z * pl.col("se"),
                                               pl.col("found")),
                         high=pl.min_horizontal(pl.col("missed") + z * pl.col("se"),
                                                pl.col("frame") - pl.col("negative")))
           .with_columns(pl.lit(pool).alias("pool")))
    return out.select(*MISSED_SCHEMA).cast(MISSED_SCHEMA).sort("query")


# ---- where jkAP is known to be biased: strata judged more thinly than the simulation needed ---
# Measured by simulation in three worlds (tests/judging/simulation.py's WORLDS: dense; sparse;
# flat, relevance as rare and no likelier high in the models' ranks than low) at 2-20% of every
# stratum and SAMPLE 4 to 40 (benchmarks/jkap_flag.py, benchmarks/results/jkap_flag.md;
# docs/evaluation.md). The judged pairs per query (the mean over a pool's queries) a stratum
# needs: 4 in each above the deepest (with 2 or 3 judged there jkAP read low: statAP's
# same-stratum pairs need 4 for the jackknife's second order), and 12 in the deepest (where the
# relevant are rare, R is mostly the few drawn ones weighted N / n and jkAP reads high: in the
# flat world +0.010 with SAMPLE 24's 11 there, within 0.01 with SAMPLE 30's 13 to 14). A
# stratum of fewer candidates needs them all (judged whole it is exact). JK_BIAS: the bias
# -+ 2 Monte Carlo errors of every flagged design in every world lies within it (rounded out to
# 0.005), what the report's flag states; JK_WITHIN_SAMPLE: the smallest SAMPLE from which every
# simulated SAMPLE kept jkAP within 0.01 (|bias| + 2 MC errors) in every world. A test holds
# these to the committed figures (tests/judging/test_jkap_flag.py).
JK_NEEDED = 4
JK_NEEDED_DEEPEST = 12
JK_BIAS = (-0.015, 0.045)
JK_WITHIN_SAMPLE = 30


@dataclass(frozen=True)
class ThinStratum:
    """A stratum judged more thinly than jkAP needed in the simulation: its label, the mean
    judged pairs per query, the mean needed (JK_NEEDED or JK_NEEDED_DEEPEST, at most the
    stratum's candidates), and whether it is the deepest (where jkAP reads high, not low)."""

    label: str
    judged: float
    needed: float
    deepest: bool


def _strata_matrix(found: Design) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(sizes, judged): queries x strata arrays of the design's strata (0 where a query has
    none of a stratum), and the strata's upper edges (from their labels, '11-30': 30)."""
    edges = tuple(int(label.split("-")[1]) for label in found.labels)
    queries = found.strata["query"].unique().sort()
    rows = found.strata.join(pl.DataFrame({"query": queries, "row": np.arange(len(queries))}),
                             on="query")
    sizes = np.zeros((len(queries), len(edges)), dtype=np.int64)
    judged = np.zeros(sizes.shape, dtype=np.int64)
    at = (rows["row"].to_numpy(), rows["h"].to_numpy() - 1)
    sizes[at], judged[at] = rows["size"].to_numpy(), rows["judged"].to_numpy()
    return sizes, judged, edges


def _needed(sizes: np.ndarray) -> np.ndarray:
    """Per query and stratum (the last axis), the judged pairs jkAP needed (module
    constants, at most the stratum's candidates)."""
    need = np.full(sizes.shape[-1], JK_NEEDED)
    need[-1] = JK_NEEDED_DEEPEST
    return np.minimum(sizes, need)


def thin_mask(sizes: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """Per stratum, whether a pool's judged pairs fall short of what jkAP needs (the mean
    over its queries: `thin_strata`'s rule): `sizes` and `judged` (..., queries, strata),
    the result (..., strata); the simulation asks it of every simulated pool at once."""
    return judged.sum(axis=-2) < _needed(sizes).sum(axis=-2)


def thin_strata(found: Design) -> list[ThinStratum]:
    """The strata of a pool's judged sample whose judged pairs per query (the mean over its
    queries) fall short of what jkAP needed in the simulation (JK_NEEDED above the deepest,
    JK_NEEDED_DEEPEST in it): there the report flags jkAP (docs/evaluation.md)."""
    sizes, judged, _ = _strata_matrix(found)
    if not len(sizes):
        return []
    need, short = _needed(sizes), thin_mask(sizes, judged)
    deepest = len(found.labels) - 1
    return [ThinStratum(label, float(judged[:, h].mean()), float(need[:, h].mean()),
                        h == deepest)
            for h, label in enumerate(found.labels) if short[h]]


def sample_for_jkap(found: Design) -> int:
    """The smallest SAMPLE (pairs per query) whose draws, spread over this pool's strata as
    sample.py's `allocate` spreads them, give every stratum the judged pairs per query jkAP
    needed (`thin_strata` empty, every drawn pair judged)."""
    sizes, _, edges = _strata_matrix(found)
    if not len(sizes):
        return len(edges)
    need = _needed(sizes).sum(axis=0)
    for n in range(len(edges), int(sizes.sum(axis=1).max()) + 1):
        if (allocate(sizes, n, edges).sum(axis=0) >= need).all():
            return n
    return int(sizes.sum(axis=1).max())  # every candidate drawn: a census (never reached)


def jkap_thin(pool: str, qrels: pl.DataFrame, judgments: pl.DataFrame, sample: pl.DataFrame
              ) -> tuple[list[ThinStratum], int]:
    """One pool's strata that jkAP finds too thin (`thin_strata`) and the SAMPLE that would
    avoid them (`sample_for_jkap`), from the same design `pool_values` estimates with."""
    found = design(qrels, judgments, sample.filter(pl.col("pool") == pool)
                   if "pool" in sample.columns else sample)
    return thin_strata(found), sample_for_jkap(found)


# ---- the API: one run of one pool, as ranx scores one run -------------------------------------
SAMPLE_COLUMNS = ("query", "doc", "stratum", "sampled")
# what to give where a sample's file cannot be read
SAMPLE_FILE = Repair("", note="give the file draw_sample's frame was written to")


def _as_judgments(judgments: Any) -> pl.DataFrame:
    """Judgments (query, doc, grade) from any form `score` takes qrels in, or a DataFrame with
    a `grade` column (the judgments artifact's); a negative grade refused."""
    from pipeline.evaluation.score import as_qrels

    if isinstance(judgments, pl.DataFrame) and "grade" in judgments.columns and not (
            {"relevance", "rel"} & set(judgments.columns)):
        judgments = judgments.rename({"grade": "relevance"})
    frame = as_qrels(judgments, "judgments")
    negative = frame.filter(pl.col("rel") < 0)
    if negative.height:
        query, doc, grade = negative.row(0)
        raise InputError(f"judgments: query {query}, document {doc} has the grade {grade}: "
                         "give grades of 0 (not relevant) or more, such as 0 to 3")
    return frame.select("query", "doc", grade="rel")


def _as_sample(sample: Any) -> pl.DataFrame:
    """A sample (sample.py's frame, or its parquet file) of one pool."""
    if isinstance(sample, (str, Path)) or hasattr(sample, "__fspath__"):
        path = Path(sample)
        if not path.is_file():
            raise InputError(f"sample {str(path)!r} is not a file: give the sample's parquet "
                             "file or its DataFrame (pipeline.judging.sample.draw_sample)")
        sample = read_parquet(path, repair=SAMPLE_FILE)
    if not isinstance(sample, pl.DataFrame):
        raise InputError(f"sample: {type(sample).__name__} is not a sample: give its parquet "
                         "file or a polars DataFrame")
    lacking = [c for c in SAMPLE_COLUMNS if c not in sample.columns]
    if lacking:
        raise InputError(f"sample: no column {', '.join(lacking)}: give draw_sample's frame "
                         f"(columns {', '.join(SAMPLE_COLUMNS)}, ...)")
    if "pool" in sample.columns and sample["pool"].n_unique() > 1:
        pools = sorted(sample["pool"].unique().to_list())
        raise InputError(f"sample: it holds {len(pools)} pools ({', '.join(pools[:3])}...): "
                         "give one pool's rows, those of the run's pool")
    return sample


def inferred(qrels: Qrels, run: Run, judgments: Judgments, sample: Sample, *,
             per_query: bool = False) -> dict[str, float] | pl.DataFrame:
    """`run` scored against the citation `qrels` and a judged `sample` (ranx's order: the
    qrels first), writing nothing: {metric: mean over the evaluated queries} of jkAP, infAP,
    statAP, infNDCG, infNDCG@k and infP@k at CUTOFFS (module doc), or with `per_query=True` a
    DataFrame (query, one column per metric). `qrels` and `run` in any form `score` takes;
    `judgments`: a DataFrame (query, doc, grade: the judgments artifact) or any qrels form;
    `sample`: one pool's sample (sample.py), a DataFrame or its parquet file. Its arguments
    are checked at the API's door (pipeline.inferred), by their annotations."""
    from pipeline.evaluation.score import as_qrels, as_run

    citations = as_qrels(qrels)
    ranked = as_run(run).select("query", "doc", "rank")
    frame = _as_sample(sample)
    values = pool_values(str(frame["pool"][0]) if "pool" in frame.columns and frame.height
                         else "pool", citations, {"run": ranked}, _as_judgments(judgments),
                         frame.drop("pool", strict=False))
    if not values.height:
        raise InputError("inferred: no query has a relevant citation or a judged relevant "
                         "candidate: nothing to score; check that the qrels, the judgments and "
                         "the sample are the run's pool's")
    wide = (values.pivot("metric", index="query", values="inferred")
            .select("query", *metric_names()).sort("query"))
    if per_query:
        return wide
    return {metric: float(wide[metric].mean()) for metric in metric_names()}
