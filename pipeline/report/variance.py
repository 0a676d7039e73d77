"""The report's variance section (issue 42): where the variance of a mean comes from (queries
or pool draws), intervals of two models' difference over both, and the queries needed
(pipeline/evaluation/variance.py; docs/evaluation.md, Variance)."""

from __future__ import annotations

import polars as pl

from pipeline.evaluation.significance import MIN_QUERIES, too_few
from pipeline.evaluation.variance import (
    MAX_DRAWS,
    MAX_QUERIES,
    UPPER_LEVEL,
    components,
    differences,
    expected_square_range,
    level_range,
    pair_components,
    queries_needed,
)
from pipeline.layout import format_size
from pipeline.report.tables import MISSING, main_metric, method_note, metric_key, metric_name

DELTAS = (0.01, 0.02, 0.05)  # the differences the queries-needed table is for (metric units)
DRAWS = (1, 3, 5, 10)  # its numbers of pool draws
ALPHA, POWER = 0.05, 0.8
REACH = "R≥"  # a cell's "R≥m": not reachable with its row's draws, m draws reach it
FLOORS = ("random",)  # models at a floor: no one plans queries to tell a model from them


def _pools(size: int, scope: str) -> str:
    return f"{scope}-{format_size(size)}"


def _share(value: float | None) -> str:
    return MISSING if value is None else f"{value * 100:.0f}%"


def _se(row: dict) -> str:
    return too_few(row["queries"]) if row["se"] is None else f"{row['se'] * 100:.2f}"


def _bounds(low: float | None, high: float | None, queries: int) -> str:
    return too_few(queries) if low is None else f"[{low * 100:.1f}, {high * 100:.1f}]"


def _few_queries(found: pl.DataFrame) -> list[str]:
    """The note on pools with too few queries for a variance (MIN_QUERIES)."""
    if not (found["queries"] < MIN_QUERIES).any():
        return []
    return [f"n/a: fewer than {MIN_QUERIES} queries in every draw, so no variance, no "
            "interval and no queries needed."]


def _draw_zero(found: pl.DataFrame) -> list[str]:
    """The components table's note on draw shares of 0% from several draws: an estimate of
    0 on R-1 degrees of freedom (MS_R at most MS_E, truncated), not a measured absence."""
    zero = found.filter(pl.col("draws") > 1, pl.col("s2_draw") == 0)
    if not zero.height:
        return []
    dfs = "/".join(str(d - 1) for d in sorted(zero["draws"].unique().to_list()))
    return [f"Draw 0%: the draw estimate is 0 on {dfs} degrees of freedom (its mean square "
            "at most the interaction's, truncated), not a measurement of no draw variance."]


def _mean_square_range(draws: list[int]) -> str:
    """For each number of draws above one: the 95% interval of the draws' mean square's
    expectation in multiples of the mean square (`expected_square_range`), in words: ": the
    95% interval of that mean square's expectation spans 0.27 to 39.5 times it with 2"; ""
    without several draws."""
    dfs = sorted({d - 1 for d in draws if d > 1})
    if not dfs:
        return ""
    spans = [f"{low:.2g} to {high:.3g} times it with {df}"
             for df in dfs for low, high in [expected_square_range(df)]]
    return f": the 95% interval of that mean square's expectation spans {'; '.join(spans)}"


def _draw_df_note(found: pl.DataFrame) -> list[str]:
    """The components table's note on what R draws bound: the interval of the draws' mean
    square's expectation (`_mean_square_range`), and the draw component's interval it
    implies, whose upper end an estimate of 0 does not make 0."""
    words = _mean_square_range(found["draws"].to_list())
    if not words:
        return []
    return ["The draw share rests on the draws' mean square MS_R, on R-1 degrees of freedom"
            f"{words}. The draw component, (E[MS_R] - MS_E) / Q, lies between those ends less "
            "MS_E, over Q (at least 0): an estimate of 0 (MS_R at most MS_E) is no bound of "
            "0, its upper end above 0 unless MS_R is below MS_E over the upper factor."]


def _price(draws: int) -> float:
    """The queries-and-draws interval's median half-width over that of an interval that knew
    the components, where the draws' part carries the variance (the draw effect or the
    interaction): t(R-1) sqrt(median chi2(R-1)/(R-1)) / z(0.975); 1.83 with 3 draws.
    benchmarks/results/interval_width.md maps the ratio wherever the variance comes from."""
    from scipy.stats import chi2, norm, t

    return float(t.ppf(0.975, draws - 1) * (chi2.ppf(0.5, draws - 1) / (draws - 1)) ** 0.5
                 / norm.ppf(0.975))


