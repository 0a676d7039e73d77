"""The papers' published numbers (pipeline/report/published.csv) and the report's sections that
set them beside the measured cells of a grid named as the paper's, with the difference only on
the paper's setup (issue 30.14: corpus, queries, repeats, a benchmark's construction)."""

from __future__ import annotations

import fnmatch
import shutil
import tomllib
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.files import write_json
from pipeline.core.manifests import manifest
from pipeline.corpus.manifest import update_corpus_manifest
from pipeline.evaluation.evaluate import RESULTS_SCHEMA
from pipeline.fields import MAG_FIELDS, field_slug
from pipeline.glossary import parse_metrics
from pipeline.ingest import ingest
from pipeline.ingest.synthetic import SyntheticConfig, generate
from pipeline.layout import MANIFEST, RESULTS_FILE, pool_dir, pool_name
from pipeline.models import REGISTRY
from pipeline.report.build import Results, published_section, report
from pipeline.report.published import (
    AVERAGE,
    MEAN_OVER_MODELS,
    PAPER_MODELS,
    PUBLISHED_CSV,
    Origin,
    corpus_origin,
    published,
    published_cells,
)

ROOT = Path(__file__).resolve().parents[2]
SIZES = (200_000, 500_000, 1_000_000, 2_000_000)
TYPES = ("bm25", "specter", "scincl", "graph", "most_cited", "random")


# ---- the data file ---------------------------------------------------------------------------
def value(table: int, model: str, metric: str, paper: str = "MDCR", **where) -> float:
    rows = published().filter(pl.col("paper") == paper, pl.col("table") == table,
                              pl.col("model") == model, pl.col("metric") == metric,
                              *[pl.col(k) == v for k, v in where.items()])
    assert rows.height == 1, (table, model, metric, where, rows)
    return rows["value"][0]


def test_rows_per_table():
    data = published()
    counts = Counter(zip(data["paper"], data["table"], strict=True))
    assert counts == {
        ("MDCR", 1): 4 * 5 * 3,  # pool sizes x models x (MAP, NDCG, R@30)
        ("MDCR", 2): 6 * 20,  # models x (19 fields + average), MAP
        ("MDCR", 7): 6 * 20,  # NDCG
        ("MDCR", 8): 6 * 20,  # R@30
        ("MDCR", 3): 6 * 20 * 2,  # models x (19 fields + average) x (MAP, R@5)
        ("MDCR", 4): 7 * 6 * 2,  # (6 models + their mean) x candidate types x (MAP, R@5)
        ("SciRepEval", 5): 6 * 2,  # models x (MAP, R@5)
        ("SciRepEval", 10): 5 * 20 * 2,  # models x (19 fields + average) x (MAP, R@5)
    }
    table1 = data.filter(pl.col("table") == 1)
    assert sorted(table1["size"].unique()) == list(SIZES)
    assert set(table1["model"]) == {"bm25", "scibert", "specter", "scincl",
                                    "aspire-bio-mdcr"}  # MDCR ran ASPIRE its own way
    assert set(data.filter(pl.col("level") == "field")["size"]) == {100_000}
    assert data.filter(pl.col("level") == "mdcr")["size"].null_count() == data.filter(
        pl.col("level") == "mdcr").height
    assert set(data.filter(pl.col("table") == 4)["negatives"]) == set(TYPES)


def test_names_are_the_pipelines():
    data = published()
    named = set(data["model"]) - {""}
    assert named - {MEAN_OVER_MODELS} <= set(REGISTRY)
    assert set(parse_metrics(sorted(set(data["metric"])))) == {"map", "ndcg", "recall@30",
                                                                "recall@5"}
    fields = set(data.filter(pl.col("level") != "dataset")["field"])
    assert fields == {*MAG_FIELDS, AVERAGE}
    assert set(data.filter(pl.col("level") == "dataset")["field"]) == {""}
    # models the pipeline does not register keep the paper's name and no registry name
    unregistered = set(data.filter(pl.col("model") == "")["paper_model"])
    assert unregistered == {"SPECTER2 MTL CLS", "SPECTER2 MTL CTRL",
                            "SPECTER2 Adapters + MTL CTRL"}
    assert set(data.filter(pl.col("model") == "aspire-bio-mdcr")["paper_model"]) == {
        "ASPIRE-BM"}
    assert data.filter(pl.col("model").is_in(["aspire-bio", "aspire-cs"])).is_empty()
    assert set(data.filter(pl.col("model") == "specter2")["paper_model"]) == {
        "SPECTER2 Adapters"}


