"""Tables and plots from `runs/results.parquet` (the layout of MDCR Tables 1-4).

Dataset-level: model x pool size, cells MAP / NDCG / R@30 (x100: the mean over a pool's queries,
then mean ± standard deviation over repeats), or whatever metrics the runs were scored with:
evaluations with other metric sets (METRICS=map, MDCR's recall@5, BEIR's ndcg@10/recall@100)
share the tables, a metric a run was not scored with is shown as "-".
Field-level: model x field, MAP x100 per pool size. Plot: MAP against pool size, one line per
model (where no run has MAP: the first metric computed). MDCR-style benchmarks: Tables 3 and 4
(`mdcr_tables`); perturbed queries: each model's change against full queries
(`variant_table`). Written as markdown, LaTeX and PNG under `runs/reports/`.

Every table is the same bytes whatever the order of the results' rows and polars' number of
threads: groups are put in order by explicit keys (never the order a group_by meets them),
per-query values reach the paired tests and the bootstrap sorted by query id, and means are
summed over sorted values (`significance.ordered`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from pipeline.evaluation.significance import (
    BOUNDS,
    LEVEL,
    MIN_QUERIES,
    agreeing_interval,
    bootstrap_level,
    compare,
    intervals,
    level_grid,
    ordered,
    paired,
    too_few,
)
from pipeline.evaluation.variance import below_best
from pipeline.fields import MAG_FIELDS
from pipeline.layout import BOOTSTRAP_LEVEL_RESULTS, EVALUATION_DOC, format_size

if TYPE_CHECKING:
    from pipeline.mdcr.official import Numbers

CELL_METRICS = ("map", "ndcg", "recall@30")
# the order of a cell's metrics: the large-scale set, then MDCR's and BEIR's, then the rest
METRIC_ORDER = (*CELL_METRICS, "recall@5", "ndcg@10", "recall@100")
METRIC_NAMES = {"map": "MAP", "ndcg": "NDCG", "recall": "R", "precision": "P", "mrr": "MRR",
                "r-precision": "R-Prec", "hit_rate": "HR", "hits": "Hits", "f1": "F1",
                "bpref": "bpref", "ndcg_burges": "NDCG-B"}
MISSING = "-"  # a cell whose metric was not computed (or a model not run on those pools)
GROUP_KEYS = ["level", "scope", "field", "size", "model"]


def metric_name(metric: str) -> str:
    """The short name of a ranx metric: map -> MAP, recall@30 -> R@30, ndcg@10 -> NDCG@10."""
    base, _, cut = metric.partition("@")
    return METRIC_NAMES.get(base, base) + (f"@{cut}" if cut else "")


def metric_key(metric: str) -> tuple[int, str]:
    return (METRIC_ORDER.index(metric) if metric in METRIC_ORDER else len(METRIC_ORDER), metric)


def mean_results(results: pl.DataFrame) -> pl.DataFrame:
    """Per (level, scope, field, size, model): each metric's mean over queries, then its mean
    and standard deviation (x100) over the repeats; columns <metric>, <metric>_std and
    <metric>_n (the repeats scored with it: evaluations of one model may use other metric
    sets on other pools). A metric a row was not scored with is null."""
    per_run = (results.group_by(*GROUP_KEYS, "repeat", "metric")
               .agg(ordered("value").mean()))
    summary = per_run.group_by(*GROUP_KEYS, "metric").agg(
        mean=ordered("value").mean() * 100, std=ordered("value").std() * 100,
        n=pl.col("value").count()).sort(*GROUP_KEYS, "metric")

    def wide(column: str, suffix: str) -> pl.DataFrame:
        table = summary.pivot("metric", index=GROUP_KEYS, values=column, sort_columns=True)
        return table.rename({c: f"{c}{suffix}" for c in table.columns if c not in GROUP_KEYS})

    return (wide("mean", "").join(wide("std", "_std"), on=GROUP_KEYS, nulls_equal=True)
            .join(wide("n", "_n"), on=GROUP_KEYS, nulls_equal=True).sort(GROUP_KEYS))


def _metrics(means: pl.DataFrame) -> list[str]:
    """The metrics that have a value in some row of `means`, in METRIC_ORDER."""
    found = [c for c in means.columns if f"{c}_std" in means.columns
             and means[c].null_count() < means.height]
    return sorted(found, key=metric_key)


def main_metric(metrics: list[str]) -> str | None:
    """The metric that tables mark and plots draw: MAP when there is one."""
    return "map" if "map" in metrics else (metrics[0] if metrics else None)


def cell_value(row: pl.DataFrame, metric: str) -> float | None:
    """The first row's value of `metric`; None when it was not computed."""
    if metric not in row.columns or not row.height:
        return None
    value = row[metric][0]
    return None if value is None or value != value else float(value)  # null or NaN


def _cell(row: pl.DataFrame, metric: str) -> str:
    """mean, with ± std when there are repeats; "-" when the metric was not computed."""
    mean = cell_value(row, metric)
    if mean is None:
        return MISSING
    std, n = cell_value(row, f"{metric}_std"), cell_value(row, f"{metric}_n")
    return f"{mean:.1f}" if std is None or (n or 0) < 2 else f"{mean:.1f} ± {std:.1f}"


def _per_query(results: pl.DataFrame) -> pl.DataFrame:
    """model, query, value: a query's value averaged over repeats (a seed's repeats share their
    queries), what the paired tests compare; sorted by model and query id."""
    return (results.group_by("model", "query").agg(ordered("value").mean())
            .sort("model", "query"))


def _groups(results: pl.DataFrame, keys: list[str]) -> list[tuple[tuple, pl.DataFrame]]:
    """`results` split by `keys`, in the keys' sorted order (a metric in METRIC_ORDER), never
    the order the rows come in."""
    def order(key: tuple) -> tuple:
        return tuple(metric_key(v) if k == "metric" else (v is None, "" if v is None else v)
                     for k, v in zip(keys, key, strict=True))

    parts = results.partition_by(keys, as_dict=True)
    return [(key, parts[key]) for key in sorted(parts, key=order)]


def significance_marks(results: pl.DataFrame, by: str, metric: str = "map") -> dict[tuple, str]:
    """(value of `by`, model) -> "best" for the best mean `metric` of its column (`best_model`),
    "worse" for a model significantly below it, "" otherwise: the test the summary's "best"
    rests on (`variance.below_best`: the 95% interval of its difference with the best, over
    queries and pool draws where there are several draws, else the paired t-test's, excludes
    0; each pair unadjusted, as the summary's)."""
    marks: dict[tuple, str] = {}
    data = results.filter(pl.col("metric") == metric, pl.col("value").is_not_null())
    for (key,), group in _groups(data, [by]):
        per_query = _per_query(group)
        if per_query["model"].n_unique() < 2:
            continue
        best = best_model(per_query)
        marks |= {(key, best): "best",
                  **{(key, model): "worse" for model in below_best(group, best)}}
    return marks


