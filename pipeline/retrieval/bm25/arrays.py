"""Lucene's BM25, scored with arrays: Anserini's runs, faster for whole-abstract queries (issue
7; benchmarks/results/search_bm25.md: 11.8x pyserini's best on a 100k pool, 6.8x on 1M).

Lucene spends most of a long query's time walking postings one clause at a time. Here the
pool's postings are plain arrays (term -> documents, term frequencies) and a numba kernel
scores a query's terms over them, one query per thread. The numbers are Lucene's own:
- the tokens are Lucene's: documents and queries go through Anserini's DefaultEnglishAnalyzer
  (analysis.py, in a JVM started once in this process; the only Java this engine needs);
- document lengths are stored as Lucene stores them, one byte (SmallFloat.intToByte4), and the
  score is BM25Similarity's, in float32 with Lucene's operation order: idf = ln(1 + (N - n +
  0.5) / (n + 0.5)), weight = count of the term in the query x idf, per term
  weight - weight / (1 + tf x cache[norm]), cache[norm] = 1 / (k1 (1 - b + b dl / avgdl)),
  the terms' scores summed in float64 and rounded to float32 (Lucene's disjunction scorers).
The list is then cut and written as Anserini's SearchCollection does: the top k by score, ties
by docid (ascending, as strings), scores rounded to 1e-4 and each further tie within 1e-4
lowered by 1e-6 (its ScoreTiesAdjusterReranker), so a run is Anserini's, score for score.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np
import polars as pl

from pipeline.core.logs import Progress, progress
from pipeline.retrieval.bm25.analysis import term_counts


class Vocabulary:
    """Term ids of a pool, given as terms are first met."""

    def __init__(self) -> None:
        self.frame = pl.DataFrame(schema={"term": pl.String, "term_id": pl.Int32})

    def ids(self, terms: pl.Series) -> np.ndarray:
        """The id of each term (int32), new terms added."""
        new = (pl.DataFrame({"term": terms.unique(maintain_order=True)})
               .join(self.frame, on="term", how="anti"))
        start = self.frame.height
        self.frame = pl.concat([self.frame, new.with_columns(
            term_id=pl.int_range(start, start + new.height, dtype=pl.Int32))])
        return (pl.DataFrame({"term": terms}).join(self.frame, on="term", how="left",
                                                     maintain_order="left")
                ["term_id"].to_numpy())


# --- Lucene's one-byte document length (org.apache.lucene.util.SmallFloat) ---
def _long_to_int4(i: np.ndarray) -> np.ndarray:
    bits = np.frexp(i.astype(np.float64))[1].astype(np.int64)  # bit length (0 for 0)
    shift = np.maximum(bits - 4, 0)
    encoded = (i >> shift) & 0x07
    return np.where(bits < 4, i, encoded | ((shift + 1) << 3))


_FREE = 255 - int(_long_to_int4(np.array([2**31 - 1]))[0])  # 24


def encode_length(length: np.ndarray) -> np.ndarray:
    """SmallFloat.intToByte4: exact below 24, then 4 significant bits."""
    length = length.astype(np.int64)
    return np.where(length < _FREE, length,
                    _FREE + _long_to_int4(np.maximum(length - _FREE, 0))).astype(np.uint8)


def decode_length(byte: np.ndarray) -> np.ndarray:
    """SmallFloat.byte4ToInt."""
    i = byte.astype(np.int64) - _FREE
    bits, shift = i & 0x07, (i >> 3) - 1
    int4 = np.where(shift == -1, bits, (bits | 0x08) << np.maximum(shift, 0))
    return np.where(byte.astype(np.int64) < _FREE, byte.astype(np.int64), _FREE + int4)


class Postings:
    """A pool's inverted index as arrays: for term t, docs[ptr[t]:ptr[t+1]] and their tfs; the
    same pairs by document (for document d, terms fterms[fptr[d]:fptr[d+1]], in any order,
    with their tfs ftfs), which pruned queries use to finish their few candidates; and per
    term the (length byte, tf) pairs that bound its score for any k1 and b (`_frontiers`)."""

    def __init__(self, ids: np.ndarray, vocab: pl.DataFrame, ptr: np.ndarray, docs: np.ndarray,
                 tfs: np.ndarray, norms: np.ndarray, sum_length: int, doc_count: int,
                 forward: tuple[np.ndarray, np.ndarray, np.ndarray]):
        self.ids, self.vocab, self.ptr, self.docs, self.tfs = ids, vocab, ptr, docs, tfs
        self.norms, self.sum_length, self.doc_count = norms, sum_length, doc_count
        self.fptr, self.fterms, self.ftfs = forward
        self.frontier = _frontiers(ptr, docs, tfs, norms)

    @classmethod
    def from_pairs(cls, ids: np.ndarray, vocab: pl.DataFrame, terms: np.ndarray,
                   docs: np.ndarray, tfs: np.ndarray) -> Postings:
        """The index of (term id, document row, tf) triples, one per distinct term of a
        document, in any order (fresh analysis, `build`): grouped by document (a counting
        sort), then `from_forward`."""
        fptr, fterms, ftfs = _forward(terms.astype(np.int32, copy=False),
                                      docs.astype(np.int32, copy=False),
                                      tfs.astype(np.float32, copy=False), len(ids))
        return cls.from_forward(ids, vocab, fptr, fterms, ftfs)

    @classmethod
    def from_forward(cls, ids: np.ndarray, vocab: pl.DataFrame, fptr: np.ndarray,
                     fterms: np.ndarray, ftfs: np.ndarray) -> Postings:
        """The index of each document's terms (document d: term ids fterms[fptr[d]:fptr[d+1]],
        int32, and their tfs ftfs, float32), with the pool's own statistics (its document
        count, each term's document frequency, lengths and their average), as a Lucene index
        of the pool alone has them. The analysed-text store fills these lists straight from
        its parts (`bm25_store.pool_index`); fresh analysis goes through `from_pairs`."""
        ptr, by_term, term_tfs, lengths = _by_term(fptr, fterms, ftfs, vocab.height)
        return cls(np.asarray(ids), vocab, ptr, by_term, term_tfs, encode_length(lengths),
                   int(lengths.sum()), int((lengths > 0).sum()), (fptr, fterms, ftfs))


@numba.njit(cache=True)
def _forward(terms, docs, tfs, n_docs):  # pragma: no cover
    """(term, doc, tf) triples -> each document's terms and tfs (fptr, fterms, ftfs), in the
    order the triples give them: a counting sort by document."""
    fptr = np.zeros(n_docs + 1, dtype=np.int64)
    for p in range(len(docs)):
        fptr[docs[p] + 1] += 1
    fptr = np.cumsum(fptr)
    start = fptr[:-1].copy()
    fterms = np.empty(len(docs), dtype=np.int32)
    ftfs = np.empty(len(docs), dtype=np.float32)
    for p in range(len(docs)):
        at = start[docs[p]]
        fterms[at] = terms[p]
        ftfs[at] = tfs[p]
        start[docs[p]] += 1
    return fptr, fterms, ftfs


@numba.njit(cache=True)
def _by_term(fptr, fterms, ftfs, n_terms):  # pragma: no cover
    """Each document's terms -> postings by term, each term's documents ascending (a stable
    counting sort by term, reading the documents in order), and the documents' lengths
    (sums of their tfs)."""
    n_docs = len(fptr) - 1
    ptr = np.zeros(n_terms + 1, dtype=np.int64)
    for x in range(len(fterms)):
        ptr[fterms[x] + 1] += 1
    ptr = np.cumsum(ptr)
    fill = ptr[:-1].copy()
    docs = np.empty(len(fterms), dtype=np.int32)
    tfs = np.empty(len(fterms), dtype=np.float32)
    lengths = np.zeros(n_docs, dtype=np.int64)
    for d in range(n_docs):
        for x in range(fptr[d], fptr[d + 1]):
            t = fterms[x]
            docs[fill[t]] = d
            tfs[fill[t]] = ftfs[x]
            fill[t] += 1
            lengths[d] += np.int64(ftfs[x])
    return ptr, docs, tfs, lengths


@numba.njit(cache=True)
def _frontiers(ptr, docs, tfs, norms):  # pragma: no cover
    """Per term the postings no other posting of the term beats on both tf and length: for
    each length byte, from the shortest, the largest tf when it is above every tf of shorter
    documents. As tf x cache[norm] grows with tf and cache[norm] falls with the length (for
    any k1 and b >= 0), the term's highest score is one of these pairs' (`_maxima`).
    Two passes: count the pairs, then write them."""
    best = np.zeros(256, dtype=np.float32)
    out_ptr = np.zeros(len(ptr), dtype=np.int64)
    out_norm = np.empty(0, dtype=np.uint8)
    out_tf = np.empty(0, dtype=np.float32)
    for write in (False, True):
        if write:
            out_norm = np.empty(out_ptr[-1], dtype=np.uint8)
            out_tf = np.empty(out_ptr[-1], dtype=np.float32)
        at = 0
        for t in range(len(ptr) - 1):
            best[:] = 0
            for p in range(ptr[t], ptr[t + 1]):
                best[norms[docs[p]]] = max(best[norms[docs[p]]], tfs[p])
            top = np.float32(0)
            for n in range(256):
                if best[n] > top:
                    top = best[n]
                    if write:
                        out_norm[at], out_tf[at] = n, top
                    at += 1
            out_ptr[t + 1] = at
    return out_ptr, out_norm, out_tf


@numba.njit(cache=True)
def _maxima(frontier_ptr, frontier_norm, frontier_tf, cache):  # pragma: no cover
    """Per term the largest 1 + tf x cache[norm] of its postings (float32, Lucene's order),
    from its frontier: its score can be no higher than weight - weight / that."""
    out = np.ones(len(frontier_ptr) - 1, dtype=np.float32)
    for t in range(len(frontier_ptr) - 1):
        for i in range(frontier_ptr[t], frontier_ptr[t + 1]):
            out[t] = max(out[t], np.float32(1.0) + frontier_tf[i] * cache[frontier_norm[i]])
    return out


def build(ids: np.ndarray, texts: Sequence[str], threads: int = 2) -> Postings:
    """Index texts (as `analysis.paper_text` makes them) under `ids`, analysing every one
    (the analysed-text store, `store.py`, analyses a paper once per corpus instead).
    Memory is the postings (12 bytes per distinct term of a text) and the vocabulary, not
    the tokens."""
    vocab = Vocabulary()
    terms, docs, tfs = [], [], []
    for counts in term_counts(texts, threads):
        terms.append(vocab.ids(counts["term"]))
        docs.append(counts["text"].to_numpy())
        tfs.append(counts["tf"].to_numpy())
    if not terms:
        terms, docs, tfs = [np.zeros(0, dtype=np.int32)], [np.zeros(0, dtype=np.int32)], \
            [np.zeros(0, dtype=np.int32)]
    return Postings.from_pairs(np.asarray(ids), vocab.frame, np.concatenate(terms),
                               np.concatenate(docs), np.concatenate(tfs))


def _norm_table(index: Postings, k1: float, b: float) -> np.ndarray:
    """BM25Similarity's cache[256]: 1 / (k1 (1 - b + b length / avgdl)) per length byte,
    float32 as Lucene computes it."""
    k1, b = np.float32(k1), np.float32(b)
    avgdl = np.float32(index.sum_length / float(index.doc_count))
    table = decode_length(np.arange(256, dtype=np.uint8)).astype(np.float32)
    with np.errstate(divide="ignore"):  # b = 1, length 0: inf, as in Lucene (no postings)
        return np.float32(1) / (k1 * ((np.float32(1) - b) + b * table / avgdl))


class QueryTerms(NamedTuple):
    """Queries as their analysed terms: `counts` rows (text, term, tf), text being the
    query's row among the n; from fresh analysis (`query_terms`) or the analysed-text store."""

    counts: pl.DataFrame
    n: int


def query_terms(texts: Sequence[str], threads: int = 2) -> QueryTerms:
    """Lucene's terms of query texts and their counts."""
    return QueryTerms(pl.concat([pl.DataFrame(schema={"text": pl.Int32, "term": pl.String,
                                                      "tf": pl.Int32}),
                                 *term_counts(texts, threads)]), len(texts))


def _query_terms(index: Postings, queries: QueryTerms
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query: its terms found in the pool and their weights (count x idf, float32)."""
    counts = queries.counts.join(index.vocab, on="term").sort("text", "term_id")
    df = np.diff(index.ptr)[counts["term_id"].to_numpy()].astype(np.float64)
    n = float(index.doc_count)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
    weights = counts["tf"].to_numpy().astype(np.float32) * idf
    q_ptr = np.zeros(queries.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(counts["text"].to_numpy(), minlength=queries.n), out=q_ptr[1:])
    return q_ptr, counts["term_id"].to_numpy().astype(np.int32), weights


@numba.njit(cache=True)
def _push(heap, size, k, value):  # pragma: no cover
    """Keep the k largest values seen in a min-heap (heap[0]: the k-th); the new size."""
    if size < k:
        i = size
        heap[i] = value
        while i > 0 and heap[(i - 1) // 2] > heap[i]:
            heap[(i - 1) // 2], heap[i] = heap[i], heap[(i - 1) // 2]
            i = (i - 1) // 2
        return size + 1
    if value > heap[0]:
        heap[0] = value
        i = 0
        while 2 * i + 1 < size:
            child = 2 * i + 1
            if child + 1 < size and heap[child + 1] < heap[child]:
                child += 1
            if heap[i] <= heap[child]:
                break
            heap[i], heap[child] = heap[child], heap[i]
            i = child
    return size


PRUNE_MARGIN = 1e-5  # relative: far above float32 rounding, so pruning never changes a score
CANDIDATE_COST = 8.0  # finishing a candidate's term against scoring a posting (measured, roughly)
BLOCK = 65536  # documents per block: a block's float64 sums (512 KB) stay in a core's cache
GUESS = 2.0  # the guess of the k-th score: see `_rank`
GUESS_SHARE = 8.0  # ... made when the first block can hold this many of the top k
FIRST_SHARE = 12.0  # the first block (scored before any bound is known): this share, or 1,024
GROUP = 16  # candidates whose term lists are fetched together before they are scored
QUERY_BATCH = 1024  # queries per kernel call: progress between calls (results never change)


@numba.njit(cache=True)
def _finish(cands, n, partial, fptr, fterms, ftfs, norm_inv, weight_of, found, scores,
            sink):  # pragma: no cover
    """Score candidates whole: to each document's partial sum add the terms of weight_of in
    its own term list (in term order; a zero weight adds 0.0, so no branch). The lists lie far
    apart in memory: a group's lines are read first (into `sink`, so that they are read), so
    that their loads overlap instead of waiting one after another."""
    for g in range(0, n, GROUP):
        m = min(GROUP, n - g)
        for j in range(g, g + m):
            d = cands[j]
            for x in range(fptr[d], fptr[d + 1], 16):  # 16 entries: one 64-byte line
                sink[0] += fterms[x] + np.int64(ftfs[x])
        for j in range(g, g + m):
            d = cands[j]
            score = partial[j]
            ninv = norm_inv[d]
            for x in range(fptr[d], fptr[d + 1]):
                w = weight_of[fterms[x]]
                score += w - w / (np.float32(1.0) + ftfs[x] * ninv)
            found[j] = d
            scores[j] = np.float32(score)


@numba.njit(cache=True)
def _rank(terms, weights, ptr, docs, tfs, maxima, norm_inv, fptr, fterms, ftfs, n_docs, k,
          prune, first, block, guess_factor, acc, tmp, weight_of, heap, cands, partial, found,
          scores, stats):  # pragma: no cover
    """Lucene's BM25 of one query's documents, exactly, for every document that can reach
    its top k: their ids in found[:n] and float32 scores in scores[:n]. Returns (n, kth, ok).

    Documents go in blocks (the first of `first`, then of `block`) whose float64 sums stay in
    cache. Within a block, terms go in order of their highest possible score (MaxScore's
    bound); theta is a lower bound of the k-th score (the k-th largest whole score so far,
    lowered by PRUNE_MARGIN). Once the highest score the remaining terms could add cannot lift
    a document's partial sum to theta, and the documents that still can are few, the block's
    other postings are left and those candidates are finished from their own term lists
    (`_finish`). A document outside them cannot enter the top k nor tie with it. Partial sums
    are in float64, exact for float32 terms, so the order of terms changes no score.
    After the first block theta is raised to a guess (its r-th best score, r = guess_factor x
    its expected share of the top k, when that share is GUESS_SHARE or more); ok is False
    when the guess proved above the k-th score, and the caller ranks the query again without
    one. stats (the query's row): postings scored, documents finished, a sink for `_finish`,
    times ranked again."""
    n_terms = len(terms)
    bound = np.empty(n_terms, dtype=np.float64)
    for j in range(n_terms):
        bound[j] = weights[j] - weights[j] / maxima[terms[j]]
    order = np.argsort(-bound)
    rest = np.zeros(n_terms + 1, dtype=np.float64)  # rest[i]: bound of order[i:]
    cursor = np.empty(n_terms, dtype=np.int64)
    ends = np.empty(n_terms, dtype=np.int64)
    for i in range(n_terms - 1, -1, -1):
        rest[i] = rest[i + 1] + bound[order[i]]
        cursor[i] = ptr[terms[order[i]]]
    avg_terms = fptr[n_docs] / max(n_docs, 1)
    size, n, theta, guess, lo = 0, 0, 0.0, 0.0, 0
    while lo < n_docs:
        hi = min(lo + (first if lo == 0 else block), n_docs)
        width, remaining = hi - lo, 0
        for i in range(n_terms):  # each term's postings in the block: cursor[i]:ends[i]
            a, b = cursor[i], ptr[terms[order[i]] + 1]
            while a < b:
                mid = (a + b) // 2
                if docs[mid] < hi:
                    a = mid + 1
                else:
                    b = mid
            ends[i] = a
            remaining += a - cursor[i]
        cut, done, checked = n_terms, 0, 0
        for i in range(n_terms):
            w, c0 = weights[order[i]], cursor[i]
            m = ends[i] - c0
            for j in range(m):  # the block's norms are in cache; Lucene's float32 order
                tmp[j] = w - w / (np.float32(1.0) + tfs[c0 + j] * norm_inv[docs[c0 + j]])
            for j in range(m):
                acc[docs[c0 + j] - lo] += tmp[j]
            done += m
            remaining -= m
            reach = rest[i + 1] * (1.0 + PRUNE_MARGIN)
            # a check reads the block's sums: at most one per width / 2 postings scored
            if prune and i + 1 < n_terms and reach < theta and 2 * (done - checked) >= width:
                checked = done
                need, count = theta - reach, 0
                for x in range(width):
                    count += acc[x] >= need
                if CANDIDATE_COST * count * (avg_terms + n_terms - i - 1) <= remaining:
                    cut = i + 1
                    break
        stats[0] += done
        for i in range(n_terms):
            cursor[i] = ends[i]
        reach = rest[cut] * (1.0 + PRUNE_MARGIN)
        m = 0
        for x in range(width):
            if acc[x] + reach >= theta and acc[x] > 0:
                cands[m] = lo + x
                partial[m] = acc[x]
                m += 1
        acc[:width] = 0
        if cut == n_terms:  # every term scored: the sums are the scores
            for j in range(m):
                found[n + j] = cands[j]
                scores[n + j] = np.float32(partial[j])
        else:
            for i in range(cut, n_terms):
                weight_of[terms[order[i]]] = weights[order[i]]
            _finish(cands, m, partial, fptr, fterms, ftfs, norm_inv, weight_of, found[n:],
                    scores[n:], stats[2:])
            for i in range(cut, n_terms):
                weight_of[terms[order[i]]] = 0
            stats[1] += m
        for j in range(n, n + m):
            size = _push(heap, size, k, np.float64(scores[j]))
        n += m
        if size == k:
            theta = max(theta, heap[0] * (1.0 - PRUNE_MARGIN))
        share = k * width / n_docs  # the first block's expected share of the top k
        if lo == 0 and prune and guess_factor > 0 and hi < n_docs and share >= GUESS_SHARE:
            r = int(np.ceil(guess_factor * share))
            if r <= size:
                guess = np.sort(heap[:size])[size - r] * (1.0 - PRUNE_MARGIN)
                theta = max(theta, guess)
        lo = hi
    kth = heap[0] if size == k else 0.0
    return n, np.float32(kth), guess == 0 or (size == k and heap[0] * (1.0 - PRUNE_MARGIN)
                                                  >= guess)


@numba.njit(parallel=True, cache=True)
def _search(q_ptr, q_terms, q_weights, ptr, docs, tfs, maxima, norm_inv, fptr, fterms, ftfs,
            k, prune, first, block, guess_factor, hit_docs, hit_scores, n_hits, stats,
            acc, tmp, weight_of, heap, cands, partial, found, scores):  # pragma: no cover
    """`_rank` for every query, a query per thread: the documents whose score reaches the
    query's k-th (ties included), up to hit_docs.shape[1] of them, and their number in
    n_hits (more than fit: the caller asks again with room). Work space: a row per thread."""
    n_docs = len(fptr) - 1
    for q in numba.prange(len(q_ptr) - 1):
        t = numba.get_thread_id()
        terms, weights = q_terms[q_ptr[q]:q_ptr[q + 1]], q_weights[q_ptr[q]:q_ptr[q + 1]]
        n, kth, ok = _rank(terms, weights, ptr, docs, tfs, maxima, norm_inv, fptr, fterms,
                           ftfs, n_docs, k, prune, first, block, guess_factor, acc[t], tmp[t],
                           weight_of[t], heap[t], cands[t], partial[t], found[t], scores[t],
                           stats[q])
        if not ok:
            stats[q, 3] += 1
            n, kth, ok = _rank(terms, weights, ptr, docs, tfs, maxima, norm_inv, fptr, fterms,
                               ftfs, n_docs, k, prune, first, block, 0.0, acc[t], tmp[t],
                               weight_of[t], heap[t], cands[t], partial[t], found[t],
                               scores[t], stats[q])
        kth = max(kth, np.float32(1e-30))  # matching documents only
        m = 0
        for j in range(n):
            if scores[t][j] >= kth:
                if m < hit_docs.shape[1]:
                    hit_docs[q, m] = found[t][j]
                    hit_scores[q, m] = scores[t][j]
                m += 1
        n_hits[q] = m


@numba.njit(cache=True)
def _adjust_ties(scores, starts):  # pragma: no cover
    """Anserini's ScoreTiesAdjusterReranker on lists sorted best first (float32, in place):
    round to 1e-4 (in float64, as Anserini 1.x does), then lower the i-th of a run of scores
    within 1e-4 by i x 1e-6 (in float32)."""
    for q in range(len(starts) - 1):
        dup = 0
        for i in range(starts[q], starts[q + 1]):
            scores[i] = np.float32(np.floor(np.float64(scores[i]) * 1e4 + 0.5) / 1e4)
            if i == starts[q] or scores[i - 1] - scores[i] > np.float32(1e-4):
                dup = 0
            else:
                dup += 1
                scores[i] -= np.float32(1e-6) * np.float32(dup)


def anserini_order(rows: np.ndarray, docs: np.ndarray, scores: np.ndarray, k: int
                   ) -> pl.DataFrame:
    """(row, doc, score) cut to the top k per row as SearchCollection writes them: by score,
    ties by docid ascending as a string, scores tie-adjusted (`_adjust_ties`)."""
    frame = (pl.DataFrame({"row": rows, "doc": docs, "score": scores.astype(np.float32)})
             .sort(["row", "score", pl.col("doc").cast(pl.String)],
                   descending=[False, True, False])
             .filter(pl.int_range(pl.len()).over("row") < k))
    adjusted = frame["score"].to_numpy().copy()
    counts = frame.group_by("row", maintain_order=True).len()["len"].to_numpy()
    _adjust_ties(adjusted, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
    return frame.with_columns(score=pl.Series(adjusted))


def search(index: Postings, texts: Sequence[str] | QueryTerms, k: int, k1: float = 0.9,
           b: float = 0.4,
           prune: bool = True, stats: dict | None = None, block: int = BLOCK,
           first: int | None = None, guess: float = GUESS, bar: Progress | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lucene's BM25 of the top k per query, plus the documents tied with the k-th: (query
    row, doc id, float32 score), matching documents only (score > 0). `prune=False` scores
    every posting (the same result, slower); `block`, `first` and `guess` tune `_rank` (the
    result never depends on them); `stats` receives what the queries cost: postings of their
    terms, postings scored, documents finished from their term lists, queries ranked again.
    Queries go to the kernel QUERY_BATCH at a time; `bar` advances by each batch. `texts`
    are analysed here unless given as their terms."""
    queries = texts if isinstance(texts, QueryTerms) else query_terms(texts)
    table = _norm_table(index, k1, b)
    norm_inv, maxima = table[index.norms], _maxima(*index.frontier, table)
    q_ptr, q_terms, q_weights = _query_terms(index, queries)
    n_docs, n_queries = len(index.ids), queries.n
    k = min(k, n_docs)  # a query ranks at most every document: a larger k is the same run
    if first is None:  # documents for FIRST_SHARE of the top k, expected
        first = int(min(max(np.ceil(FIRST_SHARE * n_docs / max(k, 1)), 1024), block))
    threads = numba.config.NUMBA_NUM_THREADS
    # work space, a row per thread (zeros are calloc'ed: rows of idle threads take no memory)
    space = (np.zeros((threads, max(first, block)), dtype=np.float64),
             np.zeros((threads, max(first, block)), dtype=np.float32),
             np.zeros((threads, len(index.ptr) - 1), dtype=np.float32),
             np.zeros((threads, max(k, 1)), dtype=np.float64),
             np.zeros((threads, n_docs), dtype=np.int64),
             np.zeros((threads, n_docs), dtype=np.float64),
             np.zeros((threads, n_docs), dtype=np.int64),
             np.zeros((threads, n_docs), dtype=np.float32))
    cost = np.zeros((n_queries, 4), dtype=np.int64)
    room = np.full(n_queries, min(2 * k + 64, n_docs))
    rows, found, values = [], [], []
    todo, again = np.arange(n_queries), True
    while len(todo):  # ties beyond the room given: those queries again, with room for all
        left = []
        for lo in range(0, len(todo), QUERY_BATCH):
            part = todo[lo : lo + QUERY_BATCH]
            sub_ptr = np.concatenate([[0], np.cumsum(q_ptr[part + 1] - q_ptr[part])])
            picks = np.concatenate([np.arange(q_ptr[q], q_ptr[q + 1]) for q in part] or
                                   [np.zeros(0, dtype=np.int64)])
            width = int(room[part].max())
            hit_docs = np.empty((len(part), width), dtype=np.int64)
            hit_scores = np.empty((len(part), width), dtype=np.float32)
            n_hits = np.zeros(len(part), dtype=np.int64)
            spent = np.zeros((len(part), 4), dtype=np.int64)
            _search(sub_ptr, q_terms[picks], q_weights[picks], index.ptr, index.docs, index.tfs,
                    maxima, norm_inv, index.fptr, index.fterms, index.ftfs, k, prune, first,
                    block, guess, hit_docs, hit_scores, n_hits, spent, *space)
            cost[part] += spent
            fits = n_hits <= width
            for r in np.flatnonzero(fits):
                rows.append(np.full(n_hits[r], part[r]))
                found.append(hit_docs[r, : n_hits[r]])
                values.append(hit_scores[r, : n_hits[r]])
            room[part[~fits]] = n_hits[~fits]
            left.append(part[~fits])
            if bar is not None and again:  # a query ranked again is not counted twice
                bar.update(len(part))
        todo, again = np.concatenate(left), False
    if stats is not None:
        stats.update(queries=n_queries, postings=int(np.diff(index.ptr)[q_terms].sum()),
                     postings_scored=int(cost[:, 0].sum()), finished=int(cost[:, 1].sum()),
                     ranked_again=int(cost[:, 3].sum()))
    if not rows:
        return (np.zeros(0, dtype=np.int64), index.ids[:0], np.zeros(0, dtype=np.float32))
    rows, found, values = np.concatenate(rows), np.concatenate(found), np.concatenate(values)
    return rows, index.ids[found], values


GRID_SUMS = 2**17  # float64 sums per block of the one-pass grid (1 MB): 4,369 documents of 30
GRID_ENTRIES = 2**23  # hits held per call of the one-pass grid (queries x grid x room): ~100 MB


@numba.njit(cache=True)
def _kth_largest(values, k):  # pragma: no cover
    """The k-th largest of values (1 <= k <= len(values))."""
    return np.partition(values, len(values) - k)[len(values) - k]


@numba.njit(cache=True, error_model="numpy")  # no zero-division branch: the grid vectorises
def _grid_rank(terms, weights, ptr, docs, tfs, norms, tables, k, block, acc, kth, least,
               cursor, cand_docs, cand_scores, n_cand):  # pragma: no cover
    """Lucene's BM25 of one query for every (k1, b) of a grid at once: each posting (doc, tf)
    of the query's terms is read once and its float32 score added for every grid point g
    (tables[norm, g]: that point's `_norm_table`), each point summing in float64 as `_rank`
    does. Documents go in blocks of `block` whose G sums (acc[x, g]) stay in cache; after a
    block, each point's list cand_docs[g, :n_cand[g]] (cand_scores: float32) takes the
    documents whose score reaches kth[g], a lower bound of the point's k-th score: 0 until the
    list first fills, then the k-th largest score of the list each time it fills (when those
    below it are dropped). No document dropped can reach the k-th nor tie with it. At the end
    kth[g] is the point's k-th score (0 with fewer than k matches). Returns False when the
    documents tied with a bound fill more than half of a list: the caller asks again with
    longer lists (the lists are never grown here: rebinding them slows this loop many times
    over)."""
    n_docs, n_grid, n_terms = len(norms), tables.shape[1], len(terms)
    for i in range(n_terms):
        cursor[i] = ptr[terms[i]]
    kth[:] = 0
    n_cand[:] = 0
    # a float64 sum not above least[g] rounds below kth[g] in float32 (least: kth less two of
    # its float32 steps), and one of 0 is no match: a cheap test before the exact one
    least[:] = 0.0
    cap = cand_docs.shape[1]
    lo = 0
    while lo < n_docs:
        hi = min(lo + block, n_docs)
        for i in range(n_terms):
            w, c, end = weights[i], cursor[i], ptr[terms[i] + 1]
            while c < end and docs[c] < hi:
                d, tf = docs[c], tfs[c]
                row, sums = tables[norms[d]], acc[d - lo]
                for g in range(n_grid):  # contiguous: vectorised over the grid
                    sums[g] += w - w / (np.float32(1.0) + tf * row[g])
                c += 1
            cursor[i] = c
        for x in range(hi - lo):
            sums, reach = acc[x], 0
            for g in range(n_grid):  # vectorised: can the document enter any point's list?
                reach += sums[g] > least[g]
            if reach == 0:
                sums[:] = 0.0
                continue
            for g in range(n_grid):
                v = sums[g]
                if v > least[g]:
                    s = np.float32(v)
                    if s >= kth[g]:
                        if n_cand[g] == cap:  # full: a higher bound, those below it dropped
                            kth[g] = _kth_largest(cand_scores[g], k)
                            least[g] = np.float64(kth[g]) * (1.0 - 2.0**-22)
                            m = 0
                            for j in range(cap):
                                if cand_scores[g, j] >= kth[g]:
                                    cand_docs[g, m] = cand_docs[g, j]
                                    cand_scores[g, m] = cand_scores[g, j]
                                    m += 1
                            n_cand[g] = m
                            if 2 * m > cap:  # ties fill half the room: ask for more
                                return False
                        if s >= kth[g]:
                            cand_docs[g, n_cand[g]] = lo + x
                            cand_scores[g, n_cand[g]] = s
                            n_cand[g] += 1
                sums[g] = 0.0
        lo = hi
    for g in range(n_grid):
        kth[g] = _kth_largest(cand_scores[g, : n_cand[g]], k) if n_cand[g] >= k else 0
    return True


@numba.njit(parallel=True, cache=True)
def _grid_search(q_ptr, q_terms, q_weights, ptr, docs, tfs, norms, tables, k, block, hit_docs,
                 hit_scores, n_hits, acc, kth, least, cursor, cand_docs, cand_scores,
                 n_cand):  # pragma: no cover
    """`_grid_rank` for every query, a query per thread: per grid point g the documents whose
    score reaches the point's k-th (ties included), up to hit_docs.shape[2] of them, as
    `_search` returns them for that point alone, and their number in n_hits[q, g] (more than
    fit: the caller asks again with room). Work space: a row per thread."""
    for q in numba.prange(len(q_ptr) - 1):
        t = numba.get_thread_id()
        terms, weights = q_terms[q_ptr[q]:q_ptr[q + 1]], q_weights[q_ptr[q]:q_ptr[q + 1]]
        found, scores = cand_docs[t], cand_scores[t]
        while not _grid_rank(terms, weights, ptr, docs, tfs, norms, tables, k, block, acc[t],
                             kth[t], least[t], cursor[t], found, scores, n_cand[t]):
            acc[t] = 0.0  # left mid-block
            found = np.empty((found.shape[0], 2 * found.shape[1]), dtype=found.dtype)
            scores = np.empty((found.shape[0], found.shape[1]), dtype=np.float32)
        for g in range(tables.shape[1]):
            bar = max(kth[t, g], np.float32(1e-30))  # matching documents only
            m = 0
            for j in range(n_cand[t, g]):
                if scores[g, j] >= bar:
                    if m < hit_docs.shape[2]:
                        hit_docs[q, g, m] = found[g, j]
                        hit_scores[q, g, m] = scores[g, j]
                    m += 1
            n_hits[q, g] = m


def search_pass(index: Postings, queries: QueryTerms, k: int,
                pairs: Sequence[tuple[float, float]], block: int | None = None,
                bar: Progress | None = None
                ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`search` for every (k1, b) of `pairs` in one pass over each query's postings
    (`_grid_rank`): per pair, what `search(index, queries, k, k1, b)` returns, the same
    documents and float32 scores (in another order). Blocks of `block` documents (default:
    GRID_SUMS sums); the result never depends on it. `bar` advances by queries x pairs."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    n_grid, n_docs, n_queries = len(pairs), len(index.ids), queries.n
    tables = np.ascontiguousarray(np.stack([_norm_table(index, k1, b) for k1, b in pairs], 1))
    q_ptr, q_terms, q_weights = _query_terms(index, queries)
    threads = numba.config.NUMBA_NUM_THREADS
    block = max(1, min(block or max(GRID_SUMS // n_grid, 256), n_docs))
    cap = min(2 * k + 64, max(n_docs, 1))
    most_terms = int(np.diff(q_ptr).max()) if n_queries else 0
    space = (np.zeros((threads, block, n_grid), dtype=np.float64),
             np.zeros((threads, n_grid), dtype=np.float32),
             np.zeros((threads, n_grid), dtype=np.float64),
             np.zeros((threads, max(most_terms, 1)), dtype=np.int64),
             np.zeros((threads, n_grid, cap), dtype=np.int32),
             np.zeros((threads, n_grid, cap), dtype=np.float32),
             np.zeros((threads, n_grid), dtype=np.int64))
    room = np.full(n_queries, min(2 * k + 64, n_docs))
    out: list[tuple[list, list, list]] = [([], [], []) for _ in pairs]
    todo, again = np.arange(n_queries), True
    while len(todo):  # ties beyond the room given: those queries again, with room for all
        left = []
        step = max(1, GRID_ENTRIES // max(n_grid * int(room[todo].max()), 1))
        for lo in range(0, len(todo), min(step, QUERY_BATCH)):
            part = todo[lo : lo + min(step, QUERY_BATCH)]
            sub_ptr = np.concatenate([[0], np.cumsum(q_ptr[part + 1] - q_ptr[part])])
            picks = np.concatenate([np.arange(q_ptr[q], q_ptr[q + 1]) for q in part] or
                                   [np.zeros(0, dtype=np.int64)])
            width = int(room[part].max())
            hit_docs = np.empty((len(part), n_grid, width), dtype=np.int32)
            hit_scores = np.empty((len(part), n_grid, width), dtype=np.float32)
            n_hits = np.zeros((len(part), n_grid), dtype=np.int64)
            _grid_search(sub_ptr, q_terms[picks], q_weights[picks], index.ptr, index.docs,
                         index.tfs, index.norms, tables, k, block, hit_docs, hit_scores,
                         n_hits, *space)
            fits = (n_hits <= width).all(axis=1)
            for r in np.flatnonzero(fits):
                for g in range(n_grid):
                    out[g][0].append(np.full(n_hits[r, g], part[r]))
                    out[g][1].append(hit_docs[r, g, : n_hits[r, g]])
                    out[g][2].append(hit_scores[r, g, : n_hits[r, g]])
            room[part[~fits]] = n_hits[~fits].max(axis=1)
            left.append(part[~fits])
            if bar is not None and again:  # a query ranked again is not counted twice
                bar.update(len(part) * n_grid)
        todo, again = np.concatenate(left), False
    hits = []
    for rows, found, values in out:
        if not rows:
            hits.append((np.zeros(0, dtype=np.int64), index.ids[:0],
                         np.zeros(0, dtype=np.float32)))
            continue
        hits.append((np.concatenate(rows), index.ids[np.concatenate(found)],
                     np.concatenate(values)))
    return hits


def grid_runs(index: Postings, queries: QueryTerms, query_ids: pl.Series, doc_type: pl.DataType,
              k: int, k1s: Sequence[float], bs: Sequence[float], threads: int = 2,
              one_pass: bool = True) -> dict[tuple[float, float], pl.DataFrame]:
    """Every (k1, b) on one index: the hits (query, doc, score) of each pair, in Anserini's
    order (`anserini_order`), queries named by `query_ids` (row i: query i). A grid of several
    pairs is scored in one pass over each query's postings (`search_pass`: the same runs, byte
    for byte, as one `search` per pair, which `one_pass=False` does)."""
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    ids = query_ids.to_numpy()
    pairs = list(itertools.product(k1s, bs))
    total = queries.n * len(pairs)
    runs = {}
    with progress(total, "bm25", "queries", show=total > QUERY_BATCH) as bar:
        if one_pass and len(pairs) > 1:
            found = search_pass(index, queries, k, pairs, bar=bar)
        else:
            found = (search(index, queries, k, k1, b, bar=bar) for k1, b in pairs)
        for pair, hits in zip(pairs, found, strict=True):
            hits = anserini_order(*hits, k)
            runs[pair] = pl.DataFrame({
                "query": pl.Series(ids[hits["row"].to_numpy()], dtype=query_ids.dtype),
                "doc": pl.Series(hits["doc"], dtype=doc_type),
                "score": hits["score"].cast(pl.Float64)})
    return runs


def warm_up() -> None:
    """Compile the numba kernels (or load numba's cache) on a two-document index, without the
    JVM, so that the first BM25 search after an install does not pay the JIT (`make setup`)."""
    index = Postings.from_pairs(np.arange(2), pl.DataFrame({"term": ["a", "b"],
                                                            "term_id": [0, 1]}),
                                np.array([0, 0, 1]), np.array([0, 1, 1]), np.ones(3))
    table = _norm_table(index, 0.9, 0.4)
    norm_inv, maxima = table[index.norms], _maxima(*index.frontier, table)
    threads = numba.config.NUMBA_NUM_THREADS
    _search(np.array([0, 2]), np.array([0, 1], dtype=np.int32), np.ones(2, dtype=np.float32),
            index.ptr, index.docs, index.tfs, maxima, norm_inv, index.fptr, index.fterms,
            index.ftfs, 1, True, 1, 1, GUESS, np.empty((1, 2), dtype=np.int64),
            np.empty((1, 2), dtype=np.float32), np.zeros(1, dtype=np.int64),
            np.zeros((1, 4), dtype=np.int64), np.zeros((threads, 1)),
            np.zeros((threads, 1), dtype=np.float32), np.zeros((threads, 2), dtype=np.float32),
            np.zeros((threads, 1)), np.zeros((threads, 2), dtype=np.int64),
            np.zeros((threads, 2)), np.zeros((threads, 2), dtype=np.int64),
            np.zeros((threads, 2), dtype=np.float32))
    search_pass(index, QueryTerms(pl.DataFrame({"text": pl.Series([0, 0], dtype=pl.Int32),
                                                "term": ["a", "b"],
                                                "tf": pl.Series([1, 1], dtype=pl.Int32)}), 1),
                1, [(0.9, 0.4), (1.2, 0.75)])
    anserini_order(np.zeros(2, dtype=np.int64), index.ids, np.ones(2, dtype=np.float32), 1)
