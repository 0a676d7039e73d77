"""Pair scorers for reranked runs (pipeline/retrieval/rerank.py): cross-encoders (kind
"reranker"), a (query paper, candidate paper) pair scored as sentence-transformers'
`CrossEncoder` scores it, and decoder rerankers (kind "decoder-reranker").

The folder is loaded by sentence-transformers itself (`CrossEncoder(folder)`: its classifier
head, its max_length, its activation: Sigmoid for a one-label model unless its configuration
names another), and each pair's score is what `CrossEncoder.predict` gives for it. The pairs
go to `predict` longest first, a chunk per progress line, so a chunk holds pairs of like
lengths (`predict` sorts a chunk's pairs by length itself): a batch pads little. A paper is
its title and abstract as the entry's `join` says (docs/encoders.md, "Input"), the query
paper first. A model of more than one label (a classifier of classes, not a relevance score)
is refused in one line. Decoder rerankers: DecoderScorer below.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pipeline.core.errors import InputError, first_line
from pipeline.core.logs import Progress
from pipeline.encoding.encoders import (
    LOAD_ERRORS,
    hub_offline,
    join_text,
    load_advice,
    model_dtype,
    model_source,
    pick_device,
)
from pipeline.encoding.families import check_source
from pipeline.encoding.stmodels import ST_SETUP
from pipeline.models import ModelEntry

log = logging.getLogger(__name__)

CROSS_BATCH = 32  # pairs per forward pass: CrossEncoder.predict's default


def loaded(entry: ModelEntry, model_path: str | Path | None,
           load: Callable[[str, bool], None]) -> None:
    """`load(source, offline)` of `entry`'s weights (MODEL_PATH, else its hub id) after the
    family check (check_source), a loader's failure one line naming the model and the fix."""
    source = model_source(entry, model_path)
    offline = hub_offline(source, entry)
    try:
        check_source(entry, source, offline)
        load(source, offline)
    except LOAD_ERRORS as exc:
        raise InputError(f"cannot load MODEL {entry.name} from {source} "
                         f"({first_line(exc)}): {load_advice(exc, source)}") from None


class CrossScorer:
    """A CrossEncoder folder, loaded once; `score` gives each pair's relevance score."""

    def __init__(self, entry: ModelEntry, model_path: str | Path | None = None,
                 device: str | None = None, batch_size: int = CROSS_BATCH):
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise InputError(ST_SETUP) from None
        self.entry, self.batch_size = entry, batch_size
        self.device = pick_device(device)
        dtype = model_dtype(entry, self.device)

        def load(source: str, offline: bool) -> None:
            self.model = CrossEncoder(source, device=str(self.device), local_files_only=offline)

        loaded(entry, model_path, load)
        if self.model.num_labels != 1:
            raise InputError(f"MODEL {entry.name}: its CrossEncoder has {self.model.num_labels} "
                             "labels, a classifier of classes; a reranker gives one score per "
                             "pair (num_labels 1)")
        self.model.to(dtype).eval()
        activation = type(self.model.activation_fn).__name__
        log.info(f"[rerank] MODEL {entry.name}: CrossEncoder, max_length "
                 f"{self.model.max_seq_length}, activation {activation}")

    def text(self, title: str | None, abstract: str | None) -> str:
        return join_text(title, abstract, self.model.tokenizer.sep_token or "",
                         self.entry.join)

    def score(self, queries: dict[int, str], docs: dict[int, str],
              pairs: list[tuple[int, int]]) -> np.ndarray:
        """The score of each (query id, doc id) pair, in `pairs`' order (float32): texts of
        `queries` and `docs` by id, already formatted by `text`."""
        texts = [(queries[q], docs[d]) for q, d in pairs]
        order = np.argsort([len(q) + len(d) for q, d in texts], kind="stable")[::-1]
        out = np.zeros(len(texts), dtype=np.float32)
        step = self.batch_size * 64  # pairs between two progress updates
        with Progress(len(texts), f"[rerank] {self.entry.name}", "pairs") as progress:
            for start in range(0, len(order), step):
                chunk = order[start:start + step]
                out[chunk] = self.model.predict([texts[i] for i in chunk],
                                                batch_size=self.batch_size,
                                                show_progress_bar=False, convert_to_numpy=True)
                progress.update(len(chunk))
        return out