def best_model(per_query: pl.DataFrame) -> str:
    """The model of the best mean of `per_query` (model, query, value); a tie goes to the
    first model by name."""
    means = per_query.group_by("model").agg(ordered("value").mean())
    return means.sort(["value", "model"], descending=[True, False], nulls_last=True)[
        "model"][0]


def column_marks(per_query: pl.DataFrame, table: pl.DataFrame) -> dict[str, str]:
    """model -> "best" for the best mean of `per_query` (`best_model`), "worse" for each model
    whose pair with it is `significant` in `table` (significance.compare's rows: the test
    and correction `pipeline.compare` was asked for)."""
    best = best_model(per_query)
    marks = {best: "best"}
    for row in table.filter(pl.col("significant")).iter_rows(named=True):
        if best in (row["a"], row["b"]):
            marks[row["b"] if row["a"] == best else row["a"]] = "worse"
    return marks


def marked(text: str, mark: str) -> str:
    """A cell's text with its mark: `**x**` the best, `x†` significantly below it."""
    return f"**{text}**" if mark == "best" else f"{text}†" if mark == "worse" else text


def model_order(models: list[str]) -> list[str]:
    first = [m for m in ("bm25", "random") if m in models]
    return sorted(set(models) - set(first)) + first


# LaTeX's special characters, each as text; `<`, `>` and `|` too (other glyphs in OT1)
LATEX_TEXT = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&",
              "#": r"\#", "^": r"\textasciicircum{}", "_": r"\_", "~": r"\textasciitilde{}",
              "%": r"\%", "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}
