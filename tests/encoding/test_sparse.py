"""Learned sparse encoders (pipeline/encoding/sparse.py): weights equal to sentence-transformers'
SparseEncoder on a tiny SPLADE folder, stored as term ids and weights, resumable, identified
by the folder's weights."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.encoding.embed import embed
from pipeline.encoding.encoders import PAD_STEP
from pipeline.encoding.sparse import SparseEncoder, SparseVectors
from pipeline.encoding.store import load_sparse_vectors, stored_ids
from pipeline.layout import MANIFEST, store_dir
from pipeline.models import get_model
from pipeline.retrieval.sparse.impact import quantised
from tests.conftest import POOL_SIZES, SPLADE_PROMPTS, UNUSUAL_PAPER, pool_of

POOL = pool_of(POOL_SIZES[0])


def sparse_entry():
    """A registry entry of kind sparse, loaded from the tiny folder (MODEL_PATH)."""
    return get_model("splade-pp")


@pytest.fixture(scope="module")
def papers(corpus_dir) -> list[tuple[str, str]]:
    """Papers of different lengths: one cut at max_seq_length, an empty abstract, an empty
    title, unusual characters."""
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(5)
    ordinary = list(zip(rows["title"], rows["abstract"], strict=True))
    return [*ordinary, (ordinary[0][0], " ".join(a for _, a in ordinary) * 4),
            (ordinary[1][0], ""), ("", ordinary[2][1]), UNUSUAL_PAPER]


@pytest.fixture(scope="module")
def reference(splade_folder, papers) -> tuple[np.ndarray, np.ndarray, object]:
    """SparseEncoder's own document and query vectors (dense) of the papers, and the model."""
    from sentence_transformers import SparseEncoder as Library

    model = Library(str(splade_folder), device="cpu")
    texts = [f"{t} {a}".strip() for t, a in papers]
    docs = model.encode_document(texts, batch_size=4).to_dense().numpy()
    queries = model.encode_query(texts, batch_size=4).to_dense().numpy()
    return docs, queries, model


@pytest.mark.parametrize("padded", [False, True], ids=["one-width", "padded"])
def test_weights_and_scores_equal_sparse_encoder(padded, splade_folder, papers, reference):
    """Candidates by encode_document's path, query papers by encode_query's (its prompt),
    on batches of one padded width (a CPU) or of mixed lengths (a GPU): the same weights on
    the same terms to 1e-5, and the dot products equal SparseEncoder.similarity's."""
    want_docs, want_queries, model = reference
    encoder = SparseEncoder(sparse_entry(), model_path=splade_folder, device="cpu")
    encoder.pad_step = None if padded else PAD_STEP
    docs, _ = encoder.encode([encoder.format(t, a) for t, a in papers], progress=False)
    queries, _ = encoder.encode([encoder.format(t, a, query=True) for t, a in papers],
                                progress=False)
    got_docs, got_queries = docs.matrix().toarray(), queries.matrix().toarray()
    np.testing.assert_allclose(got_docs, want_docs, atol=1e-5)
    np.testing.assert_allclose(got_queries, want_queries, atol=1e-5)
    assert ((got_docs != 0) == (want_docs != 0)).all()  # the same terms, none dropped
    scores = (queries.matrix() @ docs.matrix().T).toarray()
    want = model.similarity(torch.from_numpy(want_queries), torch.from_numpy(want_docs))
    np.testing.assert_allclose(scores, want.numpy(), atol=1e-5)
    # the signal: sparse (tens of 2,000 terms), the prompt changes the vectors, papers differ
    active = (want_docs != 0).sum(1)
    assert active.min() > 5 and active.max() < 400, active
    assert not np.allclose(got_docs, got_queries, atol=1e-3)
    assert encoder.settings()["prompts"] == {"query": SPLADE_PROMPTS["query"], "document": ""}
    assert len(encoder.tokenize([encoder.format(*papers[5])])[0]) == encoder.max_length == 64


