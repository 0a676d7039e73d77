"""Multi-vector encoders (ASPIRE, docs/encoders.md): the authors' procedure and MDCR's, each
equal to an independent implementation written here from the authors' code; sentences; the
exact max-sim search; the per-sentence store, end to end with the tiny local BERT."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
import torch

from pipeline.core.errors import InputError
from pipeline.encoding.coverage import pool_ids
from pipeline.encoding.embed import _store_config, embed
from pipeline.encoding.multivector import (
    OWN_SPLIT,
    SPLITTER,
    SentenceEncoder,
    SentenceVectors,
    fit_paper,
    split_sentences,
)
from pipeline.encoding.store import load_sentence_vectors, load_vectors, stored_ids
from pipeline.encoding.writer import add_part, check_config
from pipeline.evaluation.evaluate import eval_run
from pipeline.layout import Place, run_paths, store_dir
from pipeline.models import REGISTRY, ModelEntry, get_model
from pipeline.retrieval.dense.exact import maxsim_stream, paper_chunks, prepare
from pipeline.retrieval.dense.retriever import maxsim_hits
from pipeline.retrieval.runs import finalize_run
from pipeline.retrieval.search import index, search_pool
from tests.conftest import POOL_SIZES, UNUSUAL_PAPER, pool_of

POOL = pool_of(POOL_SIZES[0])
ASPIRE = {"aspire-bio": False, "aspire-cs": False,  # name: averages all layers (MDCR)
          "aspire-bio-mdcr": True, "aspire-cs-mdcr": True}


def pieces(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a:b] for a, b in spans]


# ---- the authors' procedure, restated independently ------------------------------------------

def aspire_reference(tokenizer, model, title: str | None, sentences: list[str],
                     all_layers: bool = False, limit: int = 500
                     ) -> tuple[list[int], list[int], np.ndarray]:
    """ts-ASPIRE's sentence vectors as its authors compute them, restated from their code
    (allenai/aspire: examples/ex_aspire_consent.py `prepare_abstracts`,
    `prepare_bert_sentences` and `AspireConSent.consent_reps_bert`; the same in
    src/learning/batchers.py and facetid_models/disent_models.py): the pieces `title +
    ' [SEP] '`, then each sentence, are tokenized one by one (`tokenize`, then
    `convert_tokens_to_ids`) and appended while the running count stays within `limit`
    content tokens; the piece that crosses the limit keeps what fits and nothing after it is
    read; [CLS] and [SEP] around (BERT's `build_inputs_with_special_tokens`, gone from
    transformers 5); all-zero token types; a sentence's vector is the mean of the LAST layer's
    states at its positions; the title's piece is no sentence. `all_layers`: MDCR's variant,
    the mean over the transformer layers (not the embeddings) first. A paper with no sentence
    (the authors assert there is one) is its title: the title's own tokens, not its [SEP]
    (the project's documented choice). Returns (input ids, sentence numbers: abstract
    sentence i is i + 1 and the title 0, vectors)."""
    ids: list[int] = []
    positions: list[list[int]] = []  # model-input positions of each piece's kept tokens
    for piece in [(title or "") + " [SEP] ", *sentences]:
        piece_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(piece))
        room = limit - len(ids)
        kept = piece_ids[:room]
        if len(piece_ids) > room and not kept:
            break
        positions.append(list(range(1 + len(ids), 1 + len(ids) + len(kept))))
        ids += kept
        if len(piece_ids) > room:
            break
    inputs = [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
    numbers = list(range(1, len(positions)))
    groups = positions[1:]
    if not groups:
        title_tokens = len(tokenizer.tokenize(title or ""))
        groups = [positions[0][:title_tokens] or positions[0]]
        numbers = [0]
    tensor = torch.tensor([inputs])
    with torch.inference_mode():
        out = model(input_ids=tensor, token_type_ids=torch.zeros_like(tensor),
                    attention_mask=torch.ones_like(tensor), output_hidden_states=True)
    states = (torch.stack(out.hidden_states[1:]).mean(0) if all_layers
              else out.last_hidden_state)[0]
    vectors = torch.stack([states[g].sum(0) / max(len(g), 1) for g in groups])
    return inputs, numbers, vectors.numpy()


@pytest.fixture(scope="module")
def reference_model(tiny_bert):
    """The tiny BERT loaded on its own (not through the pipeline)."""
    from transformers import AutoModel, AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert), AutoModel.from_pretrained(tiny_bert).eval()


@pytest.fixture(scope="module")
def hard_papers(corpus_dir) -> list[tuple[str | None, str | None]]:
    """(title, abstract): ordinary papers, one whose abstract is far over 500 tokens, empty
    abstracts, an empty title, and unusual characters (accents, Greek letters, math
    symbols, "e.g.", "i.e.", decimals: UNUSUAL_PAPER, which the tiny BERT knows)."""
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(6)
    ordinary = list(zip(rows["title"], rows["abstract"], strict=True))
    long_abstract = " ".join(a for _, a in ordinary) * 3
    return [*ordinary[:3], (ordinary[3][0], long_abstract), (ordinary[4][0], ""),
            (ordinary[5][0], None), ("", ordinary[2][1]),
            (UNUSUAL_PAPER[0], f"{UNUSUAL_PAPER[1]} {ordinary[0][1]}")]


def project_sentences(abstract: str | None) -> list[str]:
    """The abstract's sentences as the project splits them."""
    return pieces(abstract or "", split_sentences(abstract or ""))


