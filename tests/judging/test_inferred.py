"""The estimators (pipeline/judging/inferred.py): simulated under the pipeline's design
(tests/judging/simulation.py), equal to trec_eval's, ir_measures' and trectools' numbers where
they compute the same, and the API's refusals (the pairs' verdicts: test_intervals.py).

Monte Carlo error: a bias is the mean over data sets of (estimate - truth), each data set's
mean over its 30 queries x 3 draws, paired on the same data (only the sample differs); its MC
error is that mean's standard error over the data sets. A coverage's MC error is
sqrt(0.95 x 0.05 / sets): 1.1 points with 400 sets.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import pytrec_eval

import pipeline
from pipeline.core.errors import InputError
from pipeline.evaluation.variance import interval_power
from pipeline.judging.inferred import (
    CUTOFFS,
    JK_BIAS,
    JK_WITHIN_SAMPLE,
    Lists,
    jkap_thin,
    list_metrics,
    metric_names,
    missed,
    pool_values,
    replicate_means,
)
from pipeline.judging.sample import draw_sample
from pipeline.judging.stage import JudgedPool
from pipeline.report.judged import assessor_tables
from tests.judging.simulation import (
    DESIGNS,
    SIZES,
    Design,
    coverages,
    design_seed,
    run,
    summarise,
)

TREC_NAMES = {"jkAP": "map", "infAP": "map", "statAP": "map", "infNDCG": "ndcg",
              **{f"infP@{k}": f"P_{k}" for k in CUTOFFS},
              **{f"infNDCG@{k}": f"ndcg_cut_{k}" for k in CUTOFFS}}
FAST_SETS = 25  # the unit-level simulation: one chunk, about 10 s on 2 quiet cores
SLOW_SETS = 400  # the must-show's, the benchmark's: coverage to 1.1 points of MC error


@pytest.fixture(scope="module")
def thin():
    """SAMPLE 8 (sample.py's allocation, 2 draws at least per stratum): strata sampled at
    about 14%, 8% and 4%."""
    return run(11, FAST_SETS, Design(budget=8))


def _bias(result, size, model, metric):
    error = (result[size, model, "inferred", metric]
             - result[size, model, "truth", metric]).mean(axis=(1, 2))
    return error.mean(), error.std(ddof=1) / np.sqrt(len(error))


def test_jkap_and_precision_at_10_are_unbiased_on_a_thin_sample(thin):
    """8 pairs per query: jkAP (statAP with the stratified jackknife's correction, second
    order where a stratum has 3 judged) and infP@10 within 3 MC errors of the truth in every
    pool size and model, where xinfAP (infAP) is off by 10 and more; the citations alone miss
    much of both (the signal). Every stratum of 2 candidates or more has 2 judged, so the
    jackknife corrects every stratum."""
    for size in SIZES:
        rates = thin[size, -1, "rates", ""].mean(axis=0)
        assert ((rates >= 0.02) & (rates <= 0.20)).all(), rates
        for model in (0, 1):
            for metric, gap in (("jkAP", 0.01), ("infP@10", 0.1)):
                bias, error = _bias(thin, size, model, metric)
                assert abs(bias) <= 3 * error, (size, model, metric, bias, error)
                truth = thin[size, model, "truth", metric].mean()
                assert truth - thin[size, model, "cited", metric].mean() > gap
            bias, error = _bias(thin, size, model, "infAP")
            assert bias > 10 * error and bias > 0.03, (size, model, bias)


def test_the_estimators_speed_ups_give_the_same_bits(monkeypatch):
    """The must-show designs' time (suite time): the exclusive counts above each rank are
    summed in int32 (`_above`) and each Lists' weights, totals and relevant-above counts are
    computed once; the same simulation with the float64 cumulative sum it replaced, each part
    recomputed for every estimator, gives every value bit for bit (a count or a cached part
    that differed would move some of the thousands of values here: 3 data sets of 30 queries
    x 3 draws, two pool sizes, two models, three kinds, the thin design's SAMPLE 8)."""
    import pipeline.judging.inferred as inferred

    fast = run(11, 3, Design(budget=8))
    flags = np.random.default_rng(2).random((50, 700)) < 0.4
    reference = np.cumsum(flags, axis=1, dtype=np.float64) - flags
    assert inferred._above(flags).dtype == np.float64
    np.testing.assert_array_equal(inferred._above(flags), reference)
    monkeypatch.setattr(inferred, "_above", lambda flags: (
        np.cumsum(flags, axis=1, dtype=np.float64) - flags))
    for part in ("per", "weight", "totals", "relevant_above"):  # recomputed on every read
        monkeypatch.setattr(Lists, part, property(getattr(Lists, part).func))
    again = run(11, 3, Design(budget=8))
    assert again.keys() == fast.keys()
    for key, values in fast.items():
        assert values.tobytes() == again[key].tobytes(), key


def test_precision_and_ndcg_estimates_are_bounded_as_the_truth_is(thin):
    """A precision or nDCG estimate is never above 1 for a single query (each unjudged
    candidate counts as its cell's judged share, a share <= 1), and reaches it."""
    for size in SIZES:
        for model in (0, 1):
            for metric in ("infP@10", "infNDCG@10"):
                values = thin[size, model, "inferred", metric]
                assert values.min() >= 0 and values.max() <= 1 + 1e-12, (metric, values.max())
                assert values.max() > 0.9


def _crossed(rng, sets: int, s2_query: float, s2_draw: float, s2_resid: float,
             queries: int = 30, draws: int = 3) -> np.ndarray:
    """`sets` Q x R matrices of the crossed normal model with these components, mean 0."""
    return (rng.normal(0, np.sqrt(s2_query), (sets, queries, 1))
            + rng.normal(0, np.sqrt(s2_draw), (sets, 1, draws))
            + rng.normal(0, np.sqrt(s2_resid), (sets, queries, draws)))


@pytest.mark.parametrize("components", [(0.01, 0.0, 0.01), (0.01, 0.002, 0.002)])
def test_the_coverage_columns_on_the_crossed_normal_model(components):
    """summarise's coverages on 4,000 data sets of 30 x 3 with known components: the report's
    interval covers a true 0 at its expected level (interval_power at the components; above
    95% by construction where the draws share little: the simulation's design), and the
    known-spread interval 95%, each within 3 MC errors; an estimate shifted by one SD of its
    mean (bias) falls well below both, so the columns tell slack from bias."""
    sets, (s2q, s2d, s2e) = 4000, components
    values = _crossed(np.random.default_rng(5), sets, s2q, s2d, s2e)
    got = coverages(values, 0.0)
    level = 1 - interval_power(30, 0.0, s2q, s2d, s2e, 3)
    assert got["expected"] == pytest.approx(level, abs=0.003)  # the components estimated
    assert level > 0.965
    error = np.sqrt(level * (1 - level) / sets)
    assert abs(got["covered"] - got["expected"]) <= 3 * error, got
    assert abs(got["known"] - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / sets), got
    biased = coverages(values + values.mean(axis=(1, 2)).std(ddof=1), 0.0)
    assert biased["known"] < 0.88 and biased["covered"] < got["expected"] - 10 * error, biased


# jkAP's known bias (docs/evaluation.md): at 2%, every stratum 2 judged, the model that
# favours citations reads +0.015 to +0.019 high (10 to 15 MC errors, about 0.6 SD of a data
# set's mean), so an interval from its known spread covers the population mean less than 93%
# of the time. Exempt from the known-spread band, with that bias asserted instead.
JK_BIASED = {("rate 2%", 150, 2), ("rate 2%", 300, 2)}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rate 2%", "rate 20%", "SAMPLE 8"])
def test_the_must_show_at_2_and_20_percent_and_the_budget_design(name):
    """400 data sets, the benchmark's seeds and sets (benchmarks/results/judged_estimators.md
    holds these numbers): infP@10 unbiased within 4 MC errors (48 comparisons in the
    benchmark). Coverage of jkAP and infP@10: the report's interval within 3 MC errors of the
    level it should have at the estimate's components (`expected_coverage`: above 95%, as the
    interval is conservative where the draws share no effect; 8 comparisons a design, so 3
    errors), and the known-spread interval (bias and spread, whatever the report's interval
    does) within 93-97%, plus one MC error, for infP@10 everywhere and for jkAP but JK_BIASED.
    jkAP is not unbiased within its MC error everywhere (docs/evaluation.md says where and why:
    strata with few judged pairs): held to 0.021 at 2% (every stratum 2 judged: the delete-one
    jackknife alone), where the model that favours citations is off by +0.015 and +0.019 (10.1
    and 14.8 MC errors), to 0.009 at SAMPLE 8 (+0.005 and +0.008, 4.5 and 5.6), 0.006 at 20%
    (-0.003 and -0.004, up to 4.2); and nearer the truth than xinfAP or statAP, whose biases it
    replaces. The replicates' closed form keeps this at about 20 s per design on 2 busy cores
    (20 s for 20%, 30 s before the counts in int32 and each list's parts computed once; 408 s
    at 200 sets when statAP was recomputed per replicate)."""
    rows = summarise(run(design_seed(name), SLOW_SETS, DESIGNS[name]),
                     ("jkAP", "infP@10", "infAP", "statAP"))
    bound = {"rate 2%": 0.021, "SAMPLE 8": 0.009, "rate 20%": 0.006}[name]
    for row in rows:
        margin = np.sqrt(0.95 * 0.05 / row["sets"])
        if row["metric"] == "infP@10":
            assert abs(row["bias"]) <= 4 * row["mc_error"], row
        if row["metric"] == "jkAP":
            assert abs(row["bias"]) <= bound, row
            others = [r for r in rows if (r["size"], r["model"]) == (row["size"], row["model"])
                      and r["metric"] in ("infAP", "statAP")]
            assert abs(row["bias"]) < max(abs(r["bias"]) for r in others), (row, others)
        if row["metric"] in ("jkAP", "infP@10"):
            level = row["expected_coverage"]
            assert level > 0.95, row
            assert abs(row["coverage"] - level) <= 3 * np.sqrt(level * (1 - level)
                                                                / row["sets"]), row
            if row["metric"] == "jkAP" and (name, row["size"], row["model"]) in JK_BIASED:
                assert row["bias"] > 5 * row["mc_error"], row  # the exemption's reason holds
                continue
            assert 0.93 - margin <= row["known_coverage"] <= 0.97 + margin, row


def test_jkap_is_flagged_where_a_stratum_is_judged_more_thinly_than_the_simulation_needed():
    """A small judged pool (8 queries): at SAMPLE 8 every stratum has fewer judged pairs per
    query than jkAP needs (4 above the deepest, 12 in it), and the report's means notes say
    so next to jkAP, with the bias range such samples had in the simulation's worlds and the
    SAMPLE from which it stayed within 0.01 there (inferred.JK_BIAS, JK_WITHIN_SAMPLE:
    tests/judging/test_jkap_flag.py), and apart from them the SAMPLE that avoids the flag in
    these pools (a count of pairs, not a bound on the bias); drawn with that SAMPLE the pool
    is not flagged (and with one fewer it still is: the smallest), nor are the notes; a pool
    judged whole (a census) is never flagged."""
    truth, runs, _, qrels = _data()
    pool = "all-1k-r0"

    def judged(n: int) -> JudgedPool:
        sample = draw_sample(pool, qrels, runs, n, seed=1)
        return JudgedPool(pool, tuple(sorted(runs)), sample, _judge(sample, truth), "standin:1",
                          "standin-1", True, qrels, runs)

    thin = judged(8)
    strata, needed = jkap_thin(pool, qrels, thin.judgments, thin.sample)
    assert [s.label for s in strata] == ["1-10", "11-30", "31-100"]
    assert all(s.judged < s.needed for s in strata) and strata[-1].needed == 12
    assert needed > 8
    notes = assessor_tables("c", [thin]).tables[0][4]
    [flag] = [i for i, note in enumerate(notes) if "jkAP may be biased" in note]
    line, bias, avoid = notes[flag:flag + 3]
    assert "4 of 12 in ranks 31-100" in line
    low, high = JK_BIAS
    assert f"from {low:+.3f} to {high:+.3f} off the truth" in bias
    assert f"within 0.01 from SAMPLE {JK_WITHIN_SAMPLE} on" in bias
    # the SAMPLE that avoids the flag here stands apart from the simulation's bias figures
    assert f"SAMPLE={needed} " in avoid and "not a bound on jkAP's bias" in avoid
    assert f"SAMPLE={needed}" not in bias and str(JK_WITHIN_SAMPLE) not in avoid
    line = f"{line} {bias}"
    # the deepest and the top ones thin: both directions named
    assert "low where a stratum above the deepest is thin" in line
    assert "high where the deepest is" in line
    assert [s.deepest for s in strata] == [False, False, True]
    for n, flagged in ((needed - 1, True), (needed, False), (10_000, False)):
        enough = judged(n)
        assert bool(jkap_thin(pool, qrels, enough.judgments, enough.sample)[0]) == flagged, n
        said = " ".join(assessor_tables("c", [enough]).tables[0][4])
        assert ("jkAP may be biased" in said) == flagged


def test_the_jackknife_is_its_delete_one_and_delete_two_replicates():
    """jkAP on one list equals the stratified jackknife computed by hand: every judged
    candidate of a stratum left out in turn (ranked by the list or not), and every pair of
    them, statAP recomputed; per stratum, the estimates at n, n - 1 and n - 2 judged (the
    replicates' means) fitted as a polynomial in x = 1/m - 1/N and read at x = 0: a line
    where 2 are judged (theta - (n - 1)(1 - n / N)(mean - theta)), a parabola where 3 or more;
    a stratum of one judged is left as it is."""
    rng = np.random.default_rng(0)
    depth, strata = 40, 3
    code = np.array([[0, 1, 1, 2, 0, 1, 2, 2, 3, -1] * 4])
    sizes = np.array([[2.0, 14, 16, 20]])
    judged = np.array([[2.0, 5, 2, 1]])  # 1: second order; 2: first; 3: one judged, as it is
    grade = np.full((1, depth), -1)
    counts = np.zeros((1, strata + 1, 4))
    counts[0, 0, 1] = 2
    grade[code == 0] = 1
    for h in (1, 2, 3):
        places = np.flatnonzero(code[0] == h)[: int(judged[0, h]) - 1]  # one judged unranked
        grade[0, places] = rng.integers(0, 3, len(places))
        for g in grade[0, places]:
            counts[0, h, g] += 1
        counts[0, h, 2] += 1  # the unranked one: relevant, grade 2
    grade[0, np.flatnonzero(code[0] == 0)[2:]] = -1  # two citations only
    code[0, np.flatnonzero(code[0] == 0)[2:]] = -1
    lists = Lists(code, grade, sizes, judged, counts)
    theta = list_metrics(lists, (10,), ("statAP",))["statAP"][0]
    shift = 0.0
    for h in (1, 2):
        items = [(place, grade[0, place]) for place in
                 np.flatnonzero((code[0] == h) & (grade[0] >= 0))] + [(None, 2)]
        n, size = judged[0, h], sizes[0, h]
        assert len(items) == n
        ones = np.mean([_replicate(lists, h, [item]) for item in items])
        if n == 2:
            shift -= (n - 1) * (1 - n / size) * (ones - theta)
            continue
        twos = np.mean([_replicate(lists, h, [a, b]) for i, a in enumerate(items)
                        for b in items[i + 1:]])
        x = [1 / m - 1 / size for m in (n, n - 1, n - 2)]
        shift += np.polyval(np.polyfit(x, [theta, ones, twos], 2), 0.0) - theta
    assert abs(shift) > 1e-3
    got = list_metrics(lists, (10,), ("jkAP",))["jkAP"][0]
    assert got == pytest.approx(theta + shift, abs=1e-10)


def _replicate(lists, h, items):
    """statAP with `items` (place or None: one the list does not rank, grade) of stratum h
    left out of the sample."""
    grade, judged, counts = lists.grade.copy(), lists.judged.copy(), lists.counts.copy()
    for place, g in items:
        if place is not None:
            grade[0, place] = -1
        judged[0, h] -= 1
        counts[0, h, g] -= 1
    return list_metrics(Lists(lists.code, grade, lists.sizes, judged, counts), (10,),
                        ("statAP",))["statAP"][0]


def _random_lists(rng, lists=40, depth=60, strata=3):
    """Random lists for the replicates' parity: per stratum 1-12 candidates, some ranked by
    the list and some not, 0 to all of them judged (a census too), grades 0-3; citations
    (stratum 0, a census) at some ranks."""
    code = np.full((lists, depth), -1)
    grade = np.full((lists, depth), -1)
    sizes = np.ones((lists, strata + 1))
    judged = np.ones((lists, strata + 1))
    counts = np.zeros((lists, strata + 1, 4))
    for row in range(lists):
        places = list(rng.permutation(depth))
        for _ in range(int(rng.integers(0, 4))):
            place = places.pop()
            code[row, place], grade[row, place] = 0, int(rng.integers(0, 2))
            counts[row, 0, grade[row, place]] += 1
        for h in range(1, strata + 1):
            size = int(rng.integers(1, 13))
            n = int(rng.choice([0, 1, 2, 3, size, *rng.integers(0, size + 1, 3)]))
            sizes[row, h], judged[row, h] = size, min(n, size)
            grades = np.where(rng.random(size) < 0.5, rng.integers(1, 4, size), 0)
            drawn = rng.permutation(size) < judged[row, h]
            for g in grades[drawn]:
                counts[row, h, g] += 1
            for member in rng.permutation(size)[:int(rng.integers(0, size + 1))]:  # ranked
                place = places.pop()
                code[row, place] = h
                grade[row, place] = grades[member] if drawn[member] else -1
    return Lists(code, grade, sizes, judged, counts)


def test_the_replicates_closed_form_is_statap_recomputed_per_replicate(monkeypatch):
    """replicate_means (every delete-one and delete-two replicate from the full sample's sums
    less the left-out candidates' terms) equals statAP recomputed with each judged candidate,
    and each pair of them, left out, on random lists: ranked and unranked judged candidates,
    strata of 2 and 3 judged (a replicate keeping one), citations above and below."""
    lists = _random_lists(np.random.default_rng(1))
    active = (lists.judged >= 2) & (lists.judged < lists.sizes)
    active[:, 0] = False
    second = active & (lists.judged >= 3)
    ones, twos = replicate_means(lists, active, second)
    checked = shared = 0
    for row in range(len(lists.code)):
        one = Lists(*(getattr(lists, f)[row:row + 1] for f in ("code", "grade", "sizes",
                                                                 "judged", "counts")))
        for h in np.flatnonzero(active[row]):
            ranked = [(int(p), int(one.grade[0, p])) for p in
                      np.flatnonzero((one.code[0] == h) & (one.grade[0] >= 0))]
            left = one.counts[0, h].copy()
            for _, g in ranked:
                left[g] -= 1
            items = ranked + [(None, g) for g in range(4) for _ in range(int(left[g]))]
            assert len(items) == one.judged[0, h]
            expected = np.mean([_replicate(one, h, [item]) for item in items])
            assert ones[row, h] == pytest.approx(expected, rel=1e-10, abs=1e-12)
            if second[row, h]:
                expected = np.mean([_replicate(one, h, [a, b]) for i, a in enumerate(items)
                                    for b in items[i + 1:]])
                assert twos[row, h] == pytest.approx(expected, rel=1e-10, abs=1e-12)
                checked += 1
                # two relevant of the stratum ranked, one above the other, a replicate of 2+
                shared += one.judged[0, h] >= 4 and sum(g >= 1 for _, g in ranked) >= 2
    assert checked >= 10 and shared >= 5 and np.ptp(twos[second]) > 0.1
    # the pairs of one list at a time (bounded memory): the same values
    monkeypatch.setattr("pipeline.judging.inferred.PAIR_CELLS", 1)
    chunked = replicate_means(lists, active, second)
    assert np.array_equal(chunked[0], ones) and np.array_equal(chunked[1], twos)


# ---- equal to the ecosystem's numbers where they compute the same ----------------------------
def _data(seed: int = 3, queries: int = 8, docs: int = 400):
    rng = np.random.default_rng(seed)
    truth = {q: (rng.random(docs) < 0.15) * rng.integers(1, 4, docs) for q in range(queries)}
    runs = {m: pl.concat([pl.DataFrame({"query": q, "doc": rng.permutation(docs)[:250],
                                        "rank": np.arange(1, 251)}) for q in range(queries)])
            for m in ("bm25", "minilm")}
    cited = {q: rng.choice(docs, 5, replace=False) for q in range(queries)}
    qrels = pl.DataFrame({"query": np.repeat(np.arange(queries), 5),
                          "doc": np.concatenate([cited[q] for q in range(queries)]), "rel": 1})
    return truth, runs, cited, qrels


def _judge(sample: pl.DataFrame, truth: dict) -> pl.DataFrame:
    drawn = sample.filter("sampled")
    grades = [int(truth[q][d]) for q, d in drawn.select("query", "doc").iter_rows()]
    return drawn.select("query", "doc").with_columns(grade=pl.Series(grades))


def _nested(run: pl.DataFrame) -> dict:
    return {str(q): {str(d): float(-r) for d, r in zip(g["doc"], g["rank"], strict=True)}
            for (q,), g in run.group_by("query")}


def test_with_every_candidate_judged_the_values_are_the_metrics_of_all_judgments():
    truth, runs, cited, qrels = _data()
    sample = draw_sample("all-1k-r0", qrels, runs, 10_000)  # every frame candidate
    values = pool_values("all-1k-r0", qrels, runs, _judge(sample, truth), sample)
    full = {str(q): {str(d): 1 for d in cited[q]} for q in cited}
    for q, d in sample.select("query", "doc").iter_rows():
        full[str(q)][str(d)] = int(truth[q][d])
    citations = {str(q): {str(d): 1 for d in docs} for q, docs in cited.items()}
    measures = set(TREC_NAMES.values())
    for model, ranked in runs.items():
        got = values.filter(pl.col("model") == model)
        for qrels_, kind in ((full, "inferred"), (citations, "cited")):
            expected = pytrec_eval.RelevanceEvaluator(qrels_, measures).evaluate(_nested(ranked))
            for row in got.iter_rows(named=True):
                assert row[kind] == pytest.approx(
                    expected[row["query"]][TREC_NAMES[row["metric"]]], abs=1e-12), row
    assert values["metric"].unique().sort().to_list() == sorted(metric_names())


def test_with_every_candidate_judged_ir_measures_and_trectools_agree():
    """ir_measures (AP, P@10, nDCG@10) and trectools (its trec_eval-compatible MAP, P@10 and
    NDCG@10) on the full qrels."""
    import ir_measures
    import pandas as pd
    from trectools import TrecEval, TrecQrel, TrecRun

    truth, runs, cited, qrels = _data(seed=4)
    sample = draw_sample("all-1k-r0", qrels, runs, 10_000)
    values = pool_values("all-1k-r0", qrels, runs, _judge(sample, truth), sample)
    rows = [(str(q), str(d), 1) for q in cited for d in cited[q]]
    rows += [(str(q), str(d), int(truth[q][d]))
             for q, d in sample.select("query", "doc").iter_rows()]
    measured = {"infAP": ir_measures.AP, "infP@10": ir_measures.P @ 10,
                "infNDCG@10": ir_measures.nDCG @ 10}
    judged = TrecQrel()
    judged.qrels_data = pd.DataFrame(rows, columns=["query", "docid", "rel"]).assign(q0=0)[
        ["query", "q0", "docid", "rel"]]
    for model, ranked in runs.items():
        got = {(r["query"], r["metric"]): r["inferred"]
               for r in values.filter(pl.col("model") == model).iter_rows(named=True)}
        for metric in ir_measures.iter_calc(list(measured.values()),
                                            [ir_measures.Qrel(*row) for row in rows],
                                            _scored(ranked)):
            name = next(k for k, v in measured.items() if v == metric.measure)
            assert got[metric.query_id, name] == pytest.approx(metric.value, abs=1e-12)
        trec_run = TrecRun()
        trec_run.run_data = pd.DataFrame({
            "query": ranked["query"].cast(str).to_list(), "q0": "Q0",
            "docid": ranked["doc"].cast(str).to_list(), "rank": ranked["rank"].to_list(),
            "score": (-ranked["rank"]).cast(float).to_list(), "system": model})
        evaluation = TrecEval(trec_run, judged)
        for name, table in (("infAP", evaluation.get_map(per_query=True)),
                            ("infP@10", evaluation.get_precision(10, per_query=True)),
                            ("infNDCG@10", evaluation.get_ndcg(10, per_query=True))):
            for query, value in table.iloc[:, -1].items():
                # trectools leaves NaN where nothing relevant is ranked (0 here, as trec_eval)
                assert got[str(query), name] == pytest.approx(
                    0.0 if np.isnan(value) else value, abs=1e-12)


def _scored(ranked: pl.DataFrame) -> list:
    """ir_measures' ScoredDocs of a run (score: minus the rank)."""
    import ir_measures

    return [ir_measures.ScoredDoc(str(q), str(d), float(-r))
            for q, d, r in ranked.select("query", "doc", "rank").iter_rows()]


def test_on_a_uniform_sample_inferred_ap_is_trec_evals_infap():
    """One stratum sampled uniformly, nothing judged outside it: xinfAP is infAP, and equal to
    trec_eval's `infAP` (through pytrec_eval and ir_measures), the undrawn candidates of the
    stratum in its qrels as -1 (pooled, not judged)."""
    import ir_measures

    truth, runs, _, _ = _data(seed=5)
    ranked = runs["bm25"]
    rng = np.random.default_rng(6)
    parts = []
    for q in range(len(truth)):
        docs = ranked.filter(pl.col("query") == q)["doc"].to_numpy()[:200]
        drawn = np.zeros(len(docs), bool)
        drawn[rng.choice(len(docs), 25, replace=False)] = True
        parts.append(pl.DataFrame({"query": q, "doc": docs, "stratum": "1-200",
                                   "sampled": drawn, "probability": 25 / len(docs)}))
    sample = pl.concat(parts)
    none = pl.DataFrame(schema={"query": pl.Int64, "doc": pl.Int64, "rel": pl.Int64})
    values = pool_values("p", none, {"bm25": ranked}, _judge(sample, truth), sample)
    qrels = {}
    for q, d, drawn in sample.select("query", "doc", "sampled").iter_rows():
        qrels.setdefault(str(q), {})[str(d)] = int(truth[q][d]) if drawn else -1
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"infAP"}).evaluate(_nested(ranked))
    listed = {(m.query_id): m.value for m in ir_measures.iter_calc(
        [ir_measures.infAP], [ir_measures.Qrel(q, d, g) for q, docs in qrels.items()
                              for d, g in docs.items()],
        _scored(ranked))}
    inferred = values.filter(pl.col("metric") == "infAP")
    got = dict(zip(inferred["query"], inferred["inferred"], strict=True))
    # a query with no relevant drawn has no R to estimate: left out here, 0 in trec_eval
    assert 6 <= len(got) < len(truth)
    for query in expected:
        assert got.get(query, 0.0) == pytest.approx(expected[query]["infAP"], abs=1e-12)
        assert got.get(query, 0.0) == pytest.approx(listed.get(query, 0.0), abs=1e-12)
    # statAP differs from it on a sample (it weights by the inclusion probabilities)
    stat = values.filter(pl.col("metric") == "statAP")["inferred"]
    assert not np.allclose(stat.to_numpy(), inferred["inferred"].to_numpy())


