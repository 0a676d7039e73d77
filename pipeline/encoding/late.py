"""Late-interaction encoders (ColBERT) as PyLate computes them: a vector per token.

PyLate (lightonai/pylate, `pylate.models.ColBERT`, version 1.6 followed) encodes a text as:

- the text (after the folder's default prompt, if it names one), stripped, lowercased where the
  Transformer module says `do_lower_case`, tokenized with truncation to the length (query_length
  or document_length) minus one; then the marker token (query_prefix, e.g. `[unused0]` or
  `[Q] `; document_prefix) inserted right after [CLS], so a sequence is at most that length;
- a query is padded with [MASK] to exactly query_length (query expansion, do_query_expansion);
  the [MASK] positions are not attended to unless attend_to_expansion_tokens, but every one of
  the query_length outputs is a query vector; without expansion a query keeps its own tokens;
- the encoder's last hidden states, through the folder's linear projection (PyLate's Dense:
  `1_Dense`, no activation), each token vector L2-normalised;
- a document keeps the vectors of its attended tokens that are not in the skiplist
  (skiplist_words, by default Python's string.punctuation, each word as the tokenizer's
  convert_tokens_to_ids reads it: a word outside the vocabulary is the unknown token, whose
  positions are skipped too, as in PyLate).

A query scores a document by MaxSim: the sum over the query's vectors of the best dot product
with any of the document's (pipeline/retrieval/late.py). The settings are read from the folder
as PyLate reads them (config_sentence_transformers.json; a Stanford ColBERT checkpoint's
artifact.metadata, its projection the checkpoint's `linear` weights), with PyLate's defaults
where it says nothing, and recorded in the store's config (`settings`).

Documents run on the project's embedding engine (encoders.py: token-budget batches, the CPU's
side-by-side threads, the GPU loop); a batch's output carries a keep flag per position
(`_forward`), and a paper's kept vectors are stored a row each, with the token's position, in
the multi-vector store's shape (`TokenVectors.part`). Queries are few and of one length: they
are encoded in fixed-size batches of query_length (`encode_queries`).
"""

from __future__ import annotations

import logging
import string
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from pipeline.core.errors import InputError
from pipeline.core.logs import Progress
from pipeline.encoding.encoders import MAX_BATCH, Encoder, join_text
from pipeline.encoding.families import folder_json
from pipeline.encoding.store import id_array
from pipeline.layout import HF_CONFIG, ST_CONFIG, ST_MODULE_CONFIG, ST_MODULES, STANFORD_METADATA
from pipeline.models import ModelEntry

log = logging.getLogger(__name__)

LATE_KIND = "late-interaction"
TOKEN = "token"  # a late-interaction store's column: the token's position in its input
QUERY_BATCH = 64  # queries per batch (all of query_length tokens)
IDENTITY = "torch.nn.modules.linear.Identity"  # the projection's activation PyLate saves


@dataclass(frozen=True)
class LateSettings:
    """What PyLate reads from a folder (and its defaults where the folder says nothing): each
    changes a token vector, so the store records them."""

    query_prefix: str = "[Q] "
    document_prefix: str = "[D] "
    query_length: int = 32
    document_length: int = 180
    do_query_expansion: bool = True
    attend_to_expansion_tokens: bool = False
    skiplist_words: list[str] = field(default_factory=lambda: list(string.punctuation))
    prompt: str = ""  # the default prompt (default_prompt_name), both sides
    do_lower_case: bool = False
    projection: str = "1_Dense"  # the folder holding the linear projection ("": Stanford's)

    @classmethod
    def of_folder(cls, folder: Path) -> LateSettings:
        """A PyLate folder's settings (modules.json and config_sentence_transformers.json), or
        a Stanford ColBERT checkpoint's (artifact.metadata, as PyLate converts one)."""
        config = folder_json(folder / ST_CONFIG) or {}
        modules = folder_json(folder / ST_MODULES)
        if modules is None:  # a Stanford checkpoint: markers [unused0]/[unused1]
            meta = folder_json(folder / STANFORD_METADATA) or {}
            return cls(query_prefix=meta.get("query_token_id", "[unused0]"),
                       document_prefix=meta.get("doc_token_id", "[unused1]"),
                       query_length=int(meta.get("query_maxlen", 32)),
                       document_length=int(meta.get("doc_maxlen", 180)),
                       attend_to_expansion_tokens=bool(meta.get("attend_to_mask_tokens",
                                                                False)),
                       projection="")
        types = [str(m.get("type", "")) for m in modules]
        if len(types) != 2 or not types[0].endswith("Transformer") or \
                not types[1].endswith("Dense") or modules[0].get("path", "") != "":
            raise InputError(f"{folder}: its modules are {' + '.join(types)}, not PyLate's "
                             "Transformer + Dense, which late interaction runs: give a PyLate "
                             "ColBERT folder (docs/encoders.md)")
        bert = folder_json(folder / ST_MODULE_CONFIG) or {}
        given = {key: config[key] for key in (
            "query_prefix", "document_prefix", "query_length", "document_length",
            "do_query_expansion", "attend_to_expansion_tokens", "skiplist_words")
            if config.get(key) is not None}
        default = config.get("default_prompt_name")
        prompt = (config.get("prompts") or {}).get(default, "") if default else ""
        settings = cls(**given, prompt=prompt or "",
                       do_lower_case=bool(bert.get("do_lower_case", False)),
                       projection=str(modules[1].get("path", "1_Dense")))
        if not settings.do_query_expansion:  # PyLate: no expansion, nothing to attend to
            settings = cls(**{**asdict(settings), "attend_to_expansion_tokens": False})
        return settings