_LATEX_SPECIAL = re.compile("|".join(map(re.escape, LATEX_TEXT)))
_LINE_BREAK = re.compile(r"\r\n|[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """A cell or caption on one line: a name holding a line break (any kind) must not end a
    Markdown row or heading, nor make a paragraph break inside a LaTeX tabular."""
    return _LINE_BREAK.sub(" ", text)


# what a Markdown renderer reads as HTML (`<`, `>`, `&`) or as an escape (`\\`)
_MARKDOWN_ACTIVE = re.compile(r"[\\<>&]")
_MARKDOWN_ESCAPED = re.compile(r"\\([\\<>&|])")


def markdown_text(text: str) -> str:
    """Text of a Markdown heading or cell: one line, `\\ < > &` backslash-escaped (GFM
    escapes any ASCII punctuation), so that a name such as `<!--<script>` shows as itself
    instead of opening an HTML comment that hides the rest of the file."""
    return _MARKDOWN_ACTIVE.sub(lambda m: "\\" + m.group(0), one_line(text))


def markdown_unescaped(text: str) -> str:
    """The text `markdown_text` or `markdown_cell` was given (its escapes undone)."""
    return _MARKDOWN_ESCAPED.sub(lambda m: m.group(1), text)


def markdown_cell(text: str) -> str:
    """A cell of a Markdown pipe table: `markdown_text`, with `|` escaped (GFM) too, so that a
    name such as `a|b` stays one cell."""
    return markdown_text(text).replace("|", r"\|")


def latex_text(text: str) -> str:
    """A cell or caption as LaTeX: every special character as text (a name such as `x%y&z_1#`
    compiles and prints as itself), then the report's marks: `**x**` bold, ±, †, ≥ and ≤."""
    text = _LATEX_SPECIAL.sub(lambda m: LATEX_TEXT[m.group(0)], one_line(text))
    text = re.sub(r"\*\*(.+?)\*\*", r"\\textbf{\1}", text).replace("±", r"$\pm$")
    return text.replace("†", r"$^\dagger$").replace("≥", r"$\geq$").replace("≤", r"$\leq$")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GFM pipe table; each cell escaped (`markdown_cell`)."""
    lines = ["| " + " | ".join(map(markdown_cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(markdown_cell, r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# ---- LaTeX tables no wider than a page -------------------------------------------------------
TEXT_WIDTH = 345.0  # pt: \textwidth of LaTeX's one-column article at its default 10 pt
COLUMN_SPACE = 12.0  # pt: \tabcolsep (6 pt) each side of a column
PROSE_LEAST = 120.0  # pt: the narrowest a column of prose is set in (a \parbox wrapping it)
HEADER_LEAST = 40.0  # pt: a header's lines may be this wide over narrower cells ("draw sd")
# Computer Modern Roman 10 pt (cmr10.tfm), glyphs by width as `latex_text` sets them, each class
# at its widest in pt (o with its kern before another o): an estimate never narrower than the
# set text; a glyph of no class counts as the widest
GLYPH_WIDTHS = (("!',.:;[]`fijl|", 3.06), (" -()Irst_", 3.95), ("†", 4.0),
                ("\"$*/0123456789\\^aceg{}z~", 5.01), ("JSbdhknopquvxy?", 5.56),
                ("EFLPZ", 6.81), ("&+=@ABCDGHKNOQRTUVXYw±≥≤<>", 7.85), ("#%m", 8.34),
                ("M", 9.17))
WIDEST_GLYPH = 10.28  # W
BOLD = 1.15  # Computer Modern Bold Extended against Roman, glyph by glyph at most
_GLYPH_WIDTH = {glyph: width for glyphs, width in GLYPH_WIDTHS for glyph in glyphs}


def text_width(text: str) -> float:
    """The width in pt that `latex_text(text)` sets on one line at 10 pt, estimated from
    above (`GLYPH_WIDTHS`); `**x**` in bold."""
    plain = re.sub(r"\*\*(.+?)\*\*", "", one_line(text))
    bold = "".join(re.findall(r"\*\*(.+?)\*\*", one_line(text)))
    return (sum(_GLYPH_WIDTH.get(c, WIDEST_GLYPH) for c in plain)
            + BOLD * sum(_GLYPH_WIDTH.get(c, WIDEST_GLYPH) for c in bold))


def body_width(rows: list[list[str]], column: int) -> float:
    """The width in pt of the widest cell of `column` (`text_width`)."""
    return max((text_width(r[column]) for r in rows), default=0.0)


def header_lines(text: str, width: float) -> list[str]:
    """A header cell broken between words into lines no wider than `width` (or its widest
    word), so that a long header does not widen a column of short cells."""
    lines: list[str] = []
    for word in one_line(text).split(" "):
        if lines and text_width(f"{lines[-1]} {word}") <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines


@dataclass(frozen=True)
class LatexLayout:
    """How a table's columns are set in LaTeX within TEXT_WIDTH: `parts`, tabulars one under
    another, each its columns' indices (the row keys first in every part); `prose`, columns
    set as wrapped text of a width in pt; `lifted`, columns the same in every row, said in a
    note instead."""

    parts: tuple[tuple[int, ...], ...]
    prose: Mapping[int, float]
    lifted: tuple[int, ...]
    keys: int

    def notes(self, header: list[str], rows: list[list[str]]) -> tuple[str, ...]:
        """The notes the layout adds: the lifted columns' one value, the parts' keys."""
        said = []
        if self.lifted:
            said.append("The same in every row: " + "; ".join(
                f"{one_line(header[c])}: {one_line(rows[0][c])}" for c in self.lifted) + ".")
        if len(self.parts) > 1:
            keys = ", ".join(one_line(header[c]) for c in self.parts[0] if c < self.keys)
            said.append(f"Set in {len(self.parts)} parts to fit the page, one under another, "
                        f"each row named by its {keys}.")
        return tuple(said)


def row_keys(header: list[str], rows: list[list[str]]) -> int:
    """The fewest leading columns whose cells tell every row apart (at least 1; none of them
    the last column): what a split table repeats in each part."""
    for keys in range(1, len(header)):
        if len({tuple(r[:keys]) for r in rows}) == len(rows):
            return keys
    return 1


def latex_layout(header: list[str], rows: list[list[str]]) -> LatexLayout:
    """The columns of `header` and `rows` within TEXT_WIDTH, by the first of these that fits:
    as they are (each header broken into lines as narrow as its column's cells); a column of
    prose wrapped; the columns that hold one value in every row lifted into a note, then the
    rest split into parts that repeat the row keys (`row_keys`), a part still too wide
    `squeezed`. Markdown and HTML keep every column."""
    count = len(header)

    def width(c: int) -> float:
        body = body_width(rows, c)
        lines = header_lines(header[c], max(body, HEADER_LEAST))
        return max(body, *map(text_width, lines)) + COLUMN_SPACE

    def least(c: int) -> float:  # its widest word (TeX may break after a hyphen)
        words = [w for text in (header[c], *(r[c] for r in rows))
                 for w in re.split(r"\s+|(?<=-)", one_line(text))]
        return max(map(text_width, words), default=0.0) + COLUMN_SPACE

    widths = [width(c) for c in range(count)]
    everything, keys = tuple(range(count)), row_keys(header, rows)
    if sum(widths) <= TEXT_WIDTH:
        return LatexLayout((everything,), {}, (), keys)

    def wrapped(columns: tuple[int, ...]) -> dict[int, float] | None:
        """The widest column of `columns` wrapped in the room the others leave, where it is
        prose (words) and the room at least PROSE_LEAST."""
        widest = max(columns, key=lambda c: widths[c])
        room = TEXT_WIDTH - sum(widths[c] for c in columns if c != widest) - COLUMN_SPACE
        prose = any(" " in one_line(r[widest]) for r in rows)
        return {widest: room} if prose and room >= PROSE_LEAST else None

    if (found := wrapped(everything)) is not None:
        return LatexLayout((everything,), found, (), keys)
    lifted = tuple(c for c in range(count) if len(rows) > 1 and len({r[c] for r in rows}) == 1)
    rest = tuple(c for c in range(count) if c not in lifted)
    if sum(widths[c] for c in rest) <= TEXT_WIDTH:
        return LatexLayout((rest,), {}, lifted, keys)
    if (found := wrapped(rest)) is not None:
        return LatexLayout((rest,), found, lifted, keys)
    lead = tuple(c for c in rest if c < keys)  # the keys that vary
    parts: list[tuple[int, ...]] = []
    for c in rest[len(lead):]:
        if parts and sum(widths[k] for k in (*lead, *parts[-1], c)) <= TEXT_WIDTH:
            parts[-1] += (c,)
        else:
            parts.append((c,))
    wraps: dict[int, float] = {}
    for part in parts:  # a key squeezed in one part is set as narrow in every part
        for c, wrap in squeezed((*lead, *part), widths, [least(c) for c in range(count)]).items():
            wraps[c] = min(wrap, wraps.get(c, wrap))
    return LatexLayout(tuple((*lead, *p) for p in parts), wraps, lifted, keys)


def squeezed(columns: tuple[int, ...], widths: list[float], least: list[float]
             ) -> dict[int, float]:
    """Widths in pt at which to wrap `columns` (their `widths` and `least`, the widest word,
    each with its COLUMN_SPACE) so that together they fit TEXT_WIDTH: every column wider than
    a cap wrapped at it (never below its least), the cap as high as fits; none where they fit
    as they are, and each at its least where nothing fits."""
    room = TEXT_WIDTH - len(columns)  # 1 pt a column for its width printed rounded up
    if sum(widths[c] for c in columns) <= TEXT_WIDTH:
        return {}
    low, high = 0.0, max(widths[c] for c in columns)
    for _ in range(60):  # bisection on the cap: the total falls as the cap falls
        cap = (low + high) / 2
        total = sum(max(least[c], min(widths[c], cap)) for c in columns)
        low, high = (cap, high) if total <= room else (low, cap)
    return {c: max(least[c], low) - COLUMN_SPACE for c in columns if widths[c] > low}


def _latex_header(text: str, width: float, align: str) -> str:
    """A header cell, its lines (`header_lines`) stacked in a one-column tabular."""
    lines = header_lines(text, width)
    if len(lines) == 1:
        return latex_text(lines[0])
    return (f"\\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}"
            + r"\\".join(map(latex_text, lines)) + "\\end{tabular}")


def latex_tabular(header: list[str], rows: list[list[str]], columns: tuple[int, ...],
                  prose: Mapping[int, float]) -> str:
    """One booktabs tabular of `columns`: the first left-aligned, the rest centred, a column
    of `prose` wrapped ragged-right in a \\parbox of its width."""
    def cell(text: str, c: int) -> str:
        if c in prose:
            return f"\\parbox[t]{{{math.ceil(prose[c])}pt}}{{\\raggedright {latex_text(text)}}}"
        return latex_text(text)

    aligns = ["l" if i == 0 or c in prose else "c" for i, c in enumerate(columns)]
    heads = [_latex_header(header[c], prose.get(c, max(body_width(rows, c), HEADER_LEAST)),
                           align) for c, align in zip(columns, aligns, strict=True)]
    body = "\n".join(" & ".join(cell(r[c], c) for c in columns) + r" \\" for r in rows)
    return (f"\\begin{{tabular}}{{{''.join(aligns)}}}\n\\toprule\n" + " & ".join(heads)
            + " \\\\\n\\midrule\n" + body + "\n\\bottomrule\n\\end{tabular}\n")


def latex_table(header: list[str], rows: list[list[str]], caption: str,
                notes: tuple[str, ...] = ()) -> str:
    """The table as a standalone LaTeX table float (booktabs): its caption above the tabular,
    as a paper sets a table, and its notes under it, a footnotesize list inside the float (the
    same words as the Markdown and the HTML page, after what `latex_layout` adds); every
    cell, the caption and each note escaped (`latex_text`). No wider than TEXT_WIDTH at the
    normal size: `latex_layout` wraps, lifts or splits columns where it must."""
    layout = latex_layout(header, rows)
    tabulars = "\\par\\medskip\n".join(latex_tabular(header, rows, part, layout.prose)
                                       for part in layout.parts)
    items = "".join(f"\\item {latex_text(note)}\n"
                    for note in (*layout.notes(header, rows), *notes))
    under = ("\\par\\smallskip\n\\begin{minipage}{\\linewidth}\\footnotesize\\raggedright\n"
             "\\begin{itemize}\\setlength{\\itemsep}{0pt}\n" + items
             + "\\end{itemize}\n\\end{minipage}\n") if items else ""
    return ("\\begin{table}[t]\n\\centering\n"
            f"\\caption{{{latex_text(caption)}}}\n\\smallskip\n" + tabulars + under
            + "\\end{table}\n")


CAPTION_WORDS = 60  # a caption's most words: what the table shows and its test (issue 79)


def caption_words(caption: str) -> int:
    """The words of a caption, as a reader counts them (separated by white space)."""
    return len(caption.split())


def method_note(anchor: str) -> str:
    """The note that names where a table's method is written in full."""
    return f"The method in full: {EVALUATION_DOC}#{anchor}."


def clauses(text: str) -> tuple[str, ...]:
    """A caption-style text of clauses joined by "; " as notes: split where "; " stands
    outside parentheses and brackets, each clause begun with a capital and ended with a
    period."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if depth == 0 and text.startswith("; ", i):
            parts.append(text[start:i])
            start = i + 2
    parts.append(text[start:])
    return tuple(sentence(part) for part in parts if part.strip())


def sentence(text: str) -> str:
    """`text` as a sentence: stripped, its first letter a capital (not a name's such as
    jkAP or infAP, whose later letters are capitals), ended with a period."""
    text = text.strip()
    first = text.split(" ", 1)[0]
    if first[1:] == first[1:].lower():
        text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else f"{text}."


def lowered(caption: str) -> str:
    """A caption begun in lower case, to stand after "<corpus>: " (not a name's first letter,
    such as CSFCube's)."""
    first = caption.split(" ", 1)[0]
    return caption[:1].lower() + caption[1:] if first[1:] == first[1:].lower() else caption


@dataclass(frozen=True)
class Table:
    """One table of the report: written as `<corpus>-<name>.tex`, shown as a Markdown section
    (its caption, the table, its notes as a list) and in the HTML page (the notes folded)."""

    name: str  # the file's section name: dataset, field-100k, published-<section>, ...
    caption: str  # what the table shows and its test, at most CAPTION_WORDS words
    header: list[str]
    rows: list[list[str]]
    notes: tuple[str, ...] = ()  # the method, one or two sentences each, printed under it

    def __post_init__(self) -> None:
        """A caption over CAPTION_WORDS words is a programming error: its method belongs in
        the notes."""
        object.__setattr__(self, "notes", tuple(self.notes))
        if (words := caption_words(self.caption)) > CAPTION_WORDS:
            raise ValueError(f"table {self.name!r}: its caption has {words} words, over "
                             f"CAPTION_WORDS ({CAPTION_WORDS}); move the method into its "
                             f"notes: {self.caption[:120]}...")

    @property
    def markdown(self) -> str:
        notes = "".join(f"- {markdown_text(note)}\n" for note in self.notes)
        return (f"## {markdown_text(self.caption)}\n\n" + markdown_table(self.header, self.rows)
                + (f"\n{notes}" if notes else ""))

    @property
    def latex(self) -> str:
        return latex_table(self.header, self.rows, self.caption, self.notes)

    @property
    def prose(self) -> str:
        """Its caption and notes as one text (what a reader reads around the cells)."""
        return " ".join([self.caption, *self.notes])

    def frame(self) -> pl.DataFrame:
        """The table's cells as strings, one column per header cell (as printed)."""
        return pl.DataFrame([dict(zip(self.header, row, strict=True)) for row in self.rows],
                            schema=dict.fromkeys(self.header, pl.String))


def dataset_metrics(means: pl.DataFrame) -> list[str]:
    """The metrics of the dataset-level table's cells: every metric some dataset-level run was
    scored with, MAP first (the one `significance_marks` marks)."""
    metrics = _metrics(means.filter(pl.col("level") == "dataset"))
    main = main_metric(metrics)
    return [main, *[m for m in metrics if m != main]] if main else []


def dataset_table(means: pl.DataFrame, marks: dict[tuple, str] | None = None
                  ) -> tuple[list[str], list[list[str]]]:
    """Models x pool sizes; the first metric of a cell (MAP if any run has it) marked by
    `significance_marks`; "-" for a metric a run was not scored with."""
    marks = marks or {}
    data = means.filter(pl.col("level") == "dataset")
    sizes = sorted(data["size"].unique().to_list())
    metrics = dataset_metrics(means)
    names = " / ".join(metric_name(m) for m in metrics)
    header = ["model", *[f"{format_size(s)} ({names})" for s in sizes]]
    rows = []
    for model in model_order(data["model"].unique().to_list()):
        cells = [model]
        for size in sizes:
            hit = data.filter(pl.col("model") == model, pl.col("size") == size)
            parts = [_cell(hit, m) for m in metrics] if hit.height else []
            if parts and parts[0] != MISSING:
                parts[0] = marked(parts[0], marks.get((size, model), ""))
            cells.append(" / ".join(parts) if parts else MISSING)
        rows.append(cells)
    return header, rows


def field_metric(means: pl.DataFrame, size: int) -> str | None:
    """The metric of the field-level table of `size`: MAP, or the first metric computed there
    when no run was scored with MAP; None when nothing was."""
    return main_metric(_metrics(means.filter(pl.col("level") == "field",
                                              pl.col("size") == size)))


def _field_values(means: pl.DataFrame, size: int, metric: str
                  ) -> tuple[list[str], dict[str, list[float | None]]]:
    """The fields of the field-level pools of `size` (MAG order) and each model's `metric` on
    each (None where its run was not scored with it, or not run)."""
    data = means.filter(pl.col("level") == "field", pl.col("size") == size)
    fields = [f for f in MAG_FIELDS if f in set(data["field"].to_list())]
    return fields, {
        model: [cell_value(data.filter(pl.col("model") == model, pl.col("field") == f), metric)
                for f in fields] for model in model_order(data["model"].unique().to_list())}


def averaged_fields(means: pl.DataFrame, size: int, metric: str | None = None) -> list[str]:
    """The fields the field-level table of `size` averages over: those every model of the
    table has a value on. A model missing a field is never averaged over fewer fields than
    another (its mean would be over other queries: 24.3 over 2 fields against 29.3 over 3)."""
    metric = metric or field_metric(means, size) or "map"
    fields, values = _field_values(means, size, metric)
    return [f for i, f in enumerate(fields) if all(v[i] is not None for v in values.values())]


def field_table(means: pl.DataFrame, size: int, marks: dict[tuple, str] | None = None,
                metric: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Models x fields, MAP (or `metric`), and the macro-average over the fields every model
    has (`averaged_fields`: "-" when there is none); "-" where a model's run was not scored
    with it."""
    marks = marks or {}
    metric = metric or field_metric(means, size) or "map"
    fields, values = _field_values(means, size, metric)
    shared = set(averaged_fields(means, size, metric))
    header = ["model", *[MAG_FIELDS[f] for f in fields], "avg"]
    rows = []
    for model, found in values.items():
        cells = [marked(f"{v:.1f}", marks.get((f, model), "")) if v is not None else MISSING
                 for f, v in zip(fields, found, strict=True)]
        averaged = [v for f, v in zip(fields, found, strict=True) if f in shared]
        rows.append([model, *cells,
                     f"{sum(averaged) / len(averaged):.1f}" if averaged else MISSING])
    return header, rows


# ---- BEIR-layout collections (pipeline/external/beir.py) --------------------------------------
COLLECTION = "collection"  # the level of a collection's pools


def collection_metrics(results: pl.DataFrame) -> list[str]:
    """The metrics of the collection table: every metric a collection pool's runs have a value
    of, nDCG@10 first (BEIR's headline metric; else MAP, else the first in METRIC_ORDER)."""
    data = results.filter(pl.col("level") == COLLECTION, pl.col("value").is_not_null())
    metrics = sorted(data["metric"].unique().to_list(), key=metric_key)
    main = "ndcg@10" if "ndcg@10" in metrics else main_metric(metrics)
    return [main, *[m for m in metrics if m != main]] if main else []


def collection_table(results: pl.DataFrame, marks: dict[tuple, str] | None = None
                     ) -> tuple[list[str], list[list[str]]]:
    """Models x metrics of the collection's pools (level "collection"; one column per metric,
    and per pool when there are several): the mean over a pool's queries (then over repeats),
    on BEIR's 0-1 scale with 4 decimals, as BEIR (0.665) and MTEB (0.6451) print nDCG@10; the
    first metric marked by `significance_marks` (keyed by size); "-" where a run lacks it."""
    marks = marks or {}
    data = results.filter(pl.col("level") == COLLECTION, pl.col("value").is_not_null())
    metrics = collection_metrics(results)
    means = (data.group_by("scope", "size", "repeat", "model", "metric")
             .agg(ordered("value").mean())
             .group_by("scope", "size", "model", "metric").agg(ordered("value").mean()))
    value = {(scope, size, model, metric): v
             for scope, size, model, metric, v in means.iter_rows()}
    pools = sorted(means.select("size", "scope").unique().rows())
    names = [metric_name(m) for m in metrics]
    header = ["model", *(names if len(pools) == 1 else
                         [f"{scope}-{format_size(size)} {name}" for size, scope in pools
                          for name in names])]
    rows = []
    for model in model_order(means["model"].unique().to_list()):
        cells = [model]
        for size, scope in pools:
            for metric in metrics:
                mean = value.get((scope, size, model, metric))
                text = MISSING if mean is None else f"{mean:.4f}"
                if metric == metrics[0] and mean is not None:
                    text = marked(text, marks.get((size, model), ""))
                cells.append(text)
        rows.append(cells)
    return header, rows


def _mdcr_field_table(numbers: Numbers,
                      models: list[str], fields: list[str]
                      ) -> tuple[list[str], list[list[str]]]:
    """Models x fields, MAP / R@5 per field, and the averages (MAP, NDCG, R@5) of `numbers`
    (model -> the official evaluator's per-field table and averages); bold: best MAP."""
    if not models:
        return [], []
    best = max(models, key=lambda m: numbers[m][1].get("map", float("-inf")))
    header = ["model", *[MAG_FIELDS.get(f, f) for f in fields], "avg MAP", "avg NDCG",
              "avg R@5"]
    table = []
    for model in models:
        per_field, averages = numbers[model]
        cells = []
        for field in fields:  # a metric the model's runs were not scored with: "-"
            hit = per_field.filter(pl.col("field") == field)
            cells.append(" / ".join(MISSING if (v := cell_value(hit, m)) is None else f"{v:.1f}"
                                    for m in ("map", "recall_5")) if hit.height else MISSING)
        avg = [MISSING if (v := averages.get(m)) is None or v != v else f"{v:.2f}"
               for m in ("map", "ndcg", "recall_5")]
        if avg[0] != MISSING:
            avg[0] = marked(avg[0], "best" if model == best and len(models) > 1 else "")
        table.append([model, *cells, *avg])
    return header, table


def _mdcr_type_rows(by_type: pl.DataFrame, types: list[str], models: list[str]
                    ) -> list[list[str]]:
    """One row per candidate type: MAP x100 per model and the mean over models."""
    rows = []
    for kind in types:
        values = [by_type.filter(pl.col("negatives") == kind, pl.col("model") == m)["value"]
                  for m in models]
        present = [v[0] for v in values if len(v)]
        rows.append([kind, *[f"{v[0]:.1f}" if len(v) else "-" for v in values],
                     f"{sum(present) / len(present):.1f}" if present else "-"])
    return rows


def mdcr_tables(results: pl.DataFrame,
                numbers: Numbers
                ) -> tuple[tuple[list[str], list[list[str]]], ...]:
    """MDCR Tables 3 and 4 from the per-query results of MDCR-style pools (level "mdcr"), and two
    tables for the lists the official evaluator does not read (empty when there are none).

    Table 3: models x fields, MAP / R@5 per field, and the averages: `numbers`, model -> the
    official evaluator's numbers on the scores file `make mdcr-scores` writes of the model's
    runs (mdcr.official.model_numbers: on exactly the lists it reads, the positives and
    OFFICIAL_TYPES, a pair listed under two fields scored once, as SHARED_PAIRS says), for
    each model with `negatives` "official" rows; bold: best average MAP. Table 4: the official
    candidate types x models, MAP over the positives and that type's negatives only,
    macro-averaged over fields, with the mean over models (MDCR's Table 4). The third: Table 3
    over every list of the benchmark (`negatives` "all", each pool's own scores); the fourth:
    Table 4's rows of the other types (a benchmark built with MDCR_MODELS=bm25,minilm has a
    `minilm` list). Queries are averaged within a field first, so every field weighs the
    same."""
    from pipeline.evaluation.evaluate import ALL_LISTS, OFFICIAL_LISTS, OFFICIAL_TYPES
    from pipeline.mdcr.official import official_numbers

    data = results.filter(pl.col("level") == "mdcr")
    official = data.filter(pl.col("negatives") == OFFICIAL_LISTS)
    models = model_order(official["model"].unique().to_list())
    fields = sorted(official["field"].unique().to_list(),
                    key=lambda f: list(MAG_FIELDS).index(f) if f in MAG_FIELDS else 99)
    by_type = (data.filter(~pl.col("negatives").is_in([ALL_LISTS, OFFICIAL_LISTS]),
                           pl.col("metric") == "map")
               .group_by("negatives", "model", "field").agg(ordered("value").mean() * 100)
               .group_by("negatives", "model").agg(ordered("value").mean())
               .sort("negatives", "model"))
    types = sorted(by_type["negatives"].unique().to_list(),
                   key=lambda t: (t in ("most_cited", "random"), t))
    type_header = ["negatives", *models, "mean over models"]
    type_rows = _mdcr_type_rows(by_type, [t for t in types if t in OFFICIAL_TYPES], models)
    others = [t for t in types if t not in OFFICIAL_TYPES]
    every = other_types = ([], [])
    if others:
        every_list = data.filter(pl.col("negatives") == ALL_LISTS)
        every = _mdcr_field_table({m: official_numbers(every_list.filter(pl.col("model") == m))
                                   for m in models}, models, fields)
        other_types = (type_header, _mdcr_type_rows(by_type, others, models))
    return (_mdcr_field_table(numbers, models, fields), (type_header, type_rows), every,
            other_types)


def variant_table(results: pl.DataFrame, metric: str = "map"
                  ) -> tuple[list[str], list[list[str]]]:
    """Query robustness (QUERY_VARIANT): per model, MAP (or `metric`) x100 with full queries
    and with each variant, over the (pool, query) pairs both runs scored, and the change in
    points."""
    from pipeline.glossary import VARIANTS
    from pipeline.layout import VARIANT_SEP

    data = (results.filter(pl.col("metric") == metric, pl.col("value").is_not_null())
            .with_columns(base=pl.col("model").str.split(VARIANT_SEP).list.first(),
                          variant=pl.col("model").str.split(VARIANT_SEP).list.get(
                              1, null_on_oob=True).fill_null("full")))
    full = data.filter(pl.col("variant") == "full").select("base", "pool", "query",
                                                            full="value")
    paired = (data.filter(pl.col("variant") != "full").join(full, on=["base", "pool", "query"])
              .sort("base", "variant", "pool", "query"))  # means summed in one order
    variants = [v for v in VARIANTS if v in set(paired["variant"].to_list())]
    header = ["model", "full", *variants]
    rows = []
    for base in model_order(paired["base"].unique().to_list()):
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


P_FLOOR = 1e-4  # a p-value below it is printed as "< 0.0001", as papers print it


def p_value(p: float) -> str:
    """A p-value as papers print it: 3 significant digits (0.0133, 0.000319), and below
    P_FLOOR "< 0.0001": the digits of a p-value of 1e-19 say nothing a reader can use and
    differ between machines whose floats differ in the last bits (1.14e-19 and 1.13e-19)."""
    return f"< {P_FLOOR:g}" if p < P_FLOOR else f"{p:.3g}"


def p_cell(p: float, adjusted: float | None, queries: int) -> str:
    """A p-value (`p_value`), with its adjusted value in parentheses (None: none);
    `too_few`'s n/a where no test could be run (too few queries: p is NaN)."""
    if math.isnan(p):
        return too_few(queries)
    return p_value(p) if adjusted is None else f"{p_value(p)} ({p_value(adjusted)})"


def span(low: float, high: float, scale: float = 100) -> str:
    """An interval's two ends x`scale`, "[low, high]", with one decimal, or as many more (up
    to 4) as keep the two apart: an interval from a sample is never printed as a point."""
    for digits in range(1, 5):
        ends = [f"{v * scale:.{digits}f}" for v in (low, high)]
        if ends[0] != ends[1]:
            break
    return f"[{ends[0]}, {ends[1]}]"


def at_bound(value: float | None, bound: float) -> bool:
    """Whether `value` is the metric's bound `bound` (up to float rounding)."""
    return value is not None and abs(value - bound) <= 1e-12


def interval_cell(low: float, high: float, queries: int, mean: float | None = None,
                  bounds: tuple[float, float] = BOUNDS) -> str:
    """A 95% interval x100 (`span`), or `too_few`'s n/a where there is none (too few
    queries). Given the `mean`: where it and the interval's end are the metric's bound (every
    query's value 1, or 0: significance.agreeing_interval), the one-sided bound that the
    interval is, "[≥ 88.7]" or "[≤ 11.3]"."""
    if math.isnan(low) or math.isnan(high):
        if queries < MIN_QUERIES:
            return too_few(queries)
        return "n/a (every query's value the same, outside the metric's range)"
    if at_bound(mean, bounds[1]) and at_bound(high, bounds[1]):
        return f"[≥ {span(low, high)[1:-1].split(', ')[0]}]"
    if at_bound(mean, bounds[0]) and at_bound(low, bounds[0]):
        return f"[≤ {span(low, high)[1:-1].split(', ')[1]}]"
    return span(low, high)


def fold_mean(per_query: pl.DataFrame, folds: Mapping[str, str]) -> float:
    """The mean of the test folds' means of per_query's `value` (one row per query; a query
    in no fold of `folds` counts as fold "all queries"), as `csfcube_table` averages a facet
    (`evaluate.fold_means`, folds in sorted order): the same float for the same queries."""
    from pipeline.evaluation.evaluate import fold_means

    values = per_query.select("query", "value").sort("query")
    by_fold: dict[str, list] = {}
    for query in values["query"].to_list():
        by_fold.setdefault(folds.get(query, "all queries"), []).append(query)
    return fold_means(values, dict(sorted(by_fold.items())), ["value"])["value"]


def fold_interval(per_query: pl.DataFrame, folds: Mapping[str, str], resamples: int = 1000,
                  seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of `fold_mean`: each fold's queries resampled apart (a
    stratified bootstrap: a fold keeps its size in every resample, as the estimate weighs it),
    `resamples` resamples from numpy's generator seeded with `seed`, folds in sorted order and
    queries by id. NaN with fewer than MIN_QUERIES queries (as `bootstrap_ci`); every value
    the same: `agreeing_interval`, as `bootstrap_ci` gives it (never a point)."""
    import numpy as np

    values = per_query.select("query", "value").sort("query")
    if values.height < MIN_QUERIES:
        return float("nan"), float("nan")
    if values["value"].n_unique() == 1:
        return agreeing_interval(float(values["value"][0]), values.height)
    by_fold: dict[str, list[float]] = {}
    for query, value in values.rows():
        by_fold.setdefault(folds.get(query, "all queries"), []).append(value)
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for _, fold in sorted(by_fold.items()):
        x = np.asarray(fold, dtype=np.float64)
        total += x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    low, high = np.percentile(total / len(by_fold), [2.5, 97.5])
    return float(low), float(high)


def significance_section(results: pl.DataFrame, folds: Mapping[str, str] | None = None
                         ) -> tuple[Table, ...]:
    """Two tables: every pair of models per pool (size or field) and metric with both paired
    tests and Holm-Bonferroni ("significance"; none with one model per pool), and each
    model's 95% bootstrap interval ("significance-intervals"). On CSFCube's facet pools (level
    "csfcube") with each query's test fold (`folds`, `csfcube_folds`) the means are the CSFCube
    table's, the mean of the folds' means (`fold_mean`), with a bootstrap that resamples each
    fold apart (`fold_interval`); the tests pair the queries either way."""
    header = ["pools", "metric", "a", "b", "mean a", "mean b", "t-test p (Holm)",
              "randomization p (Holm)"]
    rows, bounds, by_folds = [], [], False
    # pools by size, then scope; metrics in METRIC_ORDER; models by name
    for (size, scope, metric), group in _groups(results, ["size", "scope", "metric"]):
        per_query = _per_query(group)
        where = f"{scope}-{format_size(size)}"
        facet = (folds is not None and "level" in group.columns
                 and (group["level"] == "csfcube").all())
        by_folds |= facet
        for model, queries, mean, lo, hi in intervals(per_query).iter_rows():
            mine = per_query.filter(pl.col("model") == model, pl.col("value").is_not_null())
            if facet:
                mean, (lo, hi) = fold_mean(mine, folds), fold_interval(mine, folds)
            bounds.append([where, metric, model, str(queries), f"{mean * 100:.1f}",
                           interval_cell(lo, hi, queries, mean),
                           bootstrap_level_cell(queries, mean, _draws(group, model), lo, hi,
                                                mine["value"].n_unique() == 1, facet)])
        if per_query["model"].n_unique() < 2:
            continue
        t, fisher = compare(per_query, "t-test"), compare(per_query, "fisher")
        queries, wide = paired(per_query) if facet else (None, None)  # the tests' queries
        for a, b in zip(t.iter_rows(named=True), fisher.iter_rows(named=True), strict=True):
            means = (a["mean_a"], a["mean_b"]) if wide is None else tuple(
                fold_mean(pl.DataFrame({"query": queries, "value": wide[m]}), folds)
                for m in (a["a"], a["b"]))
            rows.append([where, metric, a["a"], a["b"], f"{means[0] * 100:.1f}",
                         f"{means[1] * 100:.1f}", p_cell(a["p"], a["p_holm"], a["queries"]),
                         p_cell(b["p"], b["p_holm"], b["queries"])])
    facets: tuple[str, ...] = ()
    if by_folds:
        facets = ("CSFCube's facet pools: every mean here is the mean of the two test folds' "
                  "means, as the CSFCube table and CSFCube's script average them; the bootstrap "
                  "intervals resample each fold's queries apart; the tests pair the queries, "
                  "each weighing the same.",)
    elif "level" in results.columns and (results["level"] == "csfcube").any():
        facets = ("CSFCube's facet pools: plain means over the queries here (no query's test "
                  "fold was found; its table prints the mean of the two test folds' means).",)
    few = tuple(f"{cell}: no test or interval from fewer than {MIN_QUERIES} queries."
                for cell in sorted({c for r in [*rows, *bounds] for c in r
                                    if re.fullmatch(r"n/a \(\d+ quer(y|ies)\)", c)}))
    tables = [Table("significance", PAIRS_CAPTION, header, rows,
                    (*PAIRS_NOTES, *few, *facets, method_note("significance-tables")))
              ] if rows else []
    return (*tables, Table(
        "significance-intervals", bootstrap_caption(bounds), BOOTSTRAP_HEADER, bounds,
        (*bootstrap_notes(bounds), *few, *facets,
         *(() if rows else ("Only one model per pool and metric: no pair to test.",)),
         method_note("significance-tables"))))


PAIRS_CAPTION = ("paired tests of every two models per pool and metric: each model's mean x100 "
                 "and the p-values of the paired t-test and Fisher's randomization test, "
                 "Holm-Bonferroni-adjusted over the pairs of a pool and metric in parentheses")
PAIRS_NOTES = (
    "Paired over the same queries, each query's value first averaged over the repeats.",
    "The randomization test flips the signs of the paired differences 10,000 times (seeded), "
    "two-sided, p = (hits + 1) / (n + 1).")


BOOTSTRAP_HEADER = ["pools", "metric", "model", "queries", "mean", "95% interval",
                    "simulated coverage %"]


def bootstrap_caption(bounds: list[list[str]]) -> str:
    """The caption of the significance section's intervals (`bounds`: its rows): what they
    are, what they estimate, and that each row states its own simulated level."""
    del bounds  # the same words for every table: each row carries its own level
    return ("Each model's mean x100 per pool and metric with its 95% percentile bootstrap "
            "interval over queries, an interval for the mean over the query population given "
            "the drawn pools, and the coverage such an interval had in simulations at the "
            "row's own queries, mean and number of pool draws")


def bootstrap_notes(bounds: list[list[str]]) -> tuple[str, ...]:
    """The notes under the significance section's intervals: the construction, its target,
    how each row's simulated coverage was found, and what "-" and a one-sided cell mean,
    where the table has one."""
    grid = level_grid()
    queries, means = grid["queries"], grid["means"]
    notes = [
        "Percentile interval of 1,000 resamples of the queries, each query's value first "
        "averaged over the repeats; it stays inside [0, 100], as every resample's mean does.",
        "It estimates the mean over the population of queries given the pools drawn: "
        "resampling queries sees no other pool draw, so as an interval for the mean over pool "
        "draws it covers less.",
        f"Simulated coverage: the lowest-highest share of simulated bootstrap intervals (data "
        f"sets whose values differ) that held that mean, over {len(grid['families'])} shapes "
        "of values in [0, 1] (AP-like, "
        "zero-inflated, P@10-like binomial and beta-binomial), each query's value the mean "
        "of as many pool draws as the row's, in the grid cells around the row's queries and "
        f"mean ({BOOTSTRAP_LEVEL_RESULTS}); below 95, read the interval as narrower than a 95% "
        "interval."]
    if any(r[6] == "-" for r in bounds if len(r) > 6):
        drawn = " or ".join(map(str, grid["draws"]))
        notes.append(f"A coverage of -: no simulated level (queries outside {queries[0]} to "
                     f"{queries[-1]:,}, a mean outside {100 * means[0]:g} to "
                     f"{100 * means[-1]:g}, pool draws other than {drawn} or not the same for "
                     "every query, CSFCube's fold-by-fold bootstrap, or no interval).")
    if any(r[5].startswith(("[≥", "[≤")) for r in bounds):
        notes.append("[≥ x] ([≤ x]): every query's value was 100 (0), nothing to resample: "
                     "the one-sided 95% bound on the mean from Clopper-Pearson's bound on the "
                     "share of queries that differ (0 of n), at least 95% by construction.")
    return tuple(notes)


def _draws(group: pl.DataFrame, model: str) -> int | None:
    """The values (one a pool draw) each query's value of `model` in `group` averages, as
    `_per_query` averages them; None where its queries average different numbers of them (no
    one number simulated)."""
    counts = (group.filter(pl.col("model") == model, pl.col("value").is_not_null())
              .group_by("query").len()["len"].unique())
    return int(counts[0]) if counts.len() == 1 else None


def bootstrap_level_cell(queries: int, mean: float, draws: int | None, low: float,
                         high: float, agree: bool = False, facet: bool = False,
                         grid: dict | None = None) -> str:
    """A row's simulated coverage % (`significance.bootstrap_level`: lowest-highest over the
    shapes simulated, at the row's `queries`, `mean` in [0, 1] and `draws` averaged per
    query): "≥ 95.0" where every query's value agrees (`agree`: Clopper-Pearson's bound,
    `agreeing_interval`), "-" where nothing was simulated (no interval, queries, mean or
    number of draws outside the grid, queries of different numbers of draws, a CSFCube
    facet's fold-by-fold bootstrap)."""
    if math.isnan(low) or math.isnan(high) or queries < MIN_QUERIES or facet:
        return "-"
    if agree:
        return f"≥ {100 * LEVEL:.1f}"
    found = None if draws is None else bootstrap_level(queries, mean, draws, grid)
    return "-" if found is None else f"{100 * found[0]:.1f}-{100 * found[1]:.1f}"



# ---- CSFCube (pipeline/external/csfcube.py) ---------------------------------------------------
CSFCUBE_FACETS = ("background", "method", "result")
CSFCUBE_METRICS = ("ndcg%20", "map_ranked-l2")  # the `csfcube` set: the official NDCG%20, MAP


def csfcube_folds(runs_root: Path, corpus: str, results: pl.DataFrame) -> dict[str, str]:
    """query -> its test fold, as the evaluations of `results`' runs recorded them
    (`<run>.eval.json`: `folds`, from the pool's queries)."""
    from pipeline.core.errors import InputError
    from pipeline.core.files import read_json
    from pipeline.layout import run_paths

    folds: dict[str, str] = {}
    for pool, model in results.select("pool", "model").unique().sort("pool", "model").rows():
        try:
            info = read_json(run_paths(runs_root, corpus, pool, model).evaluation)
        except InputError:
            continue
        for fold, queries in (info.get("folds") or {}).items():
            folds.update(dict.fromkeys(map(str, queries), fold))
    return folds


def csfcube_table(results: pl.DataFrame, folds: dict[str, str]
                  ) -> tuple[list[str], list[list[str]]]:
    """Models x (background, method, result, all), cells NDCG%20 / MAP x100, from the
    per-query results of CSFCube's facet pools (level "csfcube", one pool per facet) and each
    query's test fold (`folds`). As CSFCube's evaluation script averages the test split: per
    facet, the mean over each fold's queries, then the mean of the two folds' means; "all": the
    same over the three facets' queries together (fold 1 of all = the facets' folds 1), only
    when the model was scored on every facet. Bold: the best NDCG%20 of a column."""
    from pipeline.evaluation.evaluate import fold_means

    data = results.filter(pl.col("level") == "csfcube", pl.col("negatives") == "all",
                          pl.col("metric").is_in(list(CSFCUBE_METRICS)),
                          pl.col("value").is_not_null())
    models = model_order(data["model"].unique().to_list())
    columns = [*CSFCUBE_FACETS, "all"]
    cells: dict[tuple[str, str], list[float | None]] = {}
    for model in models:
        mine = data.filter(pl.col("model") == model)
        for column in columns:
            facets = CSFCUBE_FACETS if column == "all" else (column,)
            part = mine.filter(pl.col("field").is_in(list(facets)))
            if set(part["field"].unique().to_list()) != set(facets):
                cells[(model, column)] = [None] * len(CSFCUBE_METRICS)
                continue
            values = part.pivot("metric", index="query", values="value").sort("query")
            by_fold: dict[str, list] = {}
            for query in values["query"].to_list():
                by_fold.setdefault(folds.get(query, "all queries"), []).append(query)
            by_fold = dict(sorted(by_fold.items()))  # the folds' means summed in one order
            means = fold_means(values, by_fold, [m for m in CSFCUBE_METRICS
                                                 if m in values.columns])
            cells[(model, column)] = [None if (v := means.get(m)) is None else v * 100
                                      for m in CSFCUBE_METRICS]
    scored = {c: [m for m in models if cells[(m, c)][0] is not None] for c in columns}
    best = {c: max((cells[(m, c)][0], m) for m in ms)[1] for c, ms in scored.items()
            if len(ms) > 1}  # a column with one value marks nothing
    names = " / ".join(("NDCG%20", "MAP"))
    header = ["model", *[f"{c} ({names})" for c in columns]]
    rows = []
    for model in models:
        row = [model]
        for column in columns:
            parts = [MISSING if v is None else f"{v:.2f}" for v in cells[(model, column)]]
            if parts[0] != MISSING and best.get(column) == model:
                parts[0] = marked(parts[0], "best")
            row.append(MISSING if set(parts) == {MISSING} else " / ".join(parts))
        rows.append(row)
    return header, rows