def test_the_query_cache_and_quantisation_keep_the_weights(splade_folder, papers):
    """A batch's vectors as the query cache keeps them (one float64 array) come back
    bit-identical; pyserini's impacts are weight x 100 rounded half to even."""
    encoder = SparseEncoder(sparse_entry(), model_path=splade_folder, device="cpu")
    vectors, _ = encoder.encode([encoder.format(t, a) for t, a in papers], progress=False)
    back = SparseVectors.from_array(vectors.as_array(), len(papers), encoder.dim)
    for got, want in zip(back.csr(), vectors.csr(), strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    # halves (exact in float32) to even, as numpy's rint and pyserini's np.round
    assert quantised(np.array([0.004, 0.125, 0.375, 0.2549, 1.0], np.float32)).tolist() == \
        [0, 12, 38, 25, 100]


def test_a_sparse_store_resumes_and_is_identified_by_its_weights(corpus_dir, splade_folder,
                                                                 tmp_path):
    """Half the pool embedded (one shard of two), then the rest: the store holds each paper
    once, with the weights a single run gives; a folder whose weights changed is another
    model, refused before anything is added."""
    entry = sparse_entry()
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    place = data.place(corpus_dir.name)
    first = embed(place, entry, [POOL], num_shards=2, shard=0, model_path=str(splade_folder),
                  part_size=64)
    rest = embed(place, entry, [POOL], model_path=str(splade_folder), part_size=64)
    assert first["embedded"] > 0 and rest["embedded"] == first["needed"] - first["embedded"]
    assert embed(place, entry, [POOL], model_path=str(splade_folder))["embedded"] == 0
    store = store_dir(data.indexes, corpus_dir.name, entry.name)
    ids = stored_ids(store)
    assert len(ids) == first["needed"]
    offsets, terms, weights = load_sparse_vectors(store, ids[::-1])
    encoder = SparseEncoder(entry, model_path=splade_folder, device="cpu")
    texts = pl.read_parquet(corpus_dir / "prefiltered.parquet").filter(
        pl.col("corpusid").is_in(ids[::-1][:20].tolist()))
    texts = texts.sort(pl.col("corpusid").cast(pl.Int64), descending=True)
    fresh, _ = encoder.encode([encoder.format(t, a) for t, a in
                               texts.select("title", "abstract").iter_rows()], progress=False)
    got = SparseVectors.from_csr(offsets[:21], terms[: offsets[20]], weights[: offsets[20]],
                                 encoder.dim).matrix().toarray()
    np.testing.assert_array_equal(got, fresh.matrix().toarray())
    config = read_json(store / MANIFEST)["config"]
    assert config["dim"] == encoder.dim and config["splade_pooling"]["pooling_strategy"] == "max"
    changed = tmp_path / "changed"
    shutil.copytree(splade_folder, changed)
    from safetensors.torch import load_file, save_file

    weights_file = next(Path(changed).rglob("model.safetensors"))
    tensors = load_file(weights_file)
    tensors = {k: v + 0.01 if k.endswith("predictions.bias") else v for k, v in tensors.items()}
    save_file(tensors, weights_file, metadata={"format": "pt"})
    with pytest.raises(InputError, match="another model"):
        embed(place, entry, [POOL], model_path=str(changed))


def test_a_folder_of_another_family_is_refused_in_one_line(tiny_bert, tmp_path):
    """A SparseEncoder folder that is not Transformer + SpladePooling is refused by name."""
    from sentence_transformers import SparseEncoder as Library
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    transformer = Transformer(str(tiny_bert), max_seq_length=32)  # feature-extraction
    Library(modules=[transformer, SpladePooling("max")], device="cpu").save(str(tmp_path))
    with pytest.raises(InputError, match="task is 'feature-extraction', not fill-mask"):
        SparseEncoder(sparse_entry(), model_path=tmp_path, device="cpu")
