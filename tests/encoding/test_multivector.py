"""Multi-vector encoders (ASPIRE): sentences, token assignment, the exact max-sim search and
the per-sentence store, end to end with the tiny local BERT."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
import torch

from pipeline.core.errors import InputError
from pipeline.encoding.embed import _add_part, embed, pool_ids
from pipeline.encoding.models import REGISTRY, ModelEntry, get_model
from pipeline.encoding.multivector import (
    SentenceEncoder,
    SentenceVectors,
    fit_paper,
    paper_text,
    split_sentences,
    token_sentences,
)
from pipeline.encoding.store import load_sentence_vectors, load_vectors, stored_ids
from pipeline.evaluation.evaluate import eval_run
from pipeline.layout import run_paths, store_dir
from pipeline.retrieval.dense import maxsim_search, paper_chunks, prepare
from pipeline.retrieval.embedded import maxsim_hits
from pipeline.retrieval.runs import finalize_run
from pipeline.retrieval.search import index, search
from tests.conftest import POOL_SIZES, pool_of

POOL = pool_of(POOL_SIZES[0])


def pieces(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a:b] for a, b in spans]


# ---- sentences ---------------------------------------------------------------------------

def test_split_sentences_and_abbreviations():
    text = "  We study graphs.  Results are good!\nIs it? 25 cases were 0.05 mm wide. Done. "
    assert pieces(text, split_sentences(text)) == [
        "We study graphs.", "Results are good!", "Is it?", "25 cases were 0.05 mm wide.",
        "Done."]
    # documented exceptions: abbreviations, dotted words, initials; a lowercase next word
    text = ("Cells (e.g. T cells) grew as in Fig. 2 of Smith et al. (2019). E. coli did not. "
            "The dose was 5 mg. then it fell. He said \"stop.\" Then (A) held in the U.S. Army.")
    assert pieces(text, split_sentences(text)) == [
        "Cells (e.g. T cells) grew as in Fig. 2 of Smith et al. (2019).",
        "E. coli did not.",
        "The dose was 5 mg. then it fell.",
        "He said \"stop.\"",
        "Then (A) held in the U.S. Army."]
    assert split_sentences("") == [] and split_sentences("   ") == []
    assert pieces("No final period", split_sentences("No final period")) == ["No final period"]


def test_title_is_sentence_zero():
    paper = paper_text("  A Study. Part II ", "First finding. Second one.", "[SEP]", "passage: ")
    assert paper.text == "passage:   A Study. Part II [SEP]First finding. Second one."
    assert pieces(paper.text, paper.spans) == ["A Study. Part II", "First finding.",
                                               "Second one."]
    no_abstract = paper_text("Only a title", None, "[SEP]")
    assert pieces(no_abstract.text, no_abstract.spans) == ["Only a title"]
    no_title = paper_text(None, "One. Two.", " ")
    assert no_title.spans[0] == (0, 0) and pieces(no_title.text, no_title.spans[1:]) == [
        "One.", "Two."]


# ---- tokens to sentences -----------------------------------------------------------------

# "Deep nets.[SEP]We train. It works." as a BERT tokenizer splits it, by hand
HAND_TEXT = "Deep nets.[SEP]We train. It works."
HAND_SPANS = [(0, 10), (15, 24), (25, 34)]
HAND_OFFSETS = [(0, 0), (0, 4), (5, 8), (8, 9), (9, 10), (10, 15), (15, 17), (18, 23),
                (23, 24), (25, 27), (28, 33), (33, 34), (0, 0)]  # CLS deep ne ##ts . [SEP] ..
HAND_SPECIAL = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1]


def test_tokens_are_assigned_by_offsets():
    assert paper_text("Deep nets.", "We train. It works.", "[SEP]") == (HAND_TEXT, HAND_SPANS)
    labels = token_sentences(np.array(HAND_OFFSETS), HAND_SPANS)
    assert labels.tolist() == [-1, 0, 0, 0, 0, -1, 1, 1, 1, 2, 2, 2, -1]


def test_truncation_drops_cut_sentences_and_counts_them():
    ids = list(range(100, 113))
    whole = fit_paper(ids, np.array(HAND_OFFSETS), np.array(HAND_SPECIAL), HAND_SPANS, 512)
    assert whole.ids == ids and whole.truncated == 0
    # 9 tokens: [CLS] deep ne ##ts . [SEP] we train [SEP]: "We train." lost its period
    cut = fit_paper(ids, np.array(HAND_OFFSETS), np.array(HAND_SPECIAL), HAND_SPANS, 9)
    assert cut.ids == ids[:8] + [ids[-1]]
    assert cut.sentence.tolist() == [-1, 0, 0, 0, 0, -1, -1, -1, -1]
    assert cut.truncated == 2
    # not even the title fits whole: it is kept, partially (a paper keeps one row)
    tiny = fit_paper(ids, np.array(HAND_OFFSETS), np.array(HAND_SPECIAL), HAND_SPANS, 4)
    assert tiny.ids == ids[:3] + [ids[-1]]
    assert tiny.sentence.tolist() == [-1, 0, 0, -1] and tiny.truncated == 2
    # no sentence at all: every non-special token is sentence 0
    none = fit_paper(ids, np.array(HAND_OFFSETS), np.array(HAND_SPECIAL), [], 512)
    assert none.sentence.tolist() == [-1] + [0] * 11 + [-1]


@pytest.fixture(scope="module")
def tiny_entry(tiny_bert):
    entry = ModelEntry("tiny-aspire", "multi-vector", str(tiny_bert), "mean", "ip",
                       max_length=128)
    REGISTRY[entry.name] = entry
    yield entry
    del REGISTRY[entry.name]


@pytest.fixture(scope="module")
def encoder(tiny_entry) -> SentenceEncoder:
    return SentenceEncoder(tiny_entry, device="cpu")  # recomputed below with CPU tensors


@pytest.fixture(scope="module")
def papers(corpus_dir) -> pl.DataFrame:
    ids = pool_ids(corpus_dir, POOL)
    return (pl.read_parquet(corpus_dir / "prefiltered.parquet")
            .filter(pl.col("corpusid").is_in(ids.tolist())).sort("corpusid"))


@pytest.mark.slow
def test_real_tokenizer_sentences_and_ids(encoder, papers):
    """Each kept sentence's tokens are the sentence tokenized alone; the ids are exactly the
    dense path's truncated ids; some sentences are cut by the 128-token limit."""
    from pipeline.encoding.encoders import Encoder

    sample = papers.head(60)
    texts = [encoder.format(t, a) for t, a in zip(sample["title"], sample["abstract"],
                                                  strict=True)]
    tokenized = encoder.tokenize(texts)
    dense_ids = Encoder.tokenize(encoder, [t.text for t in texts])
    assert [t.ids for t in tokenized] == dense_ids
    assert sum(t.truncated for t in tokenized) > 0
    checked = 0
    for paper, tok in zip(texts, tokenized, strict=True):
        sentences = pieces(paper.text, paper.spans)
        labels = tok.sentence
        assert labels[0] == -1 and labels[-1] == -1  # [CLS], [SEP]
        kept = np.unique(labels[labels >= 0])
        assert kept.tolist() == list(range(len(kept)))  # a prefix of the sentences
        assert len(kept) + tok.truncated == len(sentences)
        for s in kept:
            alone = encoder.tokenizer(sentences[s], add_special_tokens=False)["input_ids"]
            assert [tok.ids[i] for i in np.flatnonzero(labels == s)] == alone
            checked += 1
    assert checked > 100