@pytest.fixture(scope="module")
def aspire_encoders(tiny_bert) -> dict[str, SentenceEncoder]:
    """Every ASPIRE entry of the registry, pointed at the tiny BERT (MODEL_PATH)."""
    return {name: SentenceEncoder(get_model(name), model_path=tiny_bert, device="cpu")
            for name in ASPIRE}


def test_aspire_entries_are_the_authors_and_mdcrs():
    """The authors' models under their names, MDCR's procedure under its own, same weights."""
    assert {n for n, e in REGISTRY.items() if e.kind == "multi-vector"} == set(ASPIRE)
    for name in ("aspire-bio", "aspire-cs"):
        authors, mdcr = get_model(name), get_model(f"{name}-mdcr")
        assert authors.hf_id == mdcr.hf_id and authors.hf_id.startswith(
            "allenai/aspire-contextualsentence-singlem-")
        assert (authors.pooling, mdcr.pooling) == ("mean", "mean-all-layers")
        assert authors.similarity == mdcr.similarity == "l2"
        assert authors.max_length == mdcr.max_length == 502  # 500 content tokens + 2


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ASPIRE))
def test_sentence_vectors_equal_the_authors_procedure(name, aspire_encoders, reference_model,
                                                      hard_papers):
    """Every paper's input ids are the authors' (each piece tokenized alone, 500 content
    tokens), and its sentence vectors and numbers equal the independent implementation to
    1e-5: the title is no sentence, the cut sentence keeps its first tokens, an empty
    abstract is its title; MDCR's entries average all layers."""
    encoder = aspire_encoders[name]
    tokenizer, model = reference_model
    inputs = [encoder.format(t, a) for t, a in hard_papers]
    tokenized = encoder.tokenize(inputs)
    got, tokens = encoder.encode_ids(tokenized, progress=False)
    assert tokens == sum(len(t.ids) for t in tokenized)
    cut = 0
    for i, (title, abstract) in enumerate(hard_papers):
        sentences = project_sentences(abstract)
        ids, numbers, vectors = aspire_reference(tokenizer, model, title, sentences,
                                                 ASPIRE[name])
        assert tokenized[i].ids == ids, (name, i)  # the model reads the authors' ids
        rows = got.paper == i
        assert got.sentence[rows].tolist() == numbers, (name, i)
        np.testing.assert_allclose(got.vectors[rows], vectors, rtol=0, atol=1e-5)
        if len(ids) == 502:
            cut += 1
            assert len(numbers) < len(sentences)  # sentences were left out
            assert tokenized[i].truncated == len(sentences) - len(numbers) + 1  # and one cut
        if not (abstract or "").strip():
            assert numbers == [0]  # the title stands for the paper
    assert cut >= 1  # the long abstract (and the last paper, which holds a whole abstract)


