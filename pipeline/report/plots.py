"""The report's plots (matplotlib, loaded only when a plot is drawn): metric against pool size,
and a field-by-model heatmap."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.fields import MAG_FIELDS
from pipeline.layout import format_size
from pipeline.report.tables import cell_value, metric_name, model_order


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plain(text: str) -> str:
    """A name or title as matplotlib prints it as itself: `$` escaped, or `$...$` in a corpus
    or model name would be parsed as math (and fail the report on `$\\x$`)."""
    return text.replace("$", r"\$")


def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)


def plot_map_vs_size(means: pl.DataFrame, path: Path, title: str, metric: str = "map") -> None:
    """MAP (or `metric`) against pool size (log x), one line per model, error bars and a band:
    mean ± std over repeats; sizes whose runs were not scored with it are left out of a
    model's line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    has = means.filter(pl.col(metric).is_not_null()) if metric in means.columns else means[:0]
    for model in model_order(has["model"].unique().to_list()):
        line = has.filter(pl.col("model") == model).sort("size")
        std = line[f"{metric}_std"].fill_null(0)
        drawn = ax.errorbar(line["size"], line[metric], yerr=std, marker="o", capsize=3,
                            label=_plain(model), linestyle=":" if model == "random" else "-")
        ax.fill_between(line["size"], line[metric] - std, line[metric] + std, alpha=0.15,
                        color=drawn.lines[0].get_color(), linewidth=0)
    ax.set_xscale("log")
    sizes = sorted(means["size"].unique().to_list())
    ax.set_xticks(sizes, labels=[format_size(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("candidate pool size (papers)")
    ax.set_ylabel(f"{metric_name(metric)} x100 (mean ± std over repeats)")
    ax.set_title(_plain(title))
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
    models = model_order(means["model"].unique().to_list())
    grid = [[(lambda v: float("nan") if v is None else v)(
        cell_value(means.filter(pl.col("model") == m, pl.col("field") == f), metric))
        for f in fields] for m in models]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 + 0.75 * len(fields)),
                                    1.6 + 0.5 * len(models)))
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(fields)), labels=[MAG_FIELDS[f] for f in fields])
    ax.set_yticks(range(len(models)), labels=[_plain(m) for m in models])
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value == value:  # not NaN
                ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=8,
                        color="white" if image.norm(value) < 0.5 else "black")
    fig.colorbar(image, ax=ax, label=f"{metric_name(metric)} x100")
    ax.set_title(_plain(title), fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_lines(lines: list[tuple[str, list[int], list[float], str]], path: Path, title: str,
               ylabel: str) -> None:
    """Lines against pool size (log x): each (label, sizes, values, linestyle)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    sizes = sorted({size for _, xs, _, _ in lines for size in xs})
    for label, xs, ys, style in lines:
        ax.plot(xs, ys, marker="o", linestyle=style, label=_plain(label))
    ax.set_xscale("log")
    if sizes:
        ax.set_xticks(sizes, labels=[format_size(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("candidate pool size (papers)")
    ax.set_ylabel(ylabel)
    ax.set_title(_plain(title), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
