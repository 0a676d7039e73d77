"""The report's layout (issue 79): each table's caption says what it shows and names its test in
at most CAPTION_WORDS words, the method goes to notes under it, and Markdown (a list under the
table), the HTML page (folded under `<details>`) and LaTeX (a footnotesize list inside the
float) carry the same words; every table's LaTeX file compiles with Debian's pdflatex."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.layout import REPORT_TABLE_SUFFIX, reports_dir
from pipeline.report.build import Report, build_report
from pipeline.report.tables import (
    CAPTION_WORDS,
    Table,
    caption_words,
    clauses,
    latex_text,
    markdown_text,
)
from tests.conftest import apt_install
from tests.report.conftest import REPORT_CORPUS
from tests.report.test_report_intervals import judged_report  # noqa: F401 (a fixture)
from tests.test_readme import _anchors

EVALUATION_DOCS = Path(__file__).resolve().parents[2] / "docs" / "evaluation.md"

TEX_PACKAGES = ("texlive-latex-base", "texlive-latex-recommended", "texlive-fonts-recommended")


@pytest.fixture(scope="module")
def saved(report_data, tmp_path_factory) -> tuple[Report, Path]:
    """The fixture data's report, saved under a copy of its runs folder."""
    runs = tmp_path_factory.mktemp("layout") / "runs"
    shutil.copytree(report_data / "runs", runs)
    built = build_report(runs, REPORT_CORPUS, 0, report_data / "corpora")
    built.save()
    return built, reports_dir(runs)


def test_a_caption_over_the_limit_is_refused_with_the_tables_name():
    words = " ".join(["word"] * CAPTION_WORDS)
    assert Table("fits", words, ["a"], [["1"]]).caption == words
    with pytest.raises(ValueError, match="table 'too-long': its caption has 61 words"):
        Table("too-long", f"{words} more", ["a"], [["1"]], ("the method",))


def test_clauses_split_outside_brackets_into_sentences():
    assert clauses("a (b; c); d [e; f]; g.") == ("A (b; c).", "D [e; f].", "G.")


def assert_layout(report: Report) -> int:
    """Every table of `report`: its caption within CAPTION_WORDS, its notes under it in the
    Markdown, folded in the HTML page and listed in the LaTeX float; returns the notes seen."""
    page, markdown, seen = report.html, report.markdown, 0
    for name, table in report.tables.items():
        assert caption_words(table.caption) <= CAPTION_WORDS, (name, table.caption)
        assert table.notes, name  # the method said under every table
        heading = f"## {markdown_text(table.caption)}\n"
        assert heading in markdown, name
        block = page[page.index(f'data-name="{html.escape(name, quote=True)}"'):]
        block = block[:block.index("</details>")]
        assert '<details class="notes">' in block and "<details open" not in block, name
        latex = report.latex[next(f for f in report.latex
                                  if f.endswith(f"-{name}{REPORT_TABLE_SUFFIX}"))]
        for note in table.notes:
            for anchor in re.findall(r"docs/evaluation\.md#([\w-]+)", note):  # a link that leads
                assert anchor in _anchors(EVALUATION_DOCS), (name, note)
            assert f"\n- {markdown_text(note)}\n" in markdown.split(heading, 1)[1], (name, note)
            assert f"<li>{html.escape(note, quote=True)}</li>" in block, (name, note)
            assert f"\\item {latex_text(note)}\n" in latex, (name, note)
            seen += 1
        # the caption above the tabular, the notes under it, inside the one float
        assert latex.index("\\caption{") < latex.index("\\begin{tabular}") < latex.index(
            "\\begin{itemize}") < latex.index("\\end{table}"), name
    return seen


@pytest.mark.slow  # the fixture data: pools searched and scored
def test_every_caption_of_the_report_fits_and_its_notes_are_in_every_format(saved):
    report, _ = saved
    assert {"dataset", "field-600", "significance", "significance-intervals"} <= set(
        report.tables)
    assert assert_layout(report) > len(report.tables)


@pytest.mark.slow  # the fixture data searched, fused, scored and judged
def test_every_caption_of_a_judged_report_with_fusion_fits(judged_report):  # noqa: F811
    names = set(judged_report.tables)
    assert any(n.endswith("-means") for n in names) and any(n.endswith("-pairs") for n in names)
    assert assert_layout(judged_report) > len(names)


def tex_tools() -> bool:
    """pdflatex and booktabs present."""
    if shutil.which("pdflatex") is None or shutil.which("kpsewhich") is None:
        return False
    found = subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True)
    return found.returncode == 0 and bool(found.stdout.strip())


def install_tex() -> None:
    """Debian's pdflatex and booktabs, unless installed (apt_install)."""
    apt_install(TEX_PACKAGES, tex_tools)


DOCUMENT = ("\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
            "\\input{%s}\n\\end{document}\n")


def compile_tables(folder: Path, tmp: Path) -> list[Path]:
    """Each table file of `folder` wrapped in a minimal document and compiled by pdflatex
    (-halt-on-error): assert its PDF is written and its log holds no error."""
    pdfs = []
    for tex in sorted(folder.glob(f"*{REPORT_TABLE_SUFFIX}")):
        stem = "doc-" + re.sub(r"[^A-Za-z0-9-]+", "-", tex.stem)
        (tmp / f"{stem}.tex").write_text(DOCUMENT % tex.as_posix())
        done = subprocess.run(["pdflatex", "-halt-on-error", "-interaction=nonstopmode",
                               "-no-shell-escape", f"{stem}.tex"],
                              cwd=tmp, capture_output=True, text=True, timeout=120)
        log = (tmp / f"{stem}.log").read_text(errors="replace")
        errors = [line for line in log.splitlines() if line.startswith("!")]
        assert done.returncode == 0 and not errors, (tex.name, errors, log[-2000:])
        assert (tmp / f"{stem}.pdf").stat().st_size > 0, tex.name
        pdfs.append(tmp / f"{stem}.pdf")
    return pdfs


@pytest.mark.slow  # apt-get (about 30 s where texlive is missing) and the fixture data
def test_the_latex_tables_compile_with_pdflatex(saved, judged_report, tmp_path):  # noqa: F811
    """Debian's pdflatex (installed here as SLURM and Chromium are) compiles every table file
    of the report, and of a judged report with fusion, each in a minimal document."""
    install_tex()
    report, folder = saved
    assert len(compile_tables(folder, tmp_path)) == len(report.tables)
    judged = tmp_path / "judged"
    judged.mkdir()
    for name, text in judged_report.latex.items():
        (judged / name).write_text(text)
    assert len(compile_tables(judged, judged)) == len(judged_report.tables)
