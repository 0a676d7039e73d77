"""Runs made elsewhere imported through the public API (pipeline.import_run) and scored by
pipeline.evaluate: rankings in the format of CSFCube's bundled SPECTER rankings, scored equal
to CSFCube's official definitions; every refused and counted case; reimport."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.layout import run_paths
from pipeline.retrieval.runs import load_run
from tests.conftest import make_ok, pool_of, refusal
from tests.external.test_csfcube import (
    FACETS,
    official_query,
    official_split,
    write_release,
)


@pytest.fixture(scope="module")
def csf(corpus_dir, tmp_path_factory) -> tuple[pipeline.Data, dict, dict]:
    """The synthetic CSFCube release imported as corpus `csf`, and each facet's pool."""
    from pipeline.external.csfcube import import_csfcube

    src = tmp_path_factory.mktemp("csfcube-release")
    expected = write_release(src, corpus_dir / "prefiltered.parquet")
    data = pipeline.Data(tmp_path_factory.mktemp("imported-data"))
    import_csfcube(src, data.corpus("csf"))
    pools = {pool.split("-")[1]: pool for pool in data.pools("csf")}
    return data, expected, pools


def specter_rankings(expected: dict, facet: str, seed: int) -> dict[str, list]:
    """Rankings as the release's sample_ranked_pools hold them: {query paper: [[candidate,
    L2 distance], ...]} nearest first, each query's judged list without its own paper."""
    rng = np.random.default_rng(seed)
    out = {}
    for pid, entry in expected["annotations"][facet].items():
        cands = [c for c in entry["cands"] if c != pid]
        distances = np.sort(rng.uniform(40, 60, size=len(cands)))
        out[pid] = [[c, float(d)] for c, d in zip(rng.permutation(cands), distances,
                                                  strict=True)]
    return out


def as_frame(rankings: dict[str, list], facet: str) -> pl.DataFrame:
    """The rankings as a run: the facet query's id, the candidate, -distance as the score."""
    return pl.DataFrame([(f"{pid}_{facet}", doc, -dist) for pid, ranked in rankings.items()
                         for doc, dist in ranked], schema=["query", "doc", "score"],
                        orient="row")


def test_specter_rankings_imported_score_as_the_official_script(csf, tmp_path):
    """Each facet's rankings imported (a TREC file for background, DataFrames for the others)
    and scored by pipeline.evaluate: NDCG%20 and MAP equal CSFCube's official definitions,
    query by query and averaged over the test folds; the report sets the run beside others."""
    data, expected, pools = csf
    for facet in FACETS:
        rankings = specter_rankings(expected, facet, seed=FACETS.index(facet))
        frame = as_frame(rankings, facet)
        run: object = frame
        if facet == "background":
            run = tmp_path / "specter-background.trec"
            run.write_text("".join(f"{q} Q0 {d} {i} {s!r} specter\n" for i, (q, d, s) in
                                   enumerate(frame.iter_rows(), 1)))
        info = pipeline.import_run(data, "csf", pools[facet], run, "specter-authors")
        assert info["details"]["retriever"] == "imported"
        assert info["counts"]["rows"] == frame.height
        assert info["counts"]["pool_queries_not_in_run_scored_0"] == 0
        scores = pipeline.evaluate(data, "csf", pools[facet], "specter-authors", means=True)
        annotations = expected["annotations"][facet]
        per_query = {f"{pid}_{facet}": official_query(
            [dict(zip(annotations[pid]["cands"], annotations[pid]["relevance_adju"],
                      strict=True))[doc] for doc, _ in ranked])
            for pid, ranked in rankings.items()}
        folds = {fold: expected["splits"][facet][fold] for fold in
                 ("fold1_test", "fold2_test")}
        official = official_split(per_query, folds)
        row = scores.row(0, named=True)
        assert row["model"] == "specter-authors"
        assert row["ndcg%20"] == pytest.approx(official["ndcg%20"], abs=1e-12)
        assert row["map_ranked-l2"] == pytest.approx(official["map_ranked-l2"], abs=1e-12)
    results = data.results()
    assert "specter-authors" in set(results["model"])


