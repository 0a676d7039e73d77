"""SPECTER2 with its proximity adapter, through the `adapters` library (docs/encoders.md).

`adapters` pins transformers 4.57 while the pipeline runs on transformers 5, so its packages
(constraints-specter2.txt) go beside the project's, as docs/install.md#specter2 installs them.
The test builds that folder (pip --target, cached under ~/.cache/mdcr-pipeline), builds a tiny
adapter for the tiny local BERT with `adapters` itself, saves it as `<MODEL_PATH>/adapter`,
and runs the pipeline's Encoder for the registered `specter2` entry in a subprocess there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.encoding.encoders import SPECTER2_SETUP, Encoder
from pipeline.models import get_model
from tests.conftest import side_packages

ROOT = Path(__file__).resolve().parents[2]
SIDE_FILE = ROOT / "constraints-specter2.txt"
SIDE_PACKAGES = tuple(line for line in SIDE_FILE.read_text().splitlines()
                      if line and not line.startswith("#"))

SCRIPT = """
import json, sys, numpy as np, torch
from adapters import AutoAdapterModel
from transformers import AutoModel
from pipeline.encoding.encoders import Encoder
from pipeline.models import get_model
folder = sys.argv[1]
texts_in = [("Cardiac troponin in the elderly", "Troponin predicts infarction."),
            ("Jurassic basins", "Limestone facies of marine sediments were sampled."),
            ("Jurassic basins", ""),  # no abstract: SciRepEval encodes the title alone
            ("Cardiac troponin", "troponin levels were measured in the elderly " * 120)]
model = AutoAdapterModel.from_pretrained(folder)
model.add_adapter("proximity", config="seq_bn")
torch.manual_seed(1)
for name, p in model.named_parameters():
    if "adapters." in name:
        torch.nn.init.normal_(p, std=0.5)
model.save_adapter(folder + "/adapter", "proximity")
encoder = Encoder(get_model("specter2"), model_path=folder, device="cpu")
texts = [encoder.format(t, a) for t, a in texts_in]
# SciRepEval's input, written here: the non-empty fields joined by " [SEP] "
reference = [" [SEP] ".join(x for x in (t, a) if x).strip() for t, a in texts_in]
assert texts == reference, (texts, reference)
vectors, _ = encoder.encode(texts, progress=False)
batch = encoder.tokenizer(reference, padding=True, truncation=True, max_length=512,
                          return_tensors="pt")
model.set_active_adapters("proximity")
with torch.inference_mode():
    direct = model(**batch).last_hidden_state[:, 0].numpy()
    base = AutoModel.from_pretrained(folder)(**batch).last_hidden_state[:, 0].numpy()
base_encoder = Encoder(get_model("specter2-base"), model_path=folder, device="cpu")
print(json.dumps({"adapter_vs_direct": float(np.abs(vectors - direct).max()),
                  "adapter_vs_base": float(np.abs(vectors - base).max()),
                  "base_vs_base": float(np.abs(base_encoder.encode(texts, progress=False)[0]
                                               - base).max()),
                  "active": str(encoder.model.active_adapters)}))
"""


@pytest.fixture(scope="session")
def adapters_env() -> Path:
    """transformers 4.57 + adapters, installed beside the project's packages (cached)."""
    return side_packages("adapters-env", SIDE_PACKAGES)


def test_specter2_loads_its_proximity_adapter_from_model_path(adapters_env, tiny_bert,
                                                              tmp_path):
    folder = tmp_path / "specter2"
    shutil.copytree(tiny_bert, folder)
    env = {**os.environ, "PYTHONPATH": f"{adapters_env}{os.pathsep}{ROOT}",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], env=env,
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["adapter_vs_direct"] < 1e-4  # the pipeline's vectors are the adapter model's
    assert out["adapter_vs_base"] > 1e-2  # and the adapter is really active
    assert out["base_vs_base"] < 1e-4  # SPECTER2 Base: the same weights without it
    assert "proximity" in out["active"]


def test_specter2_without_adapters_says_how_to_install_it_beside_the_venv(tiny_bert):
    """.venv has no `adapters` (it cannot: constraints.txt's transformers): the error gives
    the commands constraints-specter2.txt's first lines and docs/install.md give."""
    if importlib.util.find_spec("adapters") is not None:
        pytest.skip("adapters is installed here")
    with pytest.raises(InputError, match="constraints-specter2.txt") as error:
        Encoder(get_model("specter2"), model_path=tiny_bert, device="cpu")
    assert SPECTER2_SETUP in str(error.value) and "\n" not in str(error.value)
    header = SIDE_FILE.read_text()
    install = SPECTER2_SETUP.split("`")[1]
    assert f"#   {install}\n" in header and "PYTHONPATH=.venv/specter2 " in header
    assert install in (ROOT / "docs" / "install.md").read_text()
