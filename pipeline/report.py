"""Tables and plots from `runs/results.parquet` (the layout of MDCR Tables 1-4).

Dataset-level: model x pool size, cells MAP / NDCG / R@30 (x100: the mean over a pool's queries,
then mean ± standard deviation over repeats), or whatever metrics the runs were scored with:
evaluations with other metric sets (METRICS=map, MDCR's recall@5, BEIR's ndcg@10/recall@100)
share the tables, a metric a run was not scored with is shown as "-".
Field-level: model x field, MAP x100 per pool size. Plot: MAP against pool size, one line per
model (where no run has MAP: the first metric computed). MDCR-style benchmarks: Tables 3 and 4
(`mdcr_tables`); perturbed queries: each model's change against full queries
(`variant_table`). Written as markdown, LaTeX and PNG under `runs/reports/`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from pipeline.artifacts import atomic_path, read_parquet
from pipeline.errors import InputError
from pipeline.fields import MAG_FIELDS
from pipeline.naming import format_size
from pipeline.timing import TIMES_FILE

CELL_METRICS = ("map", "ndcg", "recall@30")
# the order of a cell's metrics: the large-scale set, then MDCR's and BEIR's, then the rest
METRIC_ORDER = (*CELL_METRICS, "recall@5", "ndcg@10", "recall@100")
METRIC_NAMES = {"map": "MAP", "ndcg": "NDCG", "recall": "R", "precision": "P", "mrr": "MRR",
                "r-precision": "R-Prec", "hit_rate": "HR", "hits": "Hits", "f1": "F1",
                "bpref": "bpref", "ndcg_burges": "NDCG-B"}
MISSING = "-"  # a cell whose metric was not computed (or a model not run on those pools)
_KEYS = ["level", "scope", "field", "size", "model"]


def metric_name(metric: str) -> str:
    """The short name of a ranx metric: map -> MAP, recall@30 -> R@30, ndcg@10 -> NDCG@10."""
    base, _, cut = metric.partition("@")
    return METRIC_NAMES.get(base, base) + (f"@{cut}" if cut else "")


def _metric_key(metric: str) -> tuple[int, str]:
    return (METRIC_ORDER.index(metric) if metric in METRIC_ORDER else len(METRIC_ORDER), metric)


def _means(results: pl.DataFrame) -> pl.DataFrame:
    """Per (level, scope, field, size, model): each metric's mean over queries, then its mean
    and standard deviation (x100) over the repeats; columns <metric>, <metric>_std and
    <metric>_n (the repeats scored with it: evaluations of one model may use other metric
    sets on other pools). A metric a row was not scored with is null."""
    per_run = (results.group_by(*_KEYS, "repeat", "metric")
               .agg(pl.col("value").mean()))
    summary = per_run.group_by(*_KEYS, "metric").agg(
        mean=pl.col("value").mean() * 100, std=pl.col("value").std() * 100,
        n=pl.col("value").count())

    def wide(column: str, suffix: str) -> pl.DataFrame:
        table = summary.pivot("metric", index=_KEYS, values=column)
        return table.rename({c: f"{c}{suffix}" for c in table.columns if c not in _KEYS})

    return (wide("mean", "").join(wide("std", "_std"), on=_KEYS, nulls_equal=True)
            .join(wide("n", "_n"), on=_KEYS, nulls_equal=True))


def _metrics(means: pl.DataFrame) -> list[str]:
    """The metrics that have a value in some row of `means`, in METRIC_ORDER."""
    found = [c for c in means.columns if f"{c}_std" in means.columns
             and means[c].null_count() < means.height]
    return sorted(found, key=_metric_key)


def _main_metric(metrics: list[str]) -> str | None:
    """The metric that tables mark and plots draw: MAP when there is one."""
    return "map" if "map" in metrics else (metrics[0] if metrics else None)


def _value(row: pl.DataFrame, metric: str) -> float | None:
    """The first row's value of `metric`; None when it was not computed."""
    if metric not in row.columns or not row.height:
        return None
    value = row[metric][0]
    return None if value is None or value != value else float(value)  # null or NaN


