"""Property tests (hypothesis) of the pool stage on random small corpora (issue 10).

Each example writes a small S2ORC 2020 metadata release (1-3 JSONL shards), runs the real
ingest, prefilter and pool stages on it, and checks the pools against an oracle computed from
the raw records the test wrote (not from the pipeline's own files): positives, years, fields,
nesting, exclusions, validation splits, self-retrieval and byte-identical outputs (docs/pools.md).

The corpus details come from a numpy generator seeded by hypothesis (a drawn `seed`), with the
shape (papers, shards, citation density, prefilter threshold) drawn by hypothesis itself: a
falsifying example is reproduced from the printed CorpusShape alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from pipeline.core.errors import InputError
from pipeline.ingest import ingest, prefilter
from pipeline.layout import POOL_FILES, Place
from pipeline.models import get_model
from pipeline.pools.build import (
    NoQueriesError,
    PoolSpec,
    build_pool,
    negative_population,
    select_queries,
)
from pipeline.retrieval.search import search_pool
from tests.conftest import CHILD_BOUND_S

FIELDS = ("Medicine", "Biology", "Computer Science", "Physics")  # 4 of the 19 MAG fields
FIELD = "Medicine"
QUERY_YEAR = MAX_YEAR = 2019
MIN_ABSTRACT = 30
REPO = Path(__file__).resolve().parents[2]
WORDS = ("cell protein tumour graph network model patient trial lattice quantum cohort "
         "sequence kernel dose enzyme spectra").split()

# derandomized: the same examples on every run (no flaky CI); no shrinking, which on a failure
# would cost minutes: a failing example is reproduced from its printed shape and draws
FAST = settings(max_examples=20, deadline=None, derandomize=True, print_blob=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SLOW = settings(FAST, max_examples=6)


@dataclass(frozen=True)
class CorpusShape:
    seed: int
    n_papers: int
    n_shards: int
    mean_cites: float
    min_citations: int


def shapes(min_shards: int = 1) -> st.SearchStrategy[CorpusShape]:
    return st.builds(
        CorpusShape,
        seed=st.integers(0, 2**32 - 1),
        n_papers=st.integers(30, 80),
        n_shards=st.integers(min_shards, 3),
        mean_cites=st.floats(2.0, 7.0),
        min_citations=st.integers(1, 3),
    )


corpus_shapes = shapes()


def generate(shape: CorpusShape) -> list[dict]:
    """Raw S2ORC records: ids of mixed magnitude (int64 order != string order), years 2014-2020
    and a few null, 1-2 fields (a few null or empty), abstracts mostly >= 30 chars (some short,
    padded or null), unique outbound citations (a few self-citations and dangling ids), inbound
    the transpose of the in-corpus outbound citations."""
    rng = np.random.default_rng(shape.seed)
    n = shape.n_papers
    ids = rng.choice(10**12, size=n, replace=False) + np.where(rng.random(n) < 0.5, 0, 10**12)
    ids = [int(i) for i in ids]
    records = []
    for i, pid in enumerate(ids):
        u = rng.random()
        year = (None if u < 0.04 else 2020 if u < 0.14 else 2019 if u < 0.5
                else int(rng.integers(2014, 2019)))
        title = " " if rng.random() < 0.03 else f"Paper {i} on {rng.choice(WORDS)}"
        v = rng.random()
        if v < 0.04:
            abstract = None
        elif v < 0.08:  # just under or at the threshold once stripped
            abstract = "  " + "x" * int(rng.integers(MIN_ABSTRACT - 2, MIN_ABSTRACT + 1)) + "  "
        else:
            abstract = " ".join(rng.choice(WORDS, size=int(rng.integers(6, 20))))
        w = rng.random()
        fields = (None if w < 0.04 else [] if w < 0.07 else
                  [FIELD] if w < 0.45 else
                  sorted(set(rng.choice(FIELDS, size=int(rng.integers(1, 3))).tolist())))
        k = min(n - 1, int(rng.poisson(shape.mean_cites)))
        others = [j for j in rng.choice(n, size=min(n, k + 1), replace=False).tolist()
                  if j != i][:k]
        if rng.random() < 0.05:
            others.append(i)  # a self-citation: never a positive of its own query
        outbound = [str(ids[j]) for j in others]
        outbound += [str(10**13 + int(d)) for d in rng.choice(10**6, size=int(rng.integers(0, 3)),
                                                             replace=False)]  # dangling
        records.append({"paper_id": str(pid), "title": title, "abstract": abstract,
                        "year": year, "mag_field_of_study": fields,
                        "outbound_citations": outbound, "inbound_citations": []})
    by_id = {r["paper_id"]: r for r in records}
    for r in records:
        for cited in r["outbound_citations"]:
            if cited in by_id:
                by_id[cited]["inbound_citations"].append(r["paper_id"])
    order = rng.permutation(n)  # file order is not id order
    return [records[i] for i in order]


def write_raw(records: list[dict], raw: Path, n_shards: int) -> Path:
    folder = raw / "metadata"
    folder.mkdir(parents=True)
    for k, chunk in enumerate(np.array_split(np.arange(len(records)), n_shards)):
        with (folder / f"metadata_{k}.jsonl").open("wb") as out:
            for i in chunk:
                out.write(orjson.dumps(records[i]) + b"\n")
    return raw


class Oracle:
    """What the pools must be, computed from the raw records alone."""

    def __init__(self, records: list[dict], min_citations: int):
        self.year = {int(r["paper_id"]): r["year"] for r in records}
        self.fields = {int(r["paper_id"]): r["mag_field_of_study"] or [] for r in records}
        self.cites = {int(r["paper_id"]): {int(c) for c in r["outbound_citations"]}
                      for r in records}
        self.prefiltered = {
            int(r["paper_id"]) for r in records
            if r["year"] is not None and r["title"].strip()
            and len((r["abstract"] or "").strip()) >= MIN_ABSTRACT
            and len(r["inbound_citations"]) >= min_citations
        }
        self.candidates = {p for p in self.prefiltered if self.year[p] <= MAX_YEAR}

    def positives(self, query: int) -> set[int]:
        return (self.cites[query] - {query}) & self.candidates

    def eligible(self, field: str | None, exclude: set[int] = frozenset()) -> set[int]:
        return {p for p in self.prefiltered - exclude if self.year[p] == QUERY_YEAR
                and (field is None or field in self.fields[p]) and self.positives(p)}

    def field_cited(self, field: str) -> set[int]:
        cited = set().union(*(c for p, c in self.cites.items() if field in self.fields[p]))
        return cited & self.candidates


def make_corpus(shape: CorpusShape, root: Path, name: str = "c", workers: int = 1
                ) -> tuple[Path, Oracle, list[dict]]:
    records = generate(shape)
    raw = root / "raw"
    if not raw.exists():
        write_raw(records, raw, shape.n_shards)
    corpus = root / "corpora" / name
    ingest(raw, corpus, workers=workers)
    prefilter(corpus, mode="inbound", min_citations=shape.min_citations,
              min_abstract=MIN_ABSTRACT)
    return corpus, Oracle(records, shape.min_citations), records


def pool_spec(data, field: str | None, seed: int | None = None, repeat: int | None = None,
              queries: int | None = None, **extra) -> PoolSpec:
    """A spec with size 1 (to be sized by `feasible_size`) and drawn seed/repeat/queries."""
    return PoolSpec(
        size=1, field=field,
        seed=data.draw(st.integers(0, 3), label="seed") if seed is None else seed,
        repeat=data.draw(st.integers(0, 2), label="repeat") if repeat is None else repeat,
        queries=(data.draw(st.integers(1, 8), label="queries") if queries is None
                 else queries), **extra)


def bounds(corpus: Path, spec: PoolSpec) -> tuple[int, int]:
    """(positives, negative population) of a spec: feasible sizes are positives..sum."""
    queries, qrels, _, _ = select_queries(corpus, spec)
    positives = qrels["doc"].unique()
    population, _ = negative_population(corpus, spec,
                                        pl.concat([queries["corpusid"], positives]))
    return len(positives), len(population)


def size_range(corpus: Path, spec: PoolSpec, oracle: Oracle) -> tuple[int, int]:
    """(positives, positives + negative population) of `spec`: its feasible sizes. When no
    paper qualifies as a query, checks the oracle agrees and rejects the example."""
    try:
        positives, population = bounds(corpus, spec)
    except NoQueriesError:
        assert not oracle.eligible(spec.field, _excluded(spec))
        assume(False)
    return positives, positives + population


def feasible_size(data, corpus: Path, spec: PoolSpec, oracle: Oracle, label: str = "size",
                  over: float = 1.0) -> PoolSpec:
    """`spec` with a size drawn between its positives and positives + population (up to
    `over` times the population for field-level pools, to reach the exhausted case)."""
    low, high = size_range(corpus, spec, oracle)
    share = data.draw(st.floats(0.0, over), label=label)
    return replace(spec, size=low + round(share * (high - low)))


def _excluded(spec: PoolSpec) -> set[int]:
    if spec.exclude is None:
        return set()
    return {int(line) for line in Path(spec.exclude).read_text().split()}


def build(corpus: Path, spec: PoolSpec) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Build a pool; a field-level SIZE beyond the field-cited set with repeat > 0 is refused
    by design (MDCR §3), which the example then skips."""
    try:
        name = build_pool(corpus, spec)["name"]  # EXCLUDE's ids are part of the name
    except InputError as exc:
        if spec.field is not None and spec.repeat > 0 and "field-cited set" in str(exc):
            assume(False)
        raise
    folder = corpus / "pools" / name
    return tuple(pl.read_parquet(folder / name) for name in POOL_FILES)  # type: ignore


