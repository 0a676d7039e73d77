"""Multi-vector encoders (ASPIRE, docs/encoders.md): one vector per sentence, papers scored by their
best sentence pair.

ts-ASPIRE (Mysore et al.; MDCR §4) represents a paper by contextual sentence embeddings: the
title is sentence 0, then the abstract's sentences; the whole paper is encoded as ONE sequence
(`title + sep_token + abstract`, as every encoder of docs/encoders.md reads it) and a sentence's
vector is the mean of its tokens' states. MDCR "mean-pooled token embeddings across all layers
for each sentence": here a token's state is the mean of the hidden states of all transformer
layers (`output_hidden_states`, `hidden_states[1:]`: the embedding layer's output is left out,
it is not contextual), then the sentence's tokens are averaged. (ASPIRE's own example code uses
the last layer only; the layer choice is recorded in the store's config.) Tokens are assigned
to sentences through the fast tokenizer's offset mapping; special tokens (CLS, SEP, padding,
the separator between title and abstract) belong to no sentence.

A paper's score for a query paper is the maximum over (query sentence, candidate sentence)
pairs of the entry's similarity, computed exactly (`pipeline.retrieval.dense.maxsim_search`).
"""

from __future__ import annotations

import logging
import re
from typing import NamedTuple

import numpy as np
import torch

from pipeline.core.logs import Progress
from pipeline.encoding.encoders import MAX_BATCH, Encoder, batch_of, default_budget
from pipeline.encoding.store import id_array

log = logging.getLogger(__name__)

# Written into the store's config: a store made with other settings is refused, not mixed.
STORE_CONFIG = {
    "unit": "sentence (0 = title, then the abstract's sentences; pipeline.encoding.multivector)",
    "splitter": "regex-v1",
    "pooling": "mean over all transformer layers (hidden_states[1:]), then over the "
               "sentence's tokens",
    "truncation": "sentences cut by max_length are dropped (the first kept partially if none "
                  "fits)",
}

# A sentence ends at . ! or ? (closing quotes or brackets may follow) when whitespace and an
# uppercase letter, a digit or an opening quote or bracket come next.
_BOUNDARY = re.compile(r"(\S*?)[.!?]+[\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[]?[A-Z0-9])")
# Words whose final period does not end a sentence ("e.g.", "et al.", "Fig.", "vs."), compared
# lowercased and without the period; "etc." is not among them (it often ends a sentence).
ABBREVIATIONS = frozenset(
    "al approx ca cf co corp dept dr eq eqs fig figs inc jr ltd mr mrs ms no nos pp prof ref "
    "refs resp sec sect sp spp sr st subsp tab univ var viz vol vs".split())
_DOTTED = re.compile(r"[A-Za-z](\.[A-Za-z])+")  # e.g, i.e, U.S: letters with inner periods


