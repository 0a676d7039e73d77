"""Names the report did not choose (a corpus, model, pool or field named by a user, a shared
data folder or an imported release) reach every file of the report as themselves: the HTML
page's JSON block neither ends early nor swallows the page's script, each LaTeX tabular has its
declared columns and no unescaped special character, each Markdown table the same cells in
every row, and a plot's title is not read as math. Also the field table's average (issue 39,
cases 7, 19 and 21). The same names in a real browser: test_report_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from pipeline.layout import REPORT_PAGE_SUFFIX, REPORT_TABLE_SUFFIX, report_file, reports_dir
from pipeline.report.build import build_report
from pipeline.report.html import markdown_blocks
from pipeline.report.tables import latex_table, markdown_table, markdown_text, one_line
from tests.report.test_report_determinism import results_frame, write_results

# every character the page, LaTeX and Markdown treat specially; none of them holds a `/` where
# it names a file (the corpus, the pool), nor a `~` in a model (a query variant's separator)
CORPUS = "c<!--<script>x%y&z_1#$\\x$"
MODEL = "m</script><!--<script>a|b{}^\\&\u2028%"
POOL = "p<!--<script>|&%_#-2k-r0"
FIELD = "f<!--<script>~#$^ line\nbreak|x"
LABEL = "x%y&z_1#"  # issue 39's TRAINING_SETS label
NAMES = (CORPUS, MODEL, POOL, FIELD)


def hostile_results() -> pl.DataFrame:
    """The determinism test's dataset-, field- and MDCR-level rows, as one corpus whose
    names hold every special character."""
    frame = results_frame().filter(pl.col("corpus").is_in(["demo", "bench"]))
    mdcr_medicine = (pl.col("level") == "mdcr") & (pl.col("field") == "Medicine")
    return frame.with_columns(
        corpus=pl.lit(CORPUS),
        model=pl.col("model").replace({"minilm": MODEL, "minilm~title": f"{MODEL}~title"}),
        pool=pl.col("pool").replace({"all-2k-r0": POOL}),
        field=pl.when(mdcr_medicine).then(pl.lit(FIELD)).otherwise(pl.col("field")),
        scope=pl.when(mdcr_medicine).then(pl.lit(f"mdcr-{FIELD}")).otherwise(pl.col("scope")))


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, object]:
    runs = tmp_path_factory.mktemp("names") / "runs"
    write_results(runs, hostile_results())
    built = build_report(runs, CORPUS)
    built.save()
    return runs, built


SCRIPT_JSON = re.compile(r'<script type="application/json" id="run-commands">(.*?)</script>',
                         re.S)


def test_names_cannot_end_or_swallow_the_pages_script(saved):
    """`<!--<script>` in a name, kept raw in the JSON block, makes the HTML parser swallow
    page.js (chromium: sort, filter and hover dead): the block holds no `<`, `>` or `&`, and
    reads back as the commands it was given; the page has its two scripts and no comment."""
    runs, built = saved
    text = report_file(reports_dir(runs), CORPUS, suffix=REPORT_PAGE_SUFFIX).read_text()
    block = SCRIPT_JSON.search(text).group(1)
    assert not set(block) & set("<>&\u2028\u2029")
    assert json.loads(block) == built.provenance.commands
    assert MODEL in json.loads(block) and f"{MODEL}~title" in json.loads(block)
    assert text.count("<script") == 2 and text.count("</script>") == 2
    assert "<!--" not in text  # every name is text: escaped in elements and attributes
    assert text.index(block) < text.index('"use strict"')  # page.js after the data, whole


def cells_of(row: str) -> list[str]:
    """A GFM pipe-table row's cells: split at every `|` not escaped by a backslash."""
    inner = row.strip()
    assert inner.startswith("|") and re.search(r"(?<!\\)\|$", inner), row
    return re.split(r"(?<!\\)\|", inner[1:-1])


def assert_markdown_tables(text: str) -> int:
    """Every pipe table in `text` has as many cells in each row as in its header; returns the
    number of tables."""
    tables, lines = 0, text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|")):
            tables += 1
            width = len(cells_of(line))
            for row in lines[i + 1:]:
                if not row.startswith("|"):
                    break
                assert len(cells_of(row)) == width, (line, row)
        assert "\u2028" not in line and "\r" not in line, line
    return tables


