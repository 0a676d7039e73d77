"""`make report`: the tables and plots of a corpus's results, written under runs/reports/."""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import fingerprints
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import Roots
from pipeline.core.locks import file_lock
from pipeline.core.logs import counted
from pipeline.core.manifests import manifest
from pipeline.core.secrets import shown_url
from pipeline.evaluation.crossover import HEADER as CROSSOVER_HEADER
from pipeline.evaluation.crossover import crossover_rows, no_rows_reason, pool_least
from pipeline.evaluation.evaluate import NOT_SCORED, collect_results, read_results
from pipeline.fields import MAG_FIELDS
from pipeline.layout import (
    DATA_FOLDERS,
    MANIFEST,
    REPORT_PAGE_SUFFIX,
    REPORT_PLOT_SUFFIX,
    REPORT_TABLE_SUFFIX,
    RESULTS_FILE,
    RESULTS_MANIFEST,
    VARIANT_SEP,
    Place,
    format_size,
    is_report_file,
    report_file,
    report_manifest,
    reports_dir,
    stage_times_path,
    store_dir,
)
from pipeline.pools.exclusions import NO_LIST, PaperList, read_list
from pipeline.report.html import page
from pipeline.report.leakage import leakage_rows, list_summary, reported_pools
from pipeline.report.plots import plot_field_heatmap, plot_map_vs_size
from pipeline.report.provenance import (
    Provenance,
    ReportInputsChanged,
    left_out_inputs,
    provenance,
    report_inputs,
    report_parameters,
    report_repair,
    results_state,
    state,
    unchanged,
)
from pipeline.report.published import Origin, comparison_tables, corpus_origin
from pipeline.report.summary import summary_sentences, summary_text
from pipeline.report.tables import (
    COLLECTION,
    GROUP_KEYS,
    MISSING,
    Table,
    averaged_fields,
    collection_metrics,
    collection_table,
    dataset_metrics,
    dataset_table,
    field_metric,
    field_table,
    lowered,
    main_metric,
    markdown_table,
    markdown_text,
    mdcr_tables,
    mean_results,
    method_note,
    metric_key,
    metric_name,
    sentence,
    significance_marks,
    significance_section,
    variant_table,
)
from pipeline.report.variance import variance_tables

if TYPE_CHECKING:
    from pipeline.judging.stage import LeftOut
    from pipeline.report.judged import JudgedTables

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class Plot:
    """One figure of the report, drawn when saved (`<corpus>-<name>.png`)."""

    name: str
    draw: Callable[[Path], None]  # writes the PNG to the path it is given


@dataclass(frozen=True)
class Section:
    """One part of the report (not-shown, mdcr, csfcube, collection, query-variants, dataset,
    fields, significance, published): its tables and plots, or Markdown text of its own."""

    name: str
    tables: tuple[Table, ...] = ()
    plots: tuple[Plot, ...] = ()
    text: str | None = None  # Markdown of its own, after its tables (a crossover's none)

    @property
    def parts(self) -> list[str]:
        """Its Markdown sections, in the report's order: its tables, then its text."""
        return [t.markdown for t in self.tables] + ([self.text] if self.text is not None else [])

    @property
    def markdown(self) -> str:
        return "\n".join(self.parts)

    def save(self, out_dir: Path, corpus: str) -> None:
        """Write its tables as LaTeX and draw its plots into the reports folder."""
        for table in self.tables:
            with atomic_path(report_file(out_dir, corpus, table.name, REPORT_TABLE_SUFFIX)) as tmp:
                tmp.write_text(table.latex)
        for plot in self.plots:
            plot.draw(report_file(out_dir, corpus, plot.name, REPORT_PLOT_SUFFIX))


