"""The report's "Beyond citations" section: per assessor whose judgments of a pool's sample
exist (make judge), each model's metrics from the citations alone and with the judged sample,
with the queries-and-draws intervals; the relevant papers the citations miss per query; and
per pair of models the difference with and without the sample, and whether the order changes
(pipeline/judging/inferred.py; docs/evaluation.md, "Beyond citations: judged samples")."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core.logs import counted
from pipeline.evaluation.significance import too_few
from pipeline.judging.inferred import (
    JK_BIAS,
    JK_WITHIN_SAMPLE,
    ThinStratum,
    jkap_thin,
    missed,
    pool_values,
)
from pipeline.judging.intervals import (
    DIFFERENCE_RANGE,
    METRIC_RANGE,
    SHIFT_RANGE,
    SIMULATED_QUERIES,
    differences,
    means,
)
from pipeline.judging.stage import JudgedPool, LeftOut, judged_pools
from pipeline.layout import Place, format_size
from pipeline.report.tables import at_bound, clauses, interval_cell, method_note, span
from pipeline.roots import where

log = logging.getLogger(__name__)

# the metrics the tables show (all are computed): jkAP the headline AP, infAP beside it for
# trec_eval's parity
SHOWN = ("jkAP", "infAP", "infNDCG@10", "infP@10")
PLOTTED = "jkAP"  # the plot's metric, the headline AP (report/build.py titles it)
STAND_IN = "a deterministic stand-in, NOT a judgment of relevance: it exercises the section only"
ALL_EQUAL = "(all equal)"  # an interval from agreeing values away from the range's bounds
NO_SPREAD = "(no spread)"  # the missed count whose stratified variance is 0: no interval
CENSUS = "(every frame candidate judged)"  # the missed count known exactly: no interval
# The means' interval (intervals.bounded_interval) in benchmarks/bounded_intervals.py, at
# SIMULATED_QUERIES queries (values in [0, 1] of three kinds, means 0.013 to 0.99): its
# coverage, lowest and highest, by the draws simulated
MEANS_COVERAGE = {3: (0.944, 0.990), 1: (0.873, 0.973)}
# ... and on its simulated judged samples (25 and 50 queries, 3 draws): jkAP's and infP@10's
# coverage of their truth (every frame candidate judged)
JUDGED_COVERAGE = (0.940, 0.978)
# The differences' interval (variance.half_widths): its false positives at a difference of 0
# were at most 5% at 20 to 1,000 queries and 2 to 10 draws (benchmarks/results/interval_level.md
# from 30, bounded_intervals.md below); with one draw it is the paired t over queries
PAIRS_QUERIES, PAIRS_DRAWS = (20, 1000), (2, 10)


def _counts(values: list[int], unit: str) -> str:
    """The distinct `values` with their unit: "8 or 20 queries", "1 draw"."""
    shown = [str(v) for v in sorted(set(values))]
    said = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f"{said} {({'queries': 'query', 'draws': 'draw'}[unit] if shown == ['1'] else unit)}"


def _outside(queries: list[int], draws: list[int]) -> str:
    """The caption's note on rows outside the simulated range (their queries, their draws)."""
    if not queries and not draws:
        return ""
    parts = ([_counts(queries, "queries")] if queries else []) + (
        [_counts(draws, "draws")] if draws else [])
    return f"; rows of {' or '.join(parts)} lie outside the simulated range"


def _one_sided(frame: pl.DataFrame, pairs: tuple[tuple[str, str], ...],
               bounds: tuple[float, float]) -> bool:
    """Whether some row shows a one-sided bound: its values agreed, at the range's bound."""
    return any(row[agree] and (at_bound(row[value], bounds[0])
                               or at_bound(row[value], bounds[1]))
               for row in frame.iter_rows(named=True) for value, agree in pairs)


ONE_SIDED = ("[≥ x] ([≤ x]): every query's value was {high} ({low}) in every draw, no spread to "
             "read: the one-sided 95% bound from Clopper-Pearson's bound on the share of "
             "queries that differ, 0 of Q (1 - 0.05^(1/Q))")