def test_ties_are_kept_and_broken_as_trec_eval_does(csf):
    """Equal scores: every line kept, ranked by docid descending as a string, counted."""
    data, expected, pools = csf
    pid, entry = next(iter(expected["annotations"]["method"].items()))
    docs = [c for c in entry["cands"] if c != pid][:4]
    frame = pl.DataFrame({"query": [f"{pid}_method"] * 4, "doc": docs,
                          "score": [1.0, 1.0, 1.0, 0.5]})
    info = pipeline.import_run(data, "csf", pools["method"], frame, "tied")
    assert info["counts"]["tied_lines"] == 3 and info["counts"]["queries_with_ties"] == 1
    run = load_run(data.place("csf"), pools["method"], "tied")
    assert run["doc"].to_list() == [*sorted(docs[:3], reverse=True), docs[3]]
    assert run["rank"].to_list() == [1, 2, 3, 4]


def test_a_csfcube_query_ranking_its_own_paper_is_dropped_and_counted(csf, caplog):
    """The query `<paper>_<facet>` ranking `<paper>` is a self hit (issue 50): dropped,
    counted and logged as docs/evaluation.md says (it was refused as an unknown paper)."""
    data, expected, pools = csf
    frame = as_frame(specter_rankings(expected, "method", seed=7), "method")
    papers = [q.rsplit("_", 1)[0] for q in frame["query"].unique(maintain_order=True)[:2]]
    own = pl.DataFrame({"query": [f"{p}_method" for p in papers], "doc": papers,
                        "score": [99.0, 99.0]})
    info = pipeline.import_run(data, "csf", pools["method"], pl.concat([frame, own]), "own")
    assert info["counts"]["self_hits_removed"] == 2
    assert info["counts"]["rows"] == frame.height
    assert "2 lines of run own rank their query's own paper: dropped" in caplog.text
    kept = load_run(data.place("csf"), pools["method"], "own")
    assert kept.height == frame.height and not kept["doc"].is_in(papers).any()


def test_the_release_keys_as_query_ids_are_refused_naming_the_facet_form(csf):
    """Query ids given as the release's keys (the paper alone): the refusal says the pool's
    queries are `<paper>_<facet>`, with one of them."""
    data, expected, pools = csf
    frame = as_frame(specter_rankings(expected, "result", seed=8), "result").with_columns(
        pl.col("query").str.replace(r"_result$", ""))
    with pytest.raises(InputError, match=r"names \d+ queries the pool does not have .*is a "
                       r"query paper, but the pool's queries are named <paper>_<facet> "
                       r"\(e\.g\. \d+_result\)"):
        pipeline.import_run(data, "csf", pools["result"], frame, "keys")
    assert not run_paths(data.runs, "csf", pools["result"], "keys").manifest.exists()


def test_a_wrong_pool_names_the_pools_and_no_command_that_cannot_make_it(csf):
    """A POOL the corpus lacks: the pools are listed, and no repair (`make pool` on an
    imported collection led back to the same error)."""
    data, expected, pools = csf
    frame = as_frame(specter_rankings(expected, "method", seed=9), "method")
    with pytest.raises(InputError, match=r"POOL='csfcube-method-1-r0' is not a pool of corpus "
                       rf"csf \(its pools: {', '.join(sorted(pools.values()))}\): give one of "
                       "them, or no POOL") as refused:
        pipeline.import_run(data, "csf", "csfcube-method-1-r0", frame, "wrong")
    assert refused.value.repair is None
    with pytest.raises(InputError, match=r"corpus csf is a collection with its own pools "
                       rf"\({', '.join(sorted(pools.values()))}\); give one of them$"):
        pipeline.evaluate(data, "csf", "csfcube-method-1-r0", "bm25")  # not `make pool`