@dataclass(frozen=True)
class Report:
    """The report of one corpus and pool seed: Markdown (`markdown`, `document`), LaTeX
    (`latex`), its tables (`tables`, by file name), the HTML page (`html`) and `save()`, which
    writes it under runs/reports/ as `make report` does."""

    corpus: str
    seed: int
    runs_root: Path
    sections: tuple[Section, ...]
    provenance: Provenance | None = None  # what made the numbers (the HTML page shows it)
    exclude: str | None = None  # EXCLUDE and TRAINING_SETS as asked for (its manifest's)
    training_sets: dict[str, str] | None = None
    shared_pairs: str = "first"  # SHARED_PAIRS as asked for (its manifest's)
    # label -> sha256 of each file it was made from (provenance.made_from), as read
    inputs: dict[str, str] = field(default_factory=dict)
    # the labels of those inputs it read and did not count, as its text says (provenance.
    # left_out_inputs): their problems are not its own (verify)
    left_out: tuple[str, ...] = ()
    # model -> sha256 of its TRAINING_SETS file as read (outside the data roots: verify
    # compares it as it compares an import's source file)
    lists: dict[str, str] = field(default_factory=dict)

    @property
    def markdown(self) -> str:
        """Every section's Markdown (what `report()` returns and the command prints)."""
        return "\n".join(part for section in self.sections for part in section.parts)

    @property
    def document(self) -> str:
        """The Markdown file: a title above `markdown`."""
        return f"# Results: {markdown_text(self.corpus)}\n\n{self.markdown}"

    @property
    def tables(self) -> dict[str, Table]:
        return {t.name: t for section in self.sections for t in section.tables}

    @property
    def latex(self) -> dict[str, str]:
        """Each table's LaTeX, by the name of the file it is written to."""
        return {report_file(Path(), self.corpus, name, REPORT_TABLE_SUFFIX).name: table.latex
                for name, table in self.tables.items()}

    def section(self, name: str) -> Section:
        for section in self.sections:
            if section.name == name:
                return section
        raise KeyError(f"no section {name!r} in the report of {self.corpus} (sections: "
                       f"{', '.join(s.name for s in self.sections)})")

    def page(self, images: dict[str, bytes]) -> str:
        """The HTML page, given each plot's PNG by its name (pipeline/report/html.py)."""
        return page(self.corpus, self.seed, self.sections, images, self.provenance)

    @property
    def html(self) -> str:
        """The self-contained HTML page (its plots drawn into a scratch folder)."""
        with tempfile.TemporaryDirectory() as scratch:
            images = {}
            for plot in (p for section in self.sections for p in section.plots):
                plot.draw(Path(scratch) / plot.name)
                images[plot.name] = (Path(scratch) / plot.name).read_bytes()
        return self.page(images)

    @property
    def files(self) -> list[Path]:
        """The files `save` writes (relative to the reports folder), in the order written:
        each table's LaTeX and each plot's PNG, the HTML page, the Markdown file."""
        parts = [report_file(Path(), self.corpus, item.name, suffix)
                 for section in self.sections
                 for items, suffix in ((section.tables, REPORT_TABLE_SUFFIX),
                                       (section.plots, REPORT_PLOT_SUFFIX)) for item in items]
        return [*parts, report_file(Path(), self.corpus, suffix=REPORT_PAGE_SUFFIX),
                report_file(Path(), self.corpus)]

    def save(self) -> Path:
        """Write the LaTeX tables, the plots, the HTML page and the Markdown file under
        runs/reports/, each replaced whole (core/atomic.py), then the manifest that vouches
        for them (`layout.report_manifest`: verify finds a number edited in any of them) and
        records what they were made from (`inputs`: verify calls the report STALE once one
        changes); the files of the report before that this one does not have (a table of
        left-out runs, now none) removed, so the folder holds this report only; under the
        report's lock, so two saves of one corpus's report never mix their files; return the
        Markdown file's path."""
        out_dir = reports_dir(self.runs_root)
        record = report_manifest(out_dir, self.corpus)
        with file_lock(record):
            return self._save(out_dir, record)

    def _save(self, out_dir: Path, record: Path) -> Path:
        try:  # the files the report before wrote: those this one does not write are removed
            before = set(read_json(record).get("outputs", {})) if record.is_file() else set()
        except InputError:
            before = set()
        record.unlink(missing_ok=True)  # removed first: files without it are not vouched for
        for section in self.sections:
            section.save(out_dir, self.corpus)
        images = {plot.name: report_file(out_dir, self.corpus, plot.name,
                                         REPORT_PLOT_SUFFIX).read_bytes()
                  for section in self.sections for plot in section.plots}
        with atomic_path(report_file(out_dir, self.corpus, suffix=REPORT_PAGE_SUFFIX)) as tmp:
            tmp.write_text(self.page(images), encoding="utf-8")
        path = report_file(out_dir, self.corpus)
        with atomic_path(path) as tmp:
            tmp.write_text(self.document)
        head = manifest("report", report_parameters(self.corpus, self.seed, self.exclude,
                                                    self.training_sets, self.shared_pairs),
                        inputs=self.inputs, left_out=list(self.left_out), lists=self.lists,
                        outputs=fingerprints(out_dir, sorted(map(str, self.files))))
        del head["created"]  # the reports folder is the same bytes for the same results
        for name in sorted(before - set(head["outputs"])):  # a table the data no longer has
            if is_report_file(name, self.corpus):
                (out_dir / name).unlink(missing_ok=True)
        write_json(head, record)
        return path

    def __str__(self) -> str:
        return self.markdown

    def _repr_markdown_(self) -> str:  # a notebook shows the tables
        return self.document


PERTURBED = pl.col("model").str.contains(VARIANT_SEP, literal=True)  # QUERY_VARIANT runs


@dataclass
class Results:
    """The rows of one corpus, pool seed and exclusion list a report is made from, and their
    views."""

    corpus: str
    runs_root: Path
    rows: pl.DataFrame  # every run of the seed, per candidate type too (published tables)
    origin: Origin | None = None
    corpus_dir: Path | None = None  # where the pools are (the leakage table reads them)
    training: dict[str, PaperList] = field(default_factory=dict)  # model -> training papers
    stale: list[dict[str, str]] = field(default_factory=list)  # left out by collect: left_out
    index_root: Path | None = None  # where the stores are (the judged section reads runs)
    shared_pairs: str = "first"  # SHARED_PAIRS: Table 3's score of a pair in two fields' pools

    @cached_property
    def mdcr_official(self) -> tuple[dict[str, tuple[pl.DataFrame, dict[str, float]]], str]:
        """Table 3's numbers and its note on them: per model evaluated on the lists the
        official evaluator reads, its numbers on the scores file `make mdcr-scores` writes of
        its runs with the report's SHARED_PAIRS (mdcr.official.model_numbers, over the pools
        its rows are of), the note naming the rule and the pairs scored in two fields' pools
        (the most any model has). Results whose benchmark is not there (a results table of
        one's own) have no runs to score: their per-query values, each pool's own, said so."""
        from pipeline.evaluation.evaluate import OFFICIAL_LISTS
        from pipeline.mdcr.benchmark import is_benchmark
        from pipeline.mdcr.official import Shared, model_numbers, official_numbers

        rows = self.rows.filter(pl.col("level") == "mdcr",
                                pl.col("negatives") == OFFICIAL_LISTS, ~PERTURBED).sort("model")
        if self.corpus_dir is None or not is_benchmark(self.corpus_dir):
            return ({label: official_numbers(mine) for (label,), mine in
                     rows.group_by("model", maintain_order=True)},
                    "No benchmark corpus holds these results' pools and runs: the numbers are "
                    "the official evaluator's computation on the per-query values, each field "
                    "scored with its own pool's scores (SHARED_PAIRS not applied).")
        place = Place(self.corpus_dir, self.index_root or self.runs_root.parent
                      / DATA_FOLDERS["indexes"], self.runs_root)
        numbers, found = {}, Shared(kept=self.shared_pairs)
        for (label, split), mine in rows.group_by("model", "split", maintain_order=True):
            fields, averages, shared = model_numbers(
                place, label.split(" (")[0], split, self.shared_pairs,
                set(mine["pool"].to_list()))  # a label's depth: `reported_runs`
            numbers[label] = (fields, averages)
            found = max(found, shared, key=lambda f: f.pairs)
        return numbers, found.note()

    @cached_property
    def lists_all(self) -> pl.DataFrame:
        """Scores over all of a query's candidates (not per candidate type)."""
        return self.rows.filter(pl.col("negatives") == "all")

    @cached_property
    def full_queries(self) -> pl.DataFrame:
        """`lists_all` without the QUERY_VARIANT runs."""
        return self.lists_all.filter(~PERTURBED)

    @cached_property
    def depth(self) -> str | None:
        """The cut (`cuts`: "500", ALL, "238-253") of most of the rows: the one the captions
        name; runs of another are labelled with theirs (`load_results`) and tested against no
        other."""
        return main_depth(self.rows)

    @property
    def top(self) -> str:
        """The captions' words for the lists' depth: "top 500"."""
        return cut_words(self.depth)

    @cached_property
    def compared(self) -> pl.DataFrame:
        """`full_queries` of the report's depth only: what the paired tests, intervals of
        differences, variance split and crossovers compare (runs of two depths never)."""
        return self.full_queries.filter(pl.col(CUT).eq_missing(self.depth)) \
            if CUT in self.full_queries.columns else self.full_queries

    @property
    def other_depths_note(self) -> str:
        """A line under a comparison's text where runs of another depth were left out of it
        (else ""): a reader of "only one model" learns why."""
        if self.compared.height == self.full_queries.height:
            return ""
        return (f"\nRuns of another depth than the report's {self.top} are in no comparison "
                "here: see the table of runs of another depth.\n")

    @cached_property
    def judged(self) -> tuple[list[JudgedTables], list[LeftOut]]:
        """Each assessor's tables over the judged samples of the report's pools, and the
        judging files left out of them (report/judged.py: `judged_tables`), read once: the
        judged section shows both, the report's manifest records which inputs it left out."""
        from pipeline.report.judged import judged_tables

        left: list[LeftOut] = []
        if self.corpus_dir is None or self.full_queries.is_empty():
            return [], left
        place = Place(self.corpus_dir, self.index_root, self.runs_root)
        return judged_tables(place, self.full_queries["pool"].unique().to_list(), left), left

    @cached_property
    def means(self) -> pl.DataFrame:
        results = self.full_queries
        return mean_results(results) if results.height else pl.DataFrame(
            schema={**dict.fromkeys(GROUP_KEYS, pl.String), "size": pl.Int64})


