"""Vectors from elsewhere (make import-vectors, pipeline.import_vectors): imported vectors
equal to embedded ones search the same; bad files refused in one line, unknown ids counted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.encoding.coverage import pool_ids
from pipeline.encoding.store import load_vectors
from pipeline.layout import run_paths, store_dir
from tests.conftest import POOL_SIZES, make_ok, pool_of
from tests.encoding.test_objects import Hashed
from tests.external.test_beir import collection  # noqa: F401  the tiny BEIR collection

POOL = pool_of(POOL_SIZES[0])


@pytest.fixture(scope="module")
def embedded(corpus_dir, tmp_path_factory):
    """The pool embedded by an object encoder, its vectors exported to parquet (plus a row
    of an id the corpus lacks)."""
    root = tmp_path_factory.mktemp("vectors")
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes", runs=root / "runs")
    model = pipeline.Encoder(Hashed(), name="hashed", similarity="cosine", fingerprint="v1")
    pipeline.search(data, corpus_dir.name, POOL, model, k=50, threads=1)
    ids = pool_ids(corpus_dir, POOL)
    vectors = load_vectors(store_dir(data.indexes, corpus_dir.name, "hashed"), ids)
    src = root / "vectors.parquet"
    pl.DataFrame({"corpusid": np.r_[ids, -5], "vector": [*vectors.tolist(), [1.0] * 64]}
                 ).write_parquet(src)
    return data, src, ids, vectors


def test_imported_vectors_search_as_the_embedded_ones(corpus_dir, embedded, caplog):
    data, src, _, _ = embedded
    name = pipeline.import_vectors(data, corpus_dir.name, "elsewhere", src, similarity="cosine")
    assert name == "vectors--elsewhere"
    assert "1 of" in caplog.text and "dropped" in caplog.text  # the unknown id, counted
    assert pipeline.search(data, corpus_dir.name, POOL, "vectors:elsewhere", k=50,
                           threads=1) == name
    ours, theirs = (pl.read_parquet(run_paths(data.runs, corpus_dir.name, POOL, n).parquet)
                    for n in (name, "hashed"))
    assert ours.equals(theirs)
    # a second import of the same bytes keeps the store; the corpus's record is in it
    store = store_dir(data.indexes, corpus_dir.name, name)
    before = (store / "manifest.json").read_bytes()
    pipeline.import_vectors(data, corpus_dir.name, "elsewhere", src)
    assert (store / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("rows, message", [
    ({"corpusid": [1, 2], "vector": [[1.0, 2.0], [1.0]]}, "1 of 2 vectors do not have 2"),
    ({"corpusid": [1, 2], "vector": [[1.0, float("nan")], [1.0, 2.0]]}, "NaN or infinite"),
    ({"corpusid": [1, 1], "vector": [[1.0, 2.0], [1.0, 2.0]]}, "more than once"),
    ({"paper": [1], "vector": [[1.0]]}, "no column corpusid"),
    # ids as strings or floats (issue 46): the column, its type and the type expected
    ({"corpusid": ["1000007"], "vector": [[1.0]]}, "column corpusid is large_string, but the "
     "paper ids of the corpus are integers: give corpusid as int64"),
    ({"corpusid": [1000007.0], "vector": [[1.0]]}, "column corpusid is double, but"),
    ({"corpusid": [1], "vector": [["1.0"]]}, "column vector is large_list<element: large_string>"
     ", not a list of floats"),
    ({"corpusid": [1], "vector": [[[1.0]]]}, "column vector is large_list<element: large_list"),
    ({"corpusid": [1], "vector": [1.0]}, "column vector is double, not a list of floats"),
    ({"corpusid": [1, None], "vector": [[1.0], [2.0]]}, "1 rows have no id or no vector"),
    ({"corpusid": [1, 2], "vector": [[1.0], None]}, "1 rows have no id or no vector"),
    ({"corpusid": [1, 2], "vector": [[1.0, None], [1.0, 2.0]]}, "e.g. paper 1"),
    ({"corpusid": pl.Series([], dtype=pl.Int64), "vector": pl.Series([], dtype=pl.List(
        pl.Float64))}, "no vectors: give at least one row"),
    # 1e39 is inf as float32, the store's type (issue 46): refused, naming the paper
    ({"corpusid": [1, 7], "vector": [[1.0, 2.0], [1e39, 2.0]]}, r"1 vectors hold NaN or "
     r"infinite values as float32, the store's type \(beyond ±3.4e\+38; e.g. paper 7\)"),
    ({"corpusid": [1, 2, 3], "vector": [[1.0], [1.0], [1.0]]}, "none of its 3 ids is a paper"),
    # query rows (issue 50): a boolean mark, every row marked, no query id twice
    ({"corpusid": [1], "vector": [[1.0]], "query": [1]}, "column query is int64, not boolean"),
    ({"corpusid": [1, 2], "vector": [[1.0], [2.0]], "query": [True, None]},
     r"1 rows have no id or no vector \(or no query mark\)"),
    ({"corpusid": [5, 5], "vector": [[1.0], [2.0]], "query": [True, True]},
     "1 query ids appear more than once"),
])
def test_bad_vector_files_are_refused_in_one_line(corpus_dir, tmp_path, rows, message):
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "i", runs=tmp_path / "r")
    src = tmp_path / "v.parquet"
    pl.DataFrame(rows).write_parquet(src)
    with pytest.raises(InputError, match=message) as caught:
        pipeline.import_vectors(data, corpus_dir.name, "bad", src)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "i").exists()  # nothing written


@pytest.mark.slow
def test_make_import_vectors_then_eval_search_and_report(raw_corpus, corpus_dir, tmp_path):
    """Through real make: import-vectors fills the store from a parquet file (an id of no
    paper dropped and counted); eval MODEL=vectors:<name> searches every pool by the recorded
    similarity (each query's first hit: the nearest candidate by inner product) and scores it;
    a second import of the same bytes keeps the store; fuse takes it (MODELS=bm25,vectors:..);
    the report shows both."""
    root = tmp_path / "data"
    shutil.copytree(corpus_dir, root / "corpora" / "small")
    shutil.copytree(raw_corpus, root / "corpora" / "small" / "s2orc")
    (tmp_path / "installed").touch()
    ids = pl.read_parquet(corpus_dir / "prefiltered.parquet")["corpusid"].to_numpy()
    vectors = np.random.default_rng(0).standard_normal((len(ids), 8))
    src = tmp_path / "outside.parquet"
    pl.DataFrame({"corpusid": np.r_[ids, -5], "vector": [*vectors.tolist(), [1.0] * 8]}
                 ).write_parquet(src)

    def make(*args: str) -> str:
        return make_ok(root, tmp_path / "installed", *args)

    out = make("import-vectors", "MODEL=outside", f"SRC={src}", "SIMILARITY=ip")
    assert f"{len(ids)} vectors of 8 dimensions" in out and f"1 of {len(ids) + 1} ids" in out
    out = make("eval", "MODEL=vectors:outside")
    pools = sorted(p.parent.name for p in (root / "runs" / "small").glob(
        "*/vectors--outside.eval.json"))
    assert pools == sorted(pool_of(size) for size in POOL_SIZES), out
    pool = pools[0]
    run = pl.read_parquet(run_paths(root / "runs", "small", pool, "vectors--outside").parquet)
    candidates = pl.read_parquet(corpus_dir / "pools" / pool / "candidates.parquet")["corpusid"]
    row = {int(i): n for n, i in enumerate(ids)}
    docs = vectors[[row[c] for c in candidates.to_list()]]
    for query in run["query"].unique().sort().to_list()[:5]:
        scores = docs @ vectors[row[query]]
        scores[candidates.to_numpy() == query] = -np.inf
        first = run.filter(pl.col("query") == query).sort("rank")["doc"][0]
        assert first == candidates[int(np.argmax(scores))]
    assert "already imported" in make("import-vectors", "MODEL=outside", f"SRC={src}",
                                      "SIMILARITY=ip")
    make("eval", "MODEL=bm25")
    make("fuse", "MODELS=bm25,vectors:outside", "METHOD=sum")  # its name splits back
    fused = "fuse--sum--bm25--vectors--outside"
    assert run_paths(root / "runs", "small", pool, fused).parquet.exists()
    make("report", "SEED=1")  # the fixture pools' seed
    tables = "".join(p.read_text() for p in (root / "runs" / "reports").rglob("*.md"))
    assert "vectors--outside" in tables and fused in tables


def test_a_damaged_imported_store_names_the_import_as_its_repair(corpus_dir, embedded):
    """Never make embed (imported vectors have no model to embed with): make import-vectors
    with the source and similarity the store records; running it makes the store whole."""
    data, src, _, _ = embedded
    name = pipeline.import_vectors(data, corpus_dir.name, "damaged", src, similarity="ip")
    part = sorted(store_dir(data.indexes, corpus_dir.name, name).glob("part-*"))[0]
    with part.open("r+b") as handle:
        handle.seek(100)
        handle.write(b"\0\0\0\0")
    os.utime(part, ns=(1, 1))
    with pytest.raises(InputError) as refused:
        pipeline.search(data, corpus_dir.name, POOL, "vectors:damaged", k=10, threads=1)
    assert str(refused.value.repair) == (f"make import-vectors CORPUS={corpus_dir.name} "
                                         f"MODEL=damaged SRC={src} SIMILARITY=ip")
    pipeline.import_vectors(data, corpus_dir.name, "damaged", src, similarity="ip")
    assert pipeline.search(data, corpus_dir.name, POOL, "vectors:damaged", k=10,
                           threads=1) == name


def test_a_file_that_is_not_parquet_is_refused_in_one_line(corpus_dir, tmp_path):
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "i", runs=tmp_path / "r")
    for text in ("", "corpusid,vector\n1,[1.0]\n"):
        (tmp_path / "v.parquet").write_text(text)
        with pytest.raises(InputError, match="not a readable parquet file") as caught:
            pipeline.import_vectors(data, corpus_dir.name, "bad", tmp_path / "v.parquet")
        assert "\n" not in str(caught.value)
    assert not (tmp_path / "i").exists()


def test_vectors_read_in_batches_make_the_same_store(corpus_dir, embedded, tmp_path,
                                                     monkeypatch):
    """A source read 7 rows at a time (ids shuffled, ints and float32 values, an id of no
    paper) makes the parts one read makes, byte for byte: the vectors of the corpus's papers
    as float32, sorted by id."""
    import pipeline.encoding.vectors as vectors

    data, _, ids, matrix = embedded
    order = np.random.default_rng(1).permutation(len(ids))
    src = tmp_path / "shuffled.parquet"
    pl.DataFrame({"corpusid": np.r_[ids[order], -5],
                  "vector": pl.Series([*matrix[order].tolist(), [1.0] * 64],
                                      dtype=pl.Array(pl.Float32, 64))}).write_parquet(src)
    parts = {}
    for batch, name in ((1 << 13, "once"), (7, "batches")):
        monkeypatch.setattr(vectors, "BATCH_ROWS", batch)
        info = vectors.import_vectors(data.place(corpus_dir.name), name, src)
        assert info["imported"] == len(ids) and info["unknown_ids_dropped"] == 1
        store = store_dir(data.indexes, corpus_dir.name, f"vectors--{name}")
        parts[name] = {p.name: p.read_bytes() for p in store.glob("part-*")}
        assert np.array_equal(load_vectors(store, ids), matrix.astype(np.float32))
    assert parts["once"] == parts["batches"]


def test_another_file_over_an_imported_store_needs_replace(corpus_dir, embedded, tmp_path):
    """As import-run: the same bytes again change nothing; another file (or similarity) over
    the store is refused with the command that imports it in its place (REPLACE=1), which
    replaces only that store."""
    data, src, ids, matrix = embedded
    pipeline.import_vectors(data, corpus_dir.name, "kept", src)
    store = store_dir(data.indexes, corpus_dir.name, "vectors--kept")
    before = {p.name: p.read_bytes() for p in store.iterdir() if p.is_file()}
    pipeline.import_vectors(data, corpus_dir.name, "kept", src)
    assert {p.name: p.read_bytes() for p in store.iterdir() if p.is_file()} == before
    other = tmp_path / "other.parquet"
    pl.DataFrame({"corpusid": ids, "vector": (matrix * 2).tolist()}).write_parquet(other)
    for given, similarity in ((other, "cosine"), (src, "ip")):
        with pytest.raises(InputError, match="REPLACE=1") as refused:
            pipeline.import_vectors(data, corpus_dir.name, "kept", given, similarity)
        assert str(refused.value.repair) == (
            f"make import-vectors CORPUS={corpus_dir.name} MODEL=kept SRC={given} "
            f"SIMILARITY={similarity} REPLACE=1")
        assert {p.name: p.read_bytes() for p in store.iterdir() if p.is_file()} == before
    pipeline.import_vectors(data, corpus_dir.name, "kept", other, replace=True)
    assert np.allclose(load_vectors(store, ids), matrix * 2)


def test_a_collections_text_queries_search_by_their_imported_vectors(  # noqa: F811
        collection, tmp_path, caplog):  # noqa: F811
    """Issue 50: a collection's queries are texts, which imported vectors cannot encode.
    Imported with the queries' own rows (column `query`; `q0` is both a query's id and a
    document's), the store searches as the encoder the vectors came from; without them the
    import warns and the search is refused before anything is written, naming the import."""
    from pipeline.external.beir import import_beir
    from pipeline.pools.build import load_pool

    data = pipeline.Data(tmp_path)
    import_beir(collection, data.corpus("sf"))
    [pool] = data.pools("sf")
    model = pipeline.Encoder(Hashed(), name="hashed", similarity="cosine", fingerprint="v1")
    pipeline.search(data, "sf", pool, model, k=50, threads=1)
    store = store_dir(data.indexes, "sf", "hashed")
    docs = pool_ids(data.corpus("sf"), pool)
    [cache] = (store / "queries").glob("*.npy")  # the query texts' vectors, sorted by id
    queries = load_pool(data.corpus("sf"), pool)[0]["corpusid"].sort()
    assert "q0" in docs and "q0" in queries
    frame = pl.DataFrame({"corpusid": [*docs, *queries],
                          "vector": [*load_vectors(store, docs).tolist(),
                                     *np.load(cache).astype(np.float32).tolist()],
                          "query": [False] * len(docs) + [True] * len(queries)})
    frame.write_parquet(tmp_path / "with-queries.parquet")
    frame.filter(~pl.col("query")).drop("query").write_parquet(tmp_path / "papers.parquet")
    pipeline.import_vectors(data, "sf", "papers-only", tmp_path / "papers.parquet")
    assert "has no query vectors (column query)" in caplog.text
    with pytest.raises(InputError, match=r"holds no query vectors, and these queries are "
                       r"texts.*\(a boolean column query, true for a query's vector\)"):
        pipeline.search(data, "sf", pool, "vectors:papers-only", k=50, threads=1)
    assert not run_paths(data.runs, "sf", pool, "vectors--papers-only").manifest.exists()
    name = pipeline.import_vectors(data, "sf", "with-queries", tmp_path / "with-queries.parquet")
    pipeline.search(data, "sf", pool, "vectors:with-queries", k=50, threads=1)
    ours, theirs = (pl.read_parquet(run_paths(data.runs, "sf", pool, n).parquet)
                    for n in (name, "hashed"))
    assert ours.select("query", "doc", "rank").equals(theirs.select("query", "doc", "rank"))
    assert np.allclose(ours["score"].to_numpy(), theirs["score"].to_numpy(), atol=1e-6)
    means = pipeline.evaluate(data, "sf", pool, "vectors:with-queries", means=True)
    assert means["ndcg@10"][0] == pipeline.evaluate(data, "sf", pool, model, means=True)[
        "ndcg@10"][0]


def collection_vectors(source: Path, tmp_path: Path, more_queries: tuple[str, ...],
                       seed: int) -> tuple[pipeline.Data, str, list]:
    """The BEIR collection `source` imported as corpus sf, and tmp_path/v.parquet: a random
    vector for each of its pool's papers and queries (rows marked `query`) and for
    `more_queries`."""
    from pipeline.external.beir import import_beir
    from pipeline.pools.build import load_pool

    data = pipeline.Data(tmp_path)
    import_beir(source, data.corpus("sf"))
    [pool] = data.pools("sf")
    docs = pool_ids(data.corpus("sf"), pool)
    queries = [*load_pool(data.corpus("sf"), pool)[0]["corpusid"], *more_queries]
    rng = np.random.default_rng(seed)
    pl.DataFrame({"corpusid": [*docs, *queries],
                  "vector": rng.normal(size=(len(docs) + len(queries), 4)).tolist(),
                  "query": [False] * len(docs) + [True] * len(queries)}
                 ).write_parquet(tmp_path / "v.parquet")
    return data, pool, queries


def test_damaged_query_vectors_are_refused_and_their_import_repairs_them(  # noqa: F811
        collection, tmp_path):  # noqa: F811
    """The query vectors are checked as the parts are: damaged, the search refuses them with
    the import, and that import (the same file) writes them again."""
    from pipeline.layout import imported_queries_path

    data, pool, _ = collection_vectors(collection, tmp_path, (), seed=3)
    name = pipeline.import_vectors(data, "sf", "v", tmp_path / "v.parquet")
    stored = imported_queries_path(store_dir(data.indexes, "sf", name))
    good = stored.read_bytes()
    stored.write_bytes(good[:-8] + b"\0" * 8)
    from pipeline.core.inputs import Roots  # make verify names it, with the same repair
    from pipeline.verify import find_problems

    roots = Roots(data.corpora, data.indexes, data.runs)
    found = [p for p in find_problems(roots)[0] if p.path == stored]
    assert [p.kind for p in found] == ["CORRUPT"], found
    assert found[0].repair.command().startswith("make import-vectors CORPUS=sf MODEL=v")
    with pytest.raises(InputError, match="bytes differ from the manifest's checksum") as refused:
        pipeline.search(data, "sf", pool, "vectors:v", k=10, threads=1)
    assert str(refused.value.repair).startswith("make import-vectors CORPUS=sf MODEL=v")
    pipeline.import_vectors(data, "sf", "v", tmp_path / "v.parquet")
    assert stored.read_bytes() == good
    pipeline.search(data, "sf", pool, "vectors:v", k=10, threads=1)


def test_query_rows_of_no_pool_are_kept_counted_and_named(  # noqa: F811
        collection, tmp_path, caplog):  # noqa: F811
    """Query rows whose id is no query of the corpus's pools (made for another collection's
    queries, or of a split not imported yet) are kept for a later pool, and counted in the
    store's manifest and a warning, as the papers' unknown ids are: never silently among the
    query vectors."""
    from pipeline.core.files import read_json
    from pipeline.layout import MANIFEST, imported_queries_path

    data, _, queries = collection_vectors(collection, tmp_path, ("elsewhere-1", "elsewhere-2"),
                                          seed=5)
    name = pipeline.import_vectors(data, "sf", "v", tmp_path / "v.parquet")
    store = store_dir(data.indexes, "sf", name)
    counts = read_json(store / MANIFEST)["config"]["imported"]["counts"]
    assert counts["query_vectors"] == len(queries) and counts["queries_of_no_pool"] == 2
    assert f"2 of {len(queries)} query vectors of {tmp_path / 'v.parquet'} are of no query " \
        "of a pool of sf" in caplog.text
    assert set(pl.read_parquet(imported_queries_path(store))["query"]) == set(queries)
