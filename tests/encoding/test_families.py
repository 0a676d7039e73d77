"""The family of a model folder (pipeline/encoding/families.py), read from its own files, and
the doors that refuse a family they do not run: tiny folders of each family saved by the
installed sentence-transformers itself (SentenceTransformer, SparseEncoder with an MLM head and
SPLADE pooling, CrossEncoder with a classifier), a PyLate ColBERT folder written as PyLate
1.6's `ColBERT.save` writes it (PyLate is not installed), and plain transformers folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import pipeline
from pipeline.core.errors import InputError
from pipeline.encoding.encoders import Encoder
from pipeline.encoding.families import FAMILY_KINDS, family_of, kind_for, routed
from pipeline.encoding.stmodels import STEncoder
from pipeline.layout import run_paths, store_dir
from pipeline.models import get_model
from tests.conftest import CHILD_BOUND_S, refusal
from tests.test_errors import POOL, ROOT, _snapshot, with_pool

pytestmark = pytest.mark.slow  # builds and loads models


def _backbone(tiny_bert: Path, out: Path, head: str) -> Path:
    """tiny_bert's tokenizer and configuration with a head: `mlm` (BertForMaskedLM, what
    SPLADE is) or `classifier` (BertForSequenceClassification, one label: a cross-encoder)."""
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForMaskedLM,
        BertForSequenceClassification,
    )

    torch.manual_seed(2)
    config = BertConfig.from_pretrained(tiny_bert, num_labels=1)
    model = BertForMaskedLM(config) if head == "mlm" else BertForSequenceClassification(config)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(out)
    return out


def _pylate(dense: Path, out: Path, model_type: bool = True) -> Path:
    """A PyLate ColBERT folder as PyLate 1.6 saves it (sentence-transformers 5.3's save, then
    `ColBERT.save`'s config_sentence_transformers.json): its Transformer at the root, a
    `pylate.models.Dense.Dense` projection in 1_Dense (configuration only: a refusal reads no
    weight), "model_type": "ColBERT" (left out: a folder saved before sentence-transformers 5,
    known by its modules)."""
    shutil.copytree(dense, out)
    shutil.rmtree(out / "1_Pooling")
    (out / "1_Dense").mkdir()
    (out / "1_Dense" / "config.json").write_text(json.dumps(
        {"in_features": 32, "out_features": 16, "bias": False,
         "activation_function": "torch.nn.modules.linear.Identity"}))
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}]))
    config = {"__version__": {"sentence_transformers": "5.3.0", "pylate": "1.6.0"},
              "prompts": {"query": "", "document": ""}, "default_prompt_name": None,
              "similarity_fn_name": "MaxSim", "query_prefix": "[unused0]",
              "document_prefix": "[unused1]", "query_length": 32, "document_length": 180,
              "attend_to_expansion_tokens": False, "skiplist_words": [".", ",", "!", "?"],
              "do_query_expansion": True}
    if model_type:
        config = {"model_type": "ColBERT", **config}
    else:
        del config["similarity_fn_name"]
    (out / "config_sentence_transformers.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def folders(tiny_bert, tmp_path_factory) -> dict[str, Path]:
    """A folder of each family, by name."""
    from sentence_transformers import CrossEncoder, SentenceTransformer, SparseEncoder
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    root = tmp_path_factory.mktemp("families")
    mlm = _backbone(tiny_bert, root / "plain-mlm", "mlm")
    classifier = _backbone(tiny_bert, root / "plain-classifier", "classifier")
    torch.manual_seed(1)
    transformer = Transformer(str(tiny_bert), max_seq_length=64)
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(),
                                                      "mean")],
                        device="cpu").save(str(root / "dense"))
    SparseEncoder(modules=[MLMTransformer(str(mlm)), SpladePooling("max")],
                  device="cpu").save(str(root / "sparse"))
    CrossEncoder(str(classifier), device="cpu").save(str(root / "cross"))
    colbert = root / "stanford-colbert"
    shutil.copytree(tiny_bert, colbert)
    config = json.loads((colbert / "config.json").read_text())
    (colbert / "config.json").write_text(json.dumps({**config, "architectures": ["HF_ColBERT"]}))
    return {"dense": root / "dense", "sparse": root / "sparse", "cross": root / "cross",
            "pylate": _pylate(root / "dense", root / "pylate"),
            "pylate-before-st5": _pylate(root / "dense", root / "pylate-old", model_type=False),
            "plain-mlm": mlm, "plain-classifier": classifier, "plain": tiny_bert,
            "stanford-colbert": colbert}


@pytest.mark.parametrize("name, family", [
    ("dense", "SentenceTransformer"), ("sparse", "SparseEncoder"), ("cross", "CrossEncoder"),
    ("pylate", "PyLate"), ("pylate-before-st5", "PyLate"), ("plain-mlm", "transformers"),
    ("plain-classifier", "CrossEncoder"), ("plain", "transformers"),
    ("stanford-colbert", "ColBERT"),
])
def test_the_family_is_the_folders_own(folders, name, family):
    assert family_of(folders[name]) == family


def test_a_newer_model_type_is_named_and_refused(folders, tmp_path):
    """A sentence-transformers class this code does not know is its own family, refused by
    its name, not run as a dense encoder."""
    folder = shutil.copytree(folders["dense"], tmp_path / "future")
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({**config, "model_type": "FutureEncoder"}))
    assert family_of(folder) == "FutureEncoder"
    with pytest.raises(InputError, match="its folder .* is a sentence-transformers "
                                         "FutureEncoder, which MODEL=st: does not load"):
        kind_for(get_model("st:local/x"), folder)


@pytest.mark.parametrize("model, name", [
    (model, name) for model in ("st:local/x", "hf:local/x@mean", "scibert")
    for name in ("sparse", "cross", "pylate", "plain-classifier", "stanford-colbert")
    # st: runs a SparseEncoder as sparse, a PyLate folder or Stanford checkpoint as ColBERT,
    # a CrossEncoder (or a plain sequence classifier, which CrossEncoder loads) as a reranker
    if model != "st:local/x" or name not in ("sparse", "pylate", "stanford-colbert", "cross",
                                             "plain-classifier")])
def test_every_door_refuses_a_family_it_does_not_run(folders, name, model):
    """st:, hf: and a registered dense model refuse the folder in one line naming its
    family, and so do their loaders, before a weight is read (the PyLate folder's projection
    has none); st: of a SparseEncoder folder is routed to the sparse kind instead, and of a
    ColBERT folder to late interaction, of a cross-encoder to the rerankers."""
    entry = get_model(model)
    with pytest.raises(InputError) as refused:
        routed(entry, folders[name])
    line = str(refused.value)
    assert "\n" not in line and "does not load as a dense encoder" in line
    assert line.startswith(f"MODEL {model.partition('@')[0]}: its folder")
    loader = STEncoder if entry.kind == "st" else Encoder
    with pytest.raises(InputError, match="does not load as a dense encoder"):
        loader(entry, model_path=folders[name], device="cpu")


@pytest.mark.parametrize("name", ["pylate", "pylate-before-st5", "stanford-colbert"])
def test_st_routes_a_colbert_folder_to_late_interaction(folders, name):
    """st: of a PyLate folder (either save) or a Stanford ColBERT checkpoint is an entry of
    the late-interaction kind, scored by the dot product (MaxSim's); that kind's registered
    entries take it too."""
    entry = routed(get_model("st:local/x"), folders[name])
    assert (entry.kind, entry.similarity) == ("late-interaction", "ip")
    assert routed(get_model("colbertv2"), folders[name]) == get_model("colbertv2")


@pytest.mark.parametrize("name", ["cross", "plain-classifier"])
def test_st_routes_a_cross_encoder_to_the_rerankers(folders, name):
    """st: of a CrossEncoder folder (or a plain sequence classifier) is a reranker; the
    registered cross-encoders take it too."""
    assert routed(get_model("st:local/x"), folders[name]).kind == "reranker"
    assert routed(get_model("ms-marco-minilm"), folders[name]) == get_model("ms-marco-minilm")


@pytest.mark.parametrize("name", ["dense", "plain", "plain-mlm"])
def test_the_doors_keep_a_dense_encoders_folder(folders, name):
    assert routed(get_model("st:local/x"), folders[name]).kind == "st"
    assert routed(get_model("hf:local/x@cls"), folders[name]).kind == "dense"
    assert routed(get_model("scibert"), folders[name]) == get_model("scibert")


def test_a_mapped_family_routes_an_st_model_to_its_kind(folders, monkeypatch):
    """Once a kind runs a family (one line in FAMILY_KINDS), the st: name of such a folder is
    an entry of that kind, named as before; hf: points at st:; the kind's own entries take
    its folders."""
    monkeypatch.setitem(FAMILY_KINDS, "SparseEncoder", "sparse")
    entry = routed(get_model("st:local/sp"), folders["sparse"])
    assert (entry.kind, entry.name, entry.hf_id) == ("sparse", "st--local--sp", "local/sp")
    assert routed(entry, folders["sparse"]) == entry
    with pytest.raises(InputError, match=f"MODEL=hf: does not load as a dense encoder; give "
                       f"MODEL=st:local/x MODEL_PATH={folders['sparse']}, which runs it as a "
                       "sparse model"):
        routed(get_model("hf:local/x@mean"), folders["sparse"])
    with pytest.raises(InputError, match="does not load as a dense encoder"):
        STEncoder(get_model("st:local/sp"), model_path=folders["sparse"], device="cpu")


@pytest.fixture(scope="module")
def data_root(corpus_dir, tmp_path_factory) -> Path:
    """A data folder with a private copy of the corpus and one pool of 800 candidates."""
    root = tmp_path_factory.mktemp("family-data") / "data"
    with_pool(root, corpus_dir)
    return root


@pytest.mark.parametrize("name, model, said", [
    ("cross", "st:local/x", "error: MODEL st:local/x is a cross-encoder model: it reranks a "
                            "first stage's candidates and ranks no pool alone; run make rerank "
                            "MODEL=st:local/x FIRST_STAGE=bm25"),
    ("pylate", "hf:local/x", "which MODEL=hf: does not load as a dense encoder"),
    ("sparse", "hf:local/x", "which MODEL=hf: does not load as a dense encoder"),
])
def test_make_eval_refuses_the_folder_before_writing(folders, data_root, tmp_path, name,
                                                     model, said):
    """make eval of such a folder (it was once embedded as a dense model and scored) is one
    line, exit status 2, and nothing is written: no store, no run."""
    (tmp_path / "installed").touch()
    before = _snapshot(data_root)
    environ = {k: v for k, v in os.environ.items() if k not in ("MODEL", "DATA")}
    done = subprocess.run(
        ["make", "--no-print-directory", "eval", f"DATA={data_root}", "CORPUS=c",
         f"MODEL={model}", f"MODEL_PATH={folders[name]}", f"PY={sys.executable}",
         f"STAMP={tmp_path / 'installed'}"], cwd=ROOT, capture_output=True, text=True,
        env={**environ, "MAKEFLAGS": ""}, timeout=CHILD_BOUND_S)
    line = refusal(done)
    assert said in line
    assert _snapshot(data_root) == before


def test_the_api_refuses_the_folder_and_a_dense_one_still_embeds(folders, data_root):
    """pipeline.search: the CrossEncoder folder refused (it only reranks) before anything is
    written; the SentenceTransformer folder searched (its store and run written), and the
    SparseEncoder folder searched as the sparse kind (a store of terms and weights)."""
    data = pipeline.Data(corpora=data_root / "corpora", indexes=data_root / "indexes",
                         runs=data_root / "runs")
    before = _snapshot(data_root)
    with pytest.raises(InputError, match="MODEL st:local/cross is a cross-encoder model: it "
                                         "reranks"):
        pipeline.search(data, "c", POOL, "st:local/cross", model_path=folders["cross"],
                        device="cpu")
    assert _snapshot(data_root) == before
    name = pipeline.search(data, "c", POOL, "st:local/dense", model_path=folders["dense"],
                           device="cpu")
    assert store_dir(data.indexes, "c", "st--local--dense").is_dir()
    assert run_paths(data.runs, "c", POOL, name).parquet.is_file()
    sparse = pipeline.search(data, "c", POOL, "st:local/sp", model_path=folders["sparse"],
                             device="cpu")
    manifest = json.loads((store_dir(data.indexes, "c", sparse) / "manifest.json").read_text())
    assert (manifest["config"]["model"]["kind"], manifest["config"]["model"]["similarity"]) == (
        "sparse", "ip")
    assert run_paths(data.runs, "c", POOL, sparse).parquet.is_file()