def load_results(runs_root: Path, corpus: str, seed: int = 0,
                 corpora_root: Path | None = None, exclusion: str | None = None,
                 training: dict[str, PaperList] | None = None,
                 index_root: Path | None = None, shared_pairs: str = "first") -> Results:
    """The test pools' rows of one corpus and pool seed in runs/results.parquet (validation
    pools tune models, MDCR §3; a corpus of validation pools only, an imported mdcr_val,
    reports those). Pools of other seeds have other queries: never averaged into one cell.
    Nor are pools drawn without different exclusion lists (EXCLUDE): `exclusion` is the tag
    of the list (`layout.exclusion_tag`; "" for pools without one), None for the one list
    the seed's pools share (several: an error asking for EXCLUDE). Collect's file is checked
    against its manifest first, and its evaluations against theirs, with `index_root` (default:
    the `indexes/` beside `runs_root`) the models of the stores their runs searched too
    (`read_results`). Runs of another depth than most are labelled with theirs
    (`labelled_depths`); the evaluations collect left out as not current come with them.
    `shared_pairs`: SHARED_PAIRS, the score Table 3 gives a pair in two fields' pools."""
    path = runs_root / RESULTS_FILE
    if not path.exists():
        raise InputError(f"{path} is missing: run `make eval` first")
    corpora = corpora_root if corpora_root is not None else (
        runs_root.parent / DATA_FOLDERS["corpora"])
    indexes = index_root if index_root is not None else (
        runs_root.parent / DATA_FOLDERS["indexes"])
    results = read_results(path, Roots(corpora, indexes, runs_root)).filter(
        pl.col("corpus") == corpus)
    results = results.filter(pl.col("split") == ("test" if (results["split"] == "test").any()
                                                 else "validation"))
    if "negatives" not in results.columns:  # collected before per-type scores existed
        results = results.with_columns(negatives=pl.lit("all"))
    if "exclusion" not in results.columns:  # collected before exclusion lists named pools
        results = results.with_columns(exclusion=pl.lit(""))
    if "depth" not in results.columns:  # a table of the user's own, without runs' depths
        results = results.with_columns(depth=pl.lit(None, pl.Int64))
    if "complete" not in results.columns:  # a table of the user's own: no run known whole
        results = results.with_columns(shortest=pl.lit(None, pl.Int64),
                                       complete=pl.lit(False))
    seeds = sorted(results["seed"].unique().to_list())
    results = results.filter(pl.col("seed") == seed)
    if results.is_empty():
        other = f" (seeds present: {', '.join(map(str, seeds))}; pass SEED=...)" if seeds else ""
        raise InputError(f"no evaluated runs for CORPUS={corpus} and SEED={seed} in {path}"
                         f"{other}: run `make eval`")
    tags = sorted(results["exclusion"].unique().to_list())
    shown = ", ".join(f"-x{t}" if t else "none" for t in tags)
    if exclusion is None and len(tags) > 1:
        raise InputError(f"CORPUS={corpus} SEED={seed}: its pools were drawn without "
                         f"{len(tags)} different exclusion lists ({shown}), never averaged "
                         "together: pass EXCLUDE=<the list> (EXCLUDE=none: the pools without "
                         "one)")
    if exclusion is not None:
        results = results.filter(pl.col("exclusion") == exclusion)
        if results.is_empty():
            raise InputError(f"no evaluated runs for CORPUS={corpus} SEED={seed} drawn without "
                             f"EXCLUDE's list (-x{exclusion}) in {path} (lists present: "
                             f"{shown}): build and evaluate its pools, or pass another EXCLUDE")
    return Results(corpus, runs_root, labelled_depths(results), corpus_origin(corpora, corpus),
                   corpora / corpus, dict(training or {}), left_out(runs_root, corpus),
                   indexes, shared_pairs)


CUT = "cut"  # the column of each row's cut (`cuts`)
ALL = "all"  # the cut of a complete run: it ranks every candidate of its pool