def test_a_run_of_the_whole_collection_goes_to_each_facet_pool(csf, tmp_path):
    """No pool: each facet pool gets the lines of its queries, the same run the facet's own
    import writes, counted per pool; one bad line anywhere refuses the run in every pool."""
    data, expected, pools = csf
    frames = {f: as_frame(specter_rankings(expected, f, seed=10 + i), f)
              for i, f in enumerate(FACETS)}
    whole = pl.concat(frames.values())
    run = _trec(tmp_path / "all.trec", whole.sample(fraction=1.0, shuffle=True, seed=1))
    bad = _trec(tmp_path / "bad.trec", pl.concat([
        whole, frames["result"].head(1).with_columns(doc=pl.lit("not-a-paper"))]))
    with pytest.raises(InputError, match=rf"the run for pool {pools['result']} names 1 papers "
                       "that are not candidates"):
        pipeline.import_run(data, "csf", None, bad, "all-facets")
    assert not any(run_paths(data.runs, "csf", p, "all-facets").manifest.exists()
                   for p in pools.values())
    written = pipeline.import_run(data, "csf", None, run, "all-facets")
    assert sorted(written) == sorted(pools.values())
    for facet, frame in frames.items():
        counts = written[pools[facet]]["counts"]
        assert counts["rows"] == frame.height and counts["lines"] == frame.height
        assert counts["other_pools_lines"] == whole.height - frame.height
        pipeline.import_run(data, "csf", pools[facet], frame, f"only-{facet}")
        alone = load_run(data.place("csf"), pools[facet], f"only-{facet}")
        assert load_run(data.place("csf"), pools[facet], "all-facets").equals(alone)
    manifests = [run_paths(data.runs, "csf", p, "all-facets").manifest for p in written]
    before = [m.stat().st_mtime_ns for m in manifests]
    again = pipeline.import_run(data, "csf", None, run, "all-facets")  # nothing to do
    assert {p: i["counts"] for p, i in again.items()} == {
        p: i["counts"] for p, i in written.items()}
    assert [m.stat().st_mtime_ns for m in manifests] == before


def test_a_damaged_copy_of_a_whole_collections_run_is_repaired_by_its_import(csf, tmp_path):
    """The repair names no POOL (the import with one would refuse the other pools' lines);
    the whole import again rewrites the damaged pool's copy."""
    data, expected, pools = csf
    run = _trec(tmp_path / "all.trec", pl.concat(
        [as_frame(specter_rankings(expected, f, seed=30), f) for f in FACETS]))
    pipeline.import_run(data, "csf", None, run, "mended-whole")
    parquet = run_paths(data.runs, "csf", pools["method"], "mended-whole").parquet
    rows = load_run(data.place("csf"), pools["method"], "mended-whole").height
    with parquet.open("r+b") as handle:
        handle.seek(20)
        handle.write(b"\0\0\0\0")
    os.utime(parquet, ns=(1, 1))
    with pytest.raises(InputError) as refused:
        load_run(data.place("csf"), pools["method"], "mended-whole")
    repair = str(refused.value.repair)
    assert repair.startswith("make import-run") and f"RUN={run}" in repair
    assert "POOL=" not in repair
    pipeline.import_run(data, "csf", None, run, "mended-whole")
    assert load_run(data.place("csf"), pools["method"], "mended-whole").height == rows


def test_a_run_of_two_facets_leaves_the_third_pool_out(csf, caplog):
    import logging

    data, expected, pools = csf
    caplog.set_level(logging.INFO, logger="pipeline")
    run = pl.concat([as_frame(specter_rankings(expected, f, seed=20), f)
                     for f in ("background", "method")])
    written = pipeline.import_run(data, "csf", None, run, "two-facets")
    assert sorted(written) == sorted([pools["background"], pools["method"]])
    assert f"1 pools left out, keeping no line of it: {pools['result']}" in caplog.text
    assert not any((data.runs / "csf" / pools["result"]).glob("*two-facets*"))  # nor a lock
    # a whole-collection import under that name again, leaving out a pool that keeps an
    # earlier import of it: refused, as the old run would stand beside the new ones
    pipeline.import_run(data, "csf", pools["result"], as_frame(
        specter_rankings(expected, "result", seed=20), "result"), "two-facets")
    with pytest.raises(InputError, match=f"pools {pools['result']} keep a run two-facets"):
        pipeline.import_run(data, "csf", None, run, "two-facets", replace=True)


@pytest.fixture(scope="module")
def small(corpus_dir, tmp_path_factory) -> tuple[pipeline.Data, str, pl.DataFrame]:
    """The shared corpus's pool (integer ids), with runs written into a folder of this
    module's, and a run of it: each query's first 5 candidates."""
    from pipeline.pools.build import load_pool

    other = tmp_path_factory.mktemp("small-runs")
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=other / "indexes",
                         runs=other / "runs")
    pool = pool_of(800)
    queries, candidates, _ = load_pool(corpus_dir, pool)
    docs = candidates["corpusid"].filter(~candidates["corpusid"].is_in(
        queries["corpusid"].implode())).head(5).to_list()
    frame = pl.DataFrame([(str(q), str(d), float(5 - i)) for q in queries["corpusid"]
                          for i, d in enumerate(docs)], schema=["query", "doc", "score"],
                         orient="row")
    return data, pool, frame


