"""Multi-vector encoders (ASPIRE, docs/encoders.md): one vector per sentence, papers scored by their
best sentence pair.

ts-ASPIRE (Mysore et al.) as its authors run it (allenai/aspire, examples/ex_aspire_consent.py;
the same procedure in their training batchers): the pieces `title + " [SEP] "`, then each
abstract sentence, are tokenized one by one and concatenated while at most 500 content tokens
are read; the sentence that crosses the limit keeps its first tokens and nothing after it is
read; the whole is wrapped in [CLS] ... [SEP] and encoded as ONE sequence. A sentence's vector is
the mean of the last layer's states over its tokens; the title's piece is read (it is in the
sequence and attends) but is no sentence. MDCR (Medić & Šnajder 2022, §4) "mean-pooled token
embeddings across all layers for each sentence": the entries `*-mdcr` (pooling
`mean-all-layers`) average the transformer layers' states (`hidden_states[1:]`) first, with the
authors' input, title and truncation otherwise (the paper says nothing of those).

Sentences are numbered 1, 2, ... in the abstract's order (a corpus's own split, e.g. CSFCube's,
where it ships one; else split_sentences); a sentence without tokens has no vector but keeps its
number. A paper none of whose sentences has a token in the sequence (no abstract, or a title
that fills the limit) is its title: sentence 0, the title's own tokens (not its [SEP]); the
authors' code refuses such a paper. A paper's score for a query paper is the maximum over
(query sentence, candidate sentence) pairs of the entry's similarity, for ASPIRE minus the L2
distance: exact, `pipeline.retrieval.dense.exact.maxsim_search`.
"""

from __future__ import annotations

import logging
import re
from typing import NamedTuple

import numpy as np
import torch

from pipeline.core.errors import InputError
from pipeline.core.logs import Progress
from pipeline.encoding.encoders import MAX_BATCH, Encoder, batch_of, default_budget
from pipeline.encoding.store import id_array
from pipeline.layout import ABSTRACT_SENTENCES

log = logging.getLogger(__name__)

# How token states become a sentence vector, per `pooling` of a multi-vector entry (in words in
# the store's config, so stores of the two procedures never mix).
POOLINGS = {
    "mean": "mean of the last layer's states over the sentence's tokens (ASPIRE's authors)",
    "mean-all-layers": "mean over all transformer layers (hidden_states[1:], not the "
                       "embeddings), then over the sentence's tokens (MDCR)",
}
SPLITTER = "regex-v2"
OWN_SPLIT = f"the corpus's own ({ABSTRACT_SENTENCES})"  # the splitter a store records then

# Written into the store's config: a store made with other settings is refused, not mixed.
STORE_CONFIG = {
    "unit": "sentence: 1, 2, ... the abstract's sentences (the corpus's own split where "
            f"prefiltered.parquet has {ABSTRACT_SENTENCES}, else the splitter's); 0: the title, "
            "only for a paper with no sentence",
    "input": "[CLS] + tokens(title + ' [SEP] ') + tokens(sentence 1) + tokens(sentence 2) ... "
             "+ [SEP], each piece tokenized alone; the title's tokens are no sentence",
    "splitter": SPLITTER,
    "truncation": "max_length - 2 content tokens (500 for ASPIRE): the sentence crossing the "
                  "limit keeps its first tokens, the rest is left out",
}

# A sentence ends at . ! or ? (ASCII closing quotes or brackets may follow) when whitespace and
# any character come next: the rules that agree best with the scispaCy split ASPIRE was trained
# on, as CSFCube released it (benchmarks/results/sentence_split.md), which ends a sentence after
# "e.g.", "i.e." and "et al." too, and before a lowercase word as well.
_BOUNDARY = re.compile(r"(\S*?)[.!?]+[\"')\]]*(?=\s+\S)")
# Words whose final period ends no sentence there, compared lowercased without the period.
ABBREVIATIONS = frozenset("co corp dr inc jr ltd mr mrs ms prof sr st vs".split())
_UPPER_DOTTED = re.compile(r"[A-Z](\.[A-Z])+")  # U.S, U.K: capitals with inner periods


def _is_abbreviation(word: str) -> bool:
    word = word.lstrip("\"'([\u201c\u2018")
    return (word.lower() in ABBREVIATIONS or _UPPER_DOTTED.fullmatch(word) is not None
            or (len(word) == 1 and word.isalpha()))  # initials: "J. Smith", "E. coli"


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the sentences of `text`, without surrounding whitespace.

    A documented regex splitter (ASPIRE's authors used scispaCy, whose models are not on PyPI;
    docs/encoders.md gives its agreement with their split): a boundary is `.`, `!` or `?`
    (plus ASCII closing quotes/brackets) followed by whitespace; not after a word of
    ABBREVIATIONS ("vs.", "Dr."), capitals with inner periods ("U.S.") or a single letter
    (initials). Decimals ("0.05") never split (no whitespace).
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


class PaperSentences(NamedTuple):
    """The pieces of one paper's input: the head (prefix, title and its separator, no sentence)
    and the abstract's sentences (sentence i + 1 = sentences[i])."""

    head: str
    sentences: list[str]


class TokenizedPaper(NamedTuple):
    """Token ids as the model reads them and the sentence number of each (-1: none)."""

    ids: list[int]
    sentence: np.ndarray
    truncated: int  # sentences that lost tokens to the limit (cut, or left out)