@pytest.mark.slow
def test_the_two_procedures_have_their_own_store_config(aspire_encoders, tmp_path):
    """aspire-bio and aspire-bio-mdcr (same weights) write different store configs (the
    pooling, named in words; the splitter is recorded), so one's store is refused for the
    other."""
    configs = {n: _store_config(e.entry, e, "float32") for n, e in aspire_encoders.items()}
    authors, mdcr = configs["aspire-bio"], configs["aspire-bio-mdcr"]
    assert authors["multi_vector"]["pooling"] != mdcr["multi_vector"]["pooling"]
    assert "last layer" in authors["multi_vector"]["pooling"]
    assert "all" in mdcr["multi_vector"]["pooling"]
    assert authors["multi_vector"]["splitter"] == mdcr["multi_vector"]["splitter"] != ""
    assert authors["max_length"] == 502
    store = tmp_path / "store"
    vectors = SentenceVectors(np.array([0]), np.array([1], np.int16),
                              np.ones((1, 32), np.float32), 0)
    add_part(store, authors, np.array([7]), vectors, "cpu")
    with pytest.raises(InputError, match="other settings"):
        check_config(store, mdcr)


def test_split_sentences_as_scispacy_split_csfcube():
    """regex-v3 (docs/encoders.md): a boundary at . ! ? (ASCII closers may follow) before
    whitespace, also before a lowercase word and after "e.g.", "i.e.", "et al." (as the
    scispaCy split CSFCube released); not after "vs.", titles, "U.S." or initials, nor after a
    curly closing quote; decimals never split."""
    text = ("  We study graphs (e.g. trees).  Results are good!\nIs it? 25 cases were 0.05 mm "
            "wide, i.e. small. Smith et al. found it. A vs. B in the U.S. and by J. Smith. "
            "They said \u201cno.\u201d Then it ended \"here.\" and went on. Done. ")
    assert pieces(text, split_sentences(text)) == [
        "We study graphs (e.g.", "trees).", "Results are good!", "Is it?",
        "25 cases were 0.05 mm wide, i.e.", "small.", "Smith et al.", "found it.",
        "A vs. B in the U.S. and by J. Smith.", "They said \u201cno.\u201d Then it ended "
        "\"here.\"", "and went on.", "Done."]
    assert split_sentences("") == [] and split_sentences("   ") == []
    assert pieces("No period at the end", split_sentences("No period at the end")) == [
        "No period at the end"]


def test_a_corpus_split_is_kept(aspire_encoders):
    """Where the corpus gives its own sentences (prefiltered.parquet's abstract_sentences),
    the encoder reads them as they are, not split again; the store's config says which."""
    encoder = aspire_encoders["aspire-cs"]
    own = ["We use e.g. trees", "without a final period", "Results are good."]
    assert encoder.format("T", " ".join(own), abstract_sentences=own).sentences == own
    assert encoder.format("T", " ".join(own)).sentences == [
        "We use e.g.", "trees without a final period Results are good."]
    assert encoder.format("T", None, query=True).sentences == []  # no query form
    entry = encoder.entry
    assert encoder.config_for(entry, ["abstract_sentences"])["multi_vector"]["splitter"] \
        == OWN_SPLIT
    assert encoder.config_for(entry, [])["multi_vector"]["splitter"] == SPLITTER == "regex-v3"


def test_fit_paper_keeps_the_authors_truncation():
    """By hand: [CLS] head s1 s2 s3 [SEP], the head (title + its [SEP]) no sentence; a
    sentence without tokens has no row but keeps its number; the one crossing the limit
    keeps its first tokens, those after it are left out (both counted as truncated)."""
    head, s = [11, 12, 3], [[21, 22], [], [31, 32, 33], [41]]
    whole = fit_paper(head, s, 20, cls=2, sep=3)
    assert whole.ids == [2, 11, 12, 3, 21, 22, 31, 32, 33, 41, 3]
    assert whole.sentence.tolist() == [-1, -1, -1, -1, 1, 1, 3, 3, 3, 4, -1]
    assert whole.truncated == 0
    cut = fit_paper(head, s, 6, cls=2, sep=3)  # room for head, s1 and one token of s3
    assert cut.ids == [2, 11, 12, 3, 21, 22, 31, 3]
    assert cut.sentence.tolist() == [-1, -1, -1, -1, 1, 1, 3, -1]
    assert cut.truncated == 2  # s3 cut, s4 left out; the empty s2 lost nothing
    exact = fit_paper(head, s, 5, cls=2, sep=3)  # s1 ends at the limit: s3 has no room
    assert exact.sentence.tolist() == [-1, -1, -1, -1, 1, 1, -1] and exact.truncated == 2
    # no sentence: the title's tokens (not its [SEP]) are sentence 0
    for empty in ([], [[], []]):
        alone = fit_paper(head, empty, 500, cls=2, sep=3)
        assert alone.ids == [2, 11, 12, 3, 3] and alone.truncated == 0
        assert alone.sentence.tolist() == [-1, 0, 0, -1, -1]
    # the head fills the limit: the title's kept tokens; no title at all: its [SEP]
    assert fit_paper(head, s, 2, cls=2, sep=3).sentence.tolist() == [-1, 0, 0, -1]
    assert fit_paper(head, s, 2, cls=2, sep=3).truncated == 3
    assert fit_paper([3], [], 500, cls=2, sep=3).sentence.tolist() == [-1, 0, -1]