def _designs(pairs: pl.DataFrame) -> list[tuple[int, int]]:
    """The queries x draws of the table's rows with an interval over queries and draws."""
    several = pairs.filter(pl.col("draws") > 1, pl.col("queries") >= MIN_QUERIES)
    return sorted(set(several.select("queries", "draws").rows()))


def _level(pairs: pl.DataFrame) -> str:
    """The interval's false-positive rate at a difference of 0 for the table's own designs
    (`level_range`: integrated over where the variance comes from), in words."""
    found = {design: level_range(*design) for design in _designs(pairs)}
    low = min(rates[0] for rates in found.values())
    high = max(rates[1] for rates in found.values())
    shown = ", ".join(f"{q} x {r}" for q, r in found)
    above = [f"{q} x {r}" for (q, r), rates in found.items() if rates[1] > 0.0505]
    return (f"{low * 100:.1f}-{high * 100:.1f}% false positives at a difference of 0 for "
            f"this table's queries x draws ({shown}), integrated over the draw effect's share "
            "of the variance (0 to 0.99) and the interaction's share of the rest (0 to 0.9)"
            + (f", above 5% at {', '.join(above)}" if above else ", at most 5% everywhere")
            + " (benchmarks/results/interval_level.md maps it)")


def _interval_notes(pairs: pl.DataFrame) -> list[str]:
    """What the queries-and-draws interval is and what its level rests on: Banerjee's
    construction, with the subtracted MS_E his theorem does not cover, its level integrated
    for the table's own queries and draws; and its price in width for their draws."""
    draws = sorted(d for d in pairs["draws"].unique().to_list() if d > 1)
    if not draws or not _designs(pairs):
        return []
    price = " and ".join(f"{_price(r):.1f} with {r} draws" for r in draws)
    return ["Queries and draws: each part with its own t quantile, in quadrature, "
            "max(MS_Q - MS_E, 0) on Q-1 degrees of freedom and MS_R (the draw effect and the "
            "interaction) on R-1 (Banerjee's 1960 construction).",
            "His theorem does not cover the subtracted MS_E, so its level is computed: "
            f"{_level(pairs)}.",
            "Its price where the interaction or the draws dominate: the median width of an "
            f"interval that knew the components times {price} (times 1.0 where the queries "
            "dominate)."]


def _narrower(pairs: pl.DataFrame) -> list[str]:
    """The differences table's note on rows whose queries-and-draws interval is narrower
    than the queries-only one, and why, only where such a row is present."""
    width = pl.col("high") - pl.col("low")
    narrow = pairs.filter(pl.col("draws") > 1, pl.col("low").is_not_null(),
                          width < (pl.col("queries_high") - pl.col("queries_low")) * (1 - 1e-9))
    if not narrow.height:
        return []
    from scipy.stats import t

    names = [f"{_pools(r['size'], r['scope'])} {r['a']} - {r['b']}"
             for r in narrow.iter_rows(named=True)]
    where = ", ".join(names) if len(names) <= 3 else f"{len(names)} rows"
    ratios = sorted({(float(t.ppf(0.975, q - 1)) / float(t.ppf(0.975, r - 1))) ** 2
                     for q, r in narrow.select("queries", "draws").unique().rows()})
    below = (f"{ratios[0]:.2f}" if f"{ratios[0]:.2f}" == f"{ratios[-1]:.2f}"
             else f"{ratios[0]:.2f}-{ratios[-1]:.2f}")
    return [f"Queries and draws narrower than queries only ({where}): the queries-only "
            "interval scales the per-query means' variance MS_Q/R, which holds the "
            "interaction's MS_E/R, by t(Q-1); the two-part one moves MS_E/R to the draws' "
            "part, measured there by MS_R under t(R-1).",
            f"So it is narrower wherever t(R-1)² MS_R < t(Q-1)² MS_E (MS_R below {below} of "
            "MS_E here: draw means that spread less than the interaction alone would spread "
            "them)."]


def _identical(pairs: pl.DataFrame) -> list[str]:
    """The queries-needed table's note on the models left out as copies of another."""
    names = sorted({n for names in pairs["identical"].to_list() for n in names})
    if not names:
        return []
    return [f"Left out: {', '.join(names)}, identical to another model on every query and "
            "draw (a zero difference has no variance to plan with)."]


