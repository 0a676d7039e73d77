"""Real Lucene through Anserini: index a pool, search it, guard the clause limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.retrieval.bm25 import analysis as bm25_analysis
from pipeline.retrieval.bm25 import jvm
from pipeline.retrieval.bm25 import lucene as bm25_lucene
from pipeline.retrieval.runs import finalize_run
from tests.conftest import (
    CHILD_BOUND_S,
    PYSERINI_IMPORT,
    PYSERINI_SIDE,
    built_once,
    pool_of,
    side_packages,
)

ROOT = Path(__file__).resolve().parents[2]
# One process for every job (file) given: pyserini's import (torch and its dense encoders
# with it) is most of a parity test's time, paid once for both kinds of ids.
PYSERINI_SCRIPT = PYSERINI_IMPORT + """
import json, sys
lists = {}
for path in sys.argv[1:]:
    job = json.load(open(path))
    searcher = LuceneSearcher(job["index"])
    searcher.set_bm25(job["k1"], job["b"])
    hits = searcher.batch_search(job["texts"], job["qids"], k=job["k"], threads=2)
    lists[path] = {q: [[h.docid, h.score] for h in hits[q]] for q in job["qids"]}
json.dump(lists, sys.stdout)
"""


@pytest.fixture(scope="module")
def docs() -> pl.DataFrame:
    return pl.DataFrame({
        "corpusid": [11, 12, 13, 14],
        "title": ["Myocardial infarction outcomes", "Tumor chemotherapy response",
                  "Volcanic eruptions and magma", "Cardiac arrhythmia after infarction"],
        "abstract": ["Troponin levels in myocardial infarction patients.",
                     "Chemotherapy resistance in solid tumor cells.",
                     "Magma chambers feed volcanic eruptions.",
                     "Arrhythmia follows myocardial infarction in many patients."],
    })


@pytest.fixture(scope="module")
def index_dir(docs, tmp_path_factory):
    out = tmp_path_factory.mktemp("lucene") / "bm25"
    info = bm25_lucene.build_index(docs, out, threads=1)
    assert info["documents"] == 4
    return out


def test_search_ranks_by_bm25(index_dir):
    queries = pl.DataFrame({"corpusid": [1, 2], "title": ["myocardial infarction", "magma"],
                            "abstract": [None, "volcanic eruptions"]})
    hits, capped = bm25_lucene.search(queries, index_dir, k=10, threads=1)
    assert capped == []
    first = hits.filter(pl.col("query") == 1).sort("score", descending=True)
    assert set(first["doc"]) == {11, 14}  # only documents sharing a term are returned
    assert first["doc"][0] == 11  # both query terms twice, against one of them twice
    second = hits.filter(pl.col("query") == 2)
    assert second["doc"].to_list() == [13]
    assert (hits["score"] > 0).all()


def test_queries_without_text_have_no_hits(index_dir):
    queries = pl.DataFrame({"corpusid": [1, 2], "title": ["", "magma"], "abstract": [None, None]})
    hits, _ = bm25_lucene.search(queries, index_dir, k=10, threads=1)
    assert hits["query"].to_list() == [2]
    empty, _ = bm25_lucene.search(queries.head(1), index_dir, k=10, threads=1)
    assert empty.is_empty() and empty.schema["doc"] == pl.Int64


def test_pyserini_defaults_and_parameters_change_scores(index_dir):
    queries = pl.DataFrame({"corpusid": [1], "title": ["myocardial infarction patients"],
                            "abstract": [None]})
    default, _ = bm25_lucene.search(queries, index_dir, k=10, threads=1)
    other, _ = bm25_lucene.search(queries, index_dir, k=10, k1=1.5, b=1.0, threads=1)
    assert default.sort("doc")["score"].to_list() != other.sort("doc")["score"].to_list()


def test_long_queries_are_capped_to_the_clause_limit(index_dir, docs):
    long_text = " ".join(f"term{i}" for i in range(1500)) + " myocardial myocardial"
    queries = pl.DataFrame({"corpusid": [5], "title": [long_text], "abstract": [None]})
    hits, capped = bm25_lucene.search(queries, index_dir, k=10, threads=1, pool_papers=lambda: docs)
    assert capped == [5]
    assert set(hits["doc"]) == {11, 14}  # terms found in the pool are kept first


def test_cap_query_keeps_top_tfidf_terms():
    df = {"alpha": 1, "beta": 9, "gamma": 1}
    text, cut = bm25_analysis.cap_query("alpha alpha beta gamma delta the of", df, 10, max_terms=2)
    assert cut and text.split() == ["alpha", "alpha", "gamma"]  # delta is in no document
    assert bm25_analysis.cap_query("short query", {}, 10) == ("short query", False)


def test_missing_index_is_a_clear_error(tmp_path):
    queries = pl.DataFrame({"corpusid": [1], "title": ["x"], "abstract": [None]})
    with pytest.raises(InputError, match="no Lucene index"):
        bm25_lucene.search(queries, tmp_path / "nothing", k=5)


def test_a_failed_anserini_run_names_its_cause_and_java_stays_usable(tmp_path, index_dir):
    """Anserini runs in this process's JVM: its failure is a ToolError that names Java's
    exception (not a crash of Python), and the next search in the same process works."""
    from pipeline.core.errors import ToolError

    with pytest.raises(ToolError, match="SearchCollection failed: .*nonexistent"):
        jvm.run_anserini("io.anserini.search.SearchCollection",
                          ["-index", "/nonexistent", "-topics", "x", "-output", "y", "-bm25"],
                          expect=tmp_path / "y")
    # Anserini refuses a bad option without making its output: that is a failure too
    with pytest.raises(ToolError, match="Exception"):
        jvm.run_anserini("io.anserini.search.SearchCollection", ["-no-such-option"],
                          expect=tmp_path / "y")
    queries = pl.DataFrame({"corpusid": [1], "title": ["myocardial infarction"],
                            "abstract": [None]})
    assert bm25_lucene.search(queries, index_dir, k=2)[0].height == 2


def test_many_pools_are_indexed_and_searched_in_one_jvm(docs, tmp_path, monkeypatch):
    """Issue 7: a stage over many pools starts no Java process per pool; both engines use
    the one JVM of this process (a started process would raise here)."""
    def no_process(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[:1]}")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    queries = pl.DataFrame({"corpusid": [1], "title": ["infarction"], "abstract": [None]})
    for n in (2, 3, 4):
        index = tmp_path / f"pool{n}" / "bm25"
        bm25_lucene.build_index(docs.head(n), index, threads=2)
        hits, _ = bm25_lucene.search(queries, index, k=10)
        assert hits["doc"].to_list()[:1] == [11] and set(hits["doc"]) <= {11, 14}


def test_java_must_exist(monkeypatch):
    monkeypatch.setenv("JAVA", "/nonexistent/java")
    with pytest.raises(InputError, match="JAVA=/nonexistent/java is not an executable"):
        jvm.java_binary()


def round_half_up(score: float) -> float:
    """A score to 6 decimals as Anserini writes it (Java's "%.6f": halves away from zero)."""
    return float(Decimal(score).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


@pytest.fixture(scope="module")
def pyserini_env() -> Path:
    return side_packages("pyserini-env", PYSERINI_SIDE)


K, K1, B = 200, 1.2, 0.75


def parity_papers(corpus_dir: Path, ids: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The 1,600-candidate pool's papers, every 7th twice (a copy under another id: exact
    ties), and its query papers; with ids as given or as strings of BEIR's kind."""
    from pipeline.corpus.files import paper_texts
    from pipeline.pools.build import load_pool

    queries, candidates, _ = load_pool(corpus_dir, pool_of(1600))
    papers = paper_texts(corpus_dir, candidates["corpusid"])
    copies = papers.gather_every(7).with_columns(pl.col("corpusid") + 10**9)
    papers = pl.concat([papers, copies])
    query_papers = paper_texts(corpus_dir, queries["corpusid"]).sort("corpusid")
    if ids == "string":
        papers = papers.with_columns(pl.format("W{}-x", "corpusid").alias("corpusid"))
        query_papers = query_papers.with_columns(pl.format("W{}-x", "corpusid")
                                                 .alias("corpusid"))
    return papers, query_papers


@pytest.fixture(scope="module")
def pyserini_lists(pyserini_env, corpus_dir, tmp_path_factory) -> Path:
    """The pipeline's index of `parity_papers` for int and for string ids (<ids>/bm25) and
    pyserini's `LuceneSearcher.batch_search` lists on each (lists.json, by ids): built once
    per test run, pyserini in one process for both (its import, torch and its dense encoders
    with it, is most of the parity's time)."""
    def build(out: Path) -> None:
        jobs = []
        for ids in ("int", "string"):
            papers, query_papers = parity_papers(corpus_dir, ids)
            bm25_lucene.build_index(papers, out / ids / "bm25", threads=2)
            job = {"index": str(bm25_lucene.lucene_dir(out / ids / "bm25")), "k1": K1, "b": B,
                   "k": K, "texts": bm25_analysis.paper_text(query_papers).to_list(),
                   "qids": [str(q) for q in query_papers["corpusid"]]}
            (out / f"{ids}.json").write_text(json.dumps(job))
            jobs.append(str(out / f"{ids}.json"))
        env = {**os.environ, "PYTHONPATH": f"{pyserini_env}{os.pathsep}{ROOT}"}
        done = subprocess.run([sys.executable, "-c", PYSERINI_SCRIPT, *jobs], env=env,
                              capture_output=True, text=True, cwd=out)
        assert done.returncode == 0, done.stderr[-3000:]
        lists = json.loads(done.stdout)
        (out / "lists.json").write_text(json.dumps({ids: lists[job] for ids, job in
                                                    zip(("int", "string"), jobs, strict=True)}))

    return built_once(tmp_path_factory, "pyserini-lists", build)


@pytest.mark.parametrize("ids", ["int", "string"])
def test_lists_equal_pyserini_lucene_searcher(pyserini_lists, corpus_dir, ids):
    """Issue 7: pyserini's own `LuceneSearcher.batch_search` on the index the pipeline built
    returns the pipeline's lists, order and ties included, for whole title+abstract queries.
    Every 7th candidate is indexed twice (a copy under another id), so every query meets
    exact ties; the second run uses string ids of the kind BEIR collections have."""
    papers, query_papers = parity_papers(corpus_dir, ids)
    ours, capped = bm25_lucene.search(query_papers, pyserini_lists / ids / "bm25", K, K1, B,
                                      threads=2)
    theirs = json.loads((pyserini_lists / "lists.json").read_text())[ids]
    assert capped == []
    assert ours["doc"].dtype == papers["corpusid"].dtype
    ties = 0
    for query, group in ours.group_by("query", maintain_order=True):
        docs = [str(d) for d in group["doc"]]
        assert docs == [d for d, _ in theirs[str(query[0])]], query  # same order, ties too
        scores = [s for _, s in theirs[str(query[0])]]
        assert group["score"].to_list() == pytest.approx(scores, abs=1e-4)
        ties += len(scores) - len(set(scores))
    assert ours["query"].n_unique() == query_papers.height
    assert ties > 50  # the copies did make ties to break
    # the run file (docs/retrieval.md#what-is-identical-to-what): pyserini's documents and
    # scores (rounded to 6 decimals; the query itself left out), in trec_eval's order: where
    # scores are exactly equal
    # (Anserini's 1e-6 tie adjustment is below float32's resolution at these scores), docid
    # descending, the reverse of pyserini's order
    run, _ = finalize_run(ours, K)
    reversed_ties = 0
    for query, group in run.group_by("query", maintain_order=True):
        hits = [(d, round_half_up(s)) for d, s in theirs[str(query[0])] if d != str(query[0])]
        trec_eval_order = sorted(hits, key=lambda h: (-h[1], [-ord(c) for c in h[0]]))
        assert list(zip(map(str, group["doc"]), group["score"], strict=True)) == \
            trec_eval_order, query
        reversed_ties += trec_eval_order != hits
    assert reversed_ties > 0  # some lists differ from pyserini's in the order of ties only


def test_string_ids_with_whitespace_are_refused(tmp_path):
    papers = pl.DataFrame({"corpusid": ["a b"], "title": ["x"], "abstract": ["y"]})
    with pytest.raises(InputError, match="1 document ids are empty or hold whitespace"):
        bm25_lucene.build_index(papers, tmp_path / "bm25")
    assert not (tmp_path / "bm25").exists()


CTRL_C_SCRIPT = """
import sys, random
from pathlib import Path
import polars as pl
from pipeline.retrieval.bm25 import jvm
from pipeline.retrieval.bm25 import lucene as bm25_lucene
words = [f"w{i}" for i in range(5000)]
rng = random.Random(1)
papers = pl.DataFrame({"corpusid": range(60_000), "title": ["t"] * 60_000,
                       "abstract": [" ".join(rng.choices(words, k=150)) for _ in range(60_000)]})
bm25_lucene.build_index(papers, Path(sys.argv[1]), threads=1)
"""


def test_ctrl_c_stops_a_java_call_at_once(tmp_path):
    """Anserini runs inside the process: Ctrl-C during IndexCollection ends the process by
    SIGINT there and then (Python's own handler would wait for Java to return), and the
    index is left unwritten (its temporary folder is swept by the next build)."""
    import signal
    import time

    out = tmp_path / "bm25"
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, str(out)], cwd=ROOT,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".bm25.*.tmp/lucene")) and time.monotonic() < deadline:
        time.sleep(0.05)  # until IndexCollection has begun writing its index
    assert list(tmp_path.glob(".bm25.*.tmp/lucene")), "indexing never started"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == -signal.SIGINT
    # stopped inside the Java call: the half-made index is still there, never committed
    # (Python's own handler would have let IndexCollection finish, then raised
    # KeyboardInterrupt and removed the temporary folder on its way out)
    assert list(tmp_path.glob(".bm25.*.tmp/lucene"))
    assert not list(tmp_path.glob(".bm25.*.tmp/lucene/segments_*")) and not out.exists()


