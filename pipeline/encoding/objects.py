"""Encoders given as Python objects: anything with `encode(texts) -> array` (a
sentence-transformers model, a user's own class) searched like a registered encoder
(docs/encoders.md, "Encoders as objects").

`Encoder(obj, name=..., similarity=..., fingerprint=...)` is the object's model entry (kind
`object`): it is passed where a model name is (`pipeline.search(..., model=Encoder(...))`),
never added to the global registry. Its store is `indexes/<corpus>/embeddings/<name>/` and
records the entry with its fingerprint, so a store of the same name made by another object
(another fingerprint) is refused, never mixed (store_texts.check_settings). `ObjectEncoder` embeds
for the embed stage: each paper's input is its title and abstract joined by a space (after
`prefix`), the object's vectors are taken as float32, in batches of `batch_size` texts,
each batch advancing the embed stage's progress lines as a registered encoder's do.
Unlike pipeline.encoding.encoders.Encoder, it loads no weights: the object is the model.

An object following MTEB's encoder protocol (its `encode(inputs, *, task_metadata, hf_split,
hf_subset, prompt_type)` takes a DataLoader of {"text": [...]} batches: mteb's own wrappers,
any model `mteb.get_model` gives) is called as MTEB calls it: each batch one DataLoader, the
metadata of an MTEB task (`task=`, default SCIDOCS: citation prediction among papers),
`PromptType.document` for the store's papers and `PromptType.query` for query papers (encoded
apart, as E5's queries are). The protocol and the task are in the store's identity.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from pipeline.core.errors import InputError
from pipeline.core.logs import Progress
from pipeline.core.repair import Repair
from pipeline.layout import check_name
from pipeline.models import REGISTRY, SIMILARITIES, ModelEntry, get_model

OBJECT_KIND = "object"
OBJECT_BATCH = 64  # texts per call of obj.encode
TEXTS, MTEB = "texts", "mteb"  # an object's protocol: encode(texts), or MTEB's encode
MTEB_TASK = "SCIDOCS"  # the MTEB task nearest ours (SPECTER's citation prediction): its prompts


def torch_fingerprint(obj: Any) -> str | None:
    """sha256 of a torch module's architecture (its repr: layers, pooling, max length) and of
    every tensor of its state_dict in key order; None when `obj` is not a torch module (torch
    is consulted only when the caller has imported it: an object of a numpy-only class never
    imports torch)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.nn.Module):
        return None
    digest = hashlib.sha256(f"{type(obj).__module__}.{type(obj).__qualname__}\n{obj!r}".encode())
    for key, tensor in sorted(obj.state_dict().items()):
        value = tensor.detach().cpu().contiguous()
        digest.update(f"\n{key} {value.dtype} {tuple(value.shape)}\n".encode())
        digest.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return digest.hexdigest()


def protocol_of(obj: Any) -> str:
    """MTEB when `obj.encode` takes MTEB's `task_metadata=` (its EncoderProtocol), else TEXTS."""
    try:
        parameters = inspect.signature(obj.encode).parameters
    except (TypeError, ValueError):  # a builtin without a signature: called with texts
        return TEXTS
    return MTEB if "task_metadata" in parameters else TEXTS


def mteb_fingerprint(obj: Any) -> str | None:
    """An MTEB wrapper's identity: its class, the torch fingerprint of the model it wraps
    (`obj.model`, as mteb's wrappers hold it) and its plain settings (prompts by task,
    instruction templates: every attribute of strings, numbers and their lists and dicts);
    None when it wraps no torch module."""
    weights = torch_fingerprint(getattr(obj, "model", None))
    if weights is None:
        return None
    settings = {key: value for key, value in sorted(vars(obj).items()) if _plain(value)}
    wrapper = f"{type(obj).__module__}.{type(obj).__qualname__}"
    text = f"{wrapper}\n{weights}\n{json.dumps(settings, sort_keys=True)}"
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: Any) -> bool:
    """Whether `value` is JSON of its own: None, a string, a number, lists and dicts of them."""
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


