"""`import pipeline`: the Python API (docs/api.md), loaded lazily, a thin layer over the stages
that gives what they give."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.evaluation.evaluate import eval_run
from pipeline.layout import Place, reports_dir, run_paths
from pipeline.pools.build import PoolSpec
from pipeline.report.build import report
from tests.conftest import CHILD_BOUND_S, N_QUERIES, POOL_SEED, POOL_SIZES, copy_corpus, pool_of

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numba", "jnius", "faiss", "transformers", "polars", "numpy", "pyarrow",
         "matplotlib", "ranx")
NAMES = {"score", "compare", "Comparison",
         "Data", "Report", "build_corpus", "build_pool", "build_report", "evaluate", "search",
         "verify_data", "Encoder", "import_vectors", "import_run", "import_collection",
         "export_beir", "crossover", "variance", "topic_set_size", "mteb_result", "inferred",
         "judge", "judge_page", "judge_agreement", "import_beir", "import_csfcube",
         "import_mdcr", "export_mdcr", "export_mteb", "embed", "generate_corpus",
         "ingest_corpus", "prefilter_corpus", "build_pools", "build_paper_pools",
         "retire_pool", "training_ids", "download"}
NAMES |= {"collect", "index", "submit_embed", "build_mdcr", "mdcr_jaccard", "mdcr_scores",
          "mdcr_evaluate"}  # issue 72
NAMES |= {"list_models", "warm", "sweep"}  # issue 72: make models, warm, sweep


def _imported(code: str) -> set[str]:
    """The modules `python -X importtime -c code` imports, in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=ROOT,
                          capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return {m.group(1) for m in re.finditer(r"^import time:.*\|\s*(\S+)\s*$", done.stderr,
                                            flags=re.M)}


def test_import_pipeline_loads_the_standard_library_only():
    modules = _imported("import pipeline")
    assert "pipeline" in modules
    assert not {m for m in modules if m.split(".")[0] in HEAVY}
    started = _imported("pass")  # the interpreter's own start (site, sitecustomize, ...)
    outside = {m for m in modules - started if m.split(".")[0] not in sys.stdlib_module_names
               and m.split(".")[0] != "pipeline"}
    assert not outside, sorted(outside)


def _loaded(code: str) -> set[str]:
    """sys.modules after `code`, in a fresh interpreter (importtime does not list what
    importlib.import_module loads itself)."""
    done = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print(*sys.modules)"],
                          cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(done.stdout.split())


def test_data_is_light_too():
    """Naming the data loads the API module, still no stage."""
    assert not {m for m in _loaded("import pipeline") if m.split(".")[0] in HEAVY}
    modules = _loaded("import pipeline; pipeline.Data('x').corpus('demo')")
    assert "pipeline.api" in modules
    assert not {m for m in modules if m.split(".")[0] in HEAVY}


def test_the_public_names():
    assert set(pipeline.__all__) == NAMES
    assert set(dir(pipeline)) >= NAMES
    # each name is the object of that name its module defines (functions behind their
    # argument check), never a submodule or another module's namesake
    for name in NAMES:
        value = inspect.unwrap(getattr(pipeline, name))
        assert value.__name__ == name and value.__module__.startswith("pipeline."), name
        assert getattr(importlib.import_module(value.__module__), name) is value, name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        pipeline.nothing  # noqa: B018
    importlib.import_module("pipeline.report.build")  # the submodules do not hide the
    importlib.import_module("pipeline.verify")  # API's names
    assert inspect.unwrap(pipeline.build_report) is pipeline.api.build_report
    assert inspect.unwrap(pipeline.verify_data) is pipeline.api.verify_data
    assert "deep" in inspect.signature(pipeline.verify_data).parameters


def test_dir_lists_the_public_names_each_with_its_section_in_the_docs():
    """`dir(pipeline)` is `__all__`: not the module's own helpers (`import_module`, `Any`, ...)
    nor the submodules loaded since; docs/api.md has a `## <name>` section for each name."""
    importlib.import_module("pipeline.report.build")  # loaded: `pipeline.report` is set
    assert dir(pipeline) == pipeline.__all__
    sections = set(re.findall(r"^## (\S+)$", (ROOT / "docs" / "api.md").read_text(), re.M))
    assert set(pipeline.__all__) - sections == set()


