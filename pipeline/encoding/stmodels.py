"""Sentence-transformers models as their own configuration says (`MODEL=st:<org>/<name>`).

The folder's modules (modules.json: the Transformer with its max_seq_length, the Pooling
module's mode, Dense layers, Normalize, ...) are loaded by the sentence-transformers library
itself and run on the batches of the project's embedding engine (pipeline/encoding/encoders.py:
token-budget batching, padding on the tokenizer's side), so a vector is what
`SentenceTransformer(...).encode_document` (candidates) or `.encode_query` (query papers) gives.
Prompts come from config_sentence_transformers.json, chosen as those two methods choose them.
The store records what changes a vector beyond the entry: the folder's identity (a digest of
every file of it, weights and configuration: pipeline/encoding/identity.py), the prompts, the
maximum sequence length (`STEncoder.settings`).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import torch

from pipeline.core.errors import InputError, first_line
from pipeline.encoding.encoders import (
    LOAD_ERRORS,
    Encoder,
    check_prompt_room,
    cpu_pad_step,
    hub_offline,
    join_text,
    load_advice,
    model_dtype,
    model_source,
    pick_device,
)
from pipeline.encoding.families import check_source
from pipeline.glossary import is_prompt_name
from pipeline.models import ST_KIND, ST_QUERY_PROMPT, ModelEntry, unknown_prompt_name

log = logging.getLogger(__name__)

# The prompt names sentence-transformers' encode_query and encode_document look for, in order
QUERY_PROMPTS = (ST_QUERY_PROMPT,)
DOCUMENT_PROMPTS = ("document", "passage", "corpus")
ST_SETUP = ("MODEL=st:... needs the sentence-transformers library: install the project with "
            "its `bench` extra (pip install -e '.[bench]')")


def prompt_of(prompts: dict[str, str], names: tuple[str, ...], default: str | None) -> str:
    """The prompt sentence-transformers prepends for these names: the first of `names` the
    model has, else its default prompt (default_prompt_name), else none."""
    for name in names:
        if name in prompts:
            return prompts[name]
    return prompts.get(default, "") if default else ""


def check_supported(entry: ModelEntry, model) -> None:
    """Refuse a configuration the engine cannot batch as sentence-transformers does: a first
    module other than a Transformer reading text (static embeddings, CLIP, a Router), one run
    for another task than its hidden states (a language model's logits, retrieval heads), or
    one whose query and document lengths differ (ColBERT-style query_length, query
    expansion)."""
    from sentence_transformers.base.modules.transformer import Transformer

    first = model[0]
    problem = ""
    if not isinstance(first, Transformer) or "text" not in first.modality_config:
        problem = f"its first module is a {type(first).__name__}, not a text Transformer"
    else:
        problem = transformer_problem(first, "feature-extraction")
    if problem:
        raise InputError(f"MODEL {entry.name}: {problem}, which MODEL=st: does not run; "
                         "search it as an object: pipeline.Encoder(SentenceTransformer(...), "
                         "name=...) (docs/encoders.md)")


def transformer_problem(first, task: str) -> str:
    """What keeps a text Transformer module from running as the engine batches it: run for
    another task than `task`, or with task-specific lengths (ColBERT-style query_length,
    query expansion); "" where nothing does."""
    if first.transformer_task != task:
        return f"its Transformer's task is {first.transformer_task!r}, not {task}"
    if first.query_length or first.document_length or first.query_expansion:
        return ("its Transformer has task-specific lengths (query_length, document_length "
                "or query_expansion)")
    return ""


def check_similarity(entry: ModelEntry, model) -> None:
    """st: models rank by cosine: refuse one whose configuration scores otherwise unless that
    ranks as cosine does (dot product or Euclidean distance of normalised vectors)."""
    from sentence_transformers.sentence_transformer.modules import Normalize

    named = model.similarity_fn_name
    normalised = isinstance(model[len(model) - 1], Normalize)
    if named != "cosine" and not (normalised and named in ("dot", "euclidean")):
        raise InputError(f"MODEL {entry.name}: its configuration scores by {named} similarity "
                         f"of vectors it does not normalise, and st: models rank by cosine; "
                         "search it as an object: pipeline.Encoder(SentenceTransformer(...), "
                         "name=..., similarity='ip' or 'l2') (docs/encoders.md)")


class STEncoder(Encoder):
    """A sentence-transformers folder run by the embedding engine: the engine tokenizes,
    batches and pads; the model's own modules turn a batch into its vectors."""

    kinds = (ST_KIND,)
    # the sentence-transformers class that loads the folder (sparse.SparseEncoder: SparseEncoder)
    library = "SentenceTransformer"

    def __init__(self, entry: ModelEntry, model_path: str | Path | None = None,
                 device: str | None = None):
        try:
            import sentence_transformers
        except ImportError:
            raise InputError(ST_SETUP) from None
        if entry.kind not in self.kinds:
            raise InputError(f"MODEL {entry.name} is a {entry.kind} model: "
                             f"{type(self).__name__} embeds {' or '.join(self.kinds)} models "
                             "only")
        self.entry = entry
        self.device = pick_device(device)
        self.pad_step = cpu_pad_step(self.device)  # as Encoder: shard-independent vectors
        source = model_source(entry, model_path)
        offline = hub_offline(source, entry)
        dtype = model_dtype(entry, self.device)
        try:
            check_source(entry, source, offline)
            self.model = getattr(sentence_transformers, self.library)(
                source, device=str(self.device), local_files_only=offline)
        except LOAD_ERRORS as exc:
            raise InputError(f"cannot load MODEL {entry.name} from {source} "
                             f"({first_line(exc)}): {load_advice(exc, source)}") from None
        self.check(self.model)
        self.model.to(dtype).eval()
        self.attention = ""
        self.tokenizer = self.model.tokenizer
        self.max_length = int(self.model.max_seq_length)
        self.dim = int(self.model.get_embedding_dimension())
        prompts, default = dict(self.model.prompts), self.model.default_prompt_name
        self.prompts = {"query": prompt_of(prompts, QUERY_PROMPTS, default),
                        "document": prompt_of(prompts, DOCUMENT_PROMPTS, default)}
        self._chosen = self._chosen_prompt()
        if self._chosen is not None:
            check_prompt_room(entry, self.tokenizer, self.max_length, self._chosen)
        self._prompt = self.prompts["document"]  # of the texts last formatted (a batch is one kind)
        log.info(f"[embed] MODEL {entry.name}: {self.model!r}".replace("\n", " "))

    def check(self, model) -> None:
        """Refuse a loaded folder the engine cannot run as its library does (check_supported)
        or that does not rank as the entry says (check_similarity)."""
        check_supported(self.entry, model)
        check_similarity(self.entry, model)

    @property
    def compute_dtype(self) -> str:
        return str(next(self.model.parameters()).dtype)

    def settings(self) -> dict:
        """What the store records besides the entry and the folder's identity (every file of
        it: pipeline/encoding/identity.py): the prompts and the maximum sequence length, as
        the model reads them, each of which changes a vector."""
        return {"prompts": self.prompts, "max_seq_length": self.max_length}

    def _chosen_prompt(self) -> str | None:
        """The user's query prompt (QUERY_PROMPT) as text: one of the configuration's prompt
        names stands for its text; a one-word value that names none is refused (a mistyped
        name), a literal word being written with a trailing space. None: no prompt given."""
        given = self.entry.query_prompt
        if given is None or given not in self.model.prompts and not is_prompt_name(given):
            return given
        if given not in self.model.prompts:
            raise unknown_prompt_name(self.entry, given, self.model.prompts)
        return self.model.prompts[given]

    def query_prompt(self) -> str:
        """The queries' prompt: the user's (QUERY_PROMPT: `_chosen_prompt`), else the
        configuration's query prompt."""
        if self.entry.query_prompt is None:
            self.entry.query_form  # noqa: B018 (refused for a prompt's model known by name only)
            return self.prompts["query"]
        return self._chosen

    def format(self, title: str | None, abstract: str | None, query: bool = False) -> str:
        """`"{title} {abstract}".strip()` after the query prompt (query papers) or the
        document prompt (candidates). The texts encoded together are of one kind, so the
        prompt of the last one formatted is the batch's (its length, `_forward`)."""
        self._prompt = self.query_prompt() if query else self.prompts["document"]
        return self._prompt + join_text(title, abstract, " ", "space")

    @functools.cache  # noqa: B019 (one encoder per stage, two or three prompts)
    def _prompt_length(self, prompt: str) -> int | None:
        """The prompt's tokens, as the Pooling module excludes them (include_prompt false):
        sentence-transformers' count, without a trailing special token."""
        if not prompt:
            return None
        ids = self.tokenizer([prompt], truncation=True, max_length=self.max_length)["input_ids"][0]
        return len(ids) - (ids[-1] in self.tokenizer.all_special_ids)

    def _forward(self, batch: dict[str, torch.Tensor]):
        features = dict(batch)
        if (length := self._prompt_length(self._prompt)) is not None:
            features["prompt_length"] = length
        return self.model(features)["sentence_embedding"].float()  # read back: HostCopy