def test_spot_checks_against_the_papers():
    assert value(1, "bm25", "map", size=200_000) == 40.4
    assert value(1, "scincl", "recall@30", size=2_000_000) == 26.5
    assert value(1, "aspire-bio-mdcr", "ndcg", size=1_000_000) == 63.5
    assert value(1, "scibert", "map", size=500_000) == 4.6
    assert value(2, "scincl", "map", field="Medicine") == 52.4
    assert value(2, "bm25", "map", field=AVERAGE) == 32.1
    assert value(2, "aspire-cs-mdcr", "map", field="Mathematics") == 34.2
    assert value(7, "bm25", "ndcg", field=AVERAGE) == 66.5
    assert value(7, "specter", "ndcg", field="History") == 47.0
    assert value(8, "scibert", "recall@30", field="Art") == 9.0
    assert value(8, "scincl", "recall@30", field="Computer Science") == 46.4
    assert value(3, "bm25", "map", field=AVERAGE) == 33.7
    assert value(3, "bm25", "recall@5", field=AVERAGE) == 28.5
    assert value(3, "scincl", "map", field="Medicine") == 42.7
    assert value(3, "aspire-bio-mdcr", "recall@5", field="Sociology") == 22.2
    assert value(4, MEAN_OVER_MODELS, "map", negatives="graph") == 55.9
    assert value(4, MEAN_OVER_MODELS, "map", negatives="random") == 95.7
    assert value(4, "bm25", "map", negatives="bm25") == 52.2
    assert value(4, "scincl", "recall@5", negatives="most_cited") == 88.3
    assert value(5, "specter2-base", "map", paper="SciRepEval") == 38.0
    assert value(5, "specter2", "recall@5", paper="SciRepEval") == 33.0
    assert value(10, "specter2", "map", paper="SciRepEval", field="Medicine") == 45.5
    assert value(10, "specter2-base", "recall@5", paper="SciRepEval", field="Geology") == 27.7


def test_averages_agree_with_their_fields():
    """A transcription check: each printed average is the mean of its 19 fields (or, in MDCR
    Table 4, of the six models) to the rounding of the printed values."""
    data = published()
    per_field = data.filter(pl.col("field").is_in(list(MAG_FIELDS)))
    means = per_field.group_by("paper", "table", "paper_model", "metric").agg(
        pl.col("value").mean(), n=pl.len())
    printed = data.filter(pl.col("field") == AVERAGE, pl.col("table") != 4).join(
        means, on=["paper", "table", "paper_model", "metric"])
    assert printed.height == 6 * 3 + 6 * 2 + 5 * 2 and set(printed["n"]) == {19}
    assert (printed["value"] - printed["value_right"]).abs().max() < 0.1
    types = data.filter(pl.col("table") == 4)
    over_models = types.filter(pl.col("model") != MEAN_OVER_MODELS).group_by(
        "negatives", "metric").agg(pl.col("value").mean())
    joined = types.filter(pl.col("model") == MEAN_OVER_MODELS).join(
        over_models, on=["negatives", "metric"])
    assert joined.height == 12 and (joined["value"] - joined["value_right"]).abs().max() < 0.1


def test_sources_printing_the_same_cell_agree():
    """SciRepEval reprints MDCR's BM25 row, and its Table 5 the averages of its Table 10."""
    rows = published().filter(pl.col("model") != "")
    key = ["level", "size", "field", "negatives", "model", "metric"]
    spread = rows.group_by(key).agg(pl.col("value").n_unique(), n=pl.len())
    assert spread["value"].max() == 1
    cells = published_cells()
    assert cells.height == spread.height
    bm25 = cells.filter(pl.col("model") == "bm25", pl.col("level") == "mdcr",
                        pl.col("field") == AVERAGE, pl.col("negatives") == "all")
    assert set(bm25["source"]) == {"MDCR Table 3, SciRepEval Table 5, SciRepEval Table 10"}


def test_the_file_ships_with_the_package():
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["package-data"]["pipeline"]
    path = f"report/{PUBLISHED_CSV}"
    assert (ROOT / "pipeline" / path).is_file()
    assert any(fnmatch.fnmatch(path, pattern) for pattern in package_data)


# ---- results frames with the columns collect_results writes ----------------------------------
def rows_of(level: str, scope: str, field: str | None, size: int, repeat: int, model: str,
            values: dict[str, float], negatives: str = "all", queries: tuple = ("1", "2"),
            split: str = "test", candidates: int | None = None) -> list[dict]:
    pool = pool_name(scope, size, repeat, split=split)
    return [{"corpus": "s2orc", "pool": pool, "level": level, "scope": scope, "field": field,
             "size": size, "repeat": repeat, "seed": 0, "split": split,
             "candidates": candidates or size, "model": model, "query": query,
             "negatives": negatives, "metric": metric,
             # the mean over an even number of queries: `value`
             "value": value + (0.01 if i % 2 == 0 else -0.01)}
            for metric, value in values.items() for i, query in enumerate(queries)]