def citations(corpus: Path) -> set[tuple[int, int]]:
    cites = pl.read_parquet(corpus / "citations.parquet")
    return set(zip(cites["citing"].to_list(), cites["cited"].to_list(), strict=True))


fields = st.sampled_from([None, FIELD])


# 1. positives -------------------------------------------------------------------------------

@FAST
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_positives_are_candidates_and_real_citations(shape, field, data):
    with tempfile.TemporaryDirectory() as tmp:
        corpus, oracle, _ = make_corpus(shape, Path(tmp))
        spec = feasible_size(data, corpus, pool_spec(data, field), oracle)
        queries, candidates, qrels = build(corpus, spec)
        pairs = set(zip(qrels["query"].to_list(), qrels["doc"].to_list(), strict=True))
        ids = set(candidates["corpusid"].to_list())
        assert set(qrels["doc"].to_list()) <= ids
        assert set(candidates.filter(pl.col("type") == "cited")["corpusid"].to_list()) == {
            doc for _, doc in pairs}
        assert pairs <= citations(corpus)  # real citations, as ingested ...
        for query, doc in pairs:  # ... and as written in the raw shards
            assert doc in oracle.cites[query] and doc != query
            assert doc in oracle.prefiltered and oracle.year[doc] <= MAX_YEAR
        # every positive of every query is a qrel, nothing else is
        expected = {(q, d) for q in queries["corpusid"].to_list() for d in oracle.positives(q)}
        assert pairs == expected
        assert (qrels["rel"] == 1).all()
        assert qrels.select("query", "doc").is_duplicated().sum() == 0


