"""The model registry: `hf:` models, precisions as model names, bad names (every entry's
vectors against its reference: test_reference_parity.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.core.errors import InputError
from pipeline.encoding.encoders import Encoder
from pipeline.models import fused_name, fusion_parts, get_model, hf_model, with_precision


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


def test_a_precision_other_than_fp32_is_another_model_name():
    """bf16 runs and stores are `<name>+bf16`: never mixed with, or reused for, fp32 ones."""
    bf16 = with_precision(get_model("scincl"), "bf16")
    assert (bf16.name, bf16.precision, bf16.hf_id) == ("scincl+bf16", "bf16", "malteos/scincl")
    assert get_model("scincl+bf16") == bf16 and get_model("scincl").precision == "fp32"
    assert with_precision(get_model("scincl"), "fp32") == get_model("scincl")
    assert get_model("hf:org/name@cls+bf16").name == "hf--org--name--cls+bf16"
    assert get_model("fuse--rrf--bm25--minilm+bf16").name == "fuse--rrf--bm25--minilm+bf16"
    assert bf16.describe() != get_model("scincl").describe()  # the store config differs
    with pytest.raises(InputError, match="PRECISION=bf16 is for encoders"):
        get_model("bm25+bf16")
    with pytest.raises(InputError, match="PRECISION='fp8'"):
        get_model("scincl+fp8")
    with pytest.raises(InputError, match="already names its precision"):
        with_precision(bf16, "fp16")


@pytest.mark.slow
def test_bf16_runs_in_bf16_and_near_fp32(tiny_bert):
    """The model runs in the precision its name says, on a CPU too (as a GPU would, up to
    kernels); fp16 is refused on a CPU."""
    texts = ["Cardiac troponin[SEP]Troponin predicts infarction.", "Jurassic basins[SEP]"]
    fp32 = Encoder(get_model("scincl"), model_path=tiny_bert, device="cpu")
    bf16 = Encoder(get_model("scincl+bf16"), model_path=tiny_bert, device="cpu")
    assert fp32.model.dtype == torch.float32 and bf16.model.dtype == torch.bfloat16
    want, got = fp32.encode(texts, progress=False)[0], bf16.encode(texts, progress=False)[0]
    assert got.dtype == np.float32 and not np.array_equal(got, want)
    cosine = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert (cosine > 0.99).all()
    with pytest.raises(InputError, match="fp16 runs on a GPU only"):
        Encoder(get_model("scincl+fp16"), model_path=tiny_bert, device="cpu")


def test_st_models_have_file_safe_names_that_map_back():
    """st:<org>/<name> is the model st--<org>--<name> (its store, runs, SLURM tasks), which
    maps back, fuses, and takes a precision like any embedded model."""
    entry = get_model("st:sentence-transformers/all-MiniLM-L6-v2")
    assert (entry.name, entry.kind, entry.hf_id, entry.similarity, entry.query_prefix) == (
        "st--sentence-transformers--all-MiniLM-L6-v2", "st",
        "sentence-transformers/all-MiniLM-L6-v2", "cosine", "")
    assert entry.embedded and get_model(entry.name) == entry
    fused = fused_name("rrf", ["bm25", entry.name, "hf:a/b@lasttoken"])
    assert fusion_parts(fused) == ("rrf", ["bm25", entry.name, "hf--a--b--lasttoken"])
    assert get_model(f"{entry.name}+bf16").precision == "bf16"