def test_data_roots(tmp_path):
    data = pipeline.Data(tmp_path)
    assert (data.corpora, data.indexes, data.runs) == (
        tmp_path / "corpora", tmp_path / "indexes", tmp_path / "runs")
    assert data.corpus("demo") == tmp_path / "corpora" / "demo"
    place = data.place("demo")
    assert place == Place(tmp_path / "corpora" / "demo", tmp_path / "indexes", tmp_path / "runs")
    assert (place.corpus, place.index_dir, place.runs_dir) == (
        "demo", tmp_path / "indexes" / "demo", tmp_path / "runs" / "demo")
    assert place.sibling("demo-mdcr").derived == (tmp_path / "indexes" / "demo-mdcr",
                                                  tmp_path / "runs" / "demo-mdcr")
    apart = pipeline.Data(tmp_path, runs=tmp_path / "scratch")
    assert apart.runs == tmp_path / "scratch" and apart.corpora == data.corpora
    assert pipeline.Data.of(str(tmp_path)) == data and pipeline.Data.of(data) is data
    assert pipeline.Data(corpora="a", indexes="b", runs="c").runs == Path("c").absolute()
    with pytest.raises(InputError, match="give a folder"):
        pipeline.Data(corpora="a")


@pytest.fixture(scope="module")
def api_data(corpus_dir, tmp_path_factory) -> pipeline.Data:
    """The fixture corpus, searched by BM25 and random through the API."""
    root = tmp_path_factory.mktemp("api")
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes",
                         runs=root / "runs")
    for size in POOL_SIZES:
        for model in ("bm25", "random"):
            assert pipeline.search(data, corpus_dir.name, pool_of(size), model,
                                   threads=1) == model
    return data


def test_pools(api_data, corpus_dir):
    assert set(api_data.pools(corpus_dir.name)) >= {pool_of(s) for s in POOL_SIZES}


def average_precisions(trec: Path, qrels: Path) -> dict[int, float]:
    """Each query's average precision, computed here from the run's TREC text and the pool's
    qrels (a reference apart from the pipeline's scorers)."""
    relevant: dict[int, set[int]] = {}
    for query, doc, rel in pl.read_parquet(qrels).iter_rows():
        if rel > 0:
            relevant.setdefault(query, set()).add(doc)
    ranked: dict[int, list[tuple[int, int]]] = {}
    for line in trec.read_text().splitlines():
        query, _, doc, rank, *_ = line.split()
        ranked.setdefault(int(query), []).append((int(rank), int(doc)))
    precisions = {}
    for query, docs in relevant.items():
        found, total = 0, 0.0
        for i, (_, doc) in enumerate(sorted(ranked.get(query, [])), start=1):
            if doc in docs:
                found += 1
                total += found / i
        precisions[query] = total / len(docs)
    return precisions


def test_evaluate_gives_what_eval_gives(api_data, corpus_dir):
    pool = pool_of(POOL_SIZES[0])
    means = pipeline.evaluate(api_data, corpus_dir.name, pool, ["bm25", "random"], means=True)
    assert means.columns == ["model", "map", "ndcg", "recall@30"]
    assert means["model"].to_list() == ["bm25", "random"]
    info = eval_run(api_data.place(corpus_dir.name), pool, "bm25")
    assert means.row(0, named=True) == {"model": "bm25", **info["means"]}
    values = pipeline.evaluate(api_data, corpus_dir.name, pool, "bm25")
    assert values.columns[:3] == ["model", "query", "negatives"]
    # each query's MAP is the average precision of the run's ranking, computed here
    ours = values.filter(pl.col("negatives") == "all").select("query", "map")
    paths = run_paths(api_data.runs, corpus_dir.name, pool, "bm25")
    want = average_precisions(paths.trec, corpus_dir / "pools" / pool / "qrels.parquet")
    assert sorted(int(q) for q in ours["query"]) == sorted(want)
    for query, value in ours.iter_rows():
        assert value == pytest.approx(want[int(query)], abs=1e-4), query
    assert means.row(0, named=True)["map"] == pytest.approx(
        sum(want.values()) / len(want), abs=1e-4)
    assert means.row(0, named=True)["map"] > means.row(1, named=True)["map"]
    one = pipeline.evaluate(api_data, corpus_dir.name, pool, "bm25", metrics=["map"],
                            means=True)
    assert one.columns == ["model", "map"]


