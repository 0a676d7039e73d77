"""MODEL=hf:<id> POOLING=lasttoken: a decoder embedder (e5-mistral, Qwen3-Embedding) read at
its last real token, the end-of-sequence token appended where its tokenizer does not end inputs
with it, padded on the tokenizer's side; against a reference written here from the procedure
(each text alone through transformers, no padding)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import torch

from pipeline.encoding.encoders import PAD_STEP, Encoder
from pipeline.models import get_model
from tests.conftest import UNUSUAL_PAPER, decoder_backbone

pytestmark = pytest.mark.slow  # encodes with a model


@pytest.fixture(scope="module")
def texts(corpus_dir) -> list[str]:
    """"title abstract" of papers of different lengths, one far over 512 tokens, unusual
    characters."""
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(5)
    texts = [f"{t} {a}".strip() for t, a in zip(rows["title"], rows["abstract"], strict=True)]
    return [*texts, " ".join(texts) * 6, " ".join(UNUSUAL_PAPER), rows["title"][0]]


def reference(folder, texts: list[str]) -> np.ndarray:
    """Each text alone: its tokens (at most 511) and the end-of-sequence token, the decoder's
    last hidden state at that token, L2-normalised."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    out = []
    for text in texts:
        ids = tokenizer(text, truncation=True, max_length=511)["input_ids"]
        ids = [*ids, tokenizer.eos_token_id]
        with torch.inference_mode():
            hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        out.append(torch.nn.functional.normalize(hidden, dim=-1).numpy())
    return np.stack(out)


@pytest.mark.parametrize("padded", [False, True], ids=["one-width", "padded"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_last_token_pooling_equals_the_reference(side, padded, corpus_dir, texts, tmp_path):
    folder = decoder_backbone(corpus_dir, tmp_path / side, side)
    entry = get_model("hf:tiny/qwen2@lasttoken")
    assert (entry.name, entry.similarity, entry.normalize, entry.join) == (
        "hf--tiny--qwen2--lasttoken", "cosine", True, "space")
    assert get_model(entry.name) == entry
    encoder = Encoder(entry, model_path=folder, device="cpu")
    encoder.pad_step = None if padded else PAD_STEP  # padded: to the longest, as on a GPU
    assert encoder.tokenizer.padding_side == side
    ids = encoder.tokenize(texts)
    assert {row[-1] for row in ids} == {encoder.tokenizer.eos_token_id}
    assert max(map(len, ids)) == 512  # the long paper cut, its end-of-sequence token kept
    assert encoder.settings() == {"eos_appended": True}
    ours, _ = encoder.encode(texts, progress=False)
    want = reference(folder, texts)
    np.testing.assert_allclose(ours, want, atol=1e-5)
    assert np.abs(want[0] - want[1]).max() > 1e-3  # the vectors differ from paper to paper


def test_an_end_of_sequence_token_the_tokenizer_adds_is_not_added_again(corpus_dir, texts,
                                                                       tmp_path):
    """A tokenizer that ends every input with its end-of-sequence token (Qwen3-Embedding's)
    is taken as it is: one such token at the end, not two."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    folder = decoder_backbone(corpus_dir, tmp_path / "eos", "left")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    eos = tokenizer.eos_token_id
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", eos)])
    tokenizer.save_pretrained(folder)
    encoder = Encoder(get_model("hf:tiny/qwen2@lasttoken"), model_path=folder, device="cpu")
    assert encoder.settings() == {"eos_appended": False}
    ids = encoder.tokenize(texts)
    assert all(row[-1] == eos and row[-2] != eos for row in ids)
    assert max(map(len, ids)) == 512