def means_interval_note(frame: pl.DataFrame) -> str:
    """The means caption's words on its intervals: what they are, their simulated level at
    the queries and draws it was simulated at, the rows outside that range, and the
    one-sided cells where there are some."""
    low, high = SIMULATED_QUERIES
    levels = " and ".join(f"{MEANS_COVERAGE[r][0] * 100:.1f}-{MEANS_COVERAGE[r][1] * 100:.1f}% "
                          f"with {counted(r, 'draw')}" for r in sorted(MEANS_COVERAGE,
                                                                                reverse=True))
    note = ("95% intervals over queries and pool draws (the variance section's construction; "
            "with one draw the queries' t) on the logit scale, so inside [0, 100]: in "
            "simulations of values in [0, 1] with means from 1.3 to 99 "
            f"(benchmarks/results/bounded_intervals.md) at {low} to {high:,} queries they "
            f"covered {levels}, and on simulated judged samples jkAP's and infP@10's truth "
            f"{JUDGED_COVERAGE[0] * 100:.1f}-{JUDGED_COVERAGE[1] * 100:.1f}% (infAP's and "
            "infNDCG@10's less, where they are biased)")
    note += _outside([q for q in frame["queries"].to_list() if not low <= q <= high],
                     [d for d in frame["draws"].to_list() if d not in MEANS_COVERAGE])
    if _one_sided(frame, (("cited", "cited_agree"), ("inferred", "agree")), METRIC_RANGE):
        note += "; " + ONE_SIDED.format(high=100, low=0)
    if any(row[agree] and not (at_bound(row[value], 0.0) or at_bound(row[value], 1.0))
           for row in frame.iter_rows(named=True)
           for value, agree in (("cited", "cited_agree"), ("inferred", "agree"))):
        note += (f"; {ALL_EQUAL}: every query's value was the same in every draw: the mean is "
                 "within the share of queries that may differ (Clopper-Pearson, 0 of Q) times "
                 "the distance to 0 and to 100")
    beyond = frame.filter((pl.col("inferred") > 1) | (pl.col("inferred") < 0))
    if beyond.height:
        note += (f"; {', '.join(sorted(set(beyond['metric'].to_list())))} outside [0, 100] "
                 "(single-query estimates may leave [0, 1]): the mean as estimated, its "
                 "interval the symmetric one clipped to [0, 100], where the truth lies")
    return note


def pairs_interval_note(frame: pl.DataFrame) -> str:
    """The pairs caption's words on its intervals and verdicts."""
    low, high = PAIRS_QUERIES
    note = ("each with its 95% interval over queries and pool draws (the variance section's "
            "construction, clipped to [-100, 100] for a difference, [-200, 200] for the shift; "
            f"at most 5% false positives at {low} to {high:,} queries and "
            f"{PAIRS_DRAWS[0]} to {PAIRS_DRAWS[1]} draws in simulations: "
            "benchmarks/results/interval_level.md, bounded_intervals.md; with one draw the "
            "paired t over queries)")
    several = frame.filter(pl.col("draws") > 1)
    note += _outside(
        [q for q in frame["queries"].to_list() if not low <= q <= high],
        [d for d in several["draws"].to_list() if not PAIRS_DRAWS[0] <= d <= PAIRS_DRAWS[1]])
    if any(frame[c].any() for c in ("cited_agree", "agree", "shift_agree")):
        note += (f"; {ALL_EQUAL}: every query's difference was the same in every draw, no "
                 "spread to read: the mean is within the share of queries that may differ "
                 "(Clopper-Pearson's one-sided 95% bound for 0 of Q, 1 - 0.05^(1/Q)) times the "
                 "distance to the range's ends")
    if _one_sided(frame, (("cited", "cited_agree"), ("inferred", "agree")), DIFFERENCE_RANGE):
        note += "; " + ONE_SIDED.format(high=100, low=-100)
    return note + ("; order: reversed only where the interval with the sample excludes 0 on "
                   "the other side of the citations' difference, kept where it excludes 0 on "
                   "the same side, not determined where it holds 0 (whatever the points do), "
                   "then whether the citations' interval excludes 0, and the points' order "
                   "(citations -> with the sample)")


