"""Tables and plots from `runs/results.parquet` (the layout of MDCR Tables 1-2).

Dataset-level: model x pool size, cells MAP / NDCG / R@30 (x100, mean over repeats).
Field-level: model x field, MAP x100 per pool size. Plot: MAP against pool size, one line per
model. Written as markdown, LaTeX and PNG under `runs/reports/`.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.artifacts import atomic_path, read_parquet
from pipeline.errors import InputError
from pipeline.fields import MAG_FIELDS
from pipeline.naming import format_size
from pipeline.timing import TIMES_FILE

CELL_METRICS = ("map", "ndcg", "recall@30")


def _means(results: pl.DataFrame) -> pl.DataFrame:
    """Mean (x100) over repeats, one row per (level, scope, field, size, model)."""
    return (
        results.group_by("level", "scope", "field", "size", "model", "metric")
        .agg(value=pl.col("value").mean() * 100, repeats=pl.len())
        .pivot("metric", index=["level", "scope", "field", "size", "model", "repeats"],
               values="value")
    )


def _model_order(models: list[str]) -> list[str]:
    first = [m for m in ("bm25", "random") if m in models]
    return sorted(set(models) - set(first)) + first


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _latex(header: list[str], rows: list[list[str]], caption: str) -> str:
    def esc(text: str) -> str:
        return text.replace("_", r"\_").replace("%", r"\%")

    body = "\n".join(" & ".join(esc(c) for c in r) + r" \\" for r in rows)
    return (
        "\\begin{table}[t]\n\\centering\n"
        f"\\begin{{tabular}}{{l{'c' * (len(header) - 1)}}}\n\\toprule\n"
        + " & ".join(esc(h) for h in header) + " \\\\\n\\midrule\n" + body
        + f"\n\\bottomrule\n\\end{{tabular}}\n\\caption{{{esc(caption)}}}\n\\end{{table}}\n"
    )


def dataset_table(means: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    data = means.filter(pl.col("level") == "dataset")
    sizes = sorted(data["size"].unique().to_list())
    header = ["model", *[f"{format_size(s)} (MAP / NDCG / R@30)" for s in sizes]]
    rows = []
    for model in _model_order(data["model"].unique().to_list()):
        cells = [model]
        for size in sizes:
            hit = data.filter(pl.col("model") == model, pl.col("size") == size)
            cells.append(" / ".join(f"{hit[m][0]:.1f}" for m in CELL_METRICS)
                         if hit.height else "-")
        rows.append(cells)
    return header, rows


def field_table(means: pl.DataFrame, size: int) -> tuple[list[str], list[list[str]]]:
    data = means.filter(pl.col("level") == "field", pl.col("size") == size)
    fields = [f for f in MAG_FIELDS if f in set(data["field"].to_list())]
    header = ["model", *[MAG_FIELDS[f] for f in fields], "avg"]
    rows = []
    for model in _model_order(data["model"].unique().to_list()):
        values = [data.filter(pl.col("model") == model, pl.col("field") == f)["map"]
                  for f in fields]
        cells = [f"{v[0]:.1f}" if len(v) else "-" for v in values]
        present = [v[0] for v in values if len(v)]
        rows.append([model, *cells, f"{sum(present) / len(present):.1f}" if present else "-"])
    return header, rows


def plot_map_vs_size(means: pl.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for model in _model_order(means["model"].unique().to_list()):
        line = means.filter(pl.col("model") == model).sort("size")
        ax.plot(line["size"], line["map"], marker="o", label=model,
                linestyle=":" if model == "random" else "-")
    ax.set_xscale("log")
    sizes = sorted(means["size"].unique().to_list())
    ax.set_xticks(sizes, labels=[format_size(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("candidate pool size (papers)")
    ax.set_ylabel("MAP x100")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
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
    # validation pools tune models (MDCR §3); the tables report the test pools only
    results = read_parquet(path).filter(pl.col("corpus") == corpus, pl.col("split") == "test")
    seeds = sorted(results["seed"].unique().to_list())
    results = results.filter(pl.col("seed") == seed)
    if results.is_empty():
        other = f" (seeds present: {', '.join(map(str, seeds))}; pass SEED=...)" if seeds else ""
        raise InputError(f"no evaluated runs for CORPUS={corpus} and SEED={seed} in {path}"
                         f"{other}: run `make eval`")
    means = _means(results)
    out_dir = runs_root / "reports"
    sections = []
    if (means["level"] == "dataset").any():
        header, rows = dataset_table(means)
        caption = f"{corpus}: dataset-level pools, MAP / NDCG / R@30 x100 (top 500)"
        sections.append(f"## {caption}\n\n" + _markdown(header, rows))
        with atomic_path(out_dir / f"{corpus}-dataset.tex") as tmp:
            tmp.write_text(_latex(header, rows, caption))
        plot_map_vs_size(means.filter(pl.col("level") == "dataset"),
                         out_dir / f"{corpus}-map-vs-pool-size.png",
                         f"{corpus}: MAP against pool size (dataset-level)")
    for size in sorted(means.filter(pl.col("level") == "field")["size"].unique().to_list()):
        header, rows = field_table(means, size)
        caption = f"{corpus}: field-level pools of {format_size(size)}, MAP x100"
        sections.append(f"## {caption}\n\n" + _markdown(header, rows))
        with atomic_path(out_dir / f"{corpus}-field-{format_size(size)}.tex") as tmp:
            tmp.write_text(_latex(header, rows, caption))
    text = "\n".join(sections)
    with atomic_path(out_dir / f"{corpus}.md") as tmp:
        tmp.write_text(f"# Results: {corpus}\n\n{text}")
    return text