# ---- the API, the missed relevant, the pairs -------------------------------------------------
def test_the_api_scores_one_run_in_ranxs_order():
    truth, runs, _, qrels = _data(seed=7)
    sample = draw_sample("all-1k-r0", qrels, runs, 20, seed=1)
    judgments = _judge(sample, truth)
    means_ = pipeline.inferred(qrels, runs["bm25"].with_columns(score=-pl.col("rank")),
                               judgments, sample)
    assert list(means_) == metric_names()
    per = pipeline.inferred(qrels, runs["bm25"].with_columns(score=-pl.col("rank")),
                            judgments, sample, per_query=True)
    assert per.columns == ["query", *metric_names()] and per.height == 8
    assert means_["infP@10"] == pytest.approx(per["infP@10"].mean())
    # the same as the library's values of the pool
    values = pool_values("all-1k-r0", qrels, runs, judgments, sample)
    ap = values.filter(pl.col("model") == "bm25", pl.col("metric") == "infAP")["inferred"]
    assert means_["infAP"] == pytest.approx(ap.mean())
    cited = pipeline.score(qrels, runs["bm25"].with_columns(score=-pl.col("rank")), "map")
    assert values.filter(pl.col("model") == "bm25", pl.col("metric") == "infAP")[
        "cited"].mean() == pytest.approx(cited["map"], abs=1e-12)