def projection(folder: Path, settings: LateSettings) -> torch.nn.Linear:
    """The linear projection of token states: a PyLate folder's Dense module (its config and
    weights), or a Stanford checkpoint's `linear` weights (no bias)."""
    from safetensors.torch import load_file

    where = folder / settings.projection
    config = folder_json(where / HF_CONFIG) if settings.projection else None
    weights_file = next((where / name for name in ("model.safetensors", "pytorch_model.bin")
                         if (where / name).is_file()), None)
    if weights_file is None:
        raise InputError(f"{where}: no model.safetensors or pytorch_model.bin holding the "
                         "ColBERT projection; download the model's folder again")
    state = (load_file(str(weights_file)) if weights_file.suffix == ".safetensors"
             else torch.load(weights_file, map_location="cpu", weights_only=True))
    if isinstance(config, dict):
        if config.get("activation_function", IDENTITY) != IDENTITY or config.get("use_residual"):
            raise InputError(f"{where}: a projection with an activation or a residual, which "
                             "PyLate's ColBERT models do not have: give a PyLate ColBERT folder")
        weight = state["linear.weight"]
        bias = state.get("linear.bias") if config.get("bias", True) else None
    else:
        weight, bias = state["linear.weight"], None
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if bias is not None:
            linear.bias.copy_(bias)
    return linear


def projection_dim(folder: Path, settings: LateSettings) -> int:
    """The token vectors' width, read without loading weights: a PyLate Dense module's
    out_features, a Stanford checkpoint's `dim` (its artifact.metadata; ColBERT's 128)."""
    if settings.projection:
        config = folder_json(folder / settings.projection / HF_CONFIG)
        if isinstance(config, dict) and "out_features" in config:
            return int(config["out_features"])
    meta = folder_json(folder / STANFORD_METADATA) or {}
    return int(meta.get("dim", 128))