def _count(row: dict) -> str:
    """A planned number of queries, or why there is none: "R≥m" where the row's R draws
    cannot reach the power at the bound and m draws can (`draws_needed`), "R>MAX_DRAWS"
    where none up to MAX_DRAWS can."""
    if row["queries"] is not None:
        return str(row["queries"])
    if row["reason"].startswith("more than"):
        return f"> {MAX_QUERIES:,}"
    more = row["draws_needed"]
    return f"{REACH}{more}" if more else f"R>{MAX_DRAWS}"


def _sd(variance: float | None) -> str:
    """A draw component's sd x100 ("0" where truncated; "-" with one draw)."""
    if variance is None:
        return MISSING
    return f"{variance ** 0.5 * 100:.2f}" if variance > 0 else "0"


def _plan_notes(table: pl.DataFrame) -> list[str]:
    """The queries-needed table's notes on what its rows rest on: the paired t where one
    draw was measured; where several were, the bound's degrees of freedom and the estimates
    of 0 beneath it, named as such, and why no row plans one draw."""
    notes = []
    if (table["measured_draws"] < 2).any():
        notes.append("R=1 (one draw measured): the paired t-test over queries (Sakai 2016's "
                     "topic set size), the draws not separated, at the estimates; no draw "
                     f"variance measured (sd+ {MISSING}), so no row for more draws.")
    several = table.filter(pl.col("measured_draws") > 1)
    if several.height:
        dfs = "/".join(map(str, sorted(several["draw_df"].unique().to_list())))
        notes.append(f"sd+ rests on the draw estimate's {dfs} degrees of freedom"
                     + (" (where the estimate is 0, the draws' mean square is at most the "
                        "interaction's, truncated: not a measurement of none)"
                        if several.filter(pl.col("s2_draw") == 0).height else "")
                     + "; the number at the estimates (`pipeline.topic_set_size`'s "
                     "queries_point) is not a plan: it falls short where the estimate is "
                     "low.")
        notes.append("No row for R=1 where several draws were measured: one draw cannot "
                     "separate the draw variance (no test on one draw holds its level).")
    return notes


def _csfcube(rows: pl.DataFrame) -> list[str]:
    """The note on CSFCube's facet pools: here the plain mean over queries."""
    if "level" not in rows.columns or not (rows["level"] == "csfcube").any():
        return []
    return ["CSFCube's facet pools: the plain mean over queries (the CSFCube table prints "
            "the mean of its two test folds' means, as CSFCube's script)."]


TableParts = tuple[str, str, list[str], list[list[str]], tuple[str, ...]]


def queries_needed_table(rows: pl.DataFrame, corpus: str, name: str) -> TableParts | None:
    """The queries-needed table: per pair of models (none with a floor model, FLOORS) of each
    scope's largest pool and number of draws R planned (DRAWS; one where one was measured,
    else more), the draw sd's upper bound at which the numbers are planned and the planned
    number for each delta of DELTAS, a column each (`queries_needed`); narrow enough for a
    one-column page, its method and keys in the notes."""
    pairs = pair_components(rows)
    pairs = pairs.filter(pl.col("size") == pl.col("size").max().over("scope"),
                         ~pl.col("a").is_in(list(FLOORS)), ~pl.col("b").is_in(list(FLOORS)))
    if not pairs.height:
        return None
    table = queries_needed(pairs, DELTAS, DRAWS, ALPHA, POWER).filter(
        (pl.col("draws") > 1) == (pl.col("measured_draws") > 1))
    keys = ["size", "scope", "a", "b", "draws"]
    body = []
    for (size, scope, a, b, draws), group in table.group_by(keys, maintain_order=True):
        cells = {r["delta"]: r for r in group.iter_rows(named=True)}
        body.append([_pools(size, scope), a, b, str(draws),
                     _sd(group["s2_draw_upper"][0]),
                     *[_count(cells[d]) if d in cells else MISSING for d in DELTAS]])
    floors = sorted(set(FLOORS) & set(rows["model"].unique().to_list()))
    level = f"{UPPER_LEVEL * 100:g}%"
    deltas = ", ".join(f"{d * 100:g}" for d in DELTAS)
    caption = (
        f"{corpus}: queries needed to detect a {name} difference of {deltas} x100 (the "
        f"columns; alpha {ALPHA}, power {POWER}) with R pool draws, per pair of models on "
        f"each scope's largest pool, planned at the draw sd's {level} upper bound (sd+); "
        "test: the differences table's 95% queries-and-draws interval excludes 0")
    notes = (
        f"sd+: the draw component's sd x100 at its one-sided {level} upper confidence bound, "
        "from the draws' mean square on its R-1 degrees of freedom as measured, taken at "
        "least the interaction's (a smaller one is chance, not evidence of no draw "
        "variance); each number is planned there, the query and interaction components at "
        "their estimates.",
        "Power falls as the draw variance rises, so wherever sd+ is at or above the true "
        f"draw sd (at least {level} of measurements) the number reaches power {POWER}; and "
        "as power rises with the draws, a number never rises with R.",
        f"{REACH}m: not reachable with the row's R draws (at sd+ the draws' part of the "
        f"interval alone keeps the power below {POWER}, however many queries); m: the "
        f"fewest draws that reach it at sd+ (R>{MAX_DRAWS}: none up to {MAX_DRAWS}).",
        *_plan_notes(table),
        *([f"The draws' mean square behind sd+ rests on the measured R-1 degrees of "
           f"freedom{span}."] if (span := _mean_square_range(pairs["draws"].to_list())) else []),
        "Pilots of 50 queries x 3 draws: benchmarks/results/queries_needed.md.",
        *([f"Pairs with {', '.join(floors)} left out (a floor)."] if floors else []),
        *_identical(pairs), method_note("queries-needed"))
    header = ["pools", "a", "b", "R", "sd+", *[f"{d * 100:g}" for d in DELTAS]]
    return ("queries-needed", caption, header, body, notes)