@dataclass(frozen=True)
class JudgedTables:
    """One assessor's tables (name, caption, header, rows, notes) and the means its plot
    draws."""

    assessor: str
    stand_in: bool
    tables: list[tuple[str, str, list[str], list[list[str]], tuple[str, ...]]]
    means: pl.DataFrame


def _x100(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _interval(value: float | None, low: float | None, high: float | None, agree: bool = False,
              queries: int = 2, bounds: tuple[float, float] = METRIC_RANGE) -> str:
    """A value x100 and its 95% interval (intervals.bounded_interval: inside `bounds`, never a
    point): where every value agreed (`agree`), at a bound the one-sided bound it is, "100.0
    [≥ 88.7]" or "0.0 [≤ 11.3]", elsewhere the interval marked "(all equal)"; n/a where there
    is none (fewer than 2 queries)."""
    if low is None or high is None:
        return f"{_x100(value)} [{too_few(queries)}]"
    if agree and at_bound(value, bounds[1]):
        return f"{_x100(value)} {interval_cell(low, high, queries, value, bounds)}"
    if agree and at_bound(value, bounds[0]):
        return f"{_x100(value)} {interval_cell(low, high, queries, value, bounds)}"
    return f"{_x100(value)} {span(low, high)}" + (f" {ALL_EQUAL}" if agree else "")


def _scope(scope: str, size: int) -> str:
    return f"{scope} {format_size(size)}"


def _who(group: Sequence[JudgedPool]) -> str:
    first = group[0]
    return f"{first.assessor} ({STAND_IN})" if first.stand_in else first.assessor


def _number(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def jkap_flag(group: Sequence[JudgedPool]) -> tuple[str, ...]:
    """The means table's notes on jkAP where a pool's sample leaves some stratum with fewer
    judged pairs per query than jkAP needs (inferred.thin_strata): which strata; the bias
    range such samples had in the simulation's worlds (inferred.JK_BIAS, measured by
    benchmarks/jkap_flag.py) and the SAMPLE from which it stayed within 0.01 there
    (inferred.JK_WITHIN_SAMPLE); and, apart, the SAMPLE that leaves no stratum of `group`'s
    pools thin, which avoids the flag here, not the bias (a count of judged pairs, not a bound
    measured on these pools); () where none is thin."""
    thin: dict[str, ThinStratum] = {}  # label: the thinnest seen over the pools
    sample = 0
    for p in group:
        strata, needed = jkap_thin(p.pool, p.qrels, p.judgments, p.sample)
        for stratum in strata:
            if stratum.label not in thin or stratum.judged < thin[stratum.label].judged:
                thin[stratum.label] = stratum
        sample = max(sample, needed)  # every pool's: the SAMPLE keeps none of them thin
    if not thin:
        return ()
    ordered = sorted(thin.values(), key=lambda stratum: int(stratum.label.split("-")[0]))
    short = ", ".join(f"{_number(s.judged)} of {_number(s.needed)} in ranks {s.label}"
                      for s in ordered)
    seen = [text for deep, text in (
        (False, "low where a stratum above the deepest is thin"),
        (True, "high where the deepest is, the more so the rarer relevant papers are"))
        if any(s.deepest == deep for s in ordered)]
    low, high = JK_BIAS
    notes = (f"jkAP may be biased here: the samples judge fewer pairs per query than jkAP "
             f"needs ({short}).",
             "In the simulation's three worlds, one dense and two sparse, samples that thin "
             f"read jkAP from {low:+.3f} to {high:+.3f} off the truth ({' and '.join(seen)}); "
             f"its bias stayed within 0.01 from SAMPLE {JK_WITHIN_SAMPLE} on "
             "(benchmarks/results/jkap_flag.md).",
             f"SAMPLE={sample} (make judge, every drawn pair judged) would judge enough pairs "
             "per query that no stratum of these pools is thin and this flag is not raised; "
             "it is a count of pairs for these pools, not a bound on jkAP's bias.")
    log.warning(f"[report] {group[0].assessor}: {' '.join(notes)}")
    return notes


def assessor_tables(corpus: str, group: Sequence[JudgedPool], name: str | None = None
                    ) -> JudgedTables:
    """The tables of one assessor's judgments over the report's pools (`group`), named
    `judged-<name>-...` (default: the judgments' file stem)."""
    values = pl.concat([pool_values(p.pool, p.qrels, p.runs, p.judgments, p.sample)
                        for p in group])
    values = values.filter(pl.col("metric").is_in(SHOWN))
    stem, who = name or group[0].file_name, _who(group)
    models = sorted({m for p in group for m in p.models})
    mean = means(values).sort("size", "scope", "metric", "model")
    rows = [[_scope(r["scope"], r["size"]), r["metric"], r["model"], str(r["queries"]),
             str(r["draws"]), _interval(r["cited"], r["cited_low"], r["cited_high"],
                                        r["cited_agree"], r["queries"]),
             _interval(r["inferred"], r["low"], r["high"], r["agree"], r["queries"])]
            for r in mean.iter_rows(named=True)]
    tables = [(f"judged-{stem}-means",
               f"{corpus}: beyond citations, judged by {who}: each model's mean x100 from the "
               "citations alone and with a judged sample of the candidates the citations "
               "leave unjudged, with 95% intervals over queries and pool draws",
               ["pools", "metric", "model", "queries", "draws", "citations", "with the sample"],
               rows, (f"The sample: candidates that {', '.join(models)} rank high and the "
                      "citations leave unjudged.",
                      "jkAP, the headline AP: statAP (Aslam, Pavlu & Yilmaz 2006) with the "
                      "stratified jackknife's bias correction (Quenouille 1956; Jones 1974; "
                      "second order where a stratum has 3 judged pairs or more: Schucany, "
                      "Gray & Owen 1971); a stratum with fewer than 2 judged pairs is left "
                      "uncorrected.", *jkap_flag(group),
                      "infAP: xinfAP (Yilmaz, Kanoulas & Aslam 2008; trec_eval's infAP only "
                      "where the qrels hold no citations), which over-counts on thin samples.",
                      "P@k: the known relevant in each model's top k and, per stratum, its "
                      "unjudged ones at the share judged relevant among its own judged ones "
                      "(at most 1).",
                      "nDCG: Horvitz-Thompson, capped at 1 (biased up on thin samples).",
                      *clauses(means_interval_note(mean)),
                      method_note("judged-tables")))]
    lost = pl.concat([missed(p.pool, p.qrels, p.judgments, p.sample) for p in group])
    rows = []
    for pool in sorted(lost["pool"].unique().to_list()):
        part = lost.filter(pl.col("pool") == pool)
        count = part.height
        total, se = float(part["missed"].sum()), float((part["se"] ** 2).sum() ** 0.5)
        census = int(part["judged"].sum()) == int(part["frame"].sum())  # nothing unjudged
        interval = (span(max(0.0, (total - 1.96 * se) / count), (total + 1.96 * se) / count,
                         scale=1) if se > 0 else CENSUS if census else NO_SPREAD)
        rows.append([pool, str(count), f"{part['cited'].mean():.1f}",
                     str(int(part["judged"].sum())), str(int(part["found"].sum())),
                     f"{total / count:.1f} {interval}",
                     f"{part['missed'].min():.1f}-{part['missed'].max():.1f}"])
    no_spread = any(row[5].endswith(NO_SPREAD) for row in rows)
    census = any(row[5].endswith(CENSUS) for row in rows)
    tables.append((f"judged-{stem}-missed",
                   f"{corpus}: relevant papers the citations miss, judged by {who}: per pool, "
                   "the relevant citations per query, the pairs judged and found relevant, and "
                   "the estimated missed relevant per query with a 95% interval",
                   ["pool", "queries", "cited per query", "judged", "relevant found",
                    "missed per query", "range"], rows,
                   ("Missed: Horvitz-Thompson over the sampling frame, with a 95% normal "
                    "interval from the stratified variance, at least 0; range: its least and "
                    "most over the queries.",
                    *((f"{NO_SPREAD}: the stratified variance is 0 (the judged pairs of every "
                       "stratum agreed), and a sample that agrees gives no interval here.",)
                      if no_spread else ()),
                    *((f"{CENSUS}: the count is known, no interval.",) if census else ()),
                    method_note("judged-tables"))))
    pairs = differences(values).sort("size", "scope", "metric", "a", "b")
    rows = [[_scope(r["scope"], r["size"]), r["metric"], f"{r['a']} - {r['b']}",
             str(r["queries"]), str(r["draws"]),
             _interval(r["cited"], r["cited_low"], r["cited_high"], r["cited_agree"],
                       r["queries"], DIFFERENCE_RANGE),
             _interval(r["inferred"], r["low"], r["high"], r["agree"], r["queries"],
                       DIFFERENCE_RANGE),
             _interval(r["shift"], r["shift_low"], r["shift_high"], r["shift_agree"],
                       r["queries"], SHIFT_RANGE), r["verdict"]]
            for r in pairs.iter_rows(named=True)]
    tables.append((f"judged-{stem}-pairs",
                   f"{corpus}: does the ranking survive, judged by {who}: each pair's mean "
                   "difference x100 from the citations alone and with the judged sample, the "
                   "shift between them, each with a 95% interval over queries and pool draws, "
                   "and whether the order changes",
                   ["pools", "metric", "pair", "queries", "draws", "citations",
                    "with the sample", "shift", "order"], rows,
                   (*clauses(pairs_interval_note(pairs)), method_note("judged-tables"))))
    return JudgedTables(group[0].assessor, group[0].stand_in, tables, mean)


def judged_tables(place: Place, pools: Sequence[str],
                  left_out: list[LeftOut] | None = None) -> list[JudgedTables]:
    """Each assessor's tables over the judged samples of `pools` (none without judgments),
    one set per sampling setting where an assessor judged several (their names then end in
    the sampling's folder name); what was left out appended to `left_out` (left_out_table)."""
    found = judged_pools(place, sorted(pools), left_out)
    keys = sorted({(p.file_name, p.sampling) for p in found})
    stems = [stem for stem, _ in keys]
    return [assessor_tables(place.corpus, [p for p in found
                                           if (p.file_name, p.sampling) == (stem, sampling)],
                            stem if stems.count(stem) == 1 else f"{stem}-{sampling or 'old'}")
            for stem, sampling in keys]


def left_out_table(place: Place, left_out: Sequence[LeftOut]
                   ) -> tuple[str, str, list[str], list[list[str]], tuple[str, ...]] | None:
    """The report's table of the samples and judgments it did not count (file, from the runs
    root's folder on; why; the command that makes them count again); None when it counted
    every one."""
    if not left_out:
        return None
    return ("judged-left-out",
            f"{place.corpus}: judging files the section above does not count, why, and the command "
            "that judges them again",
            ["file", "why", "repair"],
            [[str(item.path.relative_to(place.runs_root.parent)), item.why,
              item.repair.command(where(place.corpus_dir.parent, place.index_root,
                                        place.runs_root))] for item in left_out],
            ("No number of the judged tables comes from them.", method_note("judged-tables")))


def draw_judged(means_frame: pl.DataFrame, path: Path, title: str) -> None:
    """PLOTTED (jkAP) x100 against pool size per model: from the citations alone (dashed) and
    with the judged sample (solid), the dataset-level pools (the first scope)."""
    from pipeline.report.plots import plot_lines

    rows = means_frame.filter(pl.col("metric") == PLOTTED)
    scope = sorted(rows["scope"].unique().to_list())[:1]
    rows = rows.filter(pl.col("scope").is_in(scope)).sort("model", "size")
    lines = []
    for model in rows["model"].unique().sort().to_list():
        own = rows.filter(pl.col("model") == model)
        lines.append((f"{model}, citations", own["size"].to_list(),
                      [100 * v for v in own["cited"].to_list()], "--"))
        lines.append((f"{model}, with the sample", own["size"].to_list(),
                      [100 * v for v in own["inferred"].to_list()], "-"))
    plot_lines(lines, path, title, f"{PLOTTED} x100 (mean over queries and draws)")