# 2. queries as candidates, self-retrieval ---------------------------------------------------

@FAST
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_queries_never_sampled_and_never_retrieve_themselves(shape, field, data):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus, oracle, _ = make_corpus(shape, root)
        spec = feasible_size(data, corpus, pool_spec(data, field), oracle)
        queries, candidates, qrels = build(corpus, spec)
        query_ids = set(queries["corpusid"].to_list())
        assert query_ids.isdisjoint(
            candidates.filter(pl.col("type") == "sampled")["corpusid"].to_list())
        for cand in query_ids & set(candidates["corpusid"].to_list()):
            assert any(cand in oracle.cites[q] for q in query_ids - {cand}), cand
        k = data.draw(st.integers(1, candidates.height + 1), label="k")
        search_pool(Place(corpus, root / "indexes", root / "runs"), spec.name,
                    get_model("random"), k=k,
                    seed=data.draw(st.integers(0, 5), label="search_seed"))
        run = pl.read_parquet(root / "runs" / corpus.name / spec.name / "random.parquet")
        assert run.filter(pl.col("query") == pl.col("doc")).height == 0
        assert set(run["doc"].to_list()) <= set(candidates["corpusid"].to_list())
        assert set(run["query"].to_list()) <= query_ids
        assert run.select("query", "doc").is_duplicated().sum() == 0
        per_query = dict(run.group_by("query").len().iter_rows())
        for q in query_ids:  # the self hit is dropped before the top k are kept
            assert per_query.get(q, 0) == min(k, candidates.height - (q in candidates["corpusid"]))