def cuts(results: pl.DataFrame) -> pl.DataFrame:
    """`results` with the column CUT: where each row's run cut its lists (the results'
    `depth`, `shortest`, `complete`: runs.RunCut): ALL for a complete run, "<shortest>-<depth>"
    for an imported run whose lists are of several lengths without being whole, else its
    depth ("500"); null where no depth is recorded."""
    if CUT in results.columns:
        return results
    for name, dtype, value in (("depth", pl.Int64, None), ("shortest", pl.Int64, None),
                               ("complete", pl.Boolean, False)):
        if name not in results.columns:
            results = results.with_columns(pl.lit(value, dtype).alias(name))
    depth, shortest = pl.col("depth"), pl.col("shortest")
    return results.with_columns(pl.when(pl.col("complete").fill_null(False)).then(pl.lit(ALL))
                                .when(depth.is_null()).then(pl.lit(None, pl.String))
                                .when(shortest.is_not_null() & (shortest != depth))
                                .then(pl.format("{}-{}", shortest, depth))
                                .otherwise(depth.cast(pl.String)).alias(CUT))


def cut_words(cut: str | None) -> str:
    """A cut (`cuts`) in a caption's or a label's words: "top 500", "every candidate ranked",
    "imported, lists of 238-253", "depth not recorded"."""
    if cut is None:
        return "depth not recorded"
    if cut == ALL:
        return "every candidate ranked"
    return f"imported, lists of {cut}" if "-" in cut else f"top {cut}"


def _reaches(cut: str) -> pl.Expr:
    """The rows of complete runs that compare with runs cut at `cut`: where it is a depth at
    or above their pool's size (nothing ranked below it is missing from theirs)."""
    if not cut.isdigit():
        return pl.lit(False)
    return pl.col("complete").fill_null(False) & (pl.col("candidates") <= int(cut))


def main_depth(results: pl.DataFrame) -> str | None:
    """The cut (`cuts`) most rows of `results` compare at: each depth counts its rows and
    those of complete runs whose pools it reaches (`_reaches`); on a tie ALL, then the deeper
    depth. None when no row records one."""
    keyed = cuts(results).filter(pl.col(CUT).is_not_null())
    if keyed.is_empty():
        return None
    tally = []
    for (cut,), rows in keyed.group_by(CUT):
        reached = keyed.filter(_reaches(cut), pl.col(CUT) == ALL).height
        depth = int(cut) if cut.isdigit() else int(cut.rsplit("-", 1)[-1]) if "-" in cut else 0
        tally.append((rows.height + reached, cut == ALL, cut.isdigit(), depth, cut))
    return max(tally)[-1]


def labelled_depths(results: pl.DataFrame) -> pl.DataFrame:
    """`results` with each row's cut (`cuts`; a complete run's is the report's depth where
    that depth reaches its pool's size: `main_depth`) and each run of another cut than the
    report's labelled with its own ("bm25 (top 100)", "specter (imported, lists of
    238-253)"), so that no table shows two depths under one model's name."""
    results = cuts(results)
    main = main_depth(results)
    if main is not None:
        results = results.with_columns(pl.when(_reaches(main)).then(pl.lit(main))
                                       .otherwise(pl.col(CUT)).alias(CUT))
    if results[CUT].n_unique() < 2:  # one depth, or none recorded
        return results
    other = pl.col(CUT).map_elements(lambda cut: f" ({cut_words(cut)})",
                                     return_dtype=pl.String, skip_nulls=False)
    return results.with_columns(model=pl.when(pl.col(CUT).eq_missing(main))
                                .then(pl.col("model")).otherwise(pl.col("model") + other))


def left_out(runs_root: Path, corpus: str) -> list[dict[str, str]]:
    """The evaluations of `corpus` that collect left out as not current (run, why, the
    command that makes it current), as its manifest records them."""
    record = runs_root / RESULTS_MANIFEST
    found = read_json(record).get("left_out", []) if record.exists() else []
    return [item for item in found if isinstance(item, dict)
            and str(item.get("run", "")).startswith(f"{corpus}/")]


MDCR_AVERAGES = ("Averages as the official evaluator computes them: per field x100, rounded to "
                 "4 decimals, then the mean over fields.")
MDCR_TYPES = ("Queries are averaged within a field first, then over fields, so every field "
              "weighs the same; the last column is the mean over models.")
MDCR_TABLES = (  # name, caption, notes (no test is run on these cells)
    ("mdcr", "MDCR-style benchmark (MDCR Table 3): MAP / R@5 x100 per field and the official "
     "evaluator's averages, on the lists it reads; no significance test",
     ("The lists the official evaluator reads: the positives and the candidate types bm25, "
      "graph, most_cited, random, scincl and specter.", MDCR_AVERAGES,
      "Bold: the best average MAP.")),
    ("mdcr-types", "MAP x100 per candidate type (MDCR Table 4): each query's positives and the "
     "negatives of one type only, mean over fields; no significance test", (MDCR_TYPES,)),
    ("mdcr-every-list", "NOT the official evaluator's numbers: MAP / R@5 x100 per field over "
     "every list of the benchmark, including types the official evaluator does not read; no "
     "significance test", (MDCR_AVERAGES, "Bold: the best average MAP.")),
    ("mdcr-other-types", "MAP x100 per candidate type the official evaluator does not read: "
     "each query's positives and that type's negatives only, mean over fields; no "
     "significance test", (MDCR_TYPES,)))
SIGNIFICANT = ("significantly below the best (the 95% interval of its difference excludes 0, "
               "the summary's test)")
MARKS_NOTE = ("†: the 95% interval of the model's difference with the column's best lies below "
              "0, over queries and pool draws where the pools were drawn more than once (the "
              "variance section's differences), else over queries (the paired t-test's, "
              "p < 0.05): the test of the summary's \"best\" and \"not distinguishable\". "
              "Each pair at 95%, unadjusted, as in the summary: its \"best\" needs every "
              "pair with the best to exclude 0. The summary may differ only where it reads "
              "another metric (the variance section's) or a model lacks some of the queries "
              "or draws of the others (it compares a pair on those both have).")


def mdcr_section(data: Results) -> Section:
    """MDCR-style benchmarks (pipeline/mdcr): Tables 3 and 4, and the lists and types the
    official evaluator does not read."""
    if not (data.rows["level"] == "mdcr").any():
        return Section("mdcr")
    official, note = data.mdcr_official
    tables = mdcr_tables(data.rows.filter(~PERTURBED), official)
    return Section("mdcr", tuple(
        Table(name, f"{data.corpus}: {caption}", header, rows,
              (*notes, *((note,) if name == "mdcr" else ()),
               method_note("mdcr-tables")))
        for (name, caption, notes), (header, rows) in zip(MDCR_TABLES, tables, strict=True)
        if rows))