def query_ids(n: int, prefix: str = "q") -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(n))


PAPER_QUERIES = query_ids(3800)  # MDCR Table 1: 3,800 queries per dataset-level pool
FIELD_QUERIES = query_ids(200)  # MDCR Tables 2-4: 200 per field
S2ORC = Origin("s2orc", "an S2ORC corpus")  # what corpus_origin says of an S2ORC ingest
RELEASE = Origin("mdcr-release", "the official MDCR release")
PAPER_SETUP = ("The setup agrees with the paper's: an S2ORC corpus; 3,800 queries per pool; 3 "
               "repeats per pool size.")


def frame(rows: list[dict], corpus: str = "s2orc") -> pl.DataFrame:
    return pl.DataFrame(rows, schema=RESULTS_SCHEMA).with_columns(corpus=pl.lit(corpus))


def dataset_rows(models: dict[str, dict[int, tuple[float, float, float]]],
                 split: str = "test", queries: tuple = PAPER_QUERIES, repeats: int = 3
                 ) -> list[dict]:
    """Three repeats per size (or one), MAP shifted by -0.01, 0, +0.01: their mean is the
    given one; the paper's 3,800 queries per pool unless `queries` says otherwise."""
    shifts = (-0.01, 0.0, 0.01) if repeats == 3 else (0.0,) * repeats
    rows = []
    for model, sizes in models.items():
        for size, (ap, ndcg, recall) in sizes.items():
            for repeat, shift in enumerate(shifts):
                rows += rows_of("dataset", "all", None, size, repeat, model,
                                {"map": ap + shift, "ndcg": ndcg, "recall@30": recall},
                                split=split, queries=queries)
    return rows


def mdcr_rows(models: dict[str, tuple[float, float, float]], fields: list[str],
              types: tuple[str, ...] = (), queries: tuple = ("1", "2")) -> list[dict]:
    """A benchmark's per-query rows: MAP, NDCG and R@5 over the lists the official evaluator
    reads ("official": the given values), over every list ("all": MAP 5 points lower), and per
    type (MAP 20 points higher)."""
    rows = []
    for model, (ap, ndcg, recall) in models.items():
        for field in fields:
            for negatives in ("all", "official", *types):
                shift = {"all": -0.05, "official": 0.0}.get(negatives, 0.2)
                rows += rows_of("mdcr", field_slug(field), field, 65, 0, model,
                                {"map": ap + shift, "ndcg": ndcg, "recall@5": recall},
                                negatives=negatives, queries=queries)
    return rows


PAPER_GRID = {"bm25": {200_000: (0.41, 0.70, 0.45), 2_000_000: (0.25, 0.60, 0.25)},
              "specter": {200_000: (0.30, 0.72, 0.409), 2_000_000: (0.20, 0.50, 0.20)}}


def paper_grid() -> pl.DataFrame:
    """Dataset-level 200k and 2M pools for bm25 and specter (3,800 queries, 3 repeats), minilm
    beside them, and an MDCR-style benchmark of two fields for bm25 and scincl."""
    rows = dataset_rows({**PAPER_GRID, "minilm": {200_000: (0.1, 0.1, 0.1)}})
    rows += mdcr_rows({"bm25": (0.40, 0.5, 0.30), "scincl": (0.44, 0.5, 0.35)},
                      ["Art", "Medicine"], types=("bm25", "graph"))
    return frame(rows)


def published_sections(results: pl.DataFrame, out_dir: Path, corpus: str,
                       origin: Origin | None = None) -> list[str]:
    """The report's published section of these rows (`build.published_section`, as
    `build_report` makes it), saved into `out_dir` as `make report` saves it: its Markdown
    parts, one per table (each also written as `<corpus>-published-<section>.tex`)."""
    section = published_section(Results(corpus, out_dir, results, origin))
    section.save(out_dir, corpus)
    return section.parts


def table_row(text: str, *start: str) -> list[str]:
    prefix = "| " + " | ".join(start) + " |"
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, (prefix, text)
    return [cell.strip() for cell in lines[0].strip("|").split("|")]