def _trec(path: Path, frame: pl.DataFrame) -> Path:
    path.write_text("".join(f"{q} Q0 {d} 0 {s} x\n" for q, d, s in frame.iter_rows()))
    return path


@pytest.mark.parametrize("change, message", [
    (lambda f: pl.concat([f, f.head(1)]), r"gives 1 \(query, doc\) pairs more than once"),
    (lambda f: pl.concat([f, f.head(1).with_columns(query=pl.lit("999999999999"))]),
     r"names 1 queries the pool does not have \(e.g. 999999999999, line \d+; 1 lines\)"),
    (lambda f: pl.concat([f, f.head(1).with_columns(doc=pl.lit("007"))]),
     r"names 1 papers that are not candidates of the pool \(e.g. 007"),
])
def test_bad_runs_are_refused_writing_nothing(small, tmp_path, change, message):
    data, pool, frame = small
    run = _trec(tmp_path / "run.trec", change(frame))
    with pytest.raises(InputError, match=message):
        pipeline.import_run(data, "small", pool, run, "refused")
    assert not run_paths(data.runs, "small", pool, "refused").trec.exists()


@pytest.mark.parametrize("text, message", [
    ("1 Q0 2 1 0.5\n", r"run.trec:1: not a TREC run line"),
    ("1 Q0 2 1 nan x\n", r"run.trec:1: not a TREC run line"),
    ("\n\n", "holds no run line"),
])
def test_malformed_files_are_refused_with_the_line(small, tmp_path, text, message):
    data, pool, _ = small
    (tmp_path / "run.trec").write_text(text)
    with pytest.raises(InputError, match=message):
        pipeline.import_run(data, "small", pool, tmp_path / "run.trec", "refused")


def test_without_a_pool_pools_sharing_queries_are_listed(small):
    """No pool, on a corpus whose pools share queries: the run cannot be split, and the
    refusal lists the pools to give."""
    data, pool, frame = small
    pools = data.pools("small")
    with pytest.raises(InputError, match=r"give POOL=: the pools of corpus small share "
                       rf"queries .*its pools: {re.escape(', '.join(pools[:6]))}"):
        pipeline.import_run(data, "small", None, frame, "unsplit")
    with pytest.raises(InputError, match=r"pool 'all-9-r0' does not exist .*; build it") as \
            missing:  # a corpus whose pools are built: building it may be what is wanted
        pipeline.import_run(data, "small", "all-9-r0", frame, "unsplit")
    assert str(missing.value.repair).startswith("make pool CORPUS=small")


def test_many_pools_are_listed_as_the_first_few_and_a_count():
    from pipeline.retrieval.imported import listing

    assert listing([f"p{i}" for i in range(9)]) == "p0, p1, p2, p3, p4, p5 and 3 more"
    assert listing(["a", "b"]) == "a, b" and listing([]) == "none yet"


def test_unknown_ids_dropped_and_counted_when_asked(small, tmp_path):
    data, pool, frame = small
    extra = pl.concat([frame, frame.head(2).with_columns(query=pl.lit("999999999999")),
                       frame[[0, 5, 10]].with_columns(doc=pl.lit("1"))])
    info = pipeline.import_run(data, "small", pool, _trec(tmp_path / "r.trec", extra),
                               "dropped", drop_unknown=True)
    assert info["counts"]["unknown_query_lines_dropped"] == 2
    assert info["counts"]["unknown_doc_lines_dropped"] == 3
    assert info["counts"]["rows"] == frame.height
    assert load_run(data.place("small"), pool, "dropped").height == frame.height


def test_names_of_searched_models_are_refused(small, tmp_path):
    """... and a name no output can set (pdflatex stops at 'к'; issue 88) is refused where it
    enters, saying which characters a name takes."""
    data, pool, frame = small
    letters = "a model name is letters A-Z or a-z, digits 0-9"
    for name, message in (("bm25", "a model the pipeline searches with"),
                          ("x~title", "marks runs of perturbed queries"), ("../x", "model"),
                          ("xключ", letters), ("x漢字", letters), ("xابجد", letters)):
        with pytest.raises(InputError, match=message):
            pipeline.import_run(data, "small", pool, frame, name)