def fit_paper(head: list[int], sentences: list[list[int]], limit: int, cls: int, sep: int
              ) -> TokenizedPaper:
    """The model input of one paper from its pieces' token ids, as ASPIRE's authors build it:
    head and sentences concatenated while at most `limit` content tokens are read (the piece
    crossing the limit keeps its first tokens, nothing after it is read), then [CLS] ... [SEP].
    Sentence i (0-based) is numbered i + 1; with no sentence token in the input, the head's
    tokens but its trailing separator (the title) are sentence 0, and all of it when it has
    nothing else."""
    ids: list[int] = []
    labels: list[int] = []
    truncated = 0
    for number, piece in enumerate([head, *sentences]):  # number 0: the head
        kept = piece[: max(limit - len(ids), 0)]
        truncated += int(number > 0 and len(kept) < len(piece))
        ids += kept
        labels += [number or -1] * len(kept)
    sentence = np.array([-1, *labels, -1], dtype=np.int32)
    if not (sentence > 0).any():  # no abstract sentence in the input: the title
        title = min(len(head), limit)
        if title > 1 and ids[title - 1] == sep:
            title -= 1
        sentence[1 : 1 + title] = 0
    return TokenizedPaper([cls, *ids, sep], sentence, truncated)


class SentenceVectors(NamedTuple):
    """Sentence vectors of papers given in some order: rows sorted by (paper, sentence)."""

    paper: np.ndarray  # index of the row's paper in the input order
    sentence: np.ndarray  # int16 sentence number (1.. the abstract's; 0 the title, alone)
    vectors: np.ndarray  # float32 (rows, dim)
    truncated: int

    def part(self, ids: np.ndarray) -> tuple[np.ndarray, dict, np.ndarray, dict]:
        """Store columns for papers `ids` (the input order; int64 or string ids): row ids, the
        extra `sentence` column, the vectors and the part's counts (embed.py writes them as a
        part)."""
        return (id_array(ids)[self.paper], {"sentence": self.sentence},
                self.vectors, {"papers": len(ids), "truncated_sentences": self.truncated})


class SentenceEncoder(Encoder):
    """An Encoder (same loading: model_source, hub_offline, the entry's precision) for
    multi-vector entries: `format`, `tokenize` and `encode_ids` work on sentences, so the
    embed stage drives it as it drives a dense Encoder."""

    kinds = ("multi-vector",)
    store_config = {"multi_vector": STORE_CONFIG}
    columns = (ABSTRACT_SENTENCES,)  # read from prefiltered.parquet where present (embed.py)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.entry.pooling not in POOLINGS:
            raise InputError(f"MODEL {self.entry.name}: multi-vector pooling "
                             f"{self.entry.pooling!r}; use one of {', '.join(POOLINGS)}")
        tokenizer = self.tokenizer
        if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
            raise InputError(f"MODEL {self.entry.name}: ASPIRE's input needs a tokenizer with "
                             "[CLS] and [SEP] tokens (a BERT tokenizer)")
        self.store_config = {"multi_vector": {**STORE_CONFIG,
                                              "pooling": POOLINGS[self.entry.pooling]}}
        self.limit = self.max_length - 2  # content tokens: [CLS] and [SEP] around
        self.counts = {"sentences": 0, "truncated_sentences": 0}

    def config_for(self, columns: list[str]) -> dict:
        """The store's config for a corpus: its own split where it has ABSTRACT_SENTENCES."""
        splitter = OWN_SPLIT if ABSTRACT_SENTENCES in columns else SPLITTER
        return {"multi_vector": {**self.store_config["multi_vector"], "splitter": splitter}}

    def format(self, title: str | None, abstract: str | None,  # type: ignore[override]
               query: bool = False, abstract_sentences: list[str] | None = None
               ) -> PaperSentences:
        """The pieces of a paper: `title + " [SEP] "` (the tokenizer's separator; after the
        entry's prefix), then the abstract's sentences: `abstract_sentences` where the corpus
        gives its own split, else split_sentences of the abstract. ASPIRE has no query form:
        `query` changes nothing."""
        if abstract_sentences is None:
            abstract = abstract or ""
            abstract_sentences = [abstract[a:b] for a, b in split_sentences(abstract)]
        head = f"{self.entry.text_prefix}{title or ''} {self.tokenizer.sep_token} "
        return PaperSentences(head, list(abstract_sentences))

    def tokenize(self, papers: list[PaperSentences]) -> list[TokenizedPaper]:  # type: ignore[override]
        """Each piece tokenized alone, as the authors do (one call of the fast tokenizer for
        every piece of every paper), then fitted to the limit (fit_paper)."""
        if not papers:
            return []
        texts = [text for paper in papers for text in (paper.head, *paper.sentences)]
        ids = self.tokenizer(texts, add_special_tokens=False, return_attention_mask=False,
                             return_token_type_ids=False, verbose=False)["input_ids"]
        out, at = [], 0
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        for paper in papers:
            end = at + 1 + len(paper.sentences)
            out.append(fit_paper(ids[at], ids[at + 1 : end], self.limit, cls, sep))
            at = end
        return out

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

    def _states(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Token states, float32: the last layer's (ASPIRE), or the mean of the transformer
        layers' (MDCR)."""
        if self.entry.pooling == "mean":
            return self.model(**batch).last_hidden_state.float()
        layers = self.model(**batch, output_hidden_states=True).hidden_states[1:]
        states = layers[0].float()
        for layer in layers[1:]:
            states = states + layer.float()
        return states / len(layers)

    def _sentences(self, batch: dict[str, torch.Tensor], labels: list[np.ndarray],
                   idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(paper index, sentence number, vector) of every sentence of one batch: the mean of
        the token states (_states) over the sentence's tokens."""
        states = self._states(batch)
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