def test_the_api_refuses_in_one_line(tmp_path):
    truth, runs, _, qrels = _data(seed=7)
    not_parquet = tmp_path / "sample.parquet"
    not_parquet.write_text("query,doc,stratum,sampled\n1,2,0,true\n")
    sample = draw_sample("all-1k-r0", qrels, runs, 20, seed=1)
    run_ = runs["bm25"].with_columns(score=-pl.col("rank"))
    judgments = _judge(sample, truth)
    cases = {
        "two pools": (qrels, run_, judgments, pl.concat([
            sample, sample.with_columns(pool=pl.lit("all-2k-r0"))]), "holds 2 pools"),
        "negative": (qrels, run_, judgments.with_columns(grade=pl.lit(-1)), sample,
                     "grade -1"),
        "no sample": (qrels, run_, judgments, "nowhere.parquet", "is not a file"),
        "not parquet": (qrels, run_, judgments, not_parquet,
                        "sample.parquet cannot be read as parquet .*; repair: give the file "
                        "draw_sample's frame was written to"),
        "columns": (qrels, run_, judgments, sample.drop("stratum"), "no column stratum"),
        "order": (run_, qrels, judgments, sample, "the qrels first"),
    }
    for what, (*arguments, says) in cases.items():
        with pytest.raises(InputError, match=says) as refused:
            pipeline.inferred(*arguments)
        assert "\n" not in str(refused.value), what
    with pytest.raises(InputError, match="per_query") as refused:  # its annotation, at the door
        pipeline.inferred(qrels, run_, judgments, sample, per_query="yes")
    assert "\n" not in str(refused.value)