MATH = (r"$\pm$", r"$^\dagger$", r"$\geq$", r"$\leq$")  # the report's own math: ± † ≥ ≤
COMMANDS = {"textbf", "textbackslash", "textasciicircum", "textasciitilde", "textless",
            "textgreater", "textbar", "begin", "end", "centering", "toprule", "midrule",
            "bottomrule", "caption", "smallskip", "par", "linewidth", "footnotesize",
            "raggedright", "item", "setlength", "itemsep", "medskip", "parbox"}


def assert_latex_text(text: str) -> None:
    """No character special to LaTeX outside a known command or an escape, braces balanced."""
    for token in MATH:
        text = text.replace(token, "")
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            command = re.match(r"[A-Za-z]+", text[i + 1:])
            if command:
                assert command.group(0) in COMMANDS, text
                i += 1 + command.end()
                continue
            assert text[i + 1] in "{}$&#_%\\", text  # an escaped character (or a row's \\)
            i += 2
            continue
        assert char not in "$&#^_~%", f"unescaped {char!r} in {text!r}"
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0, text
        i += 1
    assert depth == 0, text


def assert_latex_table(tex: str) -> int:
    """Each tabular of the float (one, or the parts of a table split to fit the page) has its
    declared number of columns in every row, the same rows as the others, and every cell and
    the caption are LaTeX text; returns the number of rows (the header's among them)."""
    parts = re.findall(r"\\begin\{tabular\}\{([lc]+)\}\n\\toprule\n(.*?)\\bottomrule", tex,
                       re.DOTALL)
    assert parts, tex
    counts = set()
    for spec, body in parts:
        rows = [r for r in body.replace("\\midrule\n", "").split("\n") if r]
        counts.add(len(rows))
        for row in rows:
            assert row.endswith(" \\\\"), row
            cells = re.split(r"(?<!\\)&", row[: -len(" \\\\")])
            assert len(cells) == len(spec), (spec, row)
            for cell in cells:
                assert_latex_text(cell)
    assert len(counts) == 1, counts  # every part holds every row
    assert_latex_text(re.search(r"\\caption\{(.*)\}\n", tex).group(1))
    notes = re.findall(r"\\item (.*)\n", tex)
    for note in notes:
        assert_latex_text(note)
    # no name broke a line: the float's 5 lines, 5 and one per row for each tabular, one
    # between two tabulars, and 5 and one per note for its notes
    rows = counts.pop()
    assert tex.count("\n") == 5 + len(parts) * (5 + rows) + len(parts) - 1 + (
        5 + len(notes) if notes else 0)
    return rows


def test_tex_and_md_tables_keep_their_shape_whatever_the_names(saved):
    """`x%y&z_1#` broke the LaTeX (only `_` and `%` were escaped) and `a|b` added a column to
    the Markdown table."""
    runs, built = saved
    folder = reports_dir(runs)
    texs = sorted(folder.glob(f"*{REPORT_TABLE_SUFFIX}"))
    assert {p.name for p in texs} == {report_file(folder, CORPUS, name, REPORT_TABLE_SUFFIX).name
                                      for name in built.tables}
    assert {"dataset", "field-100k", "mdcr", "query-variants"} <= set(built.tables)
    for path in texs:
        assert assert_latex_table(path.read_text()) > 0, path
    markdown = report_file(folder, CORPUS).read_text()
    assert assert_markdown_tables(markdown) == len(built.tables)  # significance's two among them
    # each table's cells read back as the names (escapes undone), on the page's side too
    for table in built.tables.values():
        assert f"## {markdown_text(table.caption)}\n" in markdown
    blocks = [v for k, v in markdown_blocks(built.tables["significance"].markdown)
              if k == "table"]
    models = {row[2] for row in blocks[0][1]} | {row[3] for row in blocks[0][1]}
    assert one_line(MODEL) in models
    assert any(one_line(FIELD) in row[0] for row in blocks[0][1])


def test_a_training_sets_label_in_both_formats():
    """The leakage table's header names each TRAINING_SETS label (case 19's `x%y&z_1#`), and
    a label with `|` and a line break."""
    header = ["pool", "queries", "positives", f"{LABEL}: queries in training",
              "a|b\nc: positives in training"]
    rows = [["all-1k-r0", "20", "31", "2 (10.0%)", "0 (0.0%)"]]
    tex = latex_table(header, rows, f"c: queries in each model's training set ({LABEL}: "
                      "/lists/x%y&z_1#.txt)")
    assert assert_latex_table(tex) == 2
    assert r"x\%y\&z\_1\#:" in tex  # the header broken into lines, each escaped
    text = markdown_table(header, rows)
    assert assert_markdown_tables(text) == 1
    assert cells_of(text.split("\n")[0])[4].strip() == r"a\|b c: positives in training"
    # issue 46: the label `<!--<script>` reached demo.md raw
    header[3] = "<!--<script>: queries in training"
    text = markdown_table(header, rows)
    assert markdown_html(text) == "" and assert_markdown_tables(text) == 1
    assert markdown_blocks(text)[0][1][0][3] == header[3]


