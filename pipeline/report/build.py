"""`make report`: the tables and plots of a corpus's results, written under runs/reports/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.errors import InputError
from pipeline.core.files import read_parquet
from pipeline.layout import (
    DATA_FOLDERS,
    RESULTS_FILE,
    VARIANT_SEP,
    format_size,
    report_file,
    reports_dir,
    stage_times_path,
)
from pipeline.report.plots import plot_field_heatmap, plot_map_vs_size
from pipeline.report.published import corpus_origin, published_sections
from pipeline.report.tables import (
    COLLECTION,
    GROUP_KEYS,
    MISSING,
    collection_metrics,
    collection_table,
    dataset_metrics,
    dataset_table,
    field_metric,
    field_table,
    main_metric,
    markdown_table,
    mdcr_tables,
    mean_results,
    metric_key,
    metric_name,
    significance_marks,
    significance_section,
    variant_table,
    write_table,
)


def stage_times(runs_root: Path, corpus: str) -> str:
    """Seconds per stage from the stage-times log, summed over invocations."""
    path = stage_times_path(runs_root, corpus)
    if not path.exists():
        return ""
    records = pl.DataFrame([json.loads(line) for line in path.read_text().splitlines()])
    totals = records.group_by("stage", maintain_order=True).agg(
        pl.col("seconds").sum(), runs=pl.len())
    rows = [[r["stage"], f"{r['seconds']:.1f}", str(r["runs"])]
            for r in totals.iter_rows(named=True)]
    rows.append(["total", f"{totals['seconds'].sum():.1f}", str(totals['runs'].sum())])
    return markdown_table(["stage", "seconds", "invocations"], rows)


def report(runs_root: Path, corpus: str, seed: int = 0,
           corpora_root: Path | None = None) -> str:
    """Write the tables and plots of one corpus and pool seed; return the markdown written.

    Pools of other seeds have other queries, so they are never averaged into the same cells.
    `corpora_root` (default: the `corpora/` beside `runs_root`, as in a DATA folder) holds the
    corpus manifest that says what the corpus is: the published numbers get a difference only
    on the paper's setup (docs/published.md).
    """
    path = runs_root / RESULTS_FILE
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
    per_seed = results  # every run of the seed, per candidate type too (published_sections)
    out_dir = reports_dir(runs_root)

    def tex(section: str) -> Path:
        return report_file(out_dir, corpus, section, ".tex")
    sections = []
    perturbed = pl.col("model").str.contains(VARIANT_SEP, literal=True)  # QUERY_VARIANT runs
    if (results["level"] == "mdcr").any():
        tables = mdcr_tables(results.filter(~perturbed))
        captions = (f"{corpus}: MDCR-style benchmark (MDCR Table 3), MAP / R@5 x100 per field, "
                    "on the lists the official evaluator reads (the positives and the types "
                    "bm25, graph, most_cited, random, scincl, specter); averages as it computes "
                    "them (per field x100, rounded to 4 decimals, mean over fields); bold: best "
                    "MAP",
                    f"{corpus}: MAP x100 per candidate type (MDCR Table 4): each query's "
                    "positives and the negatives of one type only, mean over fields",
                    f"{corpus}: NOT the official evaluator's numbers: MAP / R@5 x100 per field "
                    "over every list of the benchmark, including types the official evaluator "
                    "does not read",
                    f"{corpus}: MAP x100 per candidate type the official evaluator does not "
                    "read: each query's positives and that type's negatives only")
        names = ("mdcr", "mdcr-types", "mdcr-every-list", "mdcr-other-types")
        for caption, (header, rows), name in zip(captions, tables, names, strict=True):
            if rows:
                sections.append(write_table(tex(name), caption, header,
                                            rows))
    if (results["level"] == "csfcube").any():  # CSFCube's facet pools (pipeline/external)
        from pipeline.report.tables import csfcube_folds, csfcube_table

        facets = results.filter(pl.col("level") == "csfcube", ~perturbed)
        header, rows = csfcube_table(facets, csfcube_folds(runs_root, corpus, facets))
        caption = (f"{corpus}: CSFCube, NDCG%20 / MAP x100 per facet and over all facets, as "
                   "CSFCube's evaluation computes them (MAP: grades >= 2 relevant; the mean of "
                   "the two test folds' means); bold: best NDCG%20")
        sections.append(write_table(tex("csfcube"), caption, header, rows))
    results = results.filter(pl.col("negatives") == "all")
    collections = results.filter(pl.col("level") == COLLECTION, ~perturbed)
    metrics = collection_metrics(collections)
    if metrics:  # BEIR-layout collections (pipeline/external): models x metrics
        header, rows = collection_table(collections,
                                        significance_marks(collections, "size", metrics[0]))
        names, main = " / ".join(metric_name(m) for m in metrics), metric_name(metrics[0])
        pools = ", ".join(sorted(collections["pool"].unique().to_list()))
        missing = (f"; {MISSING}: not computed"
                   if any(cell == MISSING for row in rows for cell in row[1:]) else "")
        caption = (f"{corpus}: BEIR-layout collection ({pools}), {names} (top 500), the mean "
                   "over queries, 0-1 with 4 decimals (the BEIR paper prints 0.665, MTEB "
                   f"0.6451){missing}; bold: best {main}; †: {main} significantly below the "
                   "best (paired t-test, Holm-Bonferroni, p < 0.05)")
        sections.append(write_table(tex("collection"), caption, header, rows))
    if results.select(perturbed.any()).item():
        scored = results.filter(perturbed, pl.col("value").is_not_null())["metric"]
        metric = main_metric(sorted(scored.unique().to_list(), key=metric_key)) or "map"
        header, rows = variant_table(results, metric)
        caption = (f"{corpus}: query robustness, {metric_name(metric)} x100 with full queries "
                   "and with each QUERY_VARIANT (change in points), over the pools and queries "
                   "both runs scored")
        sections.append(write_table(tex("query-variants"), caption, header,
                                    rows))
        results = results.filter(~perturbed)
    means = mean_results(results) if results.height else pl.DataFrame(
        schema={**dict.fromkeys(GROUP_KEYS, pl.String), "size": pl.Int64})
    metrics = dataset_metrics(means)
    if metrics:
        dataset = results.filter(pl.col("level") == "dataset")
        header, rows = dataset_table(means, significance_marks(dataset, "size", metrics[0]))
        names, main = " / ".join(metric_name(m) for m in metrics), metric_name(metrics[0])
        missing = (f"; {MISSING}: not computed"
                   if any(MISSING in cell.split(" / ") for row in rows for cell in row[1:])
                   else "")
        caption = (f"{corpus}: dataset-level pools, {names} x100 (top 500), mean ± std over "
                   f"repeats{missing}; bold: best {main}; †: {main} significantly below the "
                   "best (paired t-test, Holm-Bonferroni, p < 0.05)")
        sections.append(write_table(tex("dataset"), caption, header, rows))
        slug = re.sub(r"[^a-z0-9]+", "", metrics[0].lower())  # map, ndcg10, recall100, ...
        plot_map_vs_size(means.filter(pl.col("level") == "dataset"),
                         report_file(out_dir, corpus, f"{slug}-vs-pool-size", ".png"),
                         f"{corpus}: {main} against pool size (dataset-level)", metrics[0])
    for size in sorted(means.filter(pl.col("level") == "field")["size"].unique().to_list()):
        metric = field_metric(means, size)
        if metric is None:  # no value was computed on these pools
            continue
        fields = results.filter(pl.col("level") == "field", pl.col("size") == size)
        header, rows = field_table(means, size, significance_marks(fields, "field", metric), metric)
        name = metric_name(metric)
        plot_field_heatmap(means.filter(pl.col("level") == "field", pl.col("size") == size),
                           report_file(out_dir, corpus, f"fields-{format_size(size)}", ".png"),
                           f"{corpus}: {name} on field-level pools of {format_size(size)}",
                           metric)
        caption = (f"{corpus}: field-level pools of {format_size(size)}, {name} x100; bold: "
                   "best; †: significantly below the best (paired t-test, Holm-Bonferroni, "
                   "p < 0.05)")
        sections.append(write_table(tex(f"field-{format_size(size)}"), caption,
                               header, rows))
    sections.append(significance_section(results))
    # the papers' published numbers beside the measured cells that match them (docs/published.md)
    corpora = corpora_root if corpora_root is not None else (
        runs_root.parent / DATA_FOLDERS["corpora"])
    sections += published_sections(per_seed, out_dir, corpus, corpus_origin(corpora, corpus))
    text = "\n".join(sections)
    with atomic_path(report_file(out_dir, corpus)) as tmp:
        tmp.write_text(f"# Results: {corpus}\n\n{text}")
    return text


def jaccard_report(table: pl.DataFrame, runs_root: Path, corpus: str, depth: int) -> str:
    """`make mdcr-jaccard`: the models' negative overlap as a Markdown table, written under
    runs/reports/ and returned."""
    text = (f"Average Jaccard index between the {depth} highest-ranked negatives of two "
            f"models ({corpus}, field-level test pools; MDCR §4: pick the models whose "
            "negatives overlap least)\n\n" + markdown_table(
                ["model a", "model b", "Jaccard", "fields", "queries"],
                [[a, b, f"{j:.3f}", str(f), str(q)] for a, b, j, f, q in table.iter_rows()]))
    with atomic_path(report_file(reports_dir(runs_root), corpus, "mdcr-jaccard")) as tmp:
        tmp.write_text(text)
    return text