# Qwen3-Reranker's template (its model card's code): the system turn, the user turn holding
# "<Instruct>: ...\n<Query>: ...\n<Document>: ...", then an empty thinking block; the score is
# P("yes") against "no" at the last position
DECODER_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based "
                  "on the Query and the Instruct provided. Note that the answer can only be "
                  "\"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
DECODER_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
# the card leaves the instruction to the task; a query paper and the papers it cites is ours
DECODER_INSTRUCTION = ("Given the title and abstract of a scientific paper, retrieve papers "
                       "that the paper cites")
DECODER_MAX_LENGTH = 8192  # the card's
DECODER_BATCH = 8


class DecoderScorer:
    """A decoder reranker (kind "decoder-reranker": Qwen3-Reranker's way) as its model card's
    code scores a pair: the template above around the instruction, the query paper and the
    candidate, the pair's tokens cut to the length the template leaves (longest first), the
    prefix and suffix tokens around them, padded on the left; the score is the softmax of the
    last position's "no" and "yes" logits, its "yes" share. Batches go longest first, each
    padded on the left with its attention mask, so a pair's score does not depend on them."""

    def __init__(self, entry: ModelEntry, model_path: str | Path | None = None,
                 device: str | None = None, batch_size: int = DECODER_BATCH):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.entry, self.batch_size = entry, batch_size
        self.device = pick_device(device)
        dtype = model_dtype(entry, self.device)

        def load(source: str, offline: bool) -> None:
            self.tokenizer = AutoTokenizer.from_pretrained(source, padding_side="left",
                                                           local_files_only=offline)
            self.model = AutoModelForCausalLM.from_pretrained(
                source, dtype=dtype, local_files_only=offline).to(self.device).eval()

        loaded(entry, model_path, load)
        tokenizer = self.tokenizer
        self.yes, self.no = (tokenizer.convert_tokens_to_ids(word) for word in ("yes", "no"))
        if tokenizer.unk_token_id in (self.yes, self.no) or None in (self.yes, self.no):
            raise InputError(f"MODEL {entry.name}: its tokenizer has no single token 'yes' or "
                             "'no', which a decoder reranker's score reads: give a "
                             "Qwen3-Reranker-style folder")
        if tokenizer.pad_token_id is None:
            raise InputError(f"MODEL {entry.name}: its tokenizer has no padding token")
        self.prefix = tokenizer.encode(DECODER_PREFIX, add_special_tokens=False)
        self.suffix = tokenizer.encode(DECODER_SUFFIX, add_special_tokens=False)
        log.info(f"[rerank] MODEL {entry.name}: decoder reranker, yes/no ids {self.yes}/"
                 f"{self.no}, instruction {DECODER_INSTRUCTION!r}")

    def text(self, title: str | None, abstract: str | None) -> str:
        return join_text(title, abstract, "", "space")

    def prompt(self, query: str, doc: str) -> str:
        return f"<Instruct>: {DECODER_INSTRUCTION}\n<Query>: {query}\n<Document>: {doc}"

    def score(self, queries: dict[int, str], docs: dict[int, str],
              pairs: list[tuple[int, int]]) -> np.ndarray:
        """P(yes) of each (query id, doc id) pair, in `pairs`' order (float32)."""
        import torch

        texts = [self.prompt(queries[q], docs[d]) for q, d in pairs]
        order = np.argsort([len(t) for t in texts], kind="stable")[::-1]
        room = DECODER_MAX_LENGTH - len(self.prefix) - len(self.suffix)
        out = np.zeros(len(texts), dtype=np.float32)
        with Progress(len(texts), f"[rerank] {self.entry.name}", "pairs") as progress, \
                torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                ids = self.tokenizer([texts[i] for i in chunk], padding=False,
                                     truncation="longest_first", max_length=room,
                                     return_attention_mask=False)["input_ids"]
                batch = self.tokenizer.pad(
                    {"input_ids": [self.prefix + row + self.suffix for row in ids]},
                    padding=True, return_tensors="pt").to(self.device)
                last = self.model(**batch).logits[:, -1, :].float()
                pair = torch.stack([last[:, self.no], last[:, self.yes]], dim=1)
                out[chunk] = torch.log_softmax(pair, dim=1)[:, 1].exp().cpu().numpy()
                progress.update(len(chunk))
        return out
