"""The model registry: every entry's loading path on a tiny local model, and `hf:` models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.core.errors import InputError
from pipeline.encoding.encoders import Encoder
from pipeline.encoding.models import REGISTRY, get_model, hf_model

TEXTS = [("Cardiac troponin in the elderly", "Troponin predicts infarction. It is measured."),
         ("Jurassic basins", "Limestone facies of marine sediments were sampled.")]


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, e in REGISTRY.items()
                                  if e.kind == "dense" and not e.adapter and not e.package])
def test_every_dense_entry_loads_and_pools_as_registered(name, tiny_bert):
    """Each entry through the same from_pretrained path (the weights from MODEL_PATH): its
    pooling, normalisation and input prefix are the ones the registry states."""
    entry = get_model(name)
    encoder = Encoder(entry, model_path=tiny_bert, device="cpu")  # compared on CPU tensors
    texts = [encoder.format(t, a) for t, a in TEXTS]
    assert all(t.startswith(entry.text_prefix) for t in texts)
    assert encoder.tokenizer.sep_token in texts[0]
    vectors, _ = encoder.encode(texts, progress=False)
    batch = encoder.tokenizer(texts, padding=True, truncation=True,
                              max_length=encoder.max_length, return_tensors="pt")
    with torch.inference_mode():
        hidden = encoder.model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = hidden[:, 0] if entry.pooling == "cls" else (hidden * mask).sum(1) / mask.sum(1)
    if entry.normalize:
        expected = torch.nn.functional.normalize(expected, dim=-1)
    np.testing.assert_allclose(vectors, expected.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_hf_models_need_no_registry_entry(tiny_bert):
    entry = get_model("hf:malteos/scincl@cls")
    assert (entry.name, entry.hf_id, entry.pooling, entry.similarity) == (
        "hf--malteos--scincl--cls", "malteos/scincl", "cls", "l2")
    assert get_model(entry.name) == entry  # the file-safe name maps back
    mean = hf_model("hf:intfloat/e5-base-v2")
    assert (mean.pooling, mean.similarity, mean.normalize) == ("mean", "cosine", True)
    # MODEL_PATH gives the weights of an unregistered model
    vectors, _ = Encoder(entry, model_path=tiny_bert, device="cpu").encode(["a b", "c d"],
                                                                           progress=False)
    assert vectors.shape[0] == 2


@pytest.mark.parametrize("spec, message", [
    ("hf:a//b", "write a Hugging Face id"), ("hf:../etc", "write a Hugging Face id"),
    ("hf:org/name@max", "POOLING 'max'"), ("scincl2", "unknown MODEL 'scincl2'"),
])
def test_bad_model_names_are_one_line_errors(spec, message):
    with pytest.raises(InputError, match=message):
        get_model(spec)