@dataclass(frozen=True, init=False)
class Encoder(ModelEntry):
    """The model entry of an object with `encode(texts) -> array` (kind `object`).

    `name`: its runs' and store's name (not a registered model's); `similarity`: ip, l2 or
    cosine; `fingerprint`: what identifies its weights (given, or for a torch module such as a
    sentence-transformers model the digest of its architecture and state_dict; any other
    object must give one); `prefix` / `query_prefix`: prepended to each paper's text (a
    query's own where given, as E5's "query: "); `batch_size`: texts per `encode` call.
    An MTEB-protocol object (`protocol` "mteb") is given the metadata of MTEB task `task`
    (default SCIDOCS) and encodes query papers apart, with the query prompt type."""

    model: Any = field(default=None, compare=False, repr=False)
    fingerprint: str = ""
    batch_size: int = OBJECT_BATCH
    protocol: str = TEXTS
    task: str | None = None  # MTEB's task whose metadata an MTEB object is given

    def __init__(self, model: Any, name: str, similarity: str = "cosine",
                 fingerprint: str | None = None, *, prefix: str = "",
                 query_prefix: str | None = None, batch_size: int = OBJECT_BATCH,
                 task: str | None = None) -> None:
        if not callable(getattr(model, "encode", None)):
            raise InputError(f"Encoder: model= {type(model).__name__!r} has no encode(texts) "
                             "method: give an object whose encode(list of str) returns one "
                             "vector per text (a sentence-transformers model, a class of yours)")
        check_name("model", name)
        if known_model(name):
            raise InputError(f"Encoder: name={name!r} is a registered or derived model's: give "
                             "the object a name of its own (its runs and store are named so)")
        if similarity not in SIMILARITIES:
            raise InputError(f"Encoder: similarity={similarity!r}: use one of "
                             f"{', '.join(SIMILARITIES)}")
        protocol = protocol_of(model)
        task = _task_of(name, model, protocol, task)
        if fingerprint is None:
            fingerprint = torch_fingerprint(model) if protocol == TEXTS \
                else mteb_fingerprint(model)
            if fingerprint is None:
                raise InputError(f"Encoder {name}: give fingerprint= (a string that changes "
                                 f"whenever the weights of this {type(model).__name__} do: a "
                                 "checkpoint's sha256, a version): without it, vectors of "
                                 "other weights could be served from its store")
        if not isinstance(fingerprint, str) or not fingerprint.strip():
            raise InputError(f"Encoder {name}: fingerprint={fingerprint!r}: give a non-empty "
                             "string")
        for label, text in (("prefix", prefix), ("query_prefix", query_prefix)):
            if text is not None and not isinstance(text, str):
                raise InputError(f"Encoder {name}: {label}={text!r}: give a string")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"Encoder {name}: batch_size={batch_size!r}: give an integer >= 1")
        if protocol == MTEB:
            # queries apart from the stored papers: they are encoded with the query prompt type
            query_prefix = prefix if query_prefix is None else query_prefix
        super().__init__(name, OBJECT_KIND, similarity=similarity,  # type: ignore[arg-type]
                         text_prefix=prefix, query_prefix=query_prefix, join="space",
                         notes=f"object of {type(model).__module__}.{type(model).__qualname__}")
        for key, value in (("model", model), ("fingerprint", fingerprint),
                           ("batch_size", batch_size), ("protocol", protocol), ("task", task)):
            object.__setattr__(self, key, value)
        if protocol == MTEB:
            mteb_task(self)  # an unknown task refused now, not when the embedding starts

    def describe(self) -> dict:
        """The entry as the store's config records it: every field but the object itself
        (its fingerprint stands for it); an MTEB object's protocol and task besides (they
        choose its prompts)."""
        entry = {f.name: getattr(self, f.name) for f in fields(ModelEntry)}
        mteb = {"protocol": MTEB, "task": self.task} if self.protocol == MTEB else {}
        return {**entry, "params": dict(self.params), "fingerprint": self.fingerprint, **mteb}