def variance_rows(results: pl.DataFrame) -> tuple[str | None, pl.DataFrame]:
    """The section's metric (`main_metric` of those with a value; None: none) and its rows
    with a value: what its tables, and the summary's verdicts on them, are made from."""
    scored = results.filter(pl.col("value").is_not_null())
    metric = main_metric(sorted(scored["metric"].unique().to_list(), key=metric_key))
    return metric, scored.filter(pl.col("metric") == metric)


def variance_tables(results: pl.DataFrame, corpus: str) -> list[TableParts]:
    """(name, caption, header, rows, notes) of the section's tables from the full queries'
    rows, on the main metric (MAP when there is one: the metric the report's other tables
    mark; the API's `variance` gives every metric). None without a value."""
    metric, rows = variance_rows(results)
    if metric is None:
        return []
    name = metric_name(metric)
    found = components(rows)
    if found.is_empty():
        return []
    one_draw = (found["draws"] < 2).any()
    tables: list[TableParts] = [("variance", (
        f"{corpus}: where the variance of each model's mean {name} comes from, per pool size: "
        "the mean and its standard error x100, and the shares of that error's variance due "
        "to the query sample, the pool draw and their interaction (two-way random-effects "
        "ANOVA over queries x pool draws; no test)"),
        ["pools", "model", "queries x draws", "mean", "SE", "query", "draw", "query x draw"],
        [[_pools(r["size"], r["scope"]), r["model"], f"{r['queries']} x {r['draws']}",
          f"{r['mean'] * 100:.1f}", _se(r), _share(r["share_query"]),
          _share(r["share_draw"]), _share(r["share_interaction"])]
         for r in found.iter_rows(named=True)],
        ("Moment estimates (expected mean squares), each component truncated at 0.",
         *(["-: one draw, so the draw's share cannot be estimated and SE is the queries' "
            "alone."] if one_draw else []),
         *_draw_df_note(found),
         *_draw_zero(found), *_few_queries(found), *_csfcube(rows),
         method_note("where-the-variance-comes-from")))]
    pairs = differences(rows)
    if pairs.height:
        tables.append(("variance-differences", (
            f"{corpus}: {name} difference a - b x100 per pool size and pair of models (paired "
            "on query and pool draw), with its 95% interval over queries only (the paired "
            "t-test's) and over queries and draws (Banerjee's construction), each a test of "
            "a zero difference that rejects it where the interval excludes 0"),
            ["pools", "a", "b", "difference", "95% queries only", "95% queries and draws"],
            [[_pools(r["size"], r["scope"]), r["a"], r["b"], f"{r['difference'] * 100:.1f}",
              _bounds(r["queries_low"], r["queries_high"], r["queries"]),
              _bounds(r["low"], r["high"], r["queries"]) if r["draws"] > 1
              else "queries only (1 draw)"]
             for r in pairs.iter_rows(named=True)],
            ("Queries only: the paired t-test's interval, on the per-query differences "
             "averaged over draws.",
             *_interval_notes(pairs), *_narrower(pairs),
             *(["Queries only (1 draw): one draw cannot give the draws' part."] if one_draw
               else []),
             *_csfcube(rows), *_few_queries(pairs),
             method_note("differences-over-queries-and-draws"))))
    needed = queries_needed_table(rows, corpus, name)
    if needed:
        tables.append(needed)
    return tables
