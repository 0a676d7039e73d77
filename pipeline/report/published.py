"""The papers' published numbers beside the measured ones (docs/published.md).

`published.csv` (shipped in the package) holds every number of MDCR Tables 1, 2, 3, 4, 7 and 8
(Medić & Šnajder 2022) and SciRepEval Tables 5 and 10 (SPECTER2 on MDCR), one row per value:
paper, table, level (dataset, field, mdcr), size (candidates; empty for MDCR's benchmark),
field (a MAG field, `average` for the mean over the 19 fields, empty at dataset level),
negatives (`all`, or a candidate type of MDCR Table 4), model (the registry's name; empty where
the pipeline registers no counterpart; `mean-over-models` for Table 4's average row),
paper_model (the paper's name), metric (ranx's name), value (x100, as printed), note.

A measured cell matches a published one when they share level, size, field, candidate type,
model and metric, on test pools: dataset-level pools of 200k, 500k, 1M or 2M (Table 1),
field-level pools of 100k (Tables 2, 7, 8), an MDCR-style benchmark of the 19 fields (Tables 3
and 4, SciRepEval 5 and 10; its numbers over the lists the official evaluator reads). An
average over fields matches only when it is over all 19 fields, and Table 4's mean over models
only when all six of the paper's models were measured: an average over fewer is another number.
Measured values are computed by the report's own functions (`mean_results`, the official
evaluator's `official_numbers`), so they equal the report's tables; like them, they are the
same bytes whatever the order of the results' rows (groups in sorted order, means summed over
sorted values).

The difference (measured - published) is shown only when the grid is the paper's setup: a
release of S2ORC or S2AG (the corpus manifest's `ingest` section, `corpus_origin`), or the
official MDCR release, with the paper's queries per pool and repeats (counted in the results)
and, for a benchmark built by `make mdcr`, its construction. Otherwise the published numbers
stand beside the measured ones without a difference, and the caption says what differs.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from pipeline.core.errors import InputError
from pipeline.corpus.manifest import corpus_sections
from pipeline.evaluation.evaluate import ALL_LISTS, OFFICIAL_LISTS
from pipeline.evaluation.significance import ordered
from pipeline.fields import MAG_FIELDS
from pipeline.ingest.stage import raw_origin
from pipeline.layout import (
    PUBLISHED_CSV,
    VARIANT_SEP,
    format_size,
    parse_pool_name,
    pool_names,
    raw_dir,
)
from pipeline.pools.build import pool_manifest
from pipeline.report.tables import (
    MISSING,
    mean_results,
    metric_key,
    metric_name,
    model_order,
    sentence,
)

if TYPE_CHECKING:
    from pipeline.mdcr.official import Numbers

AVERAGE = "average"  # the field of a mean over the 19 fields
MEAN_OVER_MODELS = "mean-over-models"  # the model of MDCR Table 4's average row
# the papers, as captions cite them (no "&": LaTeX captions keep it as a column break)
PAPERS = {"MDCR": "Medić and Šnajder 2022", "SciRepEval": "Singh et al. 2023"}
SCHEMA = {"paper": pl.String, "table": pl.Int64, "level": pl.String, "size": pl.Int64,
          "field": pl.String, "negatives": pl.String, "model": pl.String,
          "paper_model": pl.String, "metric": pl.String, "value": pl.Float64,
          "note": pl.String}
KEY = ["level", "size", "field", "negatives", "model", "metric"]
# the six models of MDCR Tables 2-4, by their registry names: Table 4's average is over them
PAPER_MODELS = {"bm25": "BM25", "scibert": "SciBERT", "specter": "SPECTER", "scincl": "SciNCL",
                "aspire-bio-mdcr": "ASPIRE-BM", "aspire-cs-mdcr": "ASPIRE-CS"}
CANDIDATE_TYPES = ("bm25", "specter", "scincl", "graph", "most_cited", "random")  # Table 4
# the report's sections: (name, what the measured cells are, the column that tells them apart)
SECTIONS = {
    "dataset": ("dataset-level pools", "pool"),
    "field": ("field-level pools of 100k", "field"),
    "mdcr": ("MDCR-style benchmark", "field"),
    "mdcr-types": ("MDCR-style benchmark per candidate type (positives and one type's "
                   "negatives, mean over the 19 fields)", "negatives"),
}

# The papers' setups, as the comparison checks them (docs/published.md#when-a-difference-is-shown)
PAPER_CORPUS = "S2ORC"
SOURCES = {"s2orc": "S2ORC", "s2ag": "S2AG"}  # releases ingested (pipeline/readers.py)
PAPER_QUERIES = {"dataset": 3800, "field": 200, "mdcr": 200}  # per pool; per field (mdcr)
PAPER_REPEATS = 3  # per dataset-level size; per field whose field-cited set exceeds the pool
PAPER_BENCHMARK = {"models": ("bm25", "scincl", "specter"), "positives": 5, "per_type": 10,
                   "top": 200, "pool_size": 100_000}  # MDCR §4, `make mdcr`'s parameters


@dataclass(frozen=True)
class Origin:
    """What a corpus's cells were measured on, as its manifests record it: `data` (`s2orc`,
    `s2ag`, `synthetic`, `mdcr-release`, `collection` or `unknown`), the same in words for a
    caption, and how a benchmark built by `make mdcr` was built unlike the paper's."""

    data: str
    words: str
    differences: tuple[str, ...] = ()


