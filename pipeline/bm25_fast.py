"""Lucene's BM25, scored with arrays: Anserini's runs, faster for whole-abstract queries (issue
7; benchmarks/results/search_bm25.md: 8.6x pyserini's best on a 100k pool, 2.3x on 1M).

Lucene spends most of a long query's time walking postings one clause at a time. Here the
pool's postings are plain arrays (term -> documents, term frequencies) and a numba kernel
scores a query's terms over them, one query per thread. The numbers are Lucene's own:
- the tokens are Lucene's: documents and queries go through Anserini's DefaultEnglishAnalyzer
  (StandardTokenizer, lower case, English stop words, Porter stemmer) in a JVM started once in
  this process (pyjnius), a batch of texts per call;
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

import re
from collections.abc import Iterator, Sequence

import numba
import numpy as np
import polars as pl

from pipeline import bm25
from pipeline.bm25 import MAX_CLAUSES

SEPARATOR = "qqqmdcrseparatorqqq"  # a token that analysis leaves alone, between batched texts
_SEPARATOR = re.compile(SEPARATOR, re.IGNORECASE)  # analysis lower-cases: no text may hold it
BATCH = 2000  # texts per JVM call


def _analyzer():
    """Anserini's default English analyzer, in this process's JVM (`bm25.java_class`)."""
    return (bm25.java_class("io.anserini.analysis.AnalyzerUtils"),
            bm25.java_class("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance())


def _analyzed_batches(texts: Sequence[str]) -> Iterator[pl.DataFrame]:
    """Lucene's tokens of `texts`, a batch of texts per JVM call: frames of (text, term), one
    row per token, in text order."""
    utils, analyzer = _analyzer()
    for lo in range(0, len(texts), BATCH):
        batch = texts[lo : lo + BATCH]
        joined = f" {SEPARATOR} ".join(_SEPARATOR.sub(" ", t) for t in batch)
        listed = utils.analyze(analyzer, joined).toString()[1:-1]  # "[a, b, c]"
        tokens = pl.Series("term", listed.split(", ") if listed else [], dtype=pl.String)
        separator = tokens == SEPARATOR
        if int(separator.sum()) != len(batch) - 1:
            raise RuntimeError("the batch separator did not survive analysis")
        yield pl.DataFrame({"text": separator.cum_sum().cast(pl.Int32) + lo,
                            "term": tokens}).filter(~separator)


def analyze(texts: Sequence[str]) -> pl.DataFrame:
    """Lucene's tokens of each text: (text, term), one row per token, in text order."""
    return pl.concat([pl.DataFrame(schema={"text": pl.Int32, "term": pl.String}),
                      *_analyzed_batches(texts)])


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
    """A pool's inverted index as arrays: for term t, docs[ptr[t]:ptr[t+1]] and their tfs; and
    the same pairs by document (for document d, terms fterms[fptr[d]:fptr[d+1]] in term order
    with their tfs ftfs), which pruned queries use to finish their few candidates."""

    def __init__(self, ids: np.ndarray, vocab: pl.DataFrame, ptr: np.ndarray, docs: np.ndarray,
                 tfs: np.ndarray, norms: np.ndarray, sum_length: int, doc_count: int):
        self.ids, self.vocab, self.ptr, self.docs, self.tfs = ids, vocab, ptr, docs, tfs
        self.norms, self.sum_length, self.doc_count = norms, sum_length, doc_count
        self.fptr, self.fterms, self.ftfs = _forward(ptr, docs, tfs, len(ids))


@numba.njit(cache=True)
def _forward(ptr, docs, tfs, n_docs):  # pragma: no cover
    """The postings transposed: per document its (term, tf) pairs in term order."""
    fptr = np.zeros(n_docs + 1, dtype=np.int64)
    for p in range(len(docs)):
        fptr[docs[p] + 1] += 1
    fptr = np.cumsum(fptr)
    fill = fptr[:-1].copy()
    fterms = np.empty(len(docs), dtype=np.int32)
    ftfs = np.empty(len(docs), dtype=np.float32)
    for t in range(len(ptr) - 1):
        for p in range(ptr[t], ptr[t + 1]):
            d = docs[p]
            fterms[fill[d]] = t
            ftfs[fill[d]] = tfs[p]
            fill[d] += 1
    return fptr, fterms, ftfs


