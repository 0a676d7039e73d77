"""Decoder rerankers (pipeline/encoding/cross.py DecoderScorer) against Qwen3-Reranker's model
card code, written out here as the card gives it (format_instruction, process_inputs,
compute_logits), on a tiny Qwen3 causal LM of random weights with MiniLM's uncased tokenizer
(it has "yes" and "no"): the same scores to 1e-5, whatever the batches; a folder whose
tokenizer lacks them refused in one line. (Cross-encoders: tests/retrieval/test_rerank.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from pipeline.core.errors import InputError
from pipeline.encoding.cross import DECODER_INSTRUCTION, DecoderScorer
from pipeline.encoding.identity import model_source
from pipeline.models import get_model

ENTRY = get_model("qwen3-reranker-0.6b")


@pytest.fixture(scope="module")
def decoder_folder(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    folder = tmp_path_factory.mktemp("qwen3-reranker")
    tokenizer = AutoTokenizer.from_pretrained(model_source(get_model("minilm")))
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(folder)
    torch.manual_seed(5)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, pad_token_id=tokenizer.pad_token_id,
                         max_position_embeddings=1024)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():  # "yes" and "no" logits that differ by pair, far beyond 1e-5
        model.lm_head.weight.mul_(40)
    model.save_pretrained(folder)
    return folder


def card_scores(folder: Path, pairs: list[tuple[str, str]], max_length: int = 8192
                ) -> list[float]:
    """Qwen3-Reranker's model card code, one batch of every pair."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    token_false_id = tokenizer.convert_tokens_to_ids("no")
    token_true_id = tokenizer.convert_tokens_to_ids("yes")
    prefix = ("<|im_start|>system\nJudge whether the Document meets the requirements based on "
              "the Query and the Instruct provided. Note that the answer can only be \"yes\" or "
              "\"no\".<|im_end|>\n<|im_start|>user\n")
    suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    prefix_tokens = tokenizer.encode(prefix, add_special_tokens=False)
    suffix_tokens = tokenizer.encode(suffix, add_special_tokens=False)

    def format_instruction(instruction, query, doc):
        return f"<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}"

    texts = [format_instruction(DECODER_INSTRUCTION, q, d) for q, d in pairs]
    inputs = tokenizer(texts, padding=False, truncation="longest_first",
                       return_attention_mask=False,
                       max_length=max_length - len(prefix_tokens) - len(suffix_tokens))
    for i, ele in enumerate(inputs["input_ids"]):
        inputs["input_ids"][i] = prefix_tokens + ele + suffix_tokens
    inputs = tokenizer.pad(inputs, padding=True, return_tensors="pt", max_length=max_length)
    with torch.no_grad():
        batch_scores = model(**inputs).logits[:, -1, :]
        true_vector = batch_scores[:, token_true_id]
        false_vector = batch_scores[:, token_false_id]
        batch_scores = torch.stack([false_vector, true_vector], dim=1)
        batch_scores = torch.nn.functional.log_softmax(batch_scores, dim=1)
        return batch_scores[:, 1].exp().tolist()


def test_scores_equal_the_model_cards_code(decoder_folder, corpus_dir):
    """Corpus papers of unequal lengths, batched 3 at a time longest first here, all at once
    there: P(yes) equal to 1e-5, and the pairs told apart."""
    rows = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(5)
    scorer = DecoderScorer(ENTRY, model_path=decoder_folder, device="cpu", batch_size=3)
    text = {i: scorer.text(t, a) for i, t, a in rows.select("corpusid", "title",
                                                            "abstract").iter_rows()}
    ids = list(text)
    pairs = [(q, d) for q in ids[:2] for d in ids[1:]]
    mine = scorer.score(text, text, pairs)
    theirs = card_scores(decoder_folder, [(text[q], text[d]) for q, d in pairs])
    np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert np.ptp(theirs) > 1e-2


def test_a_tokenizer_without_yes_and_no_is_refused(decoder_folder, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    folder = shutil.copytree(decoder_folder, tmp_path / "no-yes")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    vocab = tokenizer.get_vocab()
    assert "yes" in vocab and "no" in vocab
    (folder / "tokenizer.json").write_text((folder / "tokenizer.json").read_text()
                                           .replace('"yes":', '"yes_":'))
    with pytest.raises(InputError, match="its tokenizer has no single token 'yes' or 'no'"):
        DecoderScorer(ENTRY, model_path=folder, device="cpu")


def test_a_cross_encoder_of_several_labels_is_refused(tiny_bert, tmp_path):
    """A CrossEncoder folder of two labels (a classifier of classes): one line, not a score."""
    from sentence_transformers import CrossEncoder

    from pipeline.encoding.cross import CrossScorer
    from pipeline.encoding.families import routed

    CrossEncoder(str(tiny_bert), num_labels=2, device="cpu").save(str(tmp_path / "two"))
    entry = routed(get_model("st:local/two"), tmp_path / "two")
    with pytest.raises(InputError, match="its CrossEncoder has 2 labels, a classifier of "
                                         "classes; a reranker gives one score per pair"):
        CrossScorer(entry, model_path=tmp_path / "two", device="cpu")