def test_a_search_never_takes_an_imported_runs_name(small, tmp_path):
    """An Encoder named `same` replaced the run `same` imported into a pool (its manifest's
    stage became search), or searched another pool under that name: `same` was then two
    models, and make eval left a pool out (issue 46). Every search of a model object under an
    imported run's name is refused before anything is embedded or written; the name itself,
    a model registered under it later too, is that run, searched by nothing (as make search
    says, issue 59's one door), and a search of a pool under it is refused."""
    from pipeline.layout import Place, store_dir
    from pipeline.models import REGISTRY, ModelEntry
    from pipeline.retrieval.search import search_pool
    from tests.encoding.test_objects import Hashed

    data, pool, frame = small
    pipeline.import_run(data, "small", pool, frame, "same")
    paths = run_paths(data.runs, "small", pool, "same")
    before = {p: p.read_bytes() for p in (paths.trec, paths.parquet, paths.manifest)}
    encoder = pipeline.Encoder(Hashed(), name="same", similarity="ip", fingerprint="v1")
    refused = r"^same is a run imported into pool .* \(make import-run\): give the model"
    for where in (pool, pool_of(1600)):
        with pytest.raises(InputError, match=refused):
            pipeline.search(data, "small", where, encoder, k=10, threads=1)
        with pytest.raises(InputError, match=refused):
            pipeline.search(data, "small", where, encoder, k=10, threads=1, query_variant="title")
    with pytest.raises(InputError, match=refused):  # it would score the imported run
        pipeline.evaluate(data, "small", pool, encoder)
    assert pipeline.evaluate(data, "small", pool, "same", means=True)["model"][0] == "same"
    REGISTRY["same"] = ModelEntry("same", "random")
    try:
        assert pipeline.search(data, "small", pool_of(1600), "same", k=10, threads=1) == "same"
        with pytest.raises(InputError, match=refused):
            search_pool(Place(data.corpus("small"), data.indexes, data.runs), pool,
                        REGISTRY["same"], k=10, threads=1)
    finally:
        del REGISTRY["same"]
    assert {p: p.read_bytes() for p in before} == before
    assert not store_dir(data.indexes, "small", "same").exists()
    assert not run_paths(data.runs, "small", pool_of(1600), "same").manifest.exists()


def test_an_import_never_takes_a_searched_models_name(small, tmp_path):
    """The other way round: a run imported under the name of a model searched in another
    pool of the corpus made that name two models too."""
    from tests.encoding.test_objects import Hashed

    data, pool, frame = small
    encoder = pipeline.Encoder(Hashed(), name="searched", similarity="ip", fingerprint="v1")
    pipeline.search(data, "small", pool_of(1600), encoder, k=10, threads=1)
    with pytest.raises(InputError, match=r"^MODEL='searched' is a model searched in pool "
                       f"{pool_of(1600)} "):
        pipeline.import_run(data, "small", pool, frame, "searched")
    assert not run_paths(data.runs, "small", pool, "searched").manifest.exists()
    # a damaged manifest says nothing of what made its run: it blocks no import (verify names
    # it, and its repair may be this very import)
    damaged = run_paths(data.runs, "small", pool_of(1600), "mended").manifest
    damaged.write_text('{"stage": "search", ')
    assert pipeline.import_run(data, "small", pool, frame, "mended")["stage"] == "import-run"


def test_an_entry_never_takes_a_registered_models_name(small):
    """A ModelEntry named as a registered model, with other settings, was searched under
    the registered model's name: one name, two models."""
    from pipeline.models import ModelEntry

    data, pool, _ = small
    other = ModelEntry("bm25", "bm25", params={"k1": 2.0, "b": 1.0})
    with pytest.raises(InputError, match="'bm25' is a registered or derived model's name"):
        pipeline.search(data, "small", pool, other, k=10, threads=1)
    assert not run_paths(data.runs, "small", pool, "bm25").manifest.exists()