# 3. years and fields -------------------------------------------------------------------------

@FAST
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_year_and_field_rules(shape, field, data):
    with tempfile.TemporaryDirectory() as tmp:
        corpus, oracle, _ = make_corpus(shape, Path(tmp))
        spec = feasible_size(data, corpus, pool_spec(data, field), oracle,
                             over=1.0 if field is None else 1.5)
        queries, candidates, _ = build(corpus, spec)
        pre = set(pl.read_parquet(corpus / "prefiltered.parquet")["corpusid"].to_list())
        assert pre == oracle.prefiltered
        for c in candidates["corpusid"].to_list():
            assert c in oracle.prefiltered and oracle.year[c] <= MAX_YEAR, c
        for q in queries["corpusid"].to_list():
            assert q in oracle.prefiltered and oracle.year[q] == QUERY_YEAR, q
            assert field is None or field in oracle.fields[q], q
        assert candidates["corpusid"].is_unique().all()
        positives = candidates.filter(pl.col("type") == "cited").height
        sampled = set(candidates.filter(pl.col("type") == "sampled")["corpusid"].to_list())
        if field is None:
            assert candidates.height == spec.size
        else:
            assert queries["field"].to_list() == [field] * queries.height
            scope = oracle.field_cited(field)
            assert sampled <= scope, sampled - scope
            # the pool takes all of the field-cited set only when it is smaller than SIZE
            population = scope - set(queries["corpusid"].to_list()) - set(
                candidates.filter(pl.col("type") == "cited")["corpusid"].to_list())
            assert len(sampled) == min(spec.size - positives, len(population))


# 4. nesting ----------------------------------------------------------------------------------

@FAST
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_pools_of_one_seed_and_repeat_are_nested(shape, field, data):
    with tempfile.TemporaryDirectory() as tmp:
        corpus, oracle, _ = make_corpus(shape, Path(tmp))
        base = pool_spec(data, field)
        low, high = size_range(corpus, base, oracle)
        assume(low < high)
        size_a = data.draw(st.integers(low, high - 1), label="size_a")
        size_b = data.draw(st.integers(size_a + 1, high), label="size_b")
        small, large = replace(base, size=size_a), replace(base, size=size_b)
        q_a, c_a, r_a = build(corpus, small)
        q_b, c_b, r_b = build(corpus, large)
        assert set(c_a["corpusid"].to_list()) < set(c_b["corpusid"].to_list())
        assert c_a.join(c_b, on="corpusid", how="anti").height == 0
        assert c_a.join(c_b, on=["corpusid", "type"], how="anti").height == 0  # same types
        assert q_a.equals(q_b)
        assert r_a.equals(r_b)