class TokenVectors:
    """Token vectors of papers given in some order, filled a batch of rows at a time
    (`vectors[idx] = rows`, rows (batch, width, dim + 1) whose last channel flags the kept
    positions, as Encoder.encode_ids fills a matrix): per paper its kept vectors (float32) and
    their positions in its input."""

    def __init__(self, papers: int, dim: int):
        self.dim = dim
        self._rows: list[tuple[np.ndarray, np.ndarray] | None] = [None] * papers

    def __len__(self) -> int:
        return len(self._rows)

    def __setitem__(self, idx: np.ndarray, rows: np.ndarray) -> None:
        for i, row in zip(idx, rows, strict=True):
            keep = np.flatnonzero(row[:, -1] > 0)
            self._rows[int(i)] = (keep.astype(np.int16), row[keep, :-1].astype(np.float32))

    def paper(self, i: int) -> np.ndarray:
        """Paper i's token vectors (tokens, dim)."""
        row = self._rows[i]
        if row is None:
            raise ValueError("a row of TokenVectors was never set")
        return row[1]

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(vectors, offsets, positions): paper i's vectors are vectors[offsets[i]:offsets[i+1]]."""
        rows = [self._rows[i] for i in range(len(self))]
        if any(row is None for row in rows):
            raise ValueError("a row of TokenVectors was never set")
        lengths = [len(r[0]) for r in rows]  # type: ignore[index]
        offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        if not rows:
            return np.empty((0, self.dim), np.float32), offsets, np.empty(0, np.int16)
        return (np.concatenate([r[1] for r in rows]),  # type: ignore[index]
                offsets, np.concatenate([r[0] for r in rows]))  # type: ignore[index]

    @classmethod
    def joined(cls, parts: list[TokenVectors]) -> TokenVectors:
        """Consecutive chunks' vectors as one (Encoder.encode's chunks on a GPU)."""
        out = cls(0, parts[0].dim)
        out._rows = [row for part in parts for row in part._rows]
        return out

    def as_array(self) -> np.ndarray:
        """The vectors as one float32 array (rows, 1 + dim): the paper's index (exact below
        2**24 papers), then its vector; as the query cache keeps them (from_array)."""
        vectors, offsets, _ = self.flat()
        index = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets)).astype(np.float32)
        return np.hstack([index[:, None], vectors]).astype(np.float32)

    @staticmethod
    def from_array(array: np.ndarray, papers: int) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, offsets) of an array as_array made, for `papers` papers."""
        counts = np.bincount(array[:, 0].astype(np.int64), minlength=papers)
        return (np.ascontiguousarray(array[:, 1:], dtype=np.float32),
                np.r_[0, np.cumsum(counts)].astype(np.int64))

    def part(self, ids: np.ndarray, dtype: str) -> tuple[np.ndarray, dict, np.ndarray, dict]:
        """Store columns for papers `ids` (the input order): row ids, the `token` column (each
        vector's position in its input), the vectors (writer.py stores them in `dtype`) and
        the part's counts."""
        vectors, offsets, positions = self.flat()
        return (np.repeat(id_array(ids), np.diff(offsets)), {TOKEN: positions}, vectors,
                {"papers": len(ids), "tokens": int(len(vectors))})


class LateEncoder(Encoder):
    """A ColBERT model (a PyLate folder or a Stanford checkpoint) run as PyLate runs it (see
    the module's docstring): the engine batches the documents; queries go in fixed batches."""

    kinds = (LATE_KIND,)

    def __init__(self, entry: ModelEntry, model_path: str | Path | None = None,
                 device: str | None = None):
        super().__init__(entry, model_path, device)
        folder = self._folder(model_path)
        self.late = LateSettings.of_folder(folder)
        late, tokenizer = self.late, self.tokenizer
        self.linear = projection(folder, late).to(self.model.dtype).to(self.device).eval()
        if self.linear.in_features != self.model.config.hidden_size:
            raise InputError(f"MODEL {entry.name}: its projection reads "
                             f"{self.linear.in_features} features, its encoder gives "
                             f"{self.model.config.hidden_size}: the folder is damaged")
        self.dim = int(self.linear.out_features)
        self.max_length = late.document_length
        self.marker = {}
        for side, prefix in (("query", late.query_prefix), ("document", late.document_prefix)):
            token = tokenizer.convert_tokens_to_ids(prefix) if prefix else None
            if token is not None and token == tokenizer.unk_token_id and \
                    prefix != tokenizer.unk_token:
                raise InputError(f"MODEL {entry.name}: its {side} marker {prefix!r} is not a "
                                 "token of its tokenizer: the folder is damaged")
            self.marker[side] = token
        self.mask_id = tokenizer.mask_token_id if tokenizer.mask_token_id is not None \
            else tokenizer.eos_token_id
        if late.do_query_expansion and self.mask_id is None:
            raise InputError(f"MODEL {entry.name}: query expansion pads with [MASK] (or the end "
                             "of sequence token), and its tokenizer has neither")
        self.skiplist = torch.tensor(sorted({tokenizer.convert_tokens_to_ids(w)
                                             for w in late.skiplist_words}),
                                     dtype=torch.long, device=self.device)

    def _folder(self, model_path: str | Path | None) -> Path:
        from pipeline.encoding.encoders import hub_offline, model_source

        source = model_source(self.entry, model_path)
        if Path(source).is_dir():
            return Path(source)
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, local_files_only=hub_offline(source,
                                                                           self.entry)))

    def settings(self) -> dict:
        """The folder's late-interaction settings (LateSettings), each of which changes a
        token vector, and the projection's width."""
        return {"late_interaction": {**asdict(self.late), "dim": self.dim}}

    def format(self, title: str | None, abstract: str | None, query: bool = False) -> str:
        """`"{title} {abstract}"` after the folder's default prompt (PyLate's input), stripped
        and lowercased as the folder's Transformer module says. Queries and documents differ
        by their marker and length, given when they are tokenized."""
        text = (self.late.prompt + join_text(title, abstract, " ", "space")).strip()
        return text.lower() if self.late.do_lower_case else text

    def _ids(self, texts: list[str], side: str) -> list[list[int]]:
        """Token ids: truncated to the side's length less the marker, the marker after [CLS]."""
        length = self.late.query_length if side == "query" else self.late.document_length
        marker = self.marker[side]
        ids = self.tokenizer(texts, truncation=True,
                             max_length=length - (marker is not None),
                             return_attention_mask=False, return_token_type_ids=False
                             )["input_ids"]
        return ids if marker is None else [[row[0], marker, *row[1:]] for row in ids]

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Documents' token ids (the embed stage's; queries: encode_queries)."""
        return self._ids(texts, "document")

    def vectors_for(self, papers: int) -> TokenVectors:
        return TokenVectors(papers, self.dim)

    joined = staticmethod(TokenVectors.joined)

    def _states(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Projected token states, float32, each L2-normalised (PyLate's normalisation)."""
        mask = batch["attention_mask"]
        if getattr(self, "mask_4d", False):
            batch = {**batch, "attention_mask": mask[:, None, None, :].bool()}
        hidden = self.model(**batch).last_hidden_state
        return torch.nn.functional.normalize(self.linear(hidden).float(), p=2, dim=-1)

    def _forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """A batch of documents: (rows, width, dim + 1), the normalised vectors and a keep
        flag, attended and not in the skiplist (PyLate's document mask)."""
        keep = batch["attention_mask"].bool() & ~torch.isin(batch["input_ids"], self.skiplist)
        return torch.cat([self._states(batch), keep[..., None].float()], dim=-1)

    @torch.inference_mode()
    def encode_queries(self, texts: list[str], token_budget: int | None = None,
                       max_batch: int = MAX_BATCH, progress: bool | Progress = False
                       ) -> tuple[TokenVectors, int]:
        """Query vectors as PyLate's encode(is_query=True): [MASK]-padded to query_length
        (expansion) and every position kept; without expansion, the query's own tokens."""
        late = self.late
        ids = self._ids(texts, "query")
        out = TokenVectors(len(ids), self.dim)
        width = late.query_length if late.do_query_expansion else max(map(len, ids), default=0)
        pad = self.mask_id if late.do_query_expansion else (self.tokenizer.pad_token_id or 0)
        for lo in range(0, len(ids), QUERY_BATCH):
            rows = ids[lo : lo + QUERY_BATCH]
            input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for r, row in enumerate(rows):
                input_ids[r, : len(row)] = torch.tensor(row)
                mask[r, : len(row)] = 1
            attend = torch.ones_like(mask) if late.attend_to_expansion_tokens else mask
            batch = {"input_ids": input_ids.to(self.device),
                     "attention_mask": attend.to(self.device)}
            keep = torch.ones_like(mask) if late.do_query_expansion else mask
            states = self._states(batch)
            out[np.arange(lo, lo + len(rows))] = torch.cat(
                [states, keep.to(self.device)[..., None].float()], dim=-1).cpu().numpy()
        return out, sum(map(len, ids))