def _cell(row: pl.DataFrame, metric: str) -> str:
    """mean, with ± std when there are repeats; "-" when the metric was not computed."""
    mean = _value(row, metric)
    if mean is None:
        return MISSING
    std, n = _value(row, f"{metric}_std"), _value(row, f"{metric}_n")
    return f"{mean:.1f}" if std is None or (n or 0) < 2 else f"{mean:.1f} ± {std:.1f}"


def _per_query(results: pl.DataFrame) -> pl.DataFrame:
    """model, query, value: a query's value averaged over repeats (a seed's repeats share their
    queries), what the paired tests compare."""
    return results.group_by("model", "query").agg(pl.col("value").mean())


def _marks(results: pl.DataFrame, by: str, metric: str = "map") -> dict[tuple, str]:
    """(value of `by`, model) -> "best" for the best mean `metric` of its column, "worse" for a
    model significantly below it (paired t-test, Holm-Bonferroni over the column's pairs,
    p < 0.05), "" otherwise. Per-query values are averaged over repeats first."""
    from pipeline.significance import compare

    marks: dict[tuple, str] = {}
    data = results.filter(pl.col("metric") == metric, pl.col("value").is_not_null())
    for (key,), group in data.group_by(by):
        per_query = _per_query(group)
        if per_query["model"].n_unique() < 2:
            continue
        table = compare(per_query)
        means = per_query.group_by("model").agg(pl.col("value").mean())
        best = means.row(int(means["value"].arg_max()), named=True)["model"]
        marks[(key, best)] = "best"
        for row in table.filter(pl.col("significant")).iter_rows(named=True):
            if best in (row["a"], row["b"]):
                marks[(key, row["b"] if row["a"] == best else row["a"])] = "worse"
    return marks


def _marked(text: str, mark: str) -> str:
    return f"**{text}**" if mark == "best" else f"{text}†" if mark == "worse" else text


def _model_order(models: list[str]) -> list[str]:
    first = [m for m in ("bm25", "random") if m in models]
    return sorted(set(models) - set(first)) + first


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _latex(header: list[str], rows: list[list[str]], caption: str) -> str:
    def esc(text: str) -> str:
        text = text.replace("_", r"\_").replace("%", r"\%").replace("±", r"$\pm$")
        return re.sub(r"\*\*(.+?)\*\*", r"\\textbf{\1}", text).replace("†", r"$^\dagger$")

    body = "\n".join(" & ".join(esc(c) for c in r) + r" \\" for r in rows)
    return (
        "\\begin{table}[t]\n\\centering\n"
        f"\\begin{{tabular}}{{l{'c' * (len(header) - 1)}}}\n\\toprule\n"
        + " & ".join(esc(h) for h in header) + " \\\\\n\\midrule\n" + body
        + f"\n\\bottomrule\n\\end{{tabular}}\n\\caption{{{esc(caption)}}}\n\\end{{table}}\n"
    )


def _table(tex: Path, caption: str, header: list[str], rows: list[list[str]]) -> str:
    """Write the table as LaTeX to `tex`; return it as a markdown section."""
    with atomic_path(tex) as tmp:
        tmp.write_text(_latex(header, rows, caption))
    return f"## {caption}\n\n" + _markdown(header, rows)


def dataset_metrics(means: pl.DataFrame) -> list[str]:
    """The metrics of the dataset-level table's cells: every metric some dataset-level run was
    scored with, MAP first (the one `_marks` marks)."""
    metrics = _metrics(means.filter(pl.col("level") == "dataset"))
    main = _main_metric(metrics)
    return [main, *[m for m in metrics if m != main]] if main else []