NOT_RECORDED = Origin("unknown", "a corpus without a manifest that records its origin")


def _raw_origin_now(params: dict, corpora_root: Path, corpus: str) -> str | None:
    """The origin of the raw shards an ingest read, from the raw folder itself (an ingest made
    before `raw_origin` was recorded): the folder it names, else the default one; None when
    both are gone."""
    source = params.get("source", "s2orc")
    folders = [Path(params["raw_dir"])] if params.get("raw_dir") else []
    folders.append(raw_dir(corpora_root, corpus, source))
    return next((raw_origin(folder) for folder in folders if folder.is_dir()), None)


def _construction(params: dict, corpus_dir: Path) -> tuple[str, ...]:
    """How a benchmark built by `make mdcr` differs from the paper's (MDCR §4): the models
    whose top-ranked papers give negatives, the counts, and the field-level pools it is built
    from."""
    paper = PAPER_BENCHMARK
    differences = []
    models = sorted(params.get("models") or [])
    if models != list(paper["models"]):
        differences.append(f"negatives from the models {', '.join(models) or 'none'} against "
                           f"the paper's {', '.join(paper['models'])}")
    for key, words in (("positives", "{} positives per query"),
                       ("per_type", "{} negatives per type"),
                       ("top", "model and most-cited negatives from the top {}")):
        if params.get(key) != paper[key]:
            differences.append(f"{words.format(params.get(key))} against the paper's "
                               f"{paper[key]}")
    sizes = set()
    for name in pool_names(corpus_dir):
        try:
            info = pool_manifest(corpus_dir, name)
            if info.get("split") == "test" and info.get("source_pool"):
                sizes.add(parse_pool_name(info["source_pool"]).size)
        except InputError:  # a damaged pool: verify names it; the comparison goes on
            continue
    if sizes and sizes != {paper["pool_size"]}:
        differences.append(f"negatives from field-level pools of "
                           f"{', '.join(map(format_size, sorted(sizes)))} against the paper's "
                           f"{format_size(paper['pool_size'])}")
    return tuple(differences)