def build(ids: np.ndarray, texts: Sequence[str]) -> Postings:
    """Index texts (as `bm25.paper_text` makes them) under `ids`. Terms get ids as they are
    first met; memory is the postings (12 bytes per distinct term of a text) and the vocabulary,
    not the tokens."""
    vocab = pl.DataFrame(schema={"term": pl.String, "term_id": pl.Int32})
    lengths = np.zeros(len(texts), dtype=np.int64)
    pairs = []
    for tokens in _analyzed_batches(texts):
        lengths += np.bincount(tokens["text"].to_numpy(), minlength=len(texts))
        counts = tokens.group_by("text", "term").len("tf")
        new = counts.select(pl.col("term").unique(maintain_order=True)).join(
            vocab, on="term", how="anti")
        vocab = pl.concat([vocab, new.with_columns(
            term_id=pl.int_range(vocab.height, vocab.height + new.height, dtype=pl.Int32))])
        pairs.append(counts.join(vocab, on="term").select(
            "term_id", "text", pl.col("tf").cast(pl.Float32)))
    postings = (pl.concat([pl.DataFrame(schema={"term_id": pl.Int32, "text": pl.Int32,
                                                "tf": pl.Float32}), *pairs])
                .sort("term_id", "text"))
    ptr = np.zeros(vocab.height + 1, dtype=np.int64)
    np.cumsum(np.bincount(postings["term_id"].to_numpy(), minlength=vocab.height),
              out=ptr[1:])
    return Postings(np.asarray(ids), vocab, ptr, postings["text"].to_numpy(),
                    postings["tf"].to_numpy(), encode_length(lengths), int(lengths.sum()),
                    int((lengths > 0).sum()))


def _norm_cache(index: Postings, k1: float, b: float) -> np.ndarray:
    """BM25Similarity's cache[256], float32 as Lucene computes it, per document."""
    k1, b = np.float32(k1), np.float32(b)
    avgdl = np.float32(index.sum_length / float(index.doc_count))
    table = decode_length(np.arange(256, dtype=np.uint8)).astype(np.float32)
    cache = np.float32(1) / (k1 * ((np.float32(1) - b) + b * table / avgdl))
    return cache[index.norms]