def dataset_table(means: pl.DataFrame, marks: dict[tuple, str] | None = None
                  ) -> tuple[list[str], list[list[str]]]:
    """Models x pool sizes; the first metric of a cell (MAP if any run has it) marked by
    `_marks`; "-" for a metric a run was not scored with."""
    marks = marks or {}
    data = means.filter(pl.col("level") == "dataset")
    sizes = sorted(data["size"].unique().to_list())
    metrics = dataset_metrics(means)
    names = " / ".join(metric_name(m) for m in metrics)
    header = ["model", *[f"{format_size(s)} ({names})" for s in sizes]]
    rows = []
    for model in _model_order(data["model"].unique().to_list()):
        cells = [model]
        for size in sizes:
            hit = data.filter(pl.col("model") == model, pl.col("size") == size)
            parts = [_cell(hit, m) for m in metrics] if hit.height else []
            if parts and parts[0] != MISSING:
                parts[0] = _marked(parts[0], marks.get((size, model), ""))
            cells.append(" / ".join(parts) if parts else MISSING)
        rows.append(cells)
    return header, rows


def field_metric(means: pl.DataFrame, size: int) -> str | None:
    """The metric of the field-level table of `size`: MAP, or the first metric computed there
    when no run was scored with MAP; None when nothing was."""
    return _main_metric(_metrics(means.filter(pl.col("level") == "field",
                                              pl.col("size") == size)))