QUIET_SCRIPT = """
import sys
from pathlib import Path
import polars as pl
from pipeline.retrieval.bm25 import lucene as bm25_lucene
papers = pl.DataFrame({"corpusid": range(1, 41), "title": [f"paper {i} on graphs" for i in
                       range(1, 41)], "abstract": [f"abstract {i} of retrieval" for i in
                       range(1, 41)]})
bm25_lucene.build_index(papers, Path(sys.argv[1]), threads=2)
queries = pl.DataFrame({"corpusid": [100], "title": ["graphs"], "abstract": ["retrieval"]})
hits, _ = bm25_lucene.search(queries, Path(sys.argv[1]), k=5, threads=2)
print(hits.height)
"""


def test_lucene_prints_no_java_warning(tmp_path):
    """Indexing and searching in a fresh process (a fresh JVM): once six lines on stderr that
    a user can do nothing about, Lucene's "You are running with Java 22 or later ... update
    Apache Lucene" (java.util.logging, with its dated header line) and four lines of "A
    terminally deprecated method in sun.misc.Unsafe has been called". Now none: the JVM
    options that turn them off at start (jvm.quiet_options), and the search as before."""
    done = subprocess.run([sys.executable, "-c", QUIET_SCRIPT, str(tmp_path / "bm25")],
                          cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["5"]
    noise = [line for line in done.stderr.splitlines()
             if "WARNING" in line or "MMapDirectory" in line or "StatusLogger" in line]
    assert not noise, done.stderr


def test_quiet_options_follow_the_java_version(tmp_path):
    """Each option only where the runtime knows it (an unknown option stops the JVM from
    starting: --sun-misc-unsafe-memory-access is Java 23's), read from its `release` file;
    none where the file says nothing."""
    home = tmp_path / "java"
    home.mkdir()
    assert jvm.quiet_options(home) == []  # no release file: no option risked
    found = {}
    for version in ("21.0.5", "22", "25.0.2", "1.8.0_392"):
        (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
        found[version] = jvm.quiet_options(home)
    segments = "-Dorg.apache.lucene.store.MMapDirectory.enableMemorySegments=false"
    assert found == {"21.0.5": [], "1.8.0_392": [], "22": [segments],
                     "25.0.2": [segments, "--sun-misc-unsafe-memory-access=allow"]}