# 5. exclusions and validation splits ---------------------------------------------------------

@FAST
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_exclusion_list_is_respected(shape, field, data):
    with tempfile.TemporaryDirectory() as tmp:
        corpus, oracle, _ = make_corpus(shape, Path(tmp))
        eligible = sorted(oracle.eligible(field))
        assume(eligible)
        excluded = data.draw(st.sets(st.sampled_from(eligible)), label="excluded")
        excluded |= {10**14 + 1, 7}  # ids outside the corpus are harmless
        path = Path(tmp) / "exclude.txt"
        path.write_text("".join(f"{i}\n" for i in sorted(excluded)))
        spec = feasible_size(data, corpus, pool_spec(data, field, exclude=str(path)), oracle)
        queries, _, _ = build(corpus, spec)
        picked = set(queries["corpusid"].to_list())
        assert picked.isdisjoint(excluded)
        assert picked <= oracle.eligible(field, excluded)
        assert len(picked) == min(spec.queries, len(oracle.eligible(field, excluded)))


@FAST
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_validation_queries_are_disjoint_from_test_queries(shape, field, data):
    with tempfile.TemporaryDirectory() as tmp:
        corpus, oracle, _ = make_corpus(shape, Path(tmp))
        n_eligible = len(oracle.eligible(field))
        assume(n_eligible >= 2)
        n_queries = data.draw(st.integers(1, n_eligible // 2), label="n_queries")
        test = pool_spec(data, field, queries=n_queries)
        val = replace(test, split="validation")
        test_queries, _, _ = build(corpus, feasible_size(data, corpus, test, oracle))
        val_queries, _, _ = build(corpus, feasible_size(data, corpus, val, oracle, "val_size"))
        assert set(test_queries["corpusid"].to_list()).isdisjoint(
            val_queries["corpusid"].to_list())
        assert val_queries.height == n_queries


@pytest.mark.slow
@FAST
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_validation_queries_are_disjoint_from_test_queries_of_another_count(shape, field, data):
    """The test pool of a seed and scope may ask for another number of queries (--queries)
    than its validation pool: the two must still share no query."""
    with tempfile.TemporaryDirectory() as tmp:
        corpus, oracle, _ = make_corpus(shape, Path(tmp))
        n_eligible = len(oracle.eligible(field))
        assume(n_eligible >= 3)
        n_test = data.draw(st.integers(1, n_eligible - 2), label="n_test")
        n_val = data.draw(st.integers(1, n_eligible - n_test).filter(lambda n: n != n_test),
                          label="n_val")
        test = pool_spec(data, field, queries=n_test)
        val = replace(test, queries=n_val, split="validation")
        test_queries, _, _ = build(corpus, feasible_size(data, corpus, test, oracle))
        val_queries, _, _ = build(corpus, feasible_size(data, corpus, val, oracle, "val_size"))
        shared = set(test_queries["corpusid"].to_list()) & set(val_queries["corpusid"].to_list())
        assert not shared, f"{len(shared)} validation queries are test queries"
        # asking for more validation queries than the test pool leaves gets fewer, not leaked
        too_many = replace(val, queries=n_eligible - n_test + 1, repeat=1)
        more, _, _ = build(corpus, feasible_size(data, corpus, too_many, oracle, "more_size"))
        assert set(test_queries["corpusid"].to_list()).isdisjoint(more["corpusid"].to_list())


# 6. identical bytes --------------------------------------------------------------------------

def same_bytes(a: Path, b: Path, names) -> None:
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


CORPUS_FILES = ("papers.parquet", "citations.parquet", "quarantine.jsonl",
                "prefiltered.parquet")


@SLOW
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_same_seed_gives_identical_bytes(shape, field, data):
    with tempfile.TemporaryDirectory() as tmp:
        one, oracle, _ = make_corpus(shape, Path(tmp), "one")
        two, _, _ = make_corpus(shape, Path(tmp), "two")
        same_bytes(one, two, CORPUS_FILES)
        spec = feasible_size(data, one, pool_spec(data, field), oracle)
        build(one, spec)
        build(two, spec)
        same_bytes(one / "pools" / spec.name, two / "pools" / spec.name, POOL_FILES)


def run_cli(root: Path, threads: int, *args: str) -> None:
    env = {**os.environ, "POLARS_MAX_THREADS": str(threads), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
         "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"), *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
@settings(SLOW, max_examples=3)
@given(shape=corpus_shapes, field=fields, data=st.data())
def test_polars_thread_count_does_not_change_corpus_or_pools(shape, field, data):
    """ingest, prefilter and pool, each a CLI process, with 1 and with 2 polars threads."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        probe, oracle, _ = make_corpus(shape, root, "probe")  # to draw a feasible size
        spec = feasible_size(data, probe, pool_spec(data, field, repeat=0), oracle)
        args = ["--size", str(spec.size), "--queries", str(spec.queries),
                "--seed", str(spec.seed)] + (["--field", field] if field else [])
        for threads in (1, 2):
            name = f"t{threads}"
            run_cli(root, threads, "ingest", "--corpus", name, "--raw", str(root / "raw"))
            run_cli(root, threads, "prefilter", "--corpus", name, "--citations", "inbound",
                    "--min-citations", str(shape.min_citations))
            run_cli(root, threads, "pool", "--corpus", name, *args)
        one, two = root / "corpora" / "t1", root / "corpora" / "t2"
        same_bytes(one, two, CORPUS_FILES)
        same_bytes(probe, one, CORPUS_FILES)  # the CLI and the functions agree
        same_bytes(one / "pools" / spec.name, two / "pools" / spec.name, POOL_FILES)


INGEST_SCRIPT = """
import sys
from pathlib import Path
from pipeline.ingest import ingest
ingest(Path(sys.argv[1]), Path(sys.argv[2]), workers=int(sys.argv[3]))
"""


def ingest_in_subprocess(raw: Path, corpus: Path, workers: int, prelude: str = "",
                         timeout: float = 120) -> None:
    """ingest(raw, corpus, workers=...) in a fresh interpreter (after `prelude`), so that a
    hang fails the test instead of stopping the suite."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", prelude + INGEST_SCRIPT, str(raw),
                             str(corpus), str(workers)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the interpreter and the workers it forked
        proc.communicate()
        pytest.fail(f"ingest(workers={workers}) did not finish in {timeout} s (deadlock?)")
    assert proc.returncode == 0, stderr


@pytest.mark.slow
@settings(SLOW, max_examples=5)
@given(shape=shapes(min_shards=2))
def test_ingest_worker_count_does_not_change_corpus(shape):
    with tempfile.TemporaryDirectory() as tmp:
        one, _, _ = make_corpus(shape, Path(tmp), "w1", workers=1)
        two = Path(tmp) / "corpora" / "w2"
        ingest(Path(tmp) / "raw", two, workers=2)
        same_bytes(one, two, CORPUS_FILES[:3])


@pytest.mark.slow
def test_ingest_with_workers_after_polars_was_used_does_not_hang(tmp_path):
    """ingest(workers=2) in a process that has already run polars (a notebook, a test
    session, any stage before) must not deadlock: a forked worker would inherit polars' locks
    mid-use, so workers are spawned."""
    shape = CorpusShape(seed=1, n_papers=60, n_shards=2, mean_cites=4.0, min_citations=2)
    write_raw(generate(shape), tmp_path / "raw", shape.n_shards)
    prelude = ("import polars as pl\n"
               "pl.DataFrame({'a': range(100_000)}).group_by(pl.col('a') % 7).agg(pl.len())\n")
    ingest_in_subprocess(tmp_path / "raw", tmp_path / "c", workers=2, prelude=prelude,
                         timeout=90)
    assert (tmp_path / "c" / "papers.parquet").exists()