def test_encoders_refuse_the_other_kind():
    from pipeline.encoding.encoders import Encoder

    entry = ModelEntry("tiny-aspire", "multi-vector", "unused", "mean", "ip", max_length=128)
    with pytest.raises(InputError, match="multi-vector model: Encoder embeds dense"):
        Encoder(entry)  # refused before anything is loaded
    with pytest.raises(InputError, match="dense model: SentenceEncoder embeds multi-vector"):
        SentenceEncoder(get_model("scincl"))


# ---- exact max-sim search ----------------------------------------------------------------

def ragged(rng, n_papers: int, dim: int, max_sentences: int, integer: bool
           ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    papers = []
    for count in rng.integers(1, max_sentences + 1, n_papers):
        papers.append(rng.integers(-2, 3, (count, dim)).astype(np.float32) if integer
                      else rng.standard_normal((count, dim)).astype(np.float32))
    return papers, np.concatenate(papers), np.r_[0, np.cumsum([len(p) for p in papers])]


def brute_maxsim(queries, query_offsets, docs, doc_offsets, similarity) -> np.ndarray:
    """Every sentence pair in float64, then np.maximum.reduceat per query and per doc paper."""
    q = prepare(queries, similarity).astype(np.float64)
    d = prepare(docs, similarity).astype(np.float64)
    pairs = -((q[:, None, :] - d[None, :, :]) ** 2).sum(-1) if similarity == "l2" else q @ d.T
    per_query = np.maximum.reduceat(pairs, query_offsets[:-1], axis=0)
    return np.maximum.reduceat(per_query, doc_offsets[:-1], axis=1)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("similarity", ["ip", "l2"])
@pytest.mark.parametrize("chunks", [(None, None), (7, 5)])
def test_maxsim_equals_brute_force_with_ties(similarity, chunks, device):
    """Small integer vectors: every score is exact, ties abound (and duplicated papers tie);
    the search returns the brute-force scores and, among ties, the lower position first."""
    rng = np.random.default_rng(3)
    _, queries, query_offsets = ragged(rng, 9, 4, 4, integer=True)
    doc_papers, _, _ = ragged(rng, 150, 4, 6, integer=True)
    doc_papers += [doc_papers[i] for i in rng.integers(0, 150, 40)]  # exact duplicates
    docs = np.concatenate(doc_papers)
    doc_offsets = np.r_[0, np.cumsum([len(p) for p in doc_papers])]
    want = brute_maxsim(queries, query_offsets, docs, doc_offsets, similarity)
    order = np.argsort(-want, axis=1, kind="stable")[:, :30]
    scores, positions = maxsim_search(queries, query_offsets, docs, doc_offsets, 30,
                                      similarity, device, *chunks)
    np.testing.assert_array_equal(positions, order)
    np.testing.assert_array_equal(scores, np.take_along_axis(want, order, 1))
    top = np.take_along_axis(want, order, 1)
    assert (np.diff(top, axis=1) == 0).any()  # the test has ties inside the top 30
    assert (top[:, -1] == np.take_along_axis(want, np.argsort(-want, axis=1, kind="stable")
                                             [:, 30:31], 1)[:, 0]).any()  # and at its edge


def test_maxsim_cosine_and_k_beyond_the_pool():
    rng = np.random.default_rng(4)
    _, queries, query_offsets = ragged(rng, 6, 16, 5, integer=False)
    _, docs, doc_offsets = ragged(rng, 80, 16, 7, integer=False)
    want = brute_maxsim(queries, query_offsets, docs, doc_offsets, "cosine")
    scores, positions = maxsim_search(queries, query_offsets, docs, doc_offsets, 500, "cosine",
                                      "cpu", doc_rows=20, query_rows=3)
    assert positions.shape == (6, 80)
    np.testing.assert_array_equal(positions, np.argsort(-want, axis=1, kind="stable"))
    np.testing.assert_allclose(scores, np.take_along_axis(want, positions, 1), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("device", [pytest.param("cpu", marks=pytest.mark.cpu_only),
                                    pytest.param("cuda", marks=pytest.mark.gpu)])
def test_auto_backend_of_maxsim_is_torch_on_the_best_device(device):
    """Multi-vector search runs on torch: auto takes the GPU where one is visible; a forced
    torch-cuda without one is refused up front."""
    from pipeline.retrieval.dense import maxsim_device

    assert maxsim_device("auto") == device
    assert maxsim_device("torch-cpu") == "cpu"
    if device == "cuda":
        assert maxsim_device("torch-cuda") == "cuda"
    else:
        with pytest.raises(InputError, match="--backend torch-cuda: no CUDA GPU"):
            maxsim_device("torch-cuda")


def test_paper_chunks_hold_whole_papers():
    offsets = np.array([0, 3, 4, 10, 12, 13])
    assert paper_chunks(offsets, 4) == [(0, 2), (2, 3), (3, 5)]  # a 6-row paper alone
    assert paper_chunks(offsets, 100) == [(0, 5)]


def write_papers(store, entry, ids: np.ndarray, papers: list[np.ndarray]) -> None:
    """One store part holding `papers` (sentence rows each) under `ids`."""
    from types import SimpleNamespace

    from pipeline.encoding.embed import _store_config
    from pipeline.encoding.multivector import SentenceEncoder

    sentence = np.concatenate([np.arange(len(p)) for p in papers]).astype(np.int16)
    paper = np.repeat(np.arange(len(papers)), [len(p) for p in papers])
    vectors = SentenceVectors(paper, sentence, np.concatenate(papers), 0)
    encoder = SimpleNamespace(max_length=128, dim=papers[0].shape[1],
                              store_config=SentenceEncoder.store_config)
    _add_part(store, _store_config(entry, encoder, "float32"), ids, vectors, "cpu")


@pytest.mark.parametrize("parts, chunk_rows", [(1, None), (4, 10)])
def test_run_order_follows_trec_eval_ties(tmp_path, parts, chunk_rows):
    """Through the store, maxsim_hits and finalize_run: with exact ties (also at the k-th
    place) the run is the brute-force ranking by score, then docid descending as a string;
    also when the candidates are streamed from several parts in small chunks, with a paper
    stored twice."""
    rng = np.random.default_rng(5)
    doc_papers, _, _ = ragged(rng, 120, 3, 4, integer=True)
    ids = rng.choice(np.r_[1:200, 1000:1100, 100000:100050], size=120, replace=False)
    entry = ModelEntry("ties", "multi-vector", similarity="ip")
    store = tmp_path / "store"
    groups = np.array_split(rng.permutation(120), parts)
    if parts > 1:
        groups[-1] = np.r_[groups[-1], groups[0][:1]]  # a paper in two parts
    for group in groups:
        write_papers(store, entry, ids[group], [doc_papers[i] for i in group])
    assert np.array_equal(stored_ids(store), np.sort(ids))
    query_ids = ids[:10]
    hits, details = maxsim_hits(store, query_ids, ids, 26, "ip", "torch-cpu", chunk_rows)
    assert details["backend"] == "torch-cpu"
    assert details["candidate_sentences"] == sum(len(p) for p in doc_papers)
    run, _ = finalize_run(hits, 25)
    offsets = np.r_[0, np.cumsum([len(p) for p in doc_papers])]
    docs = np.concatenate(doc_papers)
    want = brute_maxsim(docs[np.concatenate([np.arange(offsets[i], offsets[i + 1])
                                             for i in range(10)])],
                        offsets[:11], docs, offsets, "ip")
    expected = []
    for i in np.argsort(query_ids):  # a run lists queries in id order
        query = query_ids[i]
        # trec_eval: score descending, then docid descending as a string (two stable sorts)
        ranked = sorted((j for j in range(120) if ids[j] != query), key=lambda j: str(ids[j]),
                        reverse=True)
        ranked = sorted(ranked, key=lambda j: -want[i, j])
        expected += [(int(query), int(ids[j]), float(want[i, j])) for j in ranked[:25]]
    assert list(zip(run["query"], run["doc"], run["score"], strict=True)) == expected
    with pytest.raises(InputError, match="one vector per sentence"):
        load_vectors(store, ids[:3])
    with pytest.raises(InputError, match="multi-vector models are searched with torch"):
        maxsim_hits(store, query_ids, ids, 26, "ip", "faiss-cpu")


# ---- end to end with the tiny BERT ---------------------------------------------------------

@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return tmp_path_factory.mktemp("mv-indexes"), tmp_path_factory.mktemp("mv-runs")


@pytest.fixture(scope="module")
def indexed(corpus_dir, roots, tiny_entry) -> dict:
    return index(corpus_dir, roots[0], POOL, tiny_entry, threads=1, part_size=300,
                 device="cpu")


def read_store(store) -> pa.Table:
    tables = [ipc.open_file(pa.memory_map(str(p))).read_all()
              for p in sorted(store.glob("part-*.arrow"))]
    return pa.concat_tables(tables).sort_by([("corpusid", "ascending"),
                                             ("sentence", "ascending")])


@pytest.mark.slow
def test_store_has_one_row_per_kept_sentence(corpus_dir, roots, tiny_entry, indexed, encoder,
                                             papers):
    store = store_dir(roots[0], corpus_dir.name, tiny_entry.name)
    ids = pool_ids(corpus_dir, POOL)
    assert indexed["embedded"] == len(ids)
    assert np.array_equal(stored_ids(store), ids)
    for part in store.glob("part-*.arrow"):
        table = ipc.open_file(pa.memory_map(str(part))).read_all()
        assert table.column_names == ["corpusid", "sentence", "vector"]
        assert table.schema.field("sentence").type == pa.int16()
        d_id = np.diff(table.column("corpusid").to_numpy())
        d_sentence = np.diff(table.column("sentence").to_numpy().astype(np.int64))
        assert ((d_id > 0) | ((d_id == 0) & (d_sentence > 0))).all()  # (corpusid, sentence)
    texts = [encoder.format(t, a) for t, a in zip(papers["title"], papers["abstract"],
                                                  strict=True)]
    tokenized = encoder.tokenize(texts)
    expected = [(int(i), int(s)) for i, tok in zip(papers["corpusid"], tokenized, strict=True)
                for s in np.unique(tok.sentence[tok.sentence >= 0])]
    table = read_store(store)
    got = list(zip(table.column("corpusid").to_pylist(), table.column("sentence").to_pylist(),
                   strict=True))
    assert got == expected
    truncated = sum(t.truncated for t in tokenized)
    assert truncated > 0
    assert indexed["truncated_sentences"] == truncated and indexed["sentences"] == len(got)
    import json

    parts = json.loads((store / "manifest.json").read_text())["parts"]
    assert sum(p["truncated_sentences"] for p in parts) == truncated
    assert sum(p["rows"] for p in parts) == len(got)
    # a second index of the pool embeds nothing
    assert index(corpus_dir, roots[0], POOL, tiny_entry, threads=1)["embedded"] == 0


@pytest.mark.slow
def test_sentence_vectors_are_layer_means_of_their_tokens(corpus_dir, roots, tiny_entry,
                                                          indexed, encoder, papers):
    """Recomputed independently, paper by paper: tokens whose span lies inside a sentence,
    hidden states of every transformer layer averaged, then the tokens averaged; a sentence
    counts only if the kept tokens reach its last character."""
    store = store_dir(roots[0], corpus_dir.name, tiny_entry.name)
    tok, model = encoder.tokenizer, encoder.model
    lengths = [len(x.ids) for x in encoder.tokenize(
        [encoder.format(t, a) for t, a in zip(papers["title"], papers["abstract"],
                                              strict=True)])]
    picks = [0, 1, int(np.argmax(lengths))]  # the longest is truncated
    vectors, offsets = load_sentence_vectors(store, papers["corpusid"].to_numpy()[picks])
    for n, row in enumerate(picks):
        paper = paper_text(papers["title"][row], papers["abstract"][row], tok.sep_token)
        enc = tok(paper.text, truncation=True, max_length=128, return_offsets_mapping=True,
                  return_tensors="pt")
        spans = enc.pop("offset_mapping")[0].tolist()
        with torch.inference_mode():
            layers = model(**enc, output_hidden_states=True).hidden_states[1:]
        states = torch.stack(layers).mean(0)[0]
        reach = max(end for start, end in spans if end > start)
        want = []
        for a, b in paper.spans:
            inside = [i for i, (x, y) in enumerate(spans) if y > x and a <= x and y <= b]
            if inside and reach >= b:
                want.append(states[inside].mean(0).numpy())
        got = vectors[offsets[n] : offsets[n + 1]]
        assert len(got) == len(want) >= 1
        np.testing.assert_allclose(got, np.array(want), rtol=1e-4, atol=1e-5)
    assert lengths[picks[2]] == 128 and offsets[3] - offsets[2] < len(
        split_sentences(papers["abstract"][picks[2]])) + 1


@pytest.mark.slow
def test_search_and_eval_end_to_end(corpus_dir, roots, tiny_entry, indexed):
    index_root, runs_root = roots
    info = search(corpus_dir, index_root, runs_root, POOL, tiny_entry, k=100, threads=1,
                  backend="torch-cpu")
    assert info["details"]["backend"] == "torch-cpu"
    paths = run_paths(runs_root, corpus_dir.name, POOL, tiny_entry.name)
    run = pl.read_parquet(paths["parquet"])
    queries = pl.read_parquet(corpus_dir / "pools" / POOL / "queries.parquet")
    candidates = pl.read_parquet(corpus_dir / "pools" / POOL / "candidates.parquet")
    assert set(run["query"]) == set(queries["corpusid"])
    assert (run["query"] != run["doc"]).all()
    assert set(run["doc"]) <= set(candidates["corpusid"])
    assert run.group_by("query").len()["len"].max() == 100
    ordered = run.with_columns(key=pl.col("doc").cast(pl.String)).sort(
        ["query", "score", "key"], descending=[False, True, True])
    assert ordered.select("query", "doc").equals(run.select("query", "doc"))
    # the scores are the best sentence pair, and no better candidate was left out
    store = store_dir(index_root, corpus_dir.name, tiny_entry.name)
    query_ids, doc_ids = queries["corpusid"].to_numpy(), candidates["corpusid"].to_numpy()
    qv, qo = load_sentence_vectors(store, query_ids)
    dv, do = load_sentence_vectors(store, doc_ids)
    want = brute_maxsim(qv, qo, dv, do, "ip")
    position = {doc: j for j, doc in enumerate(doc_ids.tolist())}
    for i, query in enumerate(query_ids):
        mine = run.filter(pl.col("query") == query)
        pos = np.array([position[doc] for doc in mine["doc"]])
        np.testing.assert_allclose(mine["score"].to_numpy(), want[i, pos], atol=1e-4)
        others = np.ones(len(doc_ids), bool)
        others[pos] = False
        others[doc_ids == query] = False
        assert want[i, others].max() <= mine["score"].min() + 1e-4
    result = eval_run(corpus_dir, index_root, runs_root, POOL, tiny_entry.name)
    assert result["counts"]["queries"] == queries.height
    metrics = pl.read_parquet(paths["metrics.parquet"])
    assert metrics["map"].is_between(0, 1).all() and metrics["map"].mean() > 0
    with pytest.raises(InputError, match="searched with torch"):
        search(corpus_dir, index_root, runs_root, POOL, tiny_entry, backend="faiss-cpu")


@pytest.mark.slow
def test_shards_give_the_same_store(corpus_dir, roots, tiny_entry, indexed, tmp_path):
    """Two shards, small parts and a small token budget: the same rows, the same vectors
    (float tolerance: the batches differ)."""
    for shard in range(2):
        out = embed(corpus_dir, tmp_path, tiny_entry, [POOL], shard=shard, num_shards=2,
                    part_size=128, token_budget=1024, device="cpu")
        assert out["covered_pools"] == ([POOL] if shard == 1 else [])
    one = read_store(store_dir(roots[0], corpus_dir.name, tiny_entry.name))
    two = read_store(store_dir(tmp_path, corpus_dir.name, tiny_entry.name))
    assert one.column("corpusid").equals(two.column("corpusid"))
    assert one.column("sentence").equals(two.column("sentence"))
    flat = [np.stack(t.column("vector").to_numpy(zero_copy_only=False)) for t in (one, two)]
    np.testing.assert_allclose(flat[0], flat[1], rtol=1e-4, atol=1e-5)