def _task_of(name: str, model: Any, protocol: str, task: Any) -> str | None:
    """The MTEB task whose metadata an MTEB object is given (`task`, default MTEB_TASK);
    None for an object of texts, which is refused a task."""
    if protocol != MTEB:
        if task is not None:
            raise InputError(f"Encoder {name}: task={task!r} is for an object of MTEB's "
                             f"encoder protocol; this {type(model).__name__}'s encode takes "
                             "texts: leave task out")
        return None
    if task is None:
        return MTEB_TASK
    if not isinstance(task, str) or not task.strip():
        raise InputError(f"Encoder {name}: task={task!r}: give an MTEB task's name")
    return task


def known_model(name: str) -> bool:
    """Whether `name` already names a model (registered, hf--, fused, +precision, vectors--):
    one make can search with. A store or searched run of any other name is an Encoder's."""
    if name.lower() in REGISTRY:
        return True
    try:
        get_model(name)
    except InputError:
        return False
    return True


class ObjectEncoder:
    """What the embed stage calls to embed an `Encoder` entry's papers: the object's encode,
    in batches, checked (one vector per text, one dimension, finite values)."""

    kinds: tuple[str, ...] = (OBJECT_KIND,)
    columns: tuple[str, ...] = ()  # no optional corpus columns

    def __init__(self, entry: ModelEntry, model_path: str | None = None,
                 device: str | None = None) -> None:
        if not isinstance(entry, Encoder):
            raise InputError(f"MODEL {entry.name} is a {entry.kind} model: objects are embedded "
                             "from a pipeline.Encoder(obj, name=...) given as the model")
        if model_path is not None:
            raise InputError(f"MODEL {entry.name} is an object: it has no MODEL_PATH to load")
        import torch

        self.entry, self.obj = entry, entry.model
        found = getattr(self.obj, "device", None)
        self.device = found if isinstance(found, torch.device) else torch.device("cpu")
        self.compute_dtype = str(getattr(self.obj, "dtype", "the object's"))
        self.max_length = getattr(self.obj, "max_seq_length", None)
        self.task_metadata = mteb_task(entry) if entry.protocol == MTEB else None
        self.dim = self._vectors(["dimension probe"]).shape[1]

    @classmethod
    def config_for(cls, entry: ModelEntry, columns: list[str]) -> dict:
        return {}

    def format(self, title: str | None, abstract: str | None, query: bool = False) -> str:
        """The object's input: prefix, then "title abstract" stripped (as sentence-transformers
        models are evaluated by MTEB and BEIR)."""
        entry = self.entry
        prefix = entry.query_form if query and entry.query_form is not None \
            else entry.text_prefix
        return prefix + f"{title or ''} {abstract or ''}".strip()

    def tokenize(self, texts: list[str]) -> list[str]:
        """The texts themselves: an object tokenizes what it is given."""
        return texts

    def _call(self, texts: list[str], query: bool) -> Any:
        """The object's encode of `texts`: with the texts themselves, or as MTEB calls it
        (one DataLoader of their batch, the task's metadata, the prompt type of papers
        searched for or of queries)."""
        if self.task_metadata is None:
            return self.obj.encode(texts)
        from datasets import Dataset
        from mteb.types import PromptType
        from torch.utils.data import DataLoader

        metadata = self.task_metadata
        return self.obj.encode(
            DataLoader(Dataset.from_dict({"text": texts}), batch_size=len(texts)),
            task_metadata=metadata, hf_split=metadata.eval_splits[0],
            hf_subset=(metadata.hf_subsets or ["default"])[0],
            prompt_type=PromptType.query if query else PromptType.document,
            batch_size=len(texts), show_progress_bar=False)

    def _vectors(self, texts: list[str], query: bool = False) -> np.ndarray:
        """The object's vectors of `texts` (query papers' with `query`) as float32, checked."""
        name = self.entry.name
        try:
            out = self._call(texts, query)
            if hasattr(out, "detach"):  # a torch tensor
                out = out.detach().cpu().float().numpy()
            vectors = np.asarray(out, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InputError(f"MODEL {name}: its encode(texts) gave no array of numbers "
                             f"({type(exc).__name__}: {exc}): it must return one vector per "
                             "text") from None
        if vectors.ndim != 2 or vectors.shape[0] != len(texts) or not vectors.shape[1]:
            raise InputError(f"MODEL {name}: encode() of {len(texts)} texts returned shape "
                             f"{vectors.shape}: it must return ({len(texts)}, dimension)")
        if hasattr(self, "dim") and vectors.shape[1] != self.dim:
            raise InputError(f"MODEL {name}: encode() returned vectors of {vectors.shape[1]} "
                             f"dimensions after {self.dim}: it must return one dimension")
        if not np.isfinite(vectors).all():
            bad = int((~np.isfinite(vectors)).any(axis=1).sum())
            raise InputError(f"MODEL {name}: encode() returned {bad} vectors with NaN or "
                             "infinite values: fix the model (nothing was stored)")
        return vectors

    def encode_ids(self, texts: list[str], token_budget: int | None = None,
                   max_batch: int | None = None, progress: bool | Progress = True,
                   query: bool = False) -> tuple[np.ndarray, int]:
        """Vectors of `texts` in their order (query papers' with `query`), `batch_size`
        texts per encode call, each advancing the progress lines; and the number of tokens
        encoded (0: an object's tokens are not counted)."""
        size = self.entry.batch_size  # type: ignore[attr-defined]
        bar = progress if isinstance(progress, Progress) else Progress(
            len(texts), "embed", "papers", show=progress)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for lo in range(0, len(texts), size):
            out[lo:lo + size] = self._vectors(texts[lo:lo + size], query)
            bar.update(min(size, len(texts) - lo))
        if bar is not progress:
            bar.close()
        return out, 0

    def encode(self, texts: list[str], token_budget: int | None = None,
               max_batch: int | None = None, progress: bool = True) -> tuple[np.ndarray, int]:
        return self.encode_ids(self.tokenize(texts), token_budget, max_batch, progress)

    def encode_queries(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """Vectors of query papers' texts (query_vectors.encode_texts): an MTEB object's with the
        query prompt type."""
        return self.encode_ids(self.tokenize(texts), query=True)


def mteb_task(entry: Encoder) -> Any:
    """The metadata of the MTEB task an MTEB object is given (its prompts are chosen by the
    task's name and type); an unknown task refused in one line."""
    try:
        import mteb
    except ImportError:
        raise InputError(f"MODEL {entry.name}: an MTEB-protocol object needs the mteb package "
                         "(pip install mteb)") from None
    try:
        return mteb.get_task(entry.task).metadata
    except KeyError:
        raise InputError(f"Encoder {entry.name}: task={entry.task!r} is no MTEB task: give "
                         f"one of mteb.get_tasks() (default {MTEB_TASK})") from None


def object_repair(corpus: str, name: str, pool: str | None = None, variant: str = "full"
                  ) -> Repair:
    """What makes the store, or a run and its evaluation, of a model make has no name for (a
    pipeline.Encoder, a ModelEntry of the user's) again: only the user holds the model, so
    no make target can. The Python calls, with that model (the store: each pool searched
    again embeds what it lacks); the names are shown as Python literals."""
    where = repr(pool) if pool else "<each pool>"
    query = f", variant={variant!r}" if variant != "full" else ""
    model = f"<the pipeline.Encoder or ModelEntry named {name!r}>"
    calls = f"pipeline.search(<data>, {corpus!r}, {where}, {model}{query})"
    if pool:
        calls += f", then pipeline.evaluate(<data>, {corpus!r}, {where}, <that model>)"
    return Repair("", corpus, name, note=f"in Python, with the model that made it: {calls}; "
                  f"make has no model {name!r} to do it")