@pytest.mark.slow
def test_maxsim_of_real_sentence_vectors_is_the_min_l2_distance(aspire_encoders, hard_papers,
                                                                tmp_path):
    """Through the store and maxsim_hits: each candidate's run score is minus the smallest
    L2 distance over (query sentence, candidate sentence) pairs, computed here by brute
    force with torch.cdist as ts-ASPIRE scores (pair_distances.allpair_masked_dist_l2max)."""
    encoder = aspire_encoders["aspire-cs"]
    got, _ = encoder.encode_ids(encoder.tokenize([encoder.format(t, a) for t, a in
                                                  hard_papers]), progress=False)
    ids = np.arange(100, 100 + len(hard_papers))
    store = tmp_path / "store"
    add_part(store, _store_config(encoder.entry, encoder, "float32"), ids, got, "cpu")
    hits, details = maxsim_hits(store, ids[:3], ids, len(ids), "l2", "torch-cpu")
    assert details["backend"] == "torch-cpu"
    run, _ = finalize_run(hits, len(ids))
    rows = {int(i): torch.from_numpy(got.vectors[got.paper == n]).double()
            for n, i in enumerate(ids)}
    checked = 0
    for query, doc, score in zip(run["query"], run["doc"], run["score"], strict=True):
        best = -float(torch.cdist(rows[query], rows[doc]).min())
        assert score == pytest.approx(best, abs=1e-4), (query, doc)
        checked += 1
    assert checked == 3 * (len(ids) - 1)


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


def maxsim_search(queries: np.ndarray, query_offsets: np.ndarray, docs: np.ndarray,
                  doc_offsets: np.ndarray, k: int, similarity: str, device: str = "cpu",
                  doc_rows: int | None = None, query_rows: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """`maxsim_stream` (the search the dense retriever runs) over candidates held in memory,
    in chunks of `doc_rows` sentence rows (whole papers) as the store's `candidate_chunks`
    gives them: candidate paper j is docs[doc_offsets[j]:doc_offsets[j + 1]], position j."""
    doc_rows = doc_rows or (1 << 16 if device.startswith("cuda") else 1 << 13)
    doc_offsets = np.asarray(doc_offsets)
    chunks = ((docs[doc_offsets[lo] : doc_offsets[hi]], doc_offsets[lo : hi + 1] - doc_offsets[lo],
               np.arange(lo, hi)) for lo, hi in paper_chunks(doc_offsets, doc_rows))
    return maxsim_stream(queries, query_offsets, chunks, k, similarity, device, query_rows,
                         total=len(doc_offsets) - 1)


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
    from pipeline.retrieval.dense.exact import maxsim_device

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
                              config_for=SentenceEncoder.config_for)
    add_part(store, _store_config(entry, encoder, "float32"), ids, vectors, "cpu")


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
def tiny_entry(tiny_bert):
    """ASPIRE's procedure on the tiny BERT, ranked by inner product, cut at 126 content
    tokens (so that the synthetic abstracts are truncated)."""
    entry = ModelEntry("tiny-aspire", "multi-vector", str(tiny_bert), "mean", "ip",
                       max_length=128)
    REGISTRY[entry.name] = entry
    yield entry
    del REGISTRY[entry.name]


@pytest.fixture(scope="module")
def encoder(tiny_entry) -> SentenceEncoder:
    return SentenceEncoder(tiny_entry, device="cpu")