def test_reimport_is_a_no_op_and_a_changed_source_needs_replace(small, tmp_path):
    """The same file again writes nothing; the file changed at the same size is refused with
    the command that imports it in place of the old one (REPLACE=1), which then does."""
    data, pool, frame = small
    path = _trec(tmp_path / "run.trec", frame)
    first = pipeline.import_run(data, "small", pool, path, "mine")
    paths = run_paths(data.runs, "small", pool, "mine")
    before = {p: p.stat().st_mtime_ns for p in (paths.trec, paths.parquet, paths.manifest)}
    pipeline.import_run(data, "small", pool, path, "mine")
    assert {p: p.stat().st_mtime_ns for p in before} == before
    text = path.read_text()
    changed = text.replace(" 5.0 x\n", " 6.0 x\n", 1)
    assert len(changed) == len(text) and changed != text
    path.write_text(changed)
    with pytest.raises(InputError, match="REPLACE=1") as refused:
        pipeline.import_run(data, "small", pool, path, "mine")
    assert "make import-run" in str(refused.value.repair) and "REPLACE=1" in str(
        refused.value.repair)
    info = pipeline.import_run(data, "small", pool, path, "mine", replace=True)
    assert info["details"]["source_sha256"] != first["details"]["source_sha256"]
    assert load_run(data.place("small"), pool, "mine")["score"].max() == 6.0


def test_a_damaged_copy_names_the_import_as_its_repair(small, tmp_path):
    data, pool, frame = small
    path = _trec(tmp_path / "run.trec", frame)
    pipeline.import_run(data, "small", pool, path, "damaged")
    parquet = run_paths(data.runs, "small", pool, "damaged").parquet
    with parquet.open("r+b") as handle:
        handle.seek(20)
        handle.write(b"\0\0\0\0")
    os.utime(parquet, ns=(1, 1))
    with pytest.raises(InputError) as refused:
        load_run(data.place("small"), pool, "damaged")
    repair = str(refused.value.repair)
    assert repair.startswith("make import-run") and f"RUN={path}" in repair
    pipeline.import_run(data, "small", pool, path, "damaged")  # the repair works
    assert load_run(data.place("small"), pool, "damaged").height == frame.height