def test_paper_grid_shows_measured_published_and_difference(tmp_path):
    sections = published_sections(paper_grid(), tmp_path, "s2orc", S2ORC)
    assert len(sections) == 1  # Table 1; a benchmark of two fields is not the paper's (19)
    (dataset,) = sections
    assert dataset.startswith("## s2orc: dataset-level pools beside the published numbers of "
                              "MDCR Table 1 (Medić and Šnajder 2022), MAP / NDCG / R@30 x100: "
                              "measured, published, diff = measured - published in points, "
                              "on the paper's setup; no test\n")
    assert f"\n- {PAPER_SETUP}\n" in dataset
    assert ("| model | pool | MAP measured | MAP published | MAP diff | NDCG measured | "
            "NDCG published | NDCG diff | R@30 measured | R@30 published | R@30 diff | "
            "source |") in dataset
    # measured: the mean over queries, then over the three repeats, x100
    assert table_row(dataset, "bm25", "200k") == [
        "bm25", "200k", "41.0", "40.4", "+0.6", "70.0", "73.8", "-3.8", "45.0", "43.0",
        "+2.0", "MDCR Table 1"]
    assert table_row(dataset, "bm25", "2M")[2:11] == [
        "25.0", "22.5", "+2.5", "60.0", "60.8", "-0.8", "25.0", "26.9", "-1.9"]
    assert table_row(dataset, "specter", "200k")[2:11] == [
        "30.0", "37.4", "-7.4", "72.0", "72.0", "+0.0", "40.9", "40.9", "+0.0"]
    assert table_row(dataset, "specter", "2M")[2:5] == ["20.0", "19.2", "+0.8"]
    assert "| minilm |" not in dataset  # not in the paper: no row, counted in the caption
    assert "3 measured cells have no published counterpart (models not in the papers: minilm)" \
        in dataset
    assert "MDCR Table 3" not in dataset
    latex = (tmp_path / "s2orc-published-dataset.tex").read_text()
    assert "\\begin{tabular}" in latex and "MDCR Table 1" in latex and "&" not in latex.split(
        "\\caption{")[1].split("}\n")[0]
    assert not (tmp_path / "s2orc-published-mdcr.tex").exists()


def test_full_benchmark_compares_averages_and_candidate_types(tmp_path):
    """All 19 fields and the paper's six models: the averages over fields (MDCR Table 3,
    SciRepEval Tables 5 and 10) and MDCR Table 4 per candidate type, with its mean over
    models."""
    models = {m: (0.30 + 0.01 * i, 0.5, 0.25) for i, m in enumerate(PAPER_MODELS)}
    rows = mdcr_rows({**models, "specter2": (0.40, 0.6, 0.33)}, list(MAG_FIELDS), TYPES)
    # the official release is the paper's benchmark, whatever its query count
    mdcr, types = published_sections(frame(rows), tmp_path, "mdcr", RELEASE)
    assert "diff = measured - published in points, on the paper's setup; no test" in mdcr
    assert "The setup agrees with the paper's: the official MDCR release." in mdcr
    # the benchmark, per field: the official evaluator's numbers (the lists it reads, not the
    # "all" rows 5 points lower) against MDCR Table 3
    assert "MDCR Table 3 (Medić and Šnajder 2022), SciRepEval Tables 5 and 10" in mdcr
    assert table_row(mdcr, "bm25", "Medicine") == [
        "bm25", "Medicine", "30.0", "38.6", "-8.6", "25.0", "32.5", "-7.5",
        "MDCR Table 3, SciRepEval Table 10"]
    assert table_row(mdcr, "bm25", "average (19 fields)")[2:] == [
        "30.0", "33.7", "-3.7", "25.0", "28.5", "-3.5",
        "MDCR Table 3, SciRepEval Tables 5 and 10"]
    assert table_row(mdcr, "specter2 (SPECTER2 Adapters)", "average (19 fields)")[2:] == [
        "40.0", "38.4", "+1.6", "33.0", "33.0", "+0.0", "SciRepEval Tables 5 and 10"]
    assert table_row(mdcr, "aspire-bio-mdcr (ASPIRE-BM)", "Biology")[2:5] == [
        "34.0", "38.7", "-4.7"]
    assert "Every measured cell has a published counterpart" not in mdcr  # NDCG: not printed
    assert types.startswith("## mdcr: MDCR-style benchmark per candidate type")
    assert "MDCR Table 4 (Medić and Šnajder 2022)" in types
    # per type: MAP 0.2 above the whole list's; the mean over the six models 0.325 + 0.2
    assert table_row(types, "bm25", "graph")[2:8] == ["50.0", "58.0", "-8.0", "25.0", "46.7",
                                                      "-21.7"]
    assert table_row(types, "mean over the 6 models", "random")[2:5] == ["52.5", "95.7",
                                                                          "-43.2"]
    assert "| specter2 " not in types  # SPECTER2 is not in Table 4
    assert "models not in the papers: specter2" in types