def test_evaluate_saves_as_make_eval_saves_unless_save_is_false(api_data, corpus_dir, tmp_path):
    """Issue 72, one saving policy for every door: evaluate saves what it scores as `eval
    --metrics` (make eval METRICS=...) does, other metrics than the pool's own added to its
    saved evaluation byte for byte, a current evaluation kept; save=False scores without
    writing anything; the frame holds the metrics asked, the same either way."""
    from pipeline.cli.main import main

    pool, name = pool_of(POOL_SIZES[0]), corpus_dir.name
    pipeline.evaluate(api_data, name, pool, "random")  # the pool's own set, saved
    doors = {door: tmp_path / door for door in ("api", "command")}
    for root in doors.values():
        shutil.copytree(api_data.runs, root / "runs")
    paths = {door: run_paths(root / "runs", name, pool, "random") for door, root in doors.items()}
    before = paths["api"].metrics.read_bytes()
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=api_data.indexes,
                         runs=doors["api"] / "runs")
    asked = pipeline.evaluate(data, name, pool, "random", metrics="map ndcg@5", save=False)
    assert asked.columns == ["model", "query", "negatives", "map", "ndcg@5"]
    assert paths["api"].metrics.read_bytes() == before  # scored, not written
    saved = pipeline.evaluate(data, name, pool, "random", metrics="map ndcg@5")
    assert saved.equals(asked)
    assert main(["--corpora-root", str(corpus_dir.parent), "--index-root", str(api_data.indexes),
                 "--runs-root", str(doors["command"] / "runs"), "eval", "--corpus", name,
                 "--model", "random", "--pool", pool, "--metrics", "map ndcg@5"]) == 0
    api, command = (json.loads(p.evaluation.read_text()) for p in paths.values())
    for made in (api, command):  # when and how long: the rest is the evaluation
        made.pop("seconds"), made.pop("created"), made.pop("self_sha256")
    assert api == command and api["parameters"]["metrics"][-1] == "ndcg@5"
    assert paths["api"].metrics.read_bytes() == paths["command"].metrics.read_bytes() != before
    kept = paths["api"].evaluation.stat().st_mtime_ns
    assert pipeline.evaluate(data, name, pool, "random", metrics="map").equals(
        asked.drop("ndcg@5"))  # current: kept as it is
    assert paths["api"].evaluation.stat().st_mtime_ns == kept