@pytest.mark.slow
def test_make_import_run_then_eval_search_and_report(raw_corpus, corpus_dir, small, tmp_path):
    """Through real make: import-run writes the run; eval scores it on its pool only (never
    loading a model); search says there is nothing to search; the report shows it."""
    import shutil

    _, pool, frame = small
    root = tmp_path / "data"
    shutil.copytree(corpus_dir, root / "corpora" / "small")
    shutil.copytree(raw_corpus, root / "corpora" / "small" / "s2orc")
    (tmp_path / "installed").touch()
    run = _trec(tmp_path / "outside.trec", frame)

    def make(*args: str) -> str:
        return make_ok(root, tmp_path / "installed", *args)

    unsplit = subprocess.run(  # no POOL, pools sharing queries: the pools to give, exit 2
        ["make", "--no-print-directory", f"DATA={root}", "CORPUS=small", f"PY={sys.executable}",
         f"STAMP={tmp_path / 'installed'}", "import-run", f"RUN={run}", "MODEL=outside"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
        env={**os.environ, "MAKEFLAGS": ""})
    assert f"give POOL=: the pools of corpus small share queries ({pool_of(1600)} and " in (
        refusal(unsplit))
    out = make("import-run", f"POOL={pool}", f"RUN={run}", "MODEL=outside")
    assert f"run outside of pool {pool}" in out and "rows 100" in out, out
    out = make("eval", "MODEL=outside")
    assert "outside is a run imported into 1 pools: 1 pools without it left out" in out, out
    evaluations = sorted(p.parent.name for p in (root / "runs" / "small").glob(
        "*/outside.eval.json"))
    assert evaluations == [pool]
    assert "1 current evaluations kept, 0 to score" in make("eval", "MODEL=outside")
    assert "nothing to search" in make("search", "MODEL=outside")
    make("report", "SEED=1")  # the fixture pools' seed
    tables = "".join(p.read_text() for p in (root / "runs" / "reports").rglob("*.md"))
    assert "outside" in tables


def test_a_query_ranking_its_own_paper_is_dropped_and_counted(small, tmp_path, caplog):
    """As docs/evaluation.md says: a self hit is dropped, counted in the manifest and logged,
    whether or not the query's paper is a candidate of the pool (it was refused as an unknown
    paper when it is not)."""
    from pipeline.pools.build import load_pool

    data, pool, frame = small
    queries, candidates, _ = load_pool(data.place("small").corpus_dir, pool)
    is_candidate = queries["corpusid"].is_in(candidates["corpusid"].implode())
    own = [str(queries["corpusid"].filter(is_candidate)[0]),
           str(queries["corpusid"].filter(~is_candidate)[0])]
    run = pl.concat([frame, pl.DataFrame({"query": own, "doc": own, "score": [9.0, 9.0]})])
    info = pipeline.import_run(data, "small", pool, _trec(tmp_path / "own.trec", run), "own")
    assert info["counts"]["self_hits_removed"] == 2
    assert info["counts"]["rows"] == frame.height
    assert "2 lines of run own rank their query's own paper: dropped" in caplog.text
    kept = load_run(data.place("small"), pool, "own")
    assert kept.height == frame.height and not (kept["query"] == kept["doc"]).any()


def _one_pass(frame: pl.DataFrame, pool: str, data: pipeline.Data, tmp_path: Path) -> dict:
    """What one pass over the whole run writes (the import before it was read in blocks):
    the known lines without self hits in trec_eval's order, written by write_run."""
    from types import SimpleNamespace

    from pipeline.pools.build import load_pool
    from pipeline.retrieval.runs import trec_eval_order, write_run

    queries, candidates, _ = load_pool(data.place("small").corpus_dir, pool)
    typed = frame.with_columns(pl.col("query", "doc").cast(pl.Int64)).filter(
        pl.col("query").is_in(queries["corpusid"].implode())
        & pl.col("doc").is_in(candidates["corpusid"].implode())
        & (pl.col("query") != pl.col("doc")))
    paths = SimpleNamespace(trec=tmp_path / "one.trec", parquet=tmp_path / "one.parquet",
                            manifest=tmp_path / "one.json")
    write_run(trec_eval_order(typed).select("query", "doc", "rank", "score"), paths, "read",
              decimals=None)
    return {"trec": paths.trec.read_bytes(), "parquet": paths.parquet.read_bytes()}


def test_a_run_read_in_blocks_writes_the_bytes_of_one_pass(small, tmp_path, monkeypatch):
    """A TREC file (a byte-order mark, tabs, CRLF, blank lines, ties, an unknown query and a
    self hit) read in blocks of 512 bytes and checked 150 lines at a time, with parquet row
    groups of 1,000 rows, writes the bytes one pass over the whole run writes; each group
    read holds whole queries of at most 150 lines (memory bounded by the group)."""
    import pyarrow.parquet as pq

    import pipeline.retrieval.imported as imported
    import pipeline.retrieval.runs as runs

    data, pool, _ = small
    from pipeline.pools.build import load_pool

    queries, candidates, _ = load_pool(data.place("small").corpus_dir, pool)
    rng = np.random.default_rng(5)
    pairs = [(str(q), str(d)) for q in queries["corpusid"] for d in
             rng.choice(candidates["corpusid"].to_numpy(), 120, replace=False)]
    rows = [(q, d, float(rng.integers(0, 20)) / 4) for q, d in pairs]
    rows += [("999999999999", "1", 1.0), (rows[0][0], rows[0][0], 2.0)]
    frame = pl.DataFrame([rows[i] for i in rng.permutation(len(rows))],
                         schema=["query", "doc", "score"], orient="row")
    text = "".join(f"{q}\tQ0  {d} 0 {s} x\r\n" if i % 3 else f"{q} Q0 {d} 0 {s} x\n\n"
                   for i, (q, d, s) in enumerate(frame.iter_rows()))
    source = tmp_path / "run.trec"
    source.write_text("\ufeff" + text, encoding="utf-8")
    expected = _one_pass(frame, pool, data, tmp_path)
    assert pq.ParquetFile(tmp_path / "one.parquet").metadata.num_row_groups == 1
    whole = pipeline.import_run(data, "small", pool, source, "whole", drop_unknown=True)
    monkeypatch.setattr(imported, "BLOCK_BYTES", 512)
    monkeypatch.setattr(imported, "GROUP_LINES", 150)
    monkeypatch.setattr(runs, "ROW_GROUP", 1000)
    read = imported.Spilled.read
    sizes: list[tuple[int, int]] = []

    def recorded(self, lo, hi):
        frame = read(self, lo, hi)
        sizes.append((frame.height, frame["pos"].n_unique()))
        return frame

    monkeypatch.setattr(imported.Spilled, "read", recorded)
    blocks = pipeline.import_run(data, "small", pool, source, "read", drop_unknown=True)
    assert len(sizes) > 10 and all(n <= 150 or queries == 1 for n, queries in sizes)
    assert blocks["counts"] == whole["counts"]
    assert blocks["counts"]["self_hits_removed"] == 1
    assert blocks["counts"]["unknown_query_lines_dropped"] == 1
    for name in ("whole", "read"):
        paths = run_paths(data.runs, "small", pool, name)
        tagged = expected["trec"].replace(b" read\n", f" {name}\n".encode())
        assert paths.trec.read_bytes() == tagged
    one = run_paths(data.runs, "small", pool, "whole").parquet.read_bytes()
    assert one == expected["parquet"]
    split = run_paths(data.runs, "small", pool, "read").parquet
    assert pq.ParquetFile(split).metadata.num_row_groups == 3  # 2,400 rows, 1,000 a group
    reference = tmp_path / "groups.parquet"
    pq.write_table(pq.read_table(tmp_path / "one.parquet"), reference, compression="zstd",
                   row_group_size=1000)
    assert split.read_bytes() == reference.read_bytes()


def test_an_imported_run_is_scored_where_it_was_imported_not_searched(small, tmp_path,
                                                                        caplog):
    """eval_pools and model_to_search (make eval, make search) as library calls: an imported
    run is scored on its pool only, a pool with a damaged manifest of it refused (never left
    out unsaid), and nothing is searched under its name."""
    import json
    import logging

    from pipeline.evaluation.evaluate import eval_pools
    from pipeline.retrieval.search import model_to_search

    data, pool, frame = small
    place = data.place("small")
    pipeline.import_run(data, "small", pool, frame, "scored-here")
    pools = data.pools("small")
    other = next(p for p in pools if p != pool)
    times = tmp_path / "times.jsonl"
    caplog.set_level(logging.INFO, logger="pipeline")
    assert model_to_search(place, "scored-here", {}) is None
    assert f"scored-here is a run imported into 1 pools ({pool})" in caplog.text
    eval_pools(place, "scored-here", pools, times=times)
    records = [json.loads(line) for line in times.read_text().splitlines()]
    assert [(r["stage"], r["pool"]) for r in records] == [("eval", pool)]
    assert "1 pools without it left out" in caplog.text
    damaged = run_paths(place.runs_root, "small", other, "scored-here").manifest
    damaged.parent.mkdir(parents=True, exist_ok=True)
    damaged.write_text("{not json")
    try:
        with pytest.raises(InputError, match="scored-here"):
            eval_pools(place, "scored-here", pools, times=times)
        assert len(times.read_text().splitlines()) == 1  # nothing scored
    finally:
        damaged.unlink()


def test_an_import_logs_what_it_kept(small, caplog):
    """The API's import logs its summary as make import-run does (one library call)."""
    import logging

    data, pool, frame = small
    caplog.set_level(logging.INFO, logger="pipeline")
    pipeline.import_run(data, "small", pool, frame, "logged")
    assert f"[import-run] run logged of pool {pool} (corpus small) from " in caplog.text
    assert f"rows {frame.height:,}" in caplog.text


def test_a_run_of_float_ids_is_refused_naming_the_column():
    """Issue 56 (a sibling of score's case): read_source, which import_run and score share,
    read float ids 1.0 as "1.0", matching no pool id "1"; refused, naming the column."""
    import polars as pl

    from pipeline.core.errors import InputError
    from pipeline.retrieval.imported import read_source

    with pytest.raises(InputError, match=r"^run: the column 'doc' holds Float64 ids: ids are "
                                         "strings or integers"):
        read_source(pl.DataFrame({"query": ["1"], "doc": [1.0], "score": [1.0]}))
    assert read_source(pl.DataFrame({"query": ["1"], "doc": [1], "score": [1.0]}))[0][
        "doc"].to_list() == ["1"]