@pytest.fixture(scope="module")
def papers(corpus_dir) -> pl.DataFrame:
    ids = pool_ids(corpus_dir, POOL)
    return (pl.read_parquet(corpus_dir / "prefiltered.parquet")
            .filter(pl.col("corpusid").is_in(ids.tolist())).sort("corpusid"))



@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return tmp_path_factory.mktemp("mv-indexes"), tmp_path_factory.mktemp("mv-runs")


@pytest.fixture(scope="module")
def indexed(corpus_dir, roots, tiny_entry) -> dict:
    return index(Place(corpus_dir, roots[0], roots[1]), POOL, tiny_entry, threads=1, part_size=300,
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
        assert table.column_names == ["corpusid", "sentence", "vector", "digest"]
        digests = pl.from_arrow(table.select(["corpusid", "digest"]))  # one text per paper
        assert digests.unique().height == digests["corpusid"].n_unique()
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
    place = Place(corpus_dir, roots[0], roots[1])
    assert index(place, POOL, tiny_entry, threads=1)["embedded"] == 0


@pytest.mark.slow
def test_stored_vectors_are_the_authors(corpus_dir, roots, tiny_entry, indexed, encoder, papers,
                                        reference_model):
    """The store holds, for ordinary papers and the longest (cut by the entry's 126 content
    tokens), the authors' sentence vectors, recomputed independently."""
    store = store_dir(roots[0], corpus_dir.name, tiny_entry.name)
    tokenizer, model = reference_model
    lengths = [len(x.ids) for x in encoder.tokenize(
        [encoder.format(t, a) for t, a in zip(papers["title"], papers["abstract"],
                                              strict=True)])]
    picks = [0, 1, int(np.argmax(lengths))]  # the longest is truncated
    vectors, offsets = load_sentence_vectors(store, papers["corpusid"].to_numpy()[picks])
    for n, row in enumerate(picks):
        title, abstract = papers["title"][row], papers["abstract"][row]
        _, _, want = aspire_reference(tokenizer, model, title, project_sentences(abstract),
                                      limit=126)
        np.testing.assert_allclose(vectors[offsets[n] : offsets[n + 1]], want, rtol=0,
                                   atol=1e-5)
    assert lengths[picks[2]] == 128 and offsets[3] - offsets[2] < len(
        project_sentences(papers["abstract"][picks[2]]))


@pytest.mark.slow
def test_search_and_eval_end_to_end(corpus_dir, roots, tiny_entry, indexed):
    index_root, runs_root = roots
    place = Place(corpus_dir, index_root, runs_root)
    info = search_pool(place, POOL, tiny_entry, k=100, threads=1,
                  backend="torch-cpu")
    assert info["details"]["backend"] == "torch-cpu"
    paths = run_paths(runs_root, corpus_dir.name, POOL, tiny_entry.name)
    run = pl.read_parquet(paths.parquet)
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
    result = eval_run(place, POOL, tiny_entry.name)
    assert result["counts"]["queries"] == queries.height
    metrics = pl.read_parquet(paths.metrics)
    assert metrics["map"].is_between(0, 1).all() and metrics["map"].mean() > 0
    with pytest.raises(InputError, match="searched with torch"):
        search_pool(place, POOL, tiny_entry, backend="faiss-cpu")


@pytest.mark.slow
def test_shards_give_the_same_store(corpus_dir, roots, tiny_entry, indexed, tmp_path):
    """Two shards, small parts and a small token budget: the same rows, the same vectors
    (float tolerance: the batches differ)."""
    place = Place(corpus_dir, tmp_path, tmp_path / "runs")
    for shard in range(2):
        out = embed(place, tiny_entry, [POOL], shard=shard, num_shards=2,
                    part_size=128, token_budget=1024, device="cpu")
        assert out["covered_pools"] == ([POOL] if shard == 1 else [])
    one = read_store(store_dir(roots[0], corpus_dir.name, tiny_entry.name))
    two = read_store(store_dir(tmp_path, corpus_dir.name, tiny_entry.name))
    assert one.column("corpusid").equals(two.column("corpusid"))
    assert one.column("sentence").equals(two.column("sentence"))
    flat = [np.stack(t.column("vector").to_numpy(zero_copy_only=False)) for t in (one, two)]
    np.testing.assert_allclose(flat[0], flat[1], rtol=1e-4, atol=1e-5)