def _query_terms(index: Postings, texts: Sequence[str]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query: its terms found in the pool and their weights (count x idf, float32)."""
    counts = (analyze(texts).group_by("text", "term").len("count")
              .join(index.vocab, on="term").sort("text", "term_id"))
    df = np.diff(index.ptr)[counts["term_id"].to_numpy()].astype(np.float64)
    n = float(index.doc_count)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
    weights = counts["count"].to_numpy().astype(np.float32) * idf
    q_ptr = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.bincount(counts["text"].to_numpy(), minlength=len(texts)), out=q_ptr[1:])
    return q_ptr, counts["term_id"].to_numpy().astype(np.int32), weights


@numba.njit(cache=True)
def _term_maxima(ptr, docs, tfs, norm_inv):  # pragma: no cover
    """Per term, the largest tf x cache[norm] of its postings: its score can be no higher than
    weight - weight / (1 + that), Lucene's float32 operations being monotone."""
    out = np.zeros(len(ptr) - 1, dtype=np.float32)
    for t in range(len(ptr) - 1):
        top = np.float32(0.0)
        for p in range(ptr[t], ptr[t + 1]):
            x = tfs[p] * norm_inv[docs[p]]
            if x > top:
                top = x
        out[t] = top
    return out


PRUNE_MARGIN = 1e-5  # relative: far above float32 rounding, so pruning never changes a score
CANDIDATE_COST = 8.0  # a candidate's merge step against a scored posting (measured, roughly)


@numba.njit(cache=True)
def _threshold(acc, k, reach, top):  # pragma: no cover
    """(theta, candidates): a value that at least k entries of acc reach, just below their
    k-th largest, lowered by PRUNE_MARGIN; and about how many entries reach theta - reach
    (rounded up to whole bins). One branch-free pass and a histogram of 4,096 bins over
    [0, top] (top: at least the largest entry), not a selection."""
    bins = 4096
    hist = np.zeros(bins + 2, dtype=np.int64)
    scale = bins / top
    for v in acc:
        hist[int(v * scale)] += 1
    count, theta = 0, 0.0
    for b in range(bins + 1, 0, -1):
        count += hist[b]
        if count >= k:
            theta = (b / scale) * (1.0 - 1e-9) * (1.0 - PRUNE_MARGIN)
            break
    if theta <= reach:
        return theta, len(acc)
    return theta, hist[int((theta - reach) * scale):].sum()


@numba.njit(parallel=True, cache=True)
def _scores(q_ptr, q_terms, q_weights, ptr, docs, tfs, norm_inv, maxima, fptr, fterms, ftfs,
            n_docs, k, prune, out, kth, pruned, sums, lookup):  # pragma: no cover
    """out[q, d]: Lucene's BM25 of document d for query q, for every document that can reach
    the top k (0 elsewhere); kth[q]: the k-th largest of out[q] (0 when k covers every
    document); pruned[q]: the query's terms left to the candidates (0: none).

    Exact pruning, term at a time (MaxScore's bound): terms go in order of their highest
    possible score; every partial sum is a lower bound of a document's score, so the k-th
    largest partial sum (theta) bounds the k-th score from below. Once the highest score the
    remaining terms could add is below theta, no document outside those whose partial sum
    plus that bound reaches theta can enter the top k (nor tie with it); the remaining terms
    are scored for those candidates only, from the documents' own term lists. Partial sums
    are in float64, exact for float32 terms, so the order of terms changes no score.
    sums (float64, a row of n_docs per thread) and lookup (float32, a row of the vocabulary
    size per thread, all 0) are work space."""
    for q in numba.prange(len(q_ptr) - 1):
        terms = q_terms[q_ptr[q] : q_ptr[q + 1]]
        weights = q_weights[q_ptr[q] : q_ptr[q + 1]]
        n_terms = len(terms)
        bound = np.empty(n_terms, dtype=np.float64)
        total = 0
        for j in range(n_terms):
            w = weights[j]
            bound[j] = w - w / (np.float32(1.0) + maxima[terms[j]])
            total += ptr[terms[j] + 1] - ptr[terms[j]]
        order = np.argsort(-bound)
        rest = np.zeros(n_terms + 1, dtype=np.float64)  # rest[i]: bound of order[i:]
        for i in range(n_terms - 1, -1, -1):
            rest[i] = rest[i + 1] + bound[order[i]]
        acc, weight_of = sums[numba.get_thread_id()], lookup[numba.get_thread_id()]
        acc[:] = 0
        cut, theta, done, checked = n_terms, 0.0, 0, 0
        for i in range(n_terms):
            t, w = terms[order[i]], weights[order[i]]
            for p in range(ptr[t], ptr[t + 1]):
                d = docs[p]
                acc[d] += w - w / (np.float32(1.0) + tfs[p] * norm_inv[d])
            done += ptr[t + 1] - ptr[t]
            # a check reads every partial sum: at most one per n_docs / 2 postings scored
            if prune and i + 1 < n_terms and k < n_docs and 2 * (done - checked) >= n_docs:
                checked = done
                reach = rest[i + 1] * (1.0 + PRUNE_MARGIN)
                top = (rest[0] - rest[i + 1]) * (1.0 + PRUNE_MARGIN) + 1e-30  # >= any sum
                theta, candidates = _threshold(acc, k, reach, top)
                # stop when finishing the candidates costs well under the postings left
                work = candidates * ((fptr[n_docs] / n_docs) + n_terms - i - 1)
                if reach < theta and CANDIDATE_COST * work <= total - done:
                    cut = i + 1
                    break
        row = out[q]
        if cut == n_terms:
            for d in range(n_docs):
                row[d] = np.float32(acc[d])
            kth[q] = np.partition(row, n_docs - k)[n_docs - k] if k < n_docs else 0
            pruned[q] = 0
            continue
        for i in range(cut, n_terms):  # the remaining terms, looked up by term id
            weight_of[terms[order[i]]] = weights[order[i]]
        reach = rest[cut] * (1.0 + PRUNE_MARGIN)
        row[:] = 0
        found = 0
        for d in range(n_docs):
            if acc[d] > 0 and acc[d] + reach >= theta:
                score = acc[d]
                for x in range(fptr[d], fptr[d + 1]):
                    w = weight_of[fterms[x]]
                    if w > 0:
                        score += w - w / (np.float32(1.0) + ftfs[x] * norm_inv[d])
                row[d] = np.float32(score)
                found += 1
        for i in range(cut, n_terms):
            weight_of[terms[order[i]]] = 0
        values = np.empty(found, dtype=np.float32)
        m = 0
        for d in range(n_docs):
            if row[d] > 0:
                values[m] = row[d]
                m += 1
        kth[q] = np.partition(values[:m], m - k)[m - k]
        pruned[q] = n_terms - cut


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


def search(index: Postings, texts: Sequence[str], k: int, k1: float = 0.9, b: float = 0.4,
           chunk: int = 64, prune: bool = True, stats: dict | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lucene's BM25 of the top k per query, plus the documents tied with the k-th: (query
    row, doc id, float32 score), matching documents only (score > 0). `prune=False` scores
    every posting (the same result, slower); `stats` receives how many queries were pruned."""
    norm_inv = _norm_cache(index, k1, b)
    maxima = _term_maxima(index.ptr, index.docs, index.tfs, norm_inv)
    q_ptr, q_terms, q_weights = _query_terms(index, texts)
    n_docs = len(index.ids)
    rows, found, values = [], [], []
    out = np.empty((min(chunk, len(texts)), n_docs), dtype=np.float32)
    kth = np.empty(len(out), dtype=np.float32)
    pruned = np.zeros(len(texts), dtype=np.int64)  # terms left to the candidates, per query
    # work space, a row per thread (zeros are calloc'ed: rows of idle threads take no memory)
    threads = numba.config.NUMBA_NUM_THREADS
    sums = np.zeros((threads, n_docs), dtype=np.float64)
    lookup = np.zeros((threads, len(index.ptr) - 1), dtype=np.float32)
    for lo in range(0, len(texts), chunk):
        hi = min(lo + chunk, len(texts))
        block = out[: hi - lo]
        _scores(q_ptr[lo : hi + 1] - q_ptr[lo], q_terms[q_ptr[lo] : q_ptr[hi]],
                q_weights[q_ptr[lo] : q_ptr[hi]], index.ptr, index.docs, index.tfs, norm_inv,
                maxima, index.fptr, index.fterms, index.ftfs, n_docs, k, prune, block, kth,
                pruned[lo:hi], sums, lookup)
        for r in range(hi - lo):
            scores = block[r]
            keep = np.flatnonzero(scores >= max(kth[r], np.float32(1e-30)))
            rows.append(np.full(len(keep), lo + r))
            found.append(keep)
            values.append(scores[keep])
    if stats is not None:
        stats.update(queries=len(texts), pruned=int((pruned > 0).sum()),
                     terms=len(q_terms), terms_left=int(pruned.sum()))
    return (np.concatenate(rows), index.ids[np.concatenate(found)], np.concatenate(values))


def search_grid(queries: pl.DataFrame, papers: pl.DataFrame, k: int, k1s: Sequence[float],
                bs: Sequence[float], threads: int = 2, max_clauses: int = MAX_CLAUSES
                ) -> tuple[dict[tuple[float, float], pl.DataFrame], list]:
    """`bm25.search_grid` on the pool's papers (corpusid, title, abstract) instead of a Lucene
    index: the pool is analysed once, every (k1, b) scored on it; the hits (query, doc,
    score) of each pair and the ids of queries cut to `max_clauses` terms."""
    bm25.check_ids(papers["corpusid"], "document")
    texts, capped = bm25.query_texts(queries, max_clauses, lambda: papers)
    index = build(papers["corpusid"].to_numpy(), bm25.paper_text(papers).to_list())
    query_ids = queries["corpusid"].to_numpy()
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    runs = {}
    for k1 in k1s:
        for b in bs:
            hits = anserini_order(*search(index, texts, k, k1, b), k)
            runs[(k1, b)] = pl.DataFrame({
                "query": pl.Series(query_ids[hits["row"].to_numpy()],
                                   dtype=queries["corpusid"].dtype),
                "doc": pl.Series(hits["doc"], dtype=papers["corpusid"].dtype),
                "score": hits["score"].cast(pl.Float64)})
    return runs, capped


def warm_up() -> None:
    """Compile the numba kernels (or load numba's cache) on a two-document index, without the
    JVM, so that the first BM25 search after an install does not pay the JIT (`make setup`)."""
    index = Postings(np.arange(2), pl.DataFrame(schema={"term": pl.String, "term_id": pl.Int32}),
                     np.array([0, 2, 3]), np.array([0, 1, 1], dtype=np.int32),
                     np.ones(3, dtype=np.float32), encode_length(np.array([2, 1])), 3, 2)
    norm_inv = _norm_cache(index, 0.9, 0.4)
    maxima = _term_maxima(index.ptr, index.docs, index.tfs, norm_inv)
    out, kth, pruned = (np.empty((1, 2), dtype=np.float32), np.empty(1, dtype=np.float32),
                        np.zeros(1, dtype=np.int64))
    _scores(np.array([0, 2]), np.array([0, 1], dtype=np.int32), np.ones(2, dtype=np.float32),
            index.ptr, index.docs, index.tfs, norm_inv, maxima, index.fptr, index.fterms,
            index.ftfs, 2, 1, True, out, kth, pruned[0:1],
            np.zeros((numba.config.NUMBA_NUM_THREADS, 2)),
            np.zeros((numba.config.NUMBA_NUM_THREADS, 2), dtype=np.float32))
    anserini_order(np.zeros(2, dtype=np.int64), index.ids, out[0], 1)