def report_files(folder):
    """The report's files and bytes (not the hidden stat cache beside their checksums, which
    holds inode numbers and times)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


def test_report_saves_what_make_report_writes(api_data, corpus_dir, tmp_path):
    for size in POOL_SIZES:
        pipeline.evaluate(api_data, corpus_dir.name, pool_of(size), ["bm25", "random"])
    built = pipeline.build_report(api_data, corpus_dir.name, POOL_SEED)
    assert isinstance(built, pipeline.Report)
    assert [s.name for s in built.sections] == [
        "summary", "not-shown", "mdcr", "csfcube", "collection", "query-variants", "dataset",
        "fields", "significance", "variance", "crossover", "judged", "published", "leakage"]
    assert "dataset" in built.tables and built.tables["dataset"].frame().height == 2
    assert f"{corpus_dir.name}-dataset.tex" in built.latex
    path = built.save()
    folder = reports_dir(api_data.runs)
    saved = report_files(folder)
    assert path.read_text() == built.document
    text = report(api_data.runs, corpus_dir.name, POOL_SEED, api_data.corpora)
    assert text == built.markdown
    assert saved == report_files(folder)
    with pytest.raises(InputError, match="SEED"):
        pipeline.build_report(api_data, corpus_dir.name, POOL_SEED + 5, collect=False)


def test_verify_data(api_data, corpus_dir, tmp_path):
    """Healthy runs give no line; a run file of another size than its manifest says gives one
    CORRUPT line naming it (on a copy of the runs folder)."""
    runs = tmp_path / "runs"
    shutil.copytree(api_data.runs, runs)
    data = pipeline.Data(corpora=api_data.corpora, indexes=api_data.indexes, runs=runs)
    assert not [line for line in pipeline.verify_data(data, deep=False)
                if f"/{corpus_dir.name}/" in line]
    damaged = run_paths(runs, corpus_dir.name, pool_of(POOL_SIZES[0]), "bm25").trec
    damaged.write_text(damaged.read_text() + "1 Q0 2 3 0.5 bm25\n")
    lines = pipeline.verify_data(data, deep=False)
    assert [line for line in lines if str(damaged) in line and "CORRUPT" in line], lines


def test_build_pool_takes_a_spec_or_its_fields(corpus_dir, tmp_path):
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "copy")
    data = pipeline.Data(tmp_path)
    name = pipeline.build_pool(data, "copy", size="800", queries=N_QUERIES, seed=POOL_SEED)
    assert name == pool_of(800)
    spec = PoolSpec(size=800, queries=N_QUERIES, seed=POOL_SEED)
    assert pipeline.build_pool(tmp_path, "copy", spec) == name
    assert json.loads((corpus / "pools" / name / "manifest.json").read_text())["parameters"][
        "size"] == 800
    with pytest.raises(InputError, match="not both"):
        pipeline.build_pool(data, "copy", spec, size=800)


def test_build_corpus_from_synthetic_shards(tmp_path):
    data = pipeline.Data(tmp_path)
    corpus = pipeline.build_corpus(data, "mini", synthetic=1500, shards=1, seed=3)
    assert corpus == data.corpus("mini")
    assert (corpus / "prefiltered.parquet").is_file()
    assert (corpus / "s2orc").is_dir()  # the raw shards, where make synth writes them
    made = {p: p.stat().st_mtime_ns for p in sorted(corpus.rglob("*")) if p.is_file()}
    assert pipeline.build_corpus(data, "mini", synthetic=1500, shards=1, seed=3) == corpus
    # current outputs are kept, not made again
    assert {p: p.stat().st_mtime_ns for p in sorted(corpus.rglob("*")) if p.is_file()} == made
    # min_citations: the prefilter's own default (3, MDCR's), unless given
    def recorded() -> list[str]:
        return re.findall(r'"min_citations": (\d+)', (corpus / "manifest.json").read_text())

    assert recorded() == ["3"]
    pipeline.build_corpus(data, "mini", synthetic=1500, shards=1, seed=3, min_citations=5)
    assert recorded() == ["5"]


BAD_NAMES = ("", "../corpora/x", "a/b", "..", ".hidden", "x\n")


def test_names_are_checked_as_the_command_line_checks_them(corpus_dir, tmp_path, capsys):
    """A corpus, pool or model name never becomes a path outside its folder (issue 39.2):
    every API function refuses what `--corpus`, `--pool` and CORPUS refuse, with the same
    line, and writes nothing."""
    from pipeline.cli.main import main
    from pipeline.models import ModelEntry

    user = tmp_path / "user"  # a folder of the user's own, outside the data folder
    user.mkdir()
    (user / "papers.parquet").write_text("mine")
    (user / "manifest.json").write_text("{}")
    data = pipeline.Data(tmp_path / "data")
    calls = {
        "build_corpus": lambda n: pipeline.build_corpus(data, n, synthetic=2000),
        "build_pool": lambda n: pipeline.build_pool(data, n, size=800),
        "search": lambda n: pipeline.search(data, n, "all-800-r0", "random"),
        "evaluate": lambda n: pipeline.evaluate(data, n, "all-800-r0", "random"),
        "build_report": lambda n: pipeline.build_report(data, n, collect=False),
        "corpus": data.corpus, "place": data.place, "pools": data.pools}
    for name in (*BAD_NAMES, str(user)):
        for what, call in calls.items():
            with pytest.raises(InputError, match="a corpus name is") as refused:
                call(name)
            assert "\n" not in str(refused.value).replace(repr(name), ""), what
        with pytest.raises(SystemExit):  # the command line: the same line
            main(["--corpora-root", str(tmp_path / "data"), "pool", "--corpus", name])
        assert str(refused.value) in capsys.readouterr().err
    assert sorted(p.name for p in user.iterdir()) == ["manifest.json", "papers.parquet"]
    assert (user / "papers.parquet").read_text() == "mine"
    assert not (tmp_path / "data").exists()
    copy_corpus(corpus_dir, tmp_path / "data" / "corpora" / "c")
    for pool in BAD_NAMES:
        for call in (pipeline.search, pipeline.evaluate):
            with pytest.raises(InputError, match="a pool name is"):
                call(data, "c", pool, "random")
    with pytest.raises(InputError, match="pool field '../../x': give one of the 19"):
        pipeline.build_pool(data, "c", size=800, field="../../x")  # a field names the pool
    assert not list(tmp_path.rglob("*x-800-r0*"))  # not even its lock
    for model in ("../../x", "", "a/b"):
        for call in (pipeline.search, pipeline.evaluate):
            with pytest.raises(InputError, match="a model name is"):
                call(data, "c", "all-800-r0", ModelEntry(model, "random"))
    assert not (tmp_path / "data" / "runs").exists()


def test_synthetic_shards_never_go_into_a_folder_of_the_users(tmp_path):
    """`raw=` is a release to read: with `synthetic=` it is refused, not filled (its
    metadata/ replaced, its manifest.json removed)."""
    release = tmp_path / "release"
    (release / "metadata").mkdir(parents=True)
    (release / "metadata" / "metadata_0.jsonl.gz").write_bytes(b"theirs")
    (release / "manifest.json").write_text("theirs")
    data = pipeline.Data(tmp_path / "data")
    with pytest.raises(InputError, match="give one of them"):
        pipeline.build_corpus(data, "x", synthetic=200, raw=release)
    with pytest.raises(InputError, match="source='s2orc'"):
        pipeline.build_corpus(data, "x", synthetic=200, source="s2ag")
    with pytest.raises(InputError, match="source=.*use one of s2orc, s2ag"):
        pipeline.build_corpus(data, "x", source="../../elsewhere")
    assert (release / "metadata" / "metadata_0.jsonl.gz").read_bytes() == b"theirs"
    assert (release / "manifest.json").read_text() == "theirs"
    assert not (tmp_path / "data").exists()


def _snapshot(*roots: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `roots`: its mtime (ns) and bytes."""
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes())
            for root in roots for p in sorted(Path(root).rglob("*")) if p.is_file()}