def corpus_origin(corpora_root: Path, corpus: str, depth: int = 0) -> Origin:
    """What the corpus `corpus` holds, as its manifest records it (Origin): an ingest of a
    release (S2ORC, S2AG) or of synthetic shards (`raw_origin`, or the raw folder's manifest
    for an ingest made before it was recorded), the official MDCR release, a benchmark built
    by `make mdcr` (the origin of its source corpus, and how it was built), an imported
    collection; `unknown` when nothing says."""
    corpus_dir = corpora_root / corpus
    try:
        sections = corpus_sections(corpus_dir)
    except InputError:
        return Origin("unknown", "a corpus whose manifest is damaged")
    if "ingest" in sections:
        ingest = sections["ingest"]
        params = ingest.get("parameters", {})
        origin = ingest.get("raw_origin") or _raw_origin_now(params, corpora_root, corpus)
        source = params.get("source")
        if origin == "release" and source in SOURCES:
            return Origin(source, f"an {SOURCES[source]} corpus")
        if origin == "synthetic":
            return Origin("synthetic", "a synthetic corpus")
        if origin == "trial":
            return Origin("unknown", "a trial corpus (the first files of an S2AG release, "
                          "make download FIRST=..)")
        if origin is None:
            return Origin("unknown", "a corpus whose raw shards are gone and whose ingest does "
                          "not record where they came from")
        return Origin("unknown", "a corpus whose raw shards' origin is unreadable"
                      if origin == "unknown" else f"an ingest of {source or 'no named source'}")
    benchmark = sections.get("benchmark", {})
    if benchmark.get("stage") == "import-mdcr":
        return Origin("mdcr-release", "the official MDCR release")
    if benchmark.get("stage") == "mdcr":
        params = benchmark.get("parameters", {})
        source = params.get("source_corpus")
        base = (corpus_origin(corpora_root, source, depth + 1)
                if source and source != corpus and depth < 2 else NOT_RECORDED)
        return Origin(base.data, f"a benchmark built by make mdcr from {base.words}",
                      _construction(params, corpus_dir))
    if "collection" in sections:
        return Origin("collection", "an imported collection")
    return NOT_RECORDED


def published() -> pl.DataFrame:
    """Every published number, one row per value (the columns of SCHEMA; empty text as "")."""
    data = resources.files("pipeline.report").joinpath(PUBLISHED_CSV).read_bytes()
    return (pl.read_csv(io.BytesIO(data), schema=SCHEMA)
            .with_columns(pl.col(pl.String).fill_null("")))


def published_cells() -> pl.DataFrame:
    """One row per published cell of a registered model (KEY): the value, the paper's model
    name and the sources that print it ("MDCR Table 3, SciRepEval Table 10")."""
    rows = published().filter(pl.col("model") != "").with_columns(
        source=pl.col("paper") + " Table " + pl.col("table").cast(pl.String))
    return rows.group_by(KEY, maintain_order=True).agg(
        pl.col("value").first(), pl.col("paper_model").first(),
        pl.col("source").unique(maintain_order=True).str.join(", "))


