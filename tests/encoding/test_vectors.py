"""Vectors from elsewhere (make import-vectors, pipeline.import_vectors): imported vectors
equal to embedded ones search the same; bad files refused in one line, unknown ids counted."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.encoding.embed import pool_ids
from pipeline.encoding.store import load_vectors
from pipeline.layout import run_paths, store_dir
from tests.conftest import POOL_SIZES, pool_of
from tests.encoding.test_objects import Hashed

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
])
def test_bad_vector_files_are_refused_in_one_line(corpus_dir, tmp_path, rows, message):
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "i", runs=tmp_path / "r")
    src = tmp_path / "v.parquet"
    pl.DataFrame(rows).write_parquet(src)
    with pytest.raises(InputError, match=message) as caught:
        pipeline.import_vectors(data, corpus_dir.name, "bad", src)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "i").exists()  # nothing written