def test_grid_not_named_as_papers_has_no_section(tmp_path):
    rows = dataset_rows({m: {120_000: (0.3, 0.6, 0.4)} for m in ("bm25", "minilm", "random")},
                        queries=("1", "2"))
    rows += rows_of("field", "medicine", "Medicine", 5000, 0, "bm25", {"map": 0.3})
    assert published_sections(frame(rows, "demo"), tmp_path, "demo") == []
    frame(rows, "demo").write_parquet(tmp_path / RESULTS_FILE)
    text = report(tmp_path, "demo")
    assert "dataset-level pools" in text and "published" not in text
    assert not list((tmp_path / "reports").glob("*published*"))
    # validation pools of the paper's sizes: the papers report test pools
    validation = dataset_rows(PAPER_GRID, split="validation", queries=("1", "2"))
    assert published_sections(frame(validation), tmp_path, "demo", S2ORC) == []


WHOLE_FIELDS = ("Art", "History", "Philosophy")  # MDCR: field-cited sets below 100k


def field_rows(size: int = 100_000, queries: dict[str, int] | None = None,
               repeats: int = 3) -> list[dict]:
    """bm25 on a field-level pool per MAG field: 200 queries (or `queries`), `repeats` repeats,
    one where the field-cited set is smaller than the pool (Art, History, Philosophy)."""
    rows = []
    for field in MAG_FIELDS:
        whole = field in WHOLE_FIELDS
        for repeat in range(1 if whole else repeats):
            rows += rows_of("field", field_slug(field), field, size, repeat, "bm25",
                            {"map": 0.30, "ndcg": 0.6, "recall@30": 0.35},
                            queries=query_ids((queries or {}).get(field, 200), field),
                            candidates=size // 2 if whole else size)
    return rows


@pytest.mark.parametrize("size", [100_000, 200_000])
def test_field_level_pools_of_100k_only(tmp_path, size):
    sections = published_sections(frame(field_rows(size)), tmp_path, "s2orc", S2ORC)
    if size != 100_000:
        assert sections == []
        return
    (text,) = sections
    assert "MDCR Tables 2, 7 and 8 (Medić and Šnajder 2022)" in text
    assert ("The setup agrees with the paper's: an S2ORC corpus; 200 queries per pool; 3 "
            "repeats per field, 1 where the field-cited set is smaller than the pool: Art, "
            "History, Philosophy.") in text
    assert table_row(text, "bm25", "Medicine")[2:] == [
        "30.0", "46.3", "-16.3", "60.0", "77.8", "-17.8", "35.0", "48.2", "-13.2",
        "MDCR Tables 2, 7 and 8"]
    assert table_row(text, "bm25", "average (19 fields)")[2:5] == ["30.0", "32.1", "-2.1"]
    assert "Every measured cell has a published counterpart." in text


def fake_ingest(corpora: Path, corpus: str, source: str = "s2orc",
                raw_origin: str | None = "release") -> Path:
    """The manifest section an ingest of `source` writes (`raw_origin` None: as written before
    it was recorded); no data, as the report reads the manifest only."""
    corpus_dir = corpora / corpus
    fields = {"raw_origin": raw_origin} if raw_origin else {}
    update_corpus_manifest(corpus_dir, "ingest", manifest(
        "ingest", {"raw_dir": str(corpus_dir / source), "strict": False, "source": source},
        **fields))
    return corpus_dir


def test_through_the_report(tmp_path):
    fake_ingest(tmp_path / "corpora", "s2orc")  # the corpora/ beside runs/ (a DATA folder)
    (tmp_path / "runs").mkdir()
    paper_grid().write_parquet(tmp_path / "runs" / RESULTS_FILE)
    text = report(tmp_path / "runs", "s2orc")
    assert PAPER_SETUP in text
    # the report's own tables first, then the published numbers beside the measured ones
    assert text.index("(MDCR Table 3)") < text.index(": paired tests of every") < text.index(
        "beside the published numbers of MDCR Table 1")
    assert table_row(text, "bm25", "200k")[2:5] == ["41.0", "40.4", "+0.6"]
    written = (tmp_path / "runs" / "reports" / "s2orc.md").read_text()
    assert "MDCR Table 1 (Medić and Šnajder 2022)" in written
    out = tmp_path / "runs" / "reports"
    assert {p.name for p in out.glob("*published*")} == {"s2orc-published-dataset.tex"}
    # the report's dataset table shows the same mean the comparison does
    assert "**41.0 ± 1.0**" in text


# ---- the difference only on the paper's setup (issue 30.14) ----------------------------------
def synthetic_corpus(corpora: Path, corpus: str = "synth") -> Path:
    """A synthetic corpus as `make demo` makes one (generated shards, ingested), tiny."""
    corpus_dir = corpora / corpus
    generate(corpus_dir / "s2orc", SyntheticConfig(n_papers=100, n_shards=1, seed=0))
    ingest(corpus_dir / "s2orc", corpus_dir)
    return corpus_dir


def fake_benchmark(corpora: Path, corpus: str, source: str, models: list[str],
                   pool_size: int) -> None:
    """The manifests `make mdcr` writes for a benchmark of the 19 fields built from `source`'s
    field-level pools of `pool_size` (no data)."""
    params = {"source_corpus": source, "models": models, "seed": 0, "positives": 5,
              "per_type": 10, "top": 200}
    corpus_dir = corpora / corpus
    update_corpus_manifest(corpus_dir, "benchmark", manifest("mdcr", params))
    for field in MAG_FIELDS:
        name = pool_name(field_slug(field), 65, 0)
        pool_dir(corpus_dir, name).mkdir(parents=True)
        write_json(manifest("mdcr", {**params, "field": field}, name=name, level="mdcr",
                            split="test", source_pool=pool_name(field_slug(field), pool_size, 0)),
                   pool_dir(corpus_dir, name) / MANIFEST)


def header_of(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("| model |"))


def test_synthetic_corpus_named_like_the_paper_gets_no_difference(tmp_path):
    """Issue 30.14: pools of a synthetic corpus named as the paper's grid (SIZE=200k
    QUERIES=40 REPEATS=1) were set beside MDCR Table 1 with differences of -34 MAP and no
    caveat."""
    synthetic_corpus(tmp_path / "corpora")
    (tmp_path / "runs").mkdir()
    rows = dataset_rows({"bm25": {200_000: (0.06, 0.40, 0.08), 2_000_000: (0.03, 0.3, 0.04)}},
                        queries=query_ids(40), repeats=1)
    frame(rows, "synth").write_parquet(tmp_path / "runs" / RESULTS_FILE)
    text = report(tmp_path / "runs", "synth")
    heading = ("synth: dataset-level pools beside the published numbers of MDCR Table 1 (Medić "
               "and Šnajder 2022), MAP / NDCG / R@30 x100: measured and published, NOT "
               "comparable (the setup differs), so no difference is shown; no test")
    caveat = ("The setup differs from the paper's: a synthetic corpus against the paper's "
              "S2ORC; 40 queries per pool against the paper's 3,800; 1 repeat per pool size "
              "against the paper's 3.")
    assert f"## {heading}\n" in text and f"\n- {caveat}\n" in text
    published_part = text[text.index(heading):]
    assert header_of(published_part) == (
        "| model | pool | MAP measured | MAP published | NDCG measured | NDCG published | "
        "R@30 measured | R@30 published | source |")
    assert table_row(published_part, "bm25", "200k") == [
        "bm25", "200k", "6.0", "40.4", "40.0", "73.8", "8.0", "43.0", "MDCR Table 1"]
    assert "diff =" not in text and "-34.4" not in text
    tex = (tmp_path / "runs" / "reports" / "synth-published-dataset.tex").read_text()
    assert "differs from the paper's: a synthetic corpus" in tex and " diff " not in tex
    # the ingest recorded where its shards came from: the verdict holds once they are deleted
    shutil.rmtree(tmp_path / "corpora" / "synth" / "s2orc")
    assert caveat in report(tmp_path / "runs", "synth")
    # corpora kept apart from runs (make's CORPORA_DIR): named, or nothing is known
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "corpora", moved)
    assert caveat in report(tmp_path / "runs", "synth", corpora_root=moved)
    assert ("differs from the paper's: a corpus without a manifest that records its origin "
            "against the paper's S2ORC; 40 queries") in report(tmp_path / "runs", "synth")