def field_table(means: pl.DataFrame, size: int, marks: dict[tuple, str] | None = None,
                metric: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Models x fields, MAP (or `metric`), and the macro-average over the fields that have
    it; "-" where a model's run was not scored with it."""
    marks = marks or {}
    data = means.filter(pl.col("level") == "field", pl.col("size") == size)
    metric = metric or field_metric(means, size) or "map"
    fields = [f for f in MAG_FIELDS if f in set(data["field"].to_list())]
    header = ["model", *[MAG_FIELDS[f] for f in fields], "avg"]
    rows = []
    for model in _model_order(data["model"].unique().to_list()):
        values = [_value(data.filter(pl.col("model") == model, pl.col("field") == f), metric)
                  for f in fields]
        cells = [_marked(f"{v:.1f}", marks.get((f, model), "")) if v is not None else MISSING
                 for f, v in zip(fields, values, strict=True)]
        present = [v for v in values if v is not None]
        rows.append([model, *cells,
                     f"{sum(present) / len(present):.1f}" if present else MISSING])
    return header, rows


def mdcr_tables(results: pl.DataFrame) -> tuple[tuple[list[str], list[list[str]]], ...]:
    """MDCR Tables 3 and 4 from the per-query results of MDCR-style pools (level "mdcr").

    Table 3: models x fields, MAP / R@5 per field, and the official evaluator's averages (per
    field x100 rounded to 4 decimals, then the mean over fields: MAP, NDCG, R@5); bold: best
    average MAP. Table 4: candidate types x models, MAP over the positives and that type's
    negatives only, macro-averaged over fields, with the mean over models (MDCR's Table 4).
    Queries are averaged within a field first, so every field weighs the same."""
    from pipeline.mdcr.official import official_numbers

    data = results.filter(pl.col("level") == "mdcr")
    overall = data.filter(pl.col("negatives") == "all")
    models = _model_order(overall["model"].unique().to_list())
    fields = sorted(overall["field"].unique().to_list(),
                    key=lambda f: list(MAG_FIELDS).index(f) if f in MAG_FIELDS else 99)
    official = {m: official_numbers(overall.filter(pl.col("model") == m)) for m in models}
    best = max(models, key=lambda m: official[m][1].get("map", float("-inf")))
    header = ["model", *[MAG_FIELDS.get(f, f) for f in fields], "avg MAP", "avg NDCG",
              "avg R@5"]
    rows = []
    for model in models:
        per_field, averages = official[model]
        cells = []
        for field in fields:  # a metric the model's runs were not scored with: "-"
            hit = per_field.filter(pl.col("field") == field)
            cells.append(" / ".join(MISSING if (v := _value(hit, m)) is None else f"{v:.1f}"
                                    for m in ("map", "recall_5")) if hit.height else MISSING)
        avg = [MISSING if (v := averages.get(m)) is None or v != v else f"{v:.2f}"
               for m in ("map", "ndcg", "recall_5")]
        if avg[0] != MISSING:
            avg[0] = _marked(avg[0], "best" if model == best and len(models) > 1 else "")
        rows.append([model, *cells, *avg])
    by_type = (data.filter(pl.col("negatives") != "all", pl.col("metric") == "map")
               .group_by("negatives", "model", "field").agg(pl.col("value").mean() * 100)
               .group_by("negatives", "model").agg(pl.col("value").mean()))
    types = sorted(by_type["negatives"].unique().to_list(),
                   key=lambda t: (t in ("most_cited", "random"), t))
    type_header = ["negatives", *models, "mean over models"]
    type_rows = []
    for kind in types:
        values = [by_type.filter(pl.col("negatives") == kind, pl.col("model") == m)["value"]
                  for m in models]
        present = [v[0] for v in values if len(v)]
        type_rows.append([kind, *[f"{v[0]:.1f}" if len(v) else "-" for v in values],
                          f"{sum(present) / len(present):.1f}" if present else "-"])
    return (header, rows), (type_header, type_rows)


def variant_table(results: pl.DataFrame, metric: str = "map"
                  ) -> tuple[list[str], list[list[str]]]:
    """Query robustness (QUERY_VARIANT): per model, MAP (or `metric`) x100 with full queries
    and with each variant, over the (pool, query) pairs both runs scored, and the change in
    points."""
    from pipeline.naming import VARIANT_SEP, VARIANTS

    data = (results.filter(pl.col("metric") == metric, pl.col("value").is_not_null())
            .with_columns(base=pl.col("model").str.split(VARIANT_SEP).list.first(),
                          variant=pl.col("model").str.split(VARIANT_SEP).list.get(
                              1, null_on_oob=True).fill_null("full")))
    full = data.filter(pl.col("variant") == "full").select("base", "pool", "query",
                                                            full="value")
    paired = data.filter(pl.col("variant") != "full").join(full, on=["base", "pool", "query"])
    variants = [v for v in VARIANTS if v in set(paired["variant"].to_list())]
    header = ["model", "full", *variants]
    rows = []
    for base in _model_order(paired["base"].unique().to_list()):
        mine = paired.filter(pl.col("base") == base)
        cells = [base, f"{mine['full'].mean() * 100:.1f}"]
        for variant in variants:
            hit = mine.filter(pl.col("variant") == variant)
            if not hit.height:
                cells.append("-")
                continue
            value, reference = hit["value"].mean() * 100, hit["full"].mean() * 100
            cells.append(f"{value:.1f} ({value - reference:+.1f})")
        rows.append(cells)
    return header, rows


def significance_section(results: pl.DataFrame) -> str:
    """Every pair of models per pool (size or field) and metric: both paired tests with
    Holm-Bonferroni, and each model's 95% bootstrap interval over queries."""
    from pipeline.significance import bootstrap_ci, compare

    header = ["pools", "metric", "a", "b", "mean a", "mean b", "t-test p (Holm)",
              "randomization p (Holm)"]
    rows, intervals = [], []
    for (scope, size, metric), group in results.sort("size").group_by(
            "scope", "size", "metric", maintain_order=True):
        per_query = _per_query(group)
        where = f"{scope}-{format_size(size)}"
        for model, values in per_query.group_by("model", maintain_order=True):
            lo, hi = bootstrap_ci(values["value"].to_numpy())
            intervals.append([where, metric, model[0], f"{values['value'].mean() * 100:.1f}",
                              f"[{lo * 100:.1f}, {hi * 100:.1f}]"])
        if per_query["model"].n_unique() < 2:
            continue
        t, fisher = compare(per_query, "t-test"), compare(per_query, "fisher")
        for a, b in zip(t.iter_rows(named=True), fisher.iter_rows(named=True), strict=True):
            rows.append([where, metric, a["a"], a["b"], f"{a['mean_a'] * 100:.1f}",
                         f"{a['mean_b'] * 100:.1f}", f"{a['p']:.3g} ({a['p_holm']:.3g})",
                         f"{b['p']:.3g} ({b['p_holm']:.3g})"])
    text = ("## Significance (paired over the same queries, values averaged over repeats; "
            "Holm-Bonferroni over the pairs of a pool and metric)\n\n")
    text += _markdown(header, rows) if rows else "Only one model: nothing to compare.\n"
    text += "\n## 95% bootstrap intervals of the mean over queries (x100)\n\n"
    return text + _markdown(["pools", "metric", "model", "mean", "95% interval"], intervals)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)