def csfcube_section(data: Results) -> Section:
    """CSFCube's facet pools (pipeline/external): NDCG%20 / MAP per facet."""
    if not (data.rows["level"] == "csfcube").any():
        return Section("csfcube")
    from pipeline.report.tables import csfcube_folds, csfcube_table

    facets = data.rows.filter(pl.col("level") == "csfcube", ~PERTURBED)
    header, rows = csfcube_table(facets, csfcube_folds(data.runs_root, data.corpus, facets))
    caption = (f"{data.corpus}: CSFCube, NDCG%20 / MAP x100 per facet and over all facets, as "
               "CSFCube's evaluation script computes them; bold: best NDCG%20 of its column; "
               "no significance test (the significance section tests these pools)")
    notes = ("MAP counts grades >= 2 as relevant.",
             "A cell is the mean of the two test folds' means, as the significance section's "
             "means are; the variance section uses the plain mean over the queries.",
             "The column all is over the three facets' queries together, shown only for a "
             "model scored on every facet.", method_note("csfcube-table"))
    return Section("csfcube", (Table("csfcube", caption, header, rows, notes),))


def collection_section(data: Results) -> Section:
    """BEIR-layout collections (pipeline/external): models x metrics."""
    collections = data.lists_all.filter(pl.col("level") == COLLECTION, ~PERTURBED)
    metrics = collection_metrics(collections)
    if not metrics:
        return Section("collection")
    header, rows = collection_table(collections, significance_marks(
        data.compared.filter(pl.col("level") == COLLECTION), "size", metrics[0]))
    names, main = " / ".join(metric_name(m) for m in metrics), metric_name(metrics[0])
    pools = ", ".join(sorted(collections["pool"].unique().to_list()))
    missing = ((f"{MISSING}: not computed (the run was not scored with that metric).",)
               if any(cell == MISSING for row in rows for cell in row[1:]) else ())
    caption = (f"{data.corpus}: BEIR-layout collection ({pools}), {names} ({data.top}), the mean "
               f"over queries on a 0-1 scale; bold: best {main}; †: {main} {SIGNIFICANT}")
    notes = ("Four decimals, as MTEB prints nDCG@10 (0.6451); the BEIR paper prints three "
             "(0.665).", *missing, MARKS_NOTE, method_note("collection-table"))
    return Section("collection", (Table("collection", caption, header, rows, notes),))


def query_variants_section(data: Results) -> Section:
    """Query robustness: each QUERY_VARIANT's runs beside the full queries'."""
    results = data.lists_all
    if not results.select(PERTURBED.any()).item():
        return Section("query-variants")
    scored = results.filter(PERTURBED, pl.col("value").is_not_null())["metric"]
    metric = main_metric(sorted(scored.unique().to_list(), key=metric_key)) or "map"
    header, rows = variant_table(results, metric)
    caption = (f"{data.corpus}: query robustness, {metric_name(metric)} x100 with full queries "
               "and with each QUERY_VARIANT (change in points), over the pools and queries "
               "both runs scored; no significance test")
    notes = ("A change is the variant's mean minus the full queries' mean over the same pools "
             "and queries.", method_note("query-variants-table"))
    return Section("query-variants", (Table("query-variants", caption, header, rows, notes),))


def reranked_notes(models: list[str]) -> tuple[str, ...]:
    """A note per reranked model among `models` (rerank--<reranker>--<first stage>): what its
    rows are, and what lies below its depth (docs/retrieval.md, Reranking)."""
    from pipeline.models import RERANK_PREFIX, rerank_parts

    notes = []
    for model in sorted({m.split(" (")[0] for m in models if m.startswith(RERANK_PREFIX)}):
        reranker, first = rerank_parts(model)
        notes.append(f"{model}: {first}'s run, its top RERANK_DEPTH per query reordered by "
                     f"{reranker}, the rest in {first}'s order.")
    return tuple(notes)


def dataset_section(data: Results) -> Section:
    """Dataset-level pools: models x pool sizes, and the main metric against pool size."""
    means = data.means
    metrics = dataset_metrics(means)
    if not metrics:
        return Section("dataset")
    dataset = data.compared.filter(pl.col("level") == "dataset")
    header, rows = dataset_table(means, significance_marks(dataset, "size", metrics[0]))
    names, main = " / ".join(metric_name(m) for m in metrics), metric_name(metrics[0])
    missing = ((f"{MISSING}: not computed (the run was not scored with that metric).",)
               if any(MISSING in cell.split(" / ") for row in rows for cell in row[1:])
               else ())
    caption = (f"{data.corpus}: dataset-level pools, {names} x100 ({data.top}), mean ± std over "
               f"repeats; bold: best {main}; †: {main} {SIGNIFICANT}")
    notes = ("A cell is the mean over a pool's queries, then the mean ± standard deviation over "
             "the repeats (pool draws).", *missing,
             *reranked_notes(means["model"].unique().to_list()), MARKS_NOTE,
             method_note("dataset-level-table"))
    slug = re.sub(r"[^a-z0-9]+", "", metrics[0].lower())  # map, ndcg10, recall100, ...
    plot = partial(plot_map_vs_size, means.filter(pl.col("level") == "dataset"),
                   title=f"{data.corpus}: {main} against pool size (dataset-level)",
                   metric=metrics[0])
    return Section("dataset", (Table("dataset", caption, header, rows, notes),),
                   (Plot(f"{slug}-vs-pool-size", plot),))