def test_missed_relevant_per_query_with_its_interval():
    truth, runs, cited, qrels = _data(seed=8)
    whole = draw_sample("all-1k-r0", qrels, runs, 10_000)
    exact = missed("all-1k-r0", qrels, _judge(whole, truth), whole)
    for row in exact.iter_rows(named=True):  # everything judged: the count, no error
        frame = whole.filter(pl.col("query") == int(row["query"]))["doc"].to_numpy()
        assert row["missed"] == sum(truth[int(row["query"])][d] > 0 for d in frame)
        assert row["se"] == 0 and row["low"] == row["high"] == row["missed"]
        assert row["cited"] == 5
    sample = draw_sample("all-1k-r0", qrels, runs, 20, seed=2)
    judgments = _judge(sample, truth)
    found = missed("all-1k-r0", qrels, judgments, sample)
    hits = (sample.filter("sampled").join(judgments, on=["query", "doc"])
            .filter(pl.col("grade") > 0)
            .group_by("query").agg(estimate=(1 / pl.col("probability")).sum(),
                                    found=pl.len()))
    check = found.with_columns(pl.col("query").cast(pl.Int64)).join(hits, on="query")
    assert check.height > 0
    for row in check.iter_rows(named=True):
        assert row["missed"] == pytest.approx(row["estimate"])
        assert row["low"] >= row["found_right"] and row["high"] > row["missed"]