def _long(means: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The metric columns of `mean_results` (those with a <metric>_std) as rows."""
    metrics = [c for c in means.columns if f"{c}_std" in means.columns]
    if not metrics:
        return pl.DataFrame(schema={**dict.fromkeys(keys, pl.String), "metric": pl.String,
                                    "value": pl.Float64})
    return (means.unpivot(metrics, index=keys, variable_name="metric")
            .with_columns(pl.col("value").cast(pl.Float64)).drop_nulls("value"))


def _with_averages(cells: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """`cells` (one field per row, `fields` 1) plus the mean over fields per `by`, with the
    number of MAG fields averaged in `fields`."""
    per_field = cells.with_columns(fields=pl.lit(1, pl.Int64))
    averages = (cells.group_by(by).agg(ordered("value").mean(),
                                       fields=pl.col("field").is_in(list(MAG_FIELDS)).sum())
                .with_columns(field=pl.lit(AVERAGE), fields=pl.col("fields").cast(pl.Int64)))
    return pl.concat([per_field, averages.select(per_field.columns)])


CELL_SCHEMA = {"level": pl.String, "size": pl.Int64, "field": pl.String,
               "negatives": pl.String, "model": pl.String, "metric": pl.String,
               "value": pl.Float64, "fields": pl.Int64}


def _cells(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(list(CELL_SCHEMA)).cast(CELL_SCHEMA)


def _scored(results: pl.DataFrame) -> pl.DataFrame:
    """The per-query results the comparison reads: test pools (the papers report test sets),
    full queries (no QUERY_VARIANT), computed values."""
    if "negatives" not in results.columns:
        results = results.with_columns(negatives=pl.lit(ALL_LISTS))
    if "split" in results.columns:
        results = results.filter(pl.col("split") == "test")
    return results.filter(~pl.col("model").str.contains(VARIANT_SEP, literal=True),
                          pl.col("value").is_not_null())


def measured_cells(results: pl.DataFrame, official: Numbers | None = None) -> pl.DataFrame:
    """Every measured cell the published tables could hold (KEY, value x100, fields: the
    number of fields an average is over), from the report's per-query results of one seed:
    dataset- and field-level means (`mean_results`: over queries, then repeats), the
    benchmark's per-field and average numbers as the official evaluator computes them
    (`official`: model -> Table 3's numbers, the report's `Results.mdcr_official`, so that
    both show one number; a model without them: `official_numbers` over the lists it reads),
    and per candidate type the mean over fields."""
    from pipeline.mdcr.official import OFFICIAL_METRICS, official_numbers

    results = _scored(results)
    frames = [pl.DataFrame(schema=CELL_SCHEMA)]
    pools = results.filter(pl.col("level").is_in(["dataset", "field"]),
                           pl.col("negatives") == ALL_LISTS)
    if pools.height:
        cells = _long(mean_results(pools), ["level", "field", "size", "model"]).with_columns(
            negatives=pl.lit(ALL_LISTS), field=pl.col("field").fill_null(""))
        dataset = cells.filter(pl.col("level") == "dataset").with_columns(
            fields=pl.lit(0, pl.Int64))
        fields = _with_averages(cells.filter(pl.col("level") == "field"),
                                ["level", "size", "negatives", "model", "metric"])
        frames += [_cells(dataset), _cells(fields)]
    bench = results.filter(pl.col("level") == "mdcr")
    if not set(MAG_FIELDS) <= set(bench["field"].to_list()):
        bench = bench.clear()  # the paper's benchmark has the 19 fields: another one is not it
    ranx = {official: name for official, name in OFFICIAL_METRICS.items()}
    official_runs = bench.filter(pl.col("negatives") == OFFICIAL_LISTS)
    for (model,), runs in official_runs.sort("model").group_by("model", maintain_order=True):
        per_field, averages = (official[model] if official is not None and model in official
                               else official_numbers(runs))
        n = per_field["field"].is_in(list(MAG_FIELDS)).sum()
        official = (per_field.unpivot(index="field", variable_name="metric")
                    .drop_nulls("value").with_columns(fields=pl.lit(1, pl.Int64)))
        official = pl.concat([official, pl.DataFrame(
            {"field": AVERAGE, "metric": list(averages), "value": list(averages.values()),
             "fields": n}, schema=official.schema)])
        frames.append(_cells(official.filter(pl.col("value").is_not_nan()).with_columns(
            pl.col("metric").replace_strict(ranx), level=pl.lit("mdcr"),
            size=pl.lit(None, pl.Int64), negatives=pl.lit(ALL_LISTS),
            model=pl.lit(model))))
    typed = bench.filter(~pl.col("negatives").is_in([ALL_LISTS, OFFICIAL_LISTS]))
    for (kind,), runs in typed.sort("negatives").group_by("negatives", maintain_order=True):
        cells = _long(mean_results(runs), ["field", "model"]).with_columns(
            negatives=pl.lit(kind))
        averages = _with_averages(cells, ["negatives", "model", "metric"]).filter(
            pl.col("field") == AVERAGE)
        paper = averages.filter(pl.col("model").is_in(list(PAPER_MODELS)))
        complete = paper.group_by("negatives", "metric", "fields").agg(
            ordered("value").mean(), models=pl.col("model").n_unique()).filter(
            pl.col("models") == len(PAPER_MODELS)).with_columns(
            model=pl.lit(MEAN_OVER_MODELS), field=pl.lit(AVERAGE))
        frames += [_cells(frame.with_columns(level=pl.lit("mdcr"), size=pl.lit(None, pl.Int64)))
                   for frame in (averages, complete.drop("models"))]
    return pl.concat(frames).sort(KEY, nulls_last=True)


def compare(results: pl.DataFrame, official: Numbers | None = None) -> pl.DataFrame:
    """Measured cells (`measured_cells`, `official` Table 3's numbers) joined with the
    published ones: KEY, fields, measured, published, paper_model, source, section, and
    `matched` (a published counterpart exists; an average counts only over all 19 fields)."""
    measured = measured_cells(results, official).with_columns(
        section=pl.when(pl.col("level") != "mdcr").then(pl.col("level"))
        .when(pl.col("negatives") == ALL_LISTS).then(pl.lit("mdcr"))
        .otherwise(pl.lit("mdcr-types")))
    joined = measured.join(published_cells(), on=KEY, how="left", nulls_equal=True,
                           maintain_order="left")
    return joined.rename({"value": "measured", "value_right": "published"}).with_columns(
        matched=pl.col("published").is_not_null()
        & ((pl.col("field") != AVERAGE) | (pl.col("fields") == len(MAG_FIELDS))))


def _where(section: str, row: dict) -> str:
    if section == "dataset":
        return format_size(row["size"])
    if section == "mdcr-types":
        return row["negatives"]
    return f"average ({len(MAG_FIELDS)} fields)" if row["field"] == AVERAGE else row["field"]


def _order(section: str, row: dict) -> tuple:
    if section == "dataset":
        return (row["size"], "")
    places = CANDIDATE_TYPES if section == "mdcr-types" else (*MAG_FIELDS, AVERAGE)
    place = row["negatives"] if section == "mdcr-types" else row["field"]
    return (places.index(place) if place in places else len(places), place)


def _label(model: str, paper_model: str) -> str:
    """A model as the report names it, with the paper's name where it differs."""
    if model == MEAN_OVER_MODELS:
        return f"mean over the {len(PAPER_MODELS)} models"
    return model if paper_model.lower() == model else f"{model} ({paper_model})"


def _sources(sources: list[str], cite: bool = True) -> str:
    """["MDCR Table 3", "SciRepEval Table 5", "SciRepEval Table 10"] -> "MDCR Table 3
    (Medić and Šnajder 2022), SciRepEval Tables 5 and 10 (Singh et al. 2023)"; without the
    citations when not `cite`."""
    tables: dict[str, list[int]] = {}
    for source in sources:
        paper, _, number = source.partition(" Table ")
        tables.setdefault(paper, []).append(int(number))
    parts = []
    for paper in sorted(tables, key=lambda p: list(PAPERS).index(p) if p in PAPERS else 99):
        numbers = sorted(set(tables[paper]))
        listed = (str(numbers[0]) if len(numbers) == 1
                  else ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}")
        citation = f" ({PAPERS[paper]})" if cite and paper in PAPERS else ""
        parts.append(f"{paper} Table{'s' if len(numbers) > 1 else ''} {listed}{citation}")
    return ", ".join(parts)


def _unmatched_note(cells: pl.DataFrame, reference: pl.DataFrame) -> str:
    """How many measured cells have no published counterpart (`reference`: the published
    cells of their section), and why, for a caption."""
    missing = cells.filter(~pl.col("matched"))
    if not missing.height:
        return "every measured cell has a published counterpart"

    def absent(column: str) -> list:
        return sorted(set(missing[column].drop_nulls().to_list())
                      - set(reference[column].drop_nulls().to_list()))

    models, sizes, metrics = absent("model"), absent("size"), absent("metric")
    place = "negatives" if set(reference["negatives"]) - {ALL_LISTS} else "field"
    places = absent(place)
    reason = (pl.when(pl.col("model").is_in(models)).then(pl.lit("models not in the papers"))
              .when(pl.col("size").is_in(sizes)).then(pl.lit("pool sizes not in the paper"))
              .when(pl.col("metric").is_in(metrics)).then(pl.lit("metrics not printed"))
              .when((pl.col("field") == AVERAGE) & (pl.col("fields") < len(MAG_FIELDS)))
              .then(pl.lit("averages"))
              .when(pl.col(place).is_in(places)).then(pl.lit("not in the paper"))
              .otherwise(pl.lit("other")))
    counts = dict(missing.group_by(reason.alias("reason")).len().iter_rows())
    named = {"models not in the papers": ", ".join(models),
             "pool sizes not in the paper": ", ".join(map(format_size, sizes)),
             "metrics not printed": ", ".join(map(metric_name, metrics)),
             "not in the paper": ", ".join(places)}
    reasons = []
    for why, listed in named.items():
        if counts.get(why):
            label = (f"{'candidate types' if place == 'negatives' else 'fields'} {why}"
                     if why == "not in the paper" else why)
            reasons.append(f"{label}: {listed}")
        if why == "metrics not printed" and counts.get("averages"):  # after the metrics
            least = missing.filter(pl.col("field") == AVERAGE)["fields"].min()
            reasons.append(f"averages over {least} of {len(MAG_FIELDS)} fields")
    if counts.get("other"):
        reasons.append(f"{counts['other']} other")
    n = missing.height
    return (f"{n} measured cell{'s have' if n != 1 else ' has'} no published counterpart "
            f"({'; '.join(reasons)})")


def _amount(lo: int, hi: int, one: str, many: str) -> str:
    """(40, 40) -> "40 queries", (1, 1) -> "1 query", (150, 200) -> "150 to 200 queries"."""
    return f"{lo:,}{'' if lo == hi else f' to {hi:,}'} {one if hi == 1 else many}"


def _counts(counts: list[tuple[str, int, int, int]], one: str, many: str, per: str
            ) -> str | None:
    """What differs between the counts measured per place (place, least, most, the paper's):
    None when every place has the paper's count; "40 queries per pool against the paper's
    3,800" when every place differs alike; else each way of differing with its places."""
    wrong: dict[tuple[int, int, int], list[str]] = {}
    for place, lo, hi, paper in counts:
        if not lo == hi == paper:
            wrong.setdefault((lo, hi, paper), []).append(place)
    if not wrong:
        return None
    every = len(wrong) == 1 and len(next(iter(wrong.values()))) == len(counts)
    return "; ".join(f"{_amount(lo, hi, one, many)} {per} against the paper's {paper:,}"
                     + ("" if every else f" ({', '.join(places)})")
                     for (lo, hi, paper), places in wrong.items())


def _setup(section: str, scored: pl.DataFrame, matched: pl.DataFrame, origin: Origin
           ) -> tuple[list[str], list[str]]:
    """(differences, agreements) between the setup of a section's measured pools and the
    paper's: the corpus (`origin`), the queries per pool and the repeats counted in the
    results, and a benchmark's construction. The difference is shown only when nothing
    differs."""
    level = "mdcr" if section.startswith("mdcr") else section
    differences, agreements = [], []
    release = level == "mdcr" and origin.data == "mdcr-release"
    if release or origin.data == "s2orc":
        agreements.append(origin.words)
    elif origin.data == "s2ag":
        agreements.append(f"{origin.words}, where the paper has {PAPER_CORPUS}")
    else:
        differences.append(f"{origin.words} against the paper's {PAPER_CORPUS}")
    if level == "mdcr":
        differences += origin.differences
    rows = scored.filter(pl.col("level") == level)
    if level != "mdcr":
        rows = rows.filter(pl.col("negatives") == ALL_LISTS,
                           pl.col("size").is_in(matched["size"].drop_nulls().unique().to_list()))
    place = "size" if level == "dataset" else "field"
    short = ((pl.col("candidates") < pl.col("size")).any() if "candidates" in rows.columns
             else pl.lit(False))
    pools = (rows.group_by(*dict.fromkeys([place, "size", "repeat"]))
             .agg(queries=pl.col("query").n_unique(), short=short)
             .group_by(place).agg(lo=pl.col("queries").min(), hi=pl.col("queries").max(),
                                  repeats=pl.len(), short=pl.col("short").any()))
    order = list(MAG_FIELDS)
    places = sorted(pools.iter_rows(named=True), key=lambda r: (
        (r[place], "") if level == "dataset" else
        (order.index(r[place]) if r[place] in order else len(order), r[place])))
    name = (lambda r: format_size(r["size"])) if level == "dataset" else (lambda r: r["field"])
    paper = PAPER_QUERIES[level]
    if not release:
        per = "per field" if level == "mdcr" else "per pool"
        queries = _counts([(name(r), r["lo"], r["hi"], paper) for r in places],
                          "query", "queries", per)
        differences += [queries] if queries else []
        agreements += [] if queries else [f"{_amount(paper, paper, 'query', 'queries')} {per}"]
    if level != "mdcr":  # the paper sampled each pool three times (a field: where it could)
        whole = [name(r) for r in places if level == "field" and r["short"]]
        per = "per pool size" if level == "dataset" else "per field"
        repeats = _counts([(name(r), r["repeats"], r["repeats"], 1 if name(r) in whole
                            else PAPER_REPEATS) for r in places], "repeat", "repeats", per)
        differences += [repeats] if repeats else []
        agreements += [] if repeats else [
            f"{PAPER_REPEATS} repeats {per}" + (f", 1 where the field-cited set is smaller "
                                                f"than the pool: {', '.join(whole)}"
                                                if whole else "")]
    return differences, agreements


def comparison_tables(results: pl.DataFrame, origin: Origin | None = None,
                      official: Numbers | None = None
                      ) -> list[tuple[str, str, list[str], list[list[str]], tuple[str, ...]]]:
    """Per section with at least one match: (section, caption without the corpus, header,
    rows, notes). A row is a model and a pool (size, field or candidate type) that some published
    cell matches; per metric the measured value, the published one and, when the measured
    pools are the paper's setup (`_setup`: the corpus `origin`, queries, repeats), their
    difference (of the values shown: measured rounded to 0.1, minus published, in points
    x100); then the sources. The caption says whether the setup is the paper's (and else that
    no difference is shown), the notes on what it agrees with the paper's or what differs, and
    the measured cells without a published counterpart; `official`: Table 3's numbers
    (`measured_cells`)."""
    origin = origin or NOT_RECORDED
    table = compare(results, official)
    scored = _scored(results)
    reference = published_cells()
    out = []
    for section, (what, column) in SECTIONS.items():
        cells = table.filter(pl.col("section") == section)
        matched = cells.filter(pl.col("matched"))
        if not matched.height:
            continue
        differences, agreements = _setup(section, scored, matched, origin)
        comparable = not differences
        metrics = sorted(set(matched["metric"].to_list()), key=metric_key)
        header = ["model", column]
        for name in map(metric_name, metrics):
            header += [f"{name} measured", f"{name} published",
                       *([f"{name} diff"] if comparable else [])]
        header.append("source")
        rows = []
        places = matched.select("model", "size", "field", "negatives").unique()
        models = places["model"].unique().to_list()
        models = model_order([m for m in models if m != MEAN_OVER_MODELS]) + (
            [MEAN_OVER_MODELS] if MEAN_OVER_MODELS in models else [])
        for model in models:
            for place in sorted(places.filter(pl.col("model") == model).iter_rows(named=True),
                                key=lambda row: _order(section, row)):
                mine = cells.filter(pl.col("model") == model, pl.col("field") == place["field"],
                                    pl.col("negatives") == place["negatives"],
                                    pl.col("size").eq_missing(place["size"]))
                hits = mine.filter(pl.col("matched"))
                row = [_label(model, hits["paper_model"][0]), _where(section, place)]
                for metric in metrics:
                    measured = mine.filter(pl.col("metric") == metric)["measured"].to_list()
                    shown = f"{measured[0]:.1f}" if measured else None
                    paper = hits.filter(pl.col("metric") == metric)["published"].to_list()
                    diff = round(float(shown) - paper[0], 1) + 0.0 if shown and paper else None
                    row += [shown or MISSING, f"{paper[0]:.1f}" if paper else MISSING]
                    if comparable:
                        row.append(MISSING if diff is None else f"{diff:+.1f}")  # + 0.0: no -0.0
                row.append(_sources([s for joined in hits["source"].to_list()
                                     for s in joined.split(", ")], cite=False))
                rows.append(row)
        sources = [s for joined in matched["source"].to_list() for s in joined.split(", ")]
        level = "mdcr" if section.startswith("mdcr") else section
        mine = reference.filter(pl.col("level") == level,
                                (pl.col("negatives") == ALL_LISTS) == (section != "mdcr-types"))
        how = ("measured, published, diff = measured - published in points, on the paper's "
               "setup" if comparable else
               "measured and published, NOT comparable (the setup differs), so no difference "
               "is shown")
        caption = (f"{what} beside the published numbers of {_sources(sources)}, "
                   f"{' / '.join(map(metric_name, metrics))} x100: {how}; no test")
        setup = (f"The setup agrees with the paper's: {'; '.join(agreements)}." if comparable
                 else f"The setup differs from the paper's: {'; '.join(differences)}.")
        notes = (setup, *([f"What agrees: {'; '.join(agreements)}."]
                          if agreements and not comparable else []),
                 sentence(_unmatched_note(cells, mine)))
        out.append((section, caption, header, rows, notes))
    return out