S2AG = Origin("s2ag", "an S2AG corpus")
SYNTHETIC = Origin("synthetic", "a synthetic corpus")


@pytest.mark.parametrize("origin, queries, repeats, differs", [
    (S2ORC, 3800, 3, None),
    (S2AG, 3800, 3, None),
    (SYNTHETIC, 3800, 3, "a synthetic corpus against the paper's S2ORC"),
    (None, 3800, 3, "a corpus without a manifest that records its origin against the paper's "
                    "S2ORC"),
    (S2ORC, 40, 3, "40 queries per pool against the paper's 3,800"),
    (S2ORC, 3800, 1, "1 repeat per pool size against the paper's 3"),
])
def test_difference_only_on_the_papers_setup(tmp_path, origin, queries, repeats, differs):
    rows = dataset_rows({"bm25": {200_000: (0.41, 0.70, 0.45)}}, queries=query_ids(queries),
                        repeats=repeats)
    (text,) = published_sections(frame(rows), tmp_path, "c", origin)
    row = table_row(text, "bm25", "200k")
    if differs is None:
        corpus = ("an S2ORC corpus" if origin == S2ORC
                  else "an S2AG corpus, where the paper has S2ORC")
        assert "diff = measured - published in points, on the paper's setup; " in text
        assert (f"The setup agrees with the paper's: {corpus}; 3,800 queries per pool; 3 "
                "repeats per pool size.") in text
        assert row[2:5] == ["41.0", "40.4", "+0.6"] and "MAP diff" in header_of(text)
    else:
        assert "measured and published, NOT comparable (the setup differs), so no " \
            "difference is shown; " in text
        assert f"The setup differs from the paper's: {differs}." in text
        assert row[2:5] == ["41.0", "40.4", "70.0"] and " diff " not in header_of(text)