class LateScorer:
    """A late-interaction model as a reranker (make rerank, pipeline/retrieval/rerank.py):
    each (query, doc) pair scored by MaxSim of the query's vectors (encode_queries) with the
    document's (the embed stage's), as PyLate's rerank scores a first stage's candidates; the
    documents are encoded here, only those the pairs name, not read from a store."""

    def __init__(self, entry: ModelEntry, model_path: str | Path | None = None,
                 device: str | None = None):
        self.encoder = LateEncoder(entry, model_path, device)

    def text(self, title: str | None, abstract: str | None) -> str:
        return self.encoder.format(title, abstract)

    def score(self, queries: dict[int, str], docs: dict[int, str],
              pairs: list[tuple[int, int]]) -> np.ndarray:
        """MaxSim of each (query id, doc id) pair, float32 sums as PyLate's colbert_scores."""
        query_ids, doc_ids = sorted(queries), sorted({d for _, d in pairs})
        query_vectors, _ = self.encoder.encode_queries([queries[q] for q in query_ids])
        doc_vectors, _ = self.encoder.encode_ids(
            self.encoder.tokenize([docs[d] for d in doc_ids]), progress=False)
        q_at = {q: i for i, q in enumerate(query_ids)}
        d_at = {d: i for i, d in enumerate(doc_ids)}
        return np.array([(query_vectors.paper(q_at[q]) @ doc_vectors.paper(d_at[d]).T)
                         .max(axis=1).sum(dtype=np.float32) for q, d in pairs],
                        dtype=np.float32)