def test_a_refused_call_writes_nothing(api_data, corpus_dir, tmp_path):
    """Issue 56: two API refusals rewrote runs/.checksums.json (build_report collected the
    results, then refused a corpus without runs or a missing list). Every file's bytes and
    mtime are the same before and after each refused call."""
    name = corpus_dir.name
    roots = (api_data.corpora / name, api_data.indexes, api_data.runs)
    # an evaluation newer than runs/results.parquet before each call: one that collects
    # the results before it refuses would write them
    fresh = iter([(size, model) for size in POOL_SIZES for model in ("bm25", "random")])
    refused = [
        lambda: pipeline.build_report(api_data, "nocorpus"),
        lambda: pipeline.build_report(api_data, name, exclude=tmp_path / "missing.txt"),
        lambda: pipeline.build_report(api_data, name,
                                      training_sets={"bm25": tmp_path / "missing.txt"}),
        lambda: pipeline.evaluate(api_data, name, "nopool", "bm25"),
        lambda: pipeline.search(api_data, name, pool_of(POOL_SIZES[0]), "bm25", k=0),
        lambda: pipeline.import_run(api_data, name, pool_of(POOL_SIZES[0]),
                                    tmp_path / "missing.trec", "mine"),
        lambda: pipeline.crossover(api_data.runs / "results.parquet", "bm25", "bm25"),
        lambda: pipeline.variance(api_data.runs / "results.parquet", seed=99),
    ]
    for call in refused:
        size, model = next(fresh, (POOL_SIZES[0], "bm25"))
        pipeline.evaluate(api_data, name, pool_of(size), model)
        before = _snapshot(*roots)
        with pytest.raises(InputError) as caught:
            call()
        assert "\n" not in str(caught.value)
        after = _snapshot(*roots)
        assert [p for p in before.keys() | after.keys() if before.get(p) != after.get(p)] == [], (
            str(caught.value))


def test_api_refusals_name_the_keyword_arguments(corpus_dir, tmp_path):
    """Issue 56: build_pool's refusal of a size too large said the command line's `--size`;
    the API names its own keyword (`size=`, with the value), as make names SIZE= (the refusal
    carries the option's declaration: each door words it)."""
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "i", runs=tmp_path / "r")
    with pytest.raises(InputError) as caught:
        pipeline.build_pool(data, corpus_dir.name, size=10**9, queries=5)
    text = str(caught.value)
    assert "--" not in text and text.startswith("size=1000000000 exceeds the papers available")
    assert text.endswith("choose a smaller size")


def test_embed_is_the_embed_command_each_refusing_in_its_words(corpus_dir, tmp_path, capsys):
    """`pipeline.embed` is the embed command (issue 59): a shard beyond SHARDS, refused inside
    the stage before any model loads, names the API's keywords in Python and the flags on the
    command line, and neither door writes anything."""
    from pipeline.cli.main import main

    roots = {"corpora": corpus_dir.parent, "indexes": tmp_path / "i", "runs": tmp_path / "r"}
    pool = pool_of(POOL_SIZES[0])
    with pytest.raises(InputError) as refused:
        pipeline.embed(pipeline.Data(**roots), corpus_dir.name, pool, "minilm", shard=3,
                       shards=2)
    assert str(refused.value) == "shard=3 shards=2: give a shard from 0 to 1"
    assert main(["--corpora-root", str(roots["corpora"]), "--index-root", str(roots["indexes"]),
                 "--runs-root", str(roots["runs"]), "embed", "--corpus", corpus_dir.name,
                 "--pool", pool, "--shard", "3", "--shards", "2"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --shard 3 --shards 2: give a shard from 0 to 1")
    assert not roots["indexes"].exists() and not roots["runs"].exists()