def test_what_differs_is_named_where_it_differs(tmp_path):
    """Pools that differ from the paper's in some places only: those places are named."""
    rows = dataset_rows({"bm25": {200_000: (0.41, 0.70, 0.45)}})
    rows += dataset_rows({"bm25": {2_000_000: (0.25, 0.60, 0.25)}}, queries=query_ids(40))
    (text,) = published_sections(frame(rows), tmp_path, "c", S2ORC)
    assert "differs from the paper's: 40 queries per pool against the paper's 3,800 (2M)." \
        in text
    (text,) = published_sections(frame(field_rows(queries={"Art": 150, "Medicine": 150})),
                                 tmp_path, "c", S2ORC)
    assert ("differs from the paper's: 150 queries per pool against the paper's 200 (Art, "
            "Medicine).") in text
    (text,) = published_sections(frame(field_rows(repeats=1)), tmp_path, "c", SYNTHETIC)
    others = ", ".join(f for f in MAG_FIELDS if f not in WHOLE_FIELDS)
    assert ("differs from the paper's: a synthetic corpus against the paper's S2ORC; 1 repeat "
            f"per field against the paper's 3 ({others}).") in text


def test_benchmark_built_from_a_synthetic_corpus(tmp_path):
    """`make mdcr` on the demo corpus with MDCR_MODELS=bm25,minilm, the 19 fields: MDCR Tables
    3 and 4 beside it, not comparable, and why."""
    corpora = tmp_path / "corpora"
    synthetic_corpus(corpora, "demo")
    fake_benchmark(corpora, "demo-mdcr", "demo", ["bm25", "minilm"], 1000)
    origin = corpus_origin(corpora, "demo-mdcr")
    assert origin.data == "synthetic"
    rows = mdcr_rows({m: (0.30, 0.5, 0.25) for m in PAPER_MODELS}, list(MAG_FIELDS),
                     ("bm25", "graph"))
    mdcr, types = published_sections(frame(rows), tmp_path, "demo-mdcr", origin)
    differs = ("The setup differs from the paper's: a benchmark built by make mdcr from a "
               "synthetic corpus against the paper's S2ORC; negatives from the models bm25, "
               "minilm against the paper's bm25, scincl, specter; negatives from field-level "
               "pools of 1k against the paper's 100k; 2 queries per field against the paper's "
               "200.")
    for text in (mdcr, types):
        assert differs in text and "diff =" not in text and " diff " not in header_of(text)
    assert table_row(mdcr, "bm25", "Medicine")[2:] == [
        "30.0", "38.6", "25.0", "32.5", "MDCR Table 3, SciRepEval Table 10"]


def test_benchmark_built_as_the_papers(tmp_path):
    corpora = tmp_path / "corpora"
    fake_ingest(corpora, "s2orc")
    fake_benchmark(corpora, "s2orc-mdcr", "s2orc", ["specter", "bm25", "scincl"], 100_000)
    rows = mdcr_rows({"bm25": (0.30, 0.5, 0.25)}, list(MAG_FIELDS), queries=FIELD_QUERIES)
    (mdcr,) = published_sections(frame(rows), tmp_path, "s2orc-mdcr",
                                 corpus_origin(corpora, "s2orc-mdcr"))
    assert ("The setup agrees with the paper's: a benchmark built by make mdcr from an S2ORC "
            "corpus; 200 queries per field.") in mdcr
    assert table_row(mdcr, "bm25", "Medicine")[2:5] == ["30.0", "38.6", "-8.6"]