def field_section(data: Results) -> Section:
    """Field-level pools, one table and heatmap per pool size: models x fields."""
    means, tables, plots = data.means, [], []
    for size in sorted(means.filter(pl.col("level") == "field")["size"].unique().to_list()):
        metric = field_metric(means, size)
        if metric is None:  # no value was computed on these pools
            continue
        fields = data.compared.filter(pl.col("level") == "field", pl.col("size") == size)
        header, rows = field_table(means, size, significance_marks(fields, "field", metric),
                                   metric)
        name = metric_name(metric)
        plots.append(Plot(f"fields-{format_size(size)}", partial(
            plot_field_heatmap, means.filter(pl.col("level") == "field", pl.col("size") == size),
            title=f"{data.corpus}: {name} on field-level pools of {format_size(size)}",
            metric=metric)))
        caption = (f"{data.corpus}: field-level pools of {format_size(size)}, {name} x100 per "
                   f"field and averaged over fields; bold: best; †: {SIGNIFICANT}")
        average = average_note(header[1:-1], averaged_fields(means, size, metric))
        notes = ("A cell is the mean over the field pool's queries, averaged over its repeats "
                 "where there are several.", *((average,) if average else ()),
                 *reranked_notes(means["model"].unique().to_list()), MARKS_NOTE,
                 method_note("field-level-table"))
        tables.append(Table(f"field-{format_size(size)}", caption, header, rows, notes))
    return Section("fields", tuple(tables), tuple(plots))


def average_note(shown: list[str], averaged: list[str]) -> str:
    """What the field table's avg is over, said only when it is not every field shown."""
    if len(averaged) == len(shown):
        return ""
    if not averaged:
        return f"avg: {MISSING}, no field has every model's runs."
    names = ", ".join(MAG_FIELDS[f] for f in averaged)
    return (f"avg: over the {len(averaged)} of {len(shown)} fields every model has "
            f"({names}), so that every model's average is over the same pools.")


def significance(data: Results) -> Section:
    """Paired tests between every two models of a pool, and bootstrap intervals; on CSFCube's
    facet pools the means of its test folds' means, as its table (the runs' folds)."""
    folds = None
    if (data.full_queries["level"] == "csfcube").any():
        from pipeline.report.tables import csfcube_folds

        folds = csfcube_folds(data.runs_root, data.corpus,
                              data.full_queries.filter(pl.col("level") == "csfcube"))
    depths = (sentence(data.other_depths_note),) if data.other_depths_note else ()
    return Section("significance", tuple(
        replace(table, caption=f"{data.corpus}: {lowered(table.caption)}",
                notes=(*table.notes[:-1], *depths, *table.notes[-1:]))
        for table in significance_section(data.compared, folds or None)))


def variance_section(data: Results) -> Section:
    """Where each mean's variance comes from (queries or pool draws), two models' difference
    with an interval over both, and the queries needed (pipeline/report/variance.py)."""
    return Section("variance", tuple(
        Table(name, caption, header, rows, notes)
        for name, caption, header, rows, notes in variance_tables(data.compared, data.corpus)))


def published_section(data: Results) -> Section:
    """The papers' published numbers beside the measured cells that match them
    (docs/published.md)."""
    return Section("published", tuple(
        Table(f"published-{name}", f"{data.corpus}: {caption}", header, rows,
              (*notes, method_note("published-numbers-table")))
        for name, caption, header, rows, notes in comparison_tables(data.rows, data.origin,
                                                                   data.mdcr_official[0])))


def leakage_section(data: Results) -> Section:
    """For each model whose training papers are given (TRAINING_SETS): the share of every
    pool's queries and positives it was trained on."""
    if not data.training or data.corpus_dir is None:
        return Section("leakage")
    header, rows = leakage_rows(data.corpus_dir, reported_pools(data.rows), data.training)
    caption = (f"{data.corpus}: queries and positives of each pool in each model's training set "
               "(TRAINING_SETS), counted as distinct papers; no test")
    notes = (*list_summary(data.training),
             "A query or positive seen in training flatters that model.",
             method_note("leakage-table"))
    return Section("leakage", (Table("leakage", caption, header, rows, notes),))


def crossover_section(data: Results) -> Section:
    """Where two models' curves of the main metric against pool size cross
    (pipeline/evaluation/crossover.py): per scope measured at two or more pool sizes, each
    pair with BM25 (every pair without it); no crossing under the least pool the grid can
    build with a scope's queries (their cited papers, from the pools' manifests)."""
    results = data.compared.filter(pl.col("value").is_not_null())
    if results.is_empty():
        return Section("crossover")
    metric = main_metric(sorted(results["metric"].unique().to_list(), key=metric_key)) or "map"
    least = pool_least(data.corpus_dir, results["pool"].unique().to_list()
                       if "pool" in results.columns else [])
    rows = crossover_rows(results, metric, least)
    if not rows:
        return Section("crossover", text=(
            f"## {data.corpus}: where the curves cross\n\nNo crossing estimated: "
            f"{no_rows_reason(results, metric)}.\n{data.other_depths_note}"))
    caption = (f"{data.corpus}: where the curves cross, {metric_name(metric)} against pool size "
               "per pair a - b: the gap a - b fitted as a line in log pool size, the crossing "
               "where it is 0, and the measured sizes where the gap's 95% interval over "
               "queries and pool draws holds 0 (the test inverted)")
    counts = sorted(set(least.values()))
    held = ("under 1 candidate (the least a pool holds)" if not counts else
            "under the least pool the grid can build with the scope's queries (a pool holds "
            f"their cited papers: {'-'.join(f'{c:,}' for c in sorted({counts[0], counts[-1]}))}"
            " candidates here)")
    notes = (
        "Gaps: the fitted a - b x100 at the smallest and the largest measured size.",
        "The line is tested against the measured sizes where there are 3 or more (no crossing "
        "where it does not fit); with 2 it cannot be checked.",
        "95% interval: the measured sizes where the gap's interval over queries and pool "
        "draws (as the variance section's, each repeat's nested pools one draw) holds 0, open "
        "(< or >) where it reaches the measured range's end.",
        "A crossing outside the measured sizes is an extrapolation, without interval, and "
        "none is given toward a model at its floor (random), nor where either model's line "
        "leaves the metric's range or falls below the floor (random's line where measured, "
        "else 0) before the lines meet.",
        "Nor is one given further outside the measured sizes than they span, nor "
        f"{held}, nor where the lines meet within either line's 95% interval of the floor or "
        "the metric's maximum (the outcome says which).",
        "A trend (gap closing or widening) is said only where the slope's interval excludes 0.",
        "Draws for a 4x interval: the pool draws the measured components of the gap at the "
        "crossing would need for an interval spanning a factor of 4 in pool size (the gap's "
        "half-width there over |slope| at most ln 2 in log size, with t(R-1) and the draw "
        "part falling as 1/R); not reachable where the queries' part alone is wider.",
        "With 3 draws, in simulations of this design, the interval was closed in at most "
        "0.25% of data sets at the demo's sizes (2k-10k) and at most 15% at the paper's "
        "(200k-2M, a quarter to over half not determined), a closed one spanning a factor of "
        "6 to 16: more draws, not more sizes, narrow it.",
        "The method in full: docs/evaluation.md#where-the-curves-cross.")
    return Section("crossover", (Table("crossover", caption, CROSSOVER_HEADER, rows, notes),))