def _is_abbreviation(word: str) -> bool:
    word = word.lstrip("\"'([\u201c\u2018")
    return (word.lower() in ABBREVIATIONS or _DOTTED.fullmatch(word) is not None
            or (len(word) == 1 and word.isalpha()))  # initials: "J. Smith", "E. coli"


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the sentences of `text`, without surrounding whitespace.

    A simple, documented regex splitter (ASPIRE used a full NLP pipeline): a boundary is `.`,
    `!` or `?` (plus closing quotes/brackets) followed by whitespace and a capital letter, digit
    or opening quote/bracket; not after an abbreviation (ABBREVIATIONS, dotted words such as
    "e.g." or "U.S.", single-letter initials). Decimals ("0.05") never split (no whitespace).
    """
    spans, start = [], 0
    for match in _BOUNDARY.finditer(text):
        if _is_abbreviation(match.group(1)):  # the word the period ends
            continue
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    out = []
    for lo, hi in spans:
        piece = text[lo:hi]
        lo, hi = lo + len(piece) - len(piece.lstrip()), hi - (len(piece) - len(piece.rstrip()))
        if hi > lo:
            out.append((lo, hi))
    return out


class PaperText(NamedTuple):
    """The model input of one paper and the character span of each of its sentences."""

    text: str
    spans: list[tuple[int, int]]  # sentence i = text[spans[i][0]:spans[i][1]]; 0 is the title


def paper_text(title: str | None, abstract: str | None, sep: str, prefix: str = ""
               ) -> PaperText:
    """`prefix + title + sep + abstract` (docs/encoders.md) with the title as sentence 0 (whatever
    periods it holds; an empty title keeps index 0, without tokens) and the abstract's
    sentences (split_sentences) numbered 1, 2, ..."""
    title, abstract = title or "", abstract or ""
    head = len(prefix)
    stripped = title.strip()
    lo = head + (title.find(stripped) if stripped else 0)
    spans = [(lo, lo + len(stripped))]
    body = head + len(title) + len(sep)
    spans += [(body + a, body + b) for a, b in split_sentences(abstract)]
    return PaperText(f"{prefix}{title}{sep}{abstract}", spans)


def token_sentences(offsets: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """Sentence index of each token (-1: none), from the fast tokenizer's offset mapping
    (`offsets`: (n, 2) character [start, end) per token). A token belongs to the sentence that
    holds its last character; tokens with an empty span (CLS, SEP, padding) and tokens outside
    every sentence (the title/abstract separator, a prefix) get -1."""
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    labels = np.full(len(offsets), -1, dtype=np.int32)
    if not spans or not len(offsets):
        return labels
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    ends = np.array([e for _, e in spans], dtype=np.int64)
    last = offsets[:, 1] - 1
    which = np.searchsorted(starts, last, side="right") - 1
    inside = (offsets[:, 1] > offsets[:, 0]) & (which >= 0)
    inside &= last < ends[np.clip(which, 0, None)]
    labels[inside] = which[inside]
    return labels


class TokenizedPaper(NamedTuple):
    """Token ids as the model reads them and the sentence index of each (-1: none)."""

    ids: list[int]
    sentence: np.ndarray
    truncated: int  # sentences with tokens that were dropped because of max_length


def fit_paper(ids: list[int], offsets: np.ndarray, special: np.ndarray,
              spans: list[tuple[int, int]], max_length: int) -> TokenizedPaper:
    """Truncate one untruncated encoding to `max_length` as the tokenizer does (content cut at
    the end, the trailing special tokens kept) and drop the sentences that lost tokens. The
    first sentence with tokens is kept, partially, when no sentence fits whole; a paper with
    no token in any sentence keeps every non-special token as sentence 0 (one row at least)."""
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    labels = token_sentences(offsets, spans)
    template = (np.asarray(special) == 1) & (offsets[:, 0] == offsets[:, 1])
    truncated = 0
    if len(ids) > max_length:
        tail = len(template) - len(np.trim_zeros((~template).astype(np.int8), "b"))
        keep = np.r_[0 : max_length - tail, len(ids) - tail : len(ids)]
        cut = labels[max_length - tail : len(ids) - tail]
        dropped = np.unique(cut[cut >= 0])
        kept = labels[keep]
        survivors = np.setdiff1d(kept[kept >= 0], dropped)
        if not len(survivors) and (kept >= 0).any():
            dropped = dropped[dropped != kept[kept >= 0].min()]
        truncated = len(dropped)
        ids, labels, template = [ids[i] for i in keep], kept, template[keep]
        labels[np.isin(labels, dropped)] = -1
    if not (labels >= 0).any():
        labels[~template if (~template).any() else slice(None)] = 0
    return TokenizedPaper(list(ids), labels, truncated)


class SentenceVectors(NamedTuple):
    """Sentence vectors of papers given in some order: rows sorted by (paper, sentence)."""

    paper: np.ndarray  # index of the row's paper in the input order
    sentence: np.ndarray  # int16 sentence index (0 = title)
    vectors: np.ndarray  # float32 (rows, dim)
    truncated: int

    def part(self, ids: np.ndarray) -> tuple[np.ndarray, dict, np.ndarray, dict]:
        """Store columns for papers `ids` (the input order; int64 or string ids): row ids, the
        extra `sentence` column, the vectors and the part's counts (embed.py writes them as a
        part)."""
        return (id_array(ids)[self.paper], {"sentence": self.sentence},
                self.vectors, {"papers": len(ids), "truncated_sentences": self.truncated})


class SentenceEncoder(Encoder):
    """An Encoder (same loading: model_source, hub_offline, half_dtype on a GPU) for
    multi-vector entries: `format`, `tokenize` and `encode_ids` work on sentences, so the
    embed stage drives it as it drives a dense Encoder."""

    kinds = ("multi-vector",)
    store_config = {"multi_vector": STORE_CONFIG}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.counts = {"sentences": 0, "truncated_sentences": 0}

    def format(self, title: str | None, abstract: str | None) -> PaperText:  # type: ignore[override]
        return paper_text(title, abstract, self.tokenizer.sep_token or " ",
                          self.entry.text_prefix)

    def tokenize(self, papers: list[PaperText]) -> list[TokenizedPaper]:  # type: ignore[override]
        """Whole papers tokenized with offsets, then truncated here (fit_paper), so the ids
        equal those of the dense path and truncated sentences are known."""
        if not papers:
            return []
        enc = self.tokenizer([p.text for p in papers], return_offsets_mapping=True,
                             return_special_tokens_mask=True, return_attention_mask=False,
                             return_token_type_ids=False, verbose=False)
        return [fit_paper(ids, offsets, special, paper.spans, self.max_length)
                for paper, ids, offsets, special in zip(
                    papers, enc["input_ids"], enc["offset_mapping"], enc["special_tokens_mask"],
                    strict=True)]

    @torch.inference_mode()
    def encode_ids(self, papers: list[TokenizedPaper], token_budget: int | None = None,  # type: ignore[override]
                   max_batch: int = MAX_BATCH, progress: bool | Progress = True
                   ) -> tuple[SentenceVectors, int]:
        """Sentence vectors of tokenized papers and the number of tokens encoded. Batches are
        packed by a token budget after sorting by length (batch_of); on CUDA out-of-memory
        the budget halves and the batch is tried again."""
        budget = token_budget or default_budget(self.device)
        ids = [p.ids for p in papers]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        todo = np.argsort(-lengths, kind="stable")
        bar = progress if isinstance(progress, Progress) else self.progress_bar(len(ids),
                                                                                 progress)
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        while len(todo):
            idx = batch_of(todo, lengths, budget, max_batch, self.one_length)
            try:
                found.append(self._sentences(self._tensors(ids, idx),
                                             [papers[i].sentence for i in idx], idx))
            except torch.OutOfMemoryError:
                if len(idx) == 1:
                    raise
                torch.cuda.empty_cache()
                budget = max(budget // 2, int(lengths[idx[0]]))
                log.warning(f"[embed] out of GPU memory: token budget now {budget}")
                continue
            todo = todo[len(idx):]
            bar.update(len(idx))
        if bar is not progress:
            bar.close()
        paper = np.concatenate([f[0] for f in found]) if found else np.empty(0, np.int64)
        sentence = (np.concatenate([f[1] for f in found]) if found
                    else np.empty(0, np.int16))
        vectors = (np.concatenate([f[2] for f in found]) if found
                   else np.empty((0, self.dim), np.float32))
        order = np.lexsort((sentence, paper))
        truncated = sum(p.truncated for p in papers)
        self.counts["sentences"] += len(order)
        self.counts["truncated_sentences"] += truncated
        return (SentenceVectors(paper[order], sentence[order], vectors[order], truncated),
                int(lengths.sum()))

    def _sentences(self, batch: dict[str, torch.Tensor], labels: list[np.ndarray],
                   idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(paper index, sentence index, vector) of every sentence of one batch: token states
        averaged over the transformer layers, then over the sentence's tokens."""
        layers = self.model(**batch, output_hidden_states=True).hidden_states[1:]
        states = layers[0].float()
        for layer in layers[1:]:
            states = states + layer.float()
        states = states / len(layers)
        rows, longest = batch["input_ids"].shape
        segment = np.full((rows, longest), -1, dtype=np.int64)
        paper, sentence, base = [], [], 0
        for row, lab in enumerate(labels):
            present = np.unique(lab[lab >= 0])
            segment[row, : len(lab)] = np.where(lab >= 0, base + np.searchsorted(present, lab),
                                                -1)
            paper.append(np.full(len(present), idx[row], dtype=np.int64))
            sentence.append(present.astype(np.int16))
            base += len(present)
        seg = torch.from_numpy(segment).to(self.device).view(-1)
        keep = seg >= 0
        flat = states.reshape(-1, states.shape[-1])[keep]
        sums = torch.zeros((base, flat.shape[1]), dtype=torch.float32, device=self.device)
        sums.index_add_(0, seg[keep], flat)
        counts = torch.bincount(seg[keep], minlength=base).clamp(min=1)
        vectors = sums / counts[:, None].to(sums.dtype)
        if self.entry.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return np.concatenate(paper), np.concatenate(sentence), vectors.cpu().numpy()