def test_corpus_origin_reads_the_manifests(tmp_path):
    corpora = tmp_path / "corpora"
    synthetic_corpus(corpora, "synth")
    assert corpus_origin(corpora, "synth") == SYNTHETIC
    assert corpus_origin(corpora, fake_ingest(corpora, "s2orc").name) == S2ORC
    assert corpus_origin(corpora, fake_ingest(corpora, "s2ag", "s2ag").name) == S2AG
    # an ingest recorded before `raw_origin`: the raw folder says, while it is there
    old = fake_ingest(corpora, "old", raw_origin=None)
    shutil.copytree(corpora / "synth" / "s2orc", old / "s2orc")
    assert corpus_origin(corpora, "old") == SYNTHETIC
    shutil.rmtree(old / "s2orc")
    assert corpus_origin(corpora, "old").data == "unknown"
    (old / "s2orc" / "metadata").mkdir(parents=True)  # a release: no manifest of ours
    assert corpus_origin(corpora, "old") == S2ORC
    update_corpus_manifest(corpora / "mdcr", "benchmark", manifest(
        "import-mdcr", {"source": "/data/mdcr", "split": "test"}))
    assert corpus_origin(corpora, "mdcr") == RELEASE
    update_corpus_manifest(corpora / "scidocs", "collection", manifest(
        "import-beir", {"source": "/data/scidocs", "split": "test"}))
    assert corpus_origin(corpora, "scidocs").data == "collection"
    assert corpus_origin(corpora, "absent").data == "unknown"
    (corpora / "s2ag" / MANIFEST).write_text("{")  # damaged: nothing is known
    assert corpus_origin(corpora, "s2ag") == Origin("unknown",
                                                    "a corpus whose manifest is damaged")


# ---- docs/published.md restates the file -----------------------------------------------------
def _column(paper_model: str, model: str) -> str:
    if model == MEAN_OVER_MODELS:
        return "mean over the six"
    return f"{paper_model} (`{model}`)" if model else paper_model


def docs_tables() -> list[str]:
    """The tables of docs/published.md, rendered from the data file: cells "a / b" hold a
    model's metrics in the order the caption gives."""
    from pipeline.report.tables import markdown_table

    data = published()

    def grid(rows: pl.DataFrame, row_key: str, row_names: list, label, metrics: list[str],
             first: str) -> str:
        models = list(dict.fromkeys(zip(rows["paper_model"], rows["model"], strict=True)))
        body = []
        for key in row_names:
            cells = [label(key)]
            for paper_model, _ in models:
                hit = rows.filter(pl.col(row_key) == key, pl.col("paper_model") == paper_model)
                cells.append(" / ".join(f"{hit.filter(pl.col('metric') == m)['value'][0]:.1f}"
                                        for m in metrics))
            body.append(cells)
        return markdown_table([first, *(_column(p, m) for p, m in models)], body)

    fields = [*MAG_FIELDS, AVERAGE]
    name = {**{f: f for f in MAG_FIELDS}, AVERAGE: "average"}
    table1 = data.filter(pl.col("table") == 1)
    models1 = list(dict.fromkeys(zip(table1["paper_model"], table1["model"], strict=True)))
    rows1 = [[_column(p, m), *(" / ".join(
        f"{table1.filter(pl.col('model') == m, pl.col('size') == s, pl.col('metric') == k)['value'][0]:.1f}"  # noqa: E501
        for k in ("map", "ndcg", "recall@30")) for s in SIZES)] for p, m in models1]
    field_level = data.filter(pl.col("level") == "field")
    return [
        markdown_table(["model", "200k", "500k", "1M", "2M"], rows1),
        grid(field_level, "field", fields, name.get, ["map", "ndcg", "recall@30"], "field"),
        grid(data.filter(pl.col("table") == 3), "field", fields, name.get, ["map", "recall@5"],
             "field"),
        grid(data.filter(pl.col("table") == 4), "negatives", list(TYPES), str,
             ["map", "recall@5"], "candidate type"),
        grid(data.filter(pl.col("table") == 5), "field", [AVERAGE],
             lambda _: "average over the 19 fields", ["map", "recall@5"], "MDCR"),
        grid(data.filter(pl.col("table") == 10), "field", fields, name.get,
             ["map", "recall@5"], "field"),
    ]


def test_docs_restate_the_file():
    page = (ROOT / "docs" / "published.md").read_text()
    for table in docs_tables():
        assert table in page, table