def judged_section(data: Results) -> Section:
    """Beyond citations: where make judge judged a sample of the report's pools, each
    assessor's metrics with and without the sample, the relevant papers the citations miss,
    and whether each pair's order survives (pipeline/report/judged.py), with a plot."""
    from pipeline.report.judged import PLOTTED, draw_judged, left_out_table

    found_tables, left = data.judged
    tables: list[Table] = []
    plots: list[Plot] = []
    for found in found_tables:
        tables += [Table(*table) for table in found.tables]
        name = found.tables[0][0].removesuffix("-means")
        title = (f"{data.corpus}: {PLOTTED}, citations alone and judged by {found.assessor}"
                 + (" (a stand-in)" if found.stand_in else ""))
        plots.append(Plot(name, partial(draw_judged, found.means, title=title)))
    if data.corpus_dir is not None and (table := left_out_table(
            Place(data.corpus_dir, data.index_root, data.runs_root), left)) is not None:
        tables.append(Table(*table))  # said in the report, not only logged
    return Section("judged", tuple(tables), tuple(plots))


def not_shown_section(data: Results) -> Section:
    """What the numbers below are not made of, first: the evaluations collect left out as not
    current (what verify calls stale: other weights, inputs or options than those now), each
    with the command that makes it current; and the runs of another depth than the report's,
    shown under their own label but compared with no other model."""
    tables = []
    if data.stale:
        unscored = sum(item["why"] == NOT_SCORED for item in data.stale)
        kinds = [f"{counted(n, noun)} {words}" for n, noun, words in (
            (len(data.stale) - unscored, "evaluation", "left out, not current (made from "
             "weights, inputs or options other than those now, as make verify says)"),
            (unscored, "run", "left out, not scored")) if n]
        tables.append(Table("left-out", (
            f"{data.corpus}: {'; '.join(kinds)}, with the command that scores each again"),
            ["run", "why", "the command that makes it current"],
            [[item["run"], item["why"], item["repair"]] for item in data.stale],
            ("No number of this report comes from them.", method_note("what-is-not-shown"))))
    other = data.full_queries.filter(~pl.col(CUT).eq_missing(data.depth)) \
        if CUT in data.full_queries.columns else data.full_queries.clear()
    if other.height:
        depths = (other.group_by("model", CUT).agg(pools=pl.col("pool").n_unique(),
                                                   imported=pl.col("shortest").is_not_null()
                                                   .any())
                  .sort("model", CUT))
        tables.append(Table("other-depths", (
            f"{data.corpus}: runs of another depth than the report's {data.top}, each shown "
            "under a label with its depth and compared with no other model"),
            ["run", "depth", "pools"],
            [[row["model"], MISSING if row[CUT] is None else
              "all" if row[CUT] == ALL else row[CUT], str(row["pools"])]
             for row in depths.iter_rows(named=True)],
            ("No test, interval of a difference, variance split or crossover is computed "
             "between runs of two depths.", *other_depths_fix(depths),
             method_note("what-is-not-shown"))))
    if served := served_rows(data):
        tables.append(Table("served", (
            f"{data.corpus}: models served by an endpoint, with the endpoint and when each "
            "model's store was written; a run that sends requests checks the model's identity "
            "(its URL and the vectors of the probe texts)"),
            ["model", "endpoint", "its store written"], served,
            ("A run that sends none (every paper stored) checks the URL only, so a model "
             "swapped behind the same URL since its store was written is not seen here.",
             "`make eval MODEL=<m> EMBEDDINGS_URL=<url> REPLACE=1` embeds with the model "
             "answering now.", method_note("what-is-not-shown"))))
    return Section("not-shown", tuple(tables))


def other_depths_fix(depths: pl.DataFrame) -> tuple[str, ...]:
    """What compares the runs of another depth (`depths`: model, CUT, imported), as notes:
    searched ones are searched again at one depth (K); an imported run cannot be, and is
    compared where a run of its depth, or a complete one, stands beside it."""
    imported = depths.filter(pl.col("imported"))
    searched = ("Search them again at one depth (K) to compare them.",) \
        if imported.height < depths.height else ()
    made = ("An imported run is compared with runs of its own depth, or with every model "
            "where both rank each candidate of their pools: import one cut at the report's "
            "depth, or search the others at it.",
            "A run imported before an import counted whether its lists are whole is counted "
            "by make import-run again with its source.") if imported.height else ()
    return (*searched, *made)


def served_rows(data: Results) -> list[list[str]]:
    """model, endpoint (shown without secrets), when its store was written: each model of
    the rows whose store a served endpoint filled."""
    if data.index_root is None:
        return []
    rows = []
    labels = data.rows["model"].unique()
    for model in sorted({label.split(" (")[0].split(VARIANT_SEP)[0] for label in labels}):
        record = store_dir(data.index_root, data.corpus, model) / MANIFEST
        try:
            info = read_json(record) if record.is_file() else {}
        except InputError:
            continue  # a damaged store: its runs were left out as not current
        endpoint = (info.get("config", {}).get("model") or {}).get("endpoint")
        if isinstance(endpoint, str):
            rows.append([model, shown_url(endpoint), str(info.get("created", MISSING))])
    return rows


SECTIONS = (not_shown_section, mdcr_section, csfcube_section, collection_section,
            query_variants_section, dataset_section, field_section, significance,
            variance_section, crossover_section, judged_section, published_section,
            leakage_section)