def markdown_html(text: str) -> str:
    """What a Markdown renderer may read as HTML in `text`: its `<`, `>` and `&` left once
    every backslash escape (a backslash and the character after it) is taken out."""
    return "".join(c for c in re.sub(r"\\.", "", text) if c in "<>&")


def test_names_are_text_in_the_markdown_file(saved):
    """A name holding `<!--<script>` reached the Markdown file raw, where a renderer opens an
    HTML comment and hides the rest of the file (issue 46): every heading and cell shows
    `\\ < > &` escaped, and reads back (markdown_blocks, the page's reader) as the name."""
    runs, built = saved
    markdown = report_file(reports_dir(runs), CORPUS).read_text()
    report_text = "Holm-Bonferroni"  # the report's own words hold none of them
    assert markdown_html(markdown) == "" and report_text in markdown
    assert markdown.startswith(f"# Results: {markdown_text(CORPUS)}\n")
    blocks = markdown_blocks(markdown)
    assert blocks[0] == ("heading", f"Results: {CORPUS}")
    cells = {cell for kind, value in blocks if kind == "table"
             for row in [value[0], *value[1]] for cell in row}
    assert one_line(MODEL) in cells
    assert any(one_line(FIELD) in cell for cell in cells)


def test_the_field_average_is_over_the_fields_every_model_has(tmp_path):
    """minilm's runs missing on one field: its average was over 2 fields and bm25's over 3
    (24.3 against 29.3, unmarked). Both are over the 2 fields both have, and the caption says
    which."""
    frame = results_frame().filter(pl.col("corpus") == "demo", pl.col("level") == "field")
    frame = frame.filter(~((pl.col("model") == "minilm") & (pl.col("field") == "Biology")))
    runs = tmp_path / "runs"
    write_results(runs, frame)
    table = build_report(runs, "demo").tables["field-100k"]
    fields = table.header[1:-1]
    assert sorted(fields) == ["Bio", "CS", "Med"] and table.header[-1] == "avg"
    for row in table.rows:
        shown = dict(zip(fields, row[1:-1], strict=True))
        both = [float(shown[f].strip("*†")) for f in fields if f != "Bio"]
        assert float(row[-1]) == pytest.approx(sum(both) / len(both), abs=0.051), row
    minilm = next(r for r in table.rows if r[0] == "minilm")
    assert minilm[1 + fields.index("Bio")] == "-"
    assert "avg: over the 2 of 3 fields every model has (CS, Med)" in table.prose
    # every model on every field: no note, the average over all of them
    write_results(runs, results_frame().filter(pl.col("corpus") == "demo"))
    table = build_report(runs, "demo").tables["field-100k"]
    assert "avg:" not in table.prose
    for row in table.rows:
        values = [float(c.strip("*†")) for c in row[1:-1]]
        assert float(row[-1]) == pytest.approx(sum(values) / len(values), abs=0.051)


def test_a_reranked_model_is_labelled_beside_its_first_stage(tmp_path):
    """A reranked model's rows stand beside its first stage's, and the dataset and field
    tables say what they are: the first stage's run, its top RERANK_DEPTH reordered by the
    reranker, the rest in the first stage's order; no such note without one."""
    reranked = "rerank--ms-marco-minilm--bm25"
    frame = results_frame().filter(pl.col("corpus") == "demo").with_columns(
        model=pl.col("model").replace("minilm", reranked))
    runs = tmp_path / "runs"
    write_results(runs, frame)
    report = build_report(runs, "demo")
    said = (f"{reranked}: bm25's run, its top RERANK_DEPTH per query reordered by "
            "ms-marco-minilm, the rest in bm25's order.")
    for name in ("dataset", "field-100k"):
        table = report.tables[name]
        assert {reranked, "bm25"} <= {row[0] for row in table.rows}
        assert said in table.prose, name
    write_results(runs, results_frame().filter(pl.col("corpus") == "demo"))
    assert "reordered by" not in build_report(runs, "demo").tables["dataset"].prose