def plot_map_vs_size(means: pl.DataFrame, path: Path, title: str, metric: str = "map") -> None:
    """MAP (or `metric`) against pool size (log x), one line per model, error bars: std over
    repeats; sizes whose runs were not scored with it are left out of a model's line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    has = means.filter(pl.col(metric).is_not_null()) if metric in means.columns else means[:0]
    for model in _model_order(has["model"].unique().to_list()):
        line = has.filter(pl.col("model") == model).sort("size")
        ax.errorbar(line["size"], line[metric], yerr=line[f"{metric}_std"].fill_null(0),
                    marker="o", capsize=3, label=model,
                    linestyle=":" if model == "random" else "-")
    ax.set_xscale("log")
    sizes = sorted(means["size"].unique().to_list())
    ax.set_xticks(sizes, labels=[format_size(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("candidate pool size (papers)")
    ax.set_ylabel(f"{metric_name(metric)} x100 (mean ± std over repeats)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if has.height:
        ax.legend()
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_field_heatmap(means: pl.DataFrame, path: Path, title: str, metric: str = "map"
                       ) -> None:
    """MAP (or `metric`) x100 of each model (rows) on each field's pools (columns), values
    written in; blank where a run was not scored with it."""
    plt = _pyplot()
    fields = [f for f in MAG_FIELDS if f in set(means["field"].to_list())]
    models = _model_order(means["model"].unique().to_list())
    grid = [[(lambda v: float("nan") if v is None else v)(
        _value(means.filter(pl.col("model") == m, pl.col("field") == f), metric))
        for f in fields] for m in models]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 + 0.75 * len(fields)),
                                    1.6 + 0.5 * len(models)))
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(fields)), labels=[MAG_FIELDS[f] for f in fields])
    ax.set_yticks(range(len(models)), labels=models)
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value == value:  # not NaN
                ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=8,
                        color="white" if image.norm(value) < 0.5 else "black")
    fig.colorbar(image, ax=ax, label=f"{metric_name(metric)} x100")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def stage_times(runs_root: Path, corpus: str) -> str:
    """Seconds per stage from the stage-times log, summed over invocations."""
    path = runs_root / corpus / TIMES_FILE
    if not path.exists():
        return ""
    records = pl.DataFrame([json.loads(line) for line in path.read_text().splitlines()])
    totals = records.group_by("stage", maintain_order=True).agg(
        pl.col("seconds").sum(), runs=pl.len())
    rows = [[r["stage"], f"{r['seconds']:.1f}", str(r["runs"])]
            for r in totals.iter_rows(named=True)]
    rows.append(["total", f"{totals['seconds'].sum():.1f}", str(totals['runs'].sum())])
    return _markdown(["stage", "seconds", "invocations"], rows)


def report(runs_root: Path, corpus: str, seed: int = 0) -> str:
    """Write the tables and plots of one corpus and pool seed; return the markdown written.

    Pools of other seeds have other queries, so they are never averaged into the same cells.
    """
    path = runs_root / "results.parquet"
    if not path.exists():
        raise InputError(f"{path} is missing: run `make eval` first")
    # validation pools tune models (MDCR §3); the tables report the test pools (a corpus of
    # validation pools only, an imported mdcr_val, reports those)
    results = read_parquet(path).filter(pl.col("corpus") == corpus)
    results = results.filter(pl.col("split") == ("test" if (results["split"] == "test").any()
                                                 else "validation"))
    if "negatives" not in results.columns:  # collected before per-type scores existed
        results = results.with_columns(negatives=pl.lit("all"))
    seeds = sorted(results["seed"].unique().to_list())
    results = results.filter(pl.col("seed") == seed)
    if results.is_empty():
        other = f" (seeds present: {', '.join(map(str, seeds))}; pass SEED=...)" if seeds else ""
        raise InputError(f"no evaluated runs for CORPUS={corpus} and SEED={seed} in {path}"
                         f"{other}: run `make eval`")
    out_dir = runs_root / "reports"
    sections = []
    perturbed = pl.col("model").str.contains("~", literal=True)  # QUERY_VARIANT runs
    if (results["level"] == "mdcr").any():
        (header, rows), (type_header, type_rows) = mdcr_tables(results.filter(~perturbed))
        captions = (f"{corpus}: MDCR-style benchmark (MDCR Table 3), MAP / R@5 x100 per field; "
                    "averages as the official evaluator computes them (per field x100, "
                    "rounded to 4 decimals, mean over fields); bold: best MAP",
                    f"{corpus}: MAP x100 per candidate type (MDCR Table 4): each query's "
                    "positives and the negatives of one type only, mean over fields")
        for caption, (h, r), name in zip(captions, ((header, rows), (type_header, type_rows)),
                                         ("mdcr", "mdcr-types"), strict=True):
            sections.append(_table(out_dir / f"{corpus}-{name}.tex", caption, h, r))
    results = results.filter(pl.col("negatives") == "all")
    if results.select(perturbed.any()).item():
        scored = results.filter(perturbed, pl.col("value").is_not_null())["metric"]
        metric = _main_metric(sorted(scored.unique().to_list(), key=_metric_key)) or "map"
        header, rows = variant_table(results, metric)
        caption = (f"{corpus}: query robustness, {metric_name(metric)} x100 with full queries "
                   "and with each QUERY_VARIANT (change in points), over the pools and queries "
                   "both runs scored")
        sections.append(_table(out_dir / f"{corpus}-query-variants.tex", caption, header, rows))
        results = results.filter(~perturbed)
    means = _means(results) if results.height else pl.DataFrame(
        schema={**dict.fromkeys(_KEYS, pl.String), "size": pl.Int64})
    metrics = dataset_metrics(means)
    if metrics:
        dataset = results.filter(pl.col("level") == "dataset")
        header, rows = dataset_table(means, _marks(dataset, "size", metrics[0]))
        names, main = " / ".join(metric_name(m) for m in metrics), metric_name(metrics[0])
        missing = (f"; {MISSING}: not computed"
                   if any(MISSING in cell.split(" / ") for row in rows for cell in row[1:])
                   else "")
        caption = (f"{corpus}: dataset-level pools, {names} x100 (top 500), mean ± std over "
                   f"repeats{missing}; bold: best {main}; †: {main} significantly below the "
                   "best (paired t-test, Holm-Bonferroni, p < 0.05)")
        sections.append(_table(out_dir / f"{corpus}-dataset.tex", caption, header, rows))
        slug = re.sub(r"[^a-z0-9]+", "", metrics[0].lower())  # map, ndcg10, recall100, ...
        plot_map_vs_size(means.filter(pl.col("level") == "dataset"),
                         out_dir / f"{corpus}-{slug}-vs-pool-size.png",
                         f"{corpus}: {main} against pool size (dataset-level)", metrics[0])
    for size in sorted(means.filter(pl.col("level") == "field")["size"].unique().to_list()):
        metric = field_metric(means, size)
        if metric is None:  # no value was computed on these pools
            continue
        fields = results.filter(pl.col("level") == "field", pl.col("size") == size)
        header, rows = field_table(means, size, _marks(fields, "field", metric), metric)
        name = metric_name(metric)
        plot_field_heatmap(means.filter(pl.col("level") == "field", pl.col("size") == size),
                           out_dir / f"{corpus}-fields-{format_size(size)}.png",
                           f"{corpus}: {name} on field-level pools of {format_size(size)}",
                           metric)
        caption = (f"{corpus}: field-level pools of {format_size(size)}, {name} x100; bold: "
                   "best; †: significantly below the best (paired t-test, Holm-Bonferroni, "
                   "p < 0.05)")
        sections.append(_table(out_dir / f"{corpus}-field-{format_size(size)}.tex", caption,
                               header, rows))
    sections.append(significance_section(results))
    text = "\n".join(sections)
    with atomic_path(out_dir / f"{corpus}.md") as tmp:
        tmp.write_text(f"# Results: {corpus}\n\n{text}")
    return text