def build_report(runs_root: Path, corpus: str, seed: int = 0,
                 corpora_root: Path | None = None, exclude: str | None = None,
                 training_sets: dict[str, str] | None = None,
                 index_root: Path | None = None,
                 before: dict[str, tuple[int, ...]] | None = None,
                 shared_pairs: str = "first") -> Report:
    """The report of one corpus and pool seed, in memory (`Report.save()` writes it).
    `corpora_root` (default: the `corpora/` beside `runs_root`, as in a DATA folder) holds the
    corpus manifest that says what the corpus is: the published numbers get a difference only
    on the paper's setup (docs/published.md). `exclude`: the exclusion list whose pools are
    reported (a file, or 'none'; default: the one list the pools share); `training_sets`:
    model -> file of its training papers, for the leakage table; `index_root` (default: the
    `indexes/` beside `runs_root`): where the stores of the runs' models are checked.
    `before`: the state of the files it may read (provenance.state) when the caller began (a
    collect before it); by default when this call begins. A file changed since, at its end,
    is provenance.ReportInputsChanged: a report records the digests of what it read and
    shows nothing else. `shared_pairs` (SHARED_PAIRS): the score Table 3 gives a pair listed
    under two fields, as `make mdcr-scores` writes it."""
    exclusion, training = report_lists(exclude, training_sets)
    corpora = corpora_root if corpora_root is not None else (
        runs_root.parent / DATA_FOLDERS["corpora"])
    indexes = index_root if index_root is not None else (
        runs_root.parent / DATA_FOLDERS["indexes"])
    place = Place(corpora / corpus, indexes, runs_root)
    before = state(place) if before is None else before
    repair = report_repair(corpus, seed, exclude, training_sets, shared_pairs)
    try:
        data = load_results(runs_root, corpus, seed, corpora_root, exclusion, training,
                            index_root, shared_pairs)
        sections = tuple(section(data) for section in SECTIONS)
        summary = summary_text(summary_sentences(data, sections))
        sections = (Section("summary", text=summary), *sections)  # the finding first
        made = provenance(data.rows, runs_root, corpora, corpus, seed, exclude, training_sets,
                          shared_pairs)
        inputs = report_inputs(place, reported_runs(data), data.rows["pool"].unique())
        left = left_out_inputs(place, left_runs(data), [item.path for item in data.judged[1]])
    except InputError:
        unchanged(before, place, repair)  # refused for a change made meanwhile: said so
        raise
    unchanged(before, place, repair)
    for item in data.stale:
        log.warning(f"[report] {item['run']}: left out, not current ({item['why']}); repair: "
                    f"{item['repair']}")
    return Report(corpus, seed, runs_root, sections, made, exclude, training_sets,
                  shared_pairs, inputs,
                  left_out=tuple(label for label in left if label in inputs),
                  lists={model: listed.file_sha256 for model, listed in sorted(training.items())})


REPORT_ATTEMPTS = 3  # builds of a report whose inputs changed meanwhile, before it refuses


def build_consistent(roots: Roots, corpus: str, seed: int,
                     lists: tuple[str | None, dict[str, str]], collect: bool,
                     shared_pairs: str = "first") -> Report:
    """The report of one state of the data: collected (`collect`) and read under collect's
    lock; a file changed meanwhile (an evaluation written beside it) is built again from the
    start, REPORT_ATTEMPTS in all, so that it never mixes evaluations from before and after a
    `make eval` beside it (without `collect` nothing collects the change: refused at once).
    `lists`: the exclusion list and the training sets, as build_report takes them;
    `shared_pairs`: SHARED_PAIRS (build_report)."""
    place = Place(roots.corpora / corpus, roots.indexes, roots.runs)
    attempt = 1
    while True:
        with file_lock(roots.runs / RESULTS_FILE):
            before = state(place, results=not collect)
            if collect:  # what it writes, taken after it
                collect_results(roots.corpora, roots.indexes, roots.runs)
                before |= results_state(roots.runs)
            try:
                return build_report(roots.runs, corpus, seed, roots.corpora, *lists,
                                    index_root=roots.indexes, before=before,
                                    shared_pairs=shared_pairs)
            except ReportInputsChanged as exc:
                if not collect or attempt == REPORT_ATTEMPTS:
                    raise
                log.warning(f"[report] {exc.message}: built again ({attempt + 1} of "
                            f"{REPORT_ATTEMPTS})")
        attempt += 1


def reported_runs(data: Results) -> list[tuple[str, str]]:
    """(pool, run name) of every run the report shows, its rows' and those collect left out
    as not current (their rows' labels without the depth that labelling adds: `bm25 (top
    100)` is run bm25)."""
    shown = data.rows.select("pool", "model").unique().rows()
    return sorted({*((pool, label.split(" (")[0]) for pool, label in shown), *left_runs(data)})


def left_runs(data: Results) -> list[tuple[str, str]]:
    """(pool, run name) of each evaluation collect left out as not current."""
    return [(pool, run) for pool, run in (item["run"].split("/")[1:3] for item in data.stale
                                          if item["run"].count("/") == 2)]


def report_lists(exclude: str | None, training_sets: dict[str, str] | None
                 ) -> tuple[str | None, dict[str, PaperList]]:
    """The exclusion list's tag (None: the one the pools share; "": no list) and each model's
    training papers, read and checked (a missing or malformed file refused): what a report
    needs before any result is read, so the API checks it before it collects (a refusal
    writes nothing)."""
    exclusion = None if exclude is None else (
        "" if exclude == NO_LIST else read_list(exclude).tag)
    return exclusion, {model: read_list(path, f"TRAINING_SETS {model}=")
                       for model, path in sorted((training_sets or {}).items())}


def training_lists(text: str | None) -> dict[str, str]:
    """TRAINING_SETS's `<model>=<file>` pairs, separated by spaces or commas (checked by
    options.checks.training_sets), as model -> file."""
    return dict(word.split("=", 1) for word in (text or "").replace(",", " ").split())


def report(runs_root: Path, corpus: str, seed: int = 0, corpora_root: Path | None = None,
           exclude: str | None = None, training_sets: dict[str, str] | None = None,
           index_root: Path | None = None, shared_pairs: str = "first") -> str:
    """Write the tables and plots of one corpus and pool seed; return the markdown written
    (`build_report`, then `Report.save`)."""
    built = build_report(runs_root, corpus, seed, corpora_root, exclude, training_sets,
                         index_root, shared_pairs=shared_pairs)
    built.save()
    return built.markdown


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
