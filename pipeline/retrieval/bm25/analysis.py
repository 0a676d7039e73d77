"""How papers and queries become BM25's text and terms, for both engines (docs/retrieval.md).

A paper's text is its title and abstract, whitespace normalised (`paper_text`); a query's is
cut to Lucene's clause limit where it is longer (`query_texts`). The terms are Lucene's:
Anserini's DefaultEnglishAnalyzer (StandardTokenizer, lower case, English stop words, Porter
stemmer), called in this process's JVM (`jvm.java_class`, pyjnius) a batch of texts at a time
(`analyze`, `term_counts`). Lucene analyses the texts it indexes and searches itself; the
arrays engine asks this module, so that its terms are Lucene's, token for token: this is why it
needs Java, and this module is all it imports from the JVM side (it never imports lucene.py).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import polars as pl

from pipeline.core.errors import InputError
from pipeline.retrieval.bm25 import jvm

log = logging.getLogger(__name__)
MAX_CLAUSES = 1024  # Lucene's default BooleanQuery clause limit
# Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), removed before counting
STOPWORDS = frozenset(
    ("a an and are as at be but by for if in into is it no not of on or such that the their "
     "then there these they this to was will with").split()
)
_TOKEN = re.compile(r"[a-z0-9]+")


def paper_text(df: pl.DataFrame) -> pl.Series:
    """Title and abstract as one whitespace-normalised string per paper."""
    return df.select(
        pl.concat_str(pl.col("title").fill_null(""), pl.col("abstract").fill_null(""),
                      separator=" ").str.replace_all(r"\s+", " ").str.strip_chars()
    ).to_series()


def check_ids(ids: pl.Series, what: str, where: str = "") -> None:
    """Ids are written into TREC files (space separated) and Anserini topics (tab separated):
    string ids with whitespace, or empty ones, cannot be told apart there. `where`: the file
    or collection they come from, named first."""
    if ids.dtype == pl.String:
        bad = ids.filter(ids.str.contains(r"\s") | (ids.str.len_chars() == 0) | ids.is_null())
        if bad.len():
            raise InputError(f"{f'{where}: ' if where else ''}{bad.len()} {what} ids are empty "
                             f"or hold whitespace (first: {bad[0]!r}): TREC runs cannot hold "
                             "them; rename those ids")


SEPARATOR = "qqqmdcrseparatorqqq"  # a token that analysis leaves alone, between batched texts
_SEPARATOR = re.compile(SEPARATOR, re.IGNORECASE)  # analysis lower-cases: no text may hold it
BATCH = 2000  # texts per JVM call


def _analyzer():
    """Anserini's default English analyzer, in this process's JVM (`jvm.java_class`)."""
    return (jvm.java_class("io.anserini.analysis.AnalyzerUtils"),
            jvm.java_class("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance())


def _analyzed_batch(texts: Sequence[str], lo: int) -> pl.DataFrame:
    """Lucene's tokens of texts[lo:lo + BATCH] in one JVM call: (text, term), one row per
    token, in text order. Any thread may call it (pyjnius attaches it to the JVM; the
    analyzer is the calling thread's own, and the thread is detached again)."""
    utils, analyzer = _analyzer()  # first: importing jnius would start the JVM bare
    import jnius

    batch = texts[lo : lo + BATCH]
    joined = f" {SEPARATOR} ".join(_SEPARATOR.sub(" ", t) for t in batch)
    listed = utils.analyze(analyzer, joined).toString()[1:-1]  # "[a, b, c]"
    if threading.current_thread() is not threading.main_thread():
        jnius.detach()
    tokens = (pl.Series("term", [listed], dtype=pl.String).str.split(", ").explode()
              if listed else pl.Series("term", [], dtype=pl.String))  # split in Rust
    separator = tokens == SEPARATOR
    if int(separator.sum()) != len(batch) - 1:
        raise RuntimeError("the batch separator did not survive analysis")
    return pl.DataFrame({"text": separator.cum_sum().cast(pl.Int32) + lo,
                         "term": tokens}).filter(~separator)


def _analyzed_batches(texts: Sequence[str], threads: int = 2) -> Iterator[pl.DataFrame]:
    """Lucene's tokens of `texts`, batch after batch, in text order; `threads` batches are
    analysed at a time (the JVM runs them in parallel), no more held in memory."""
    if len(texts) <= BATCH or threads < 2:
        for lo in range(0, len(texts), BATCH):
            yield _analyzed_batch(texts, lo)
        return
    _analyzer()  # the JVM starts in the main thread
    with ThreadPoolExecutor(min(threads, -(-len(texts) // BATCH))) as pool:  # one per batch
        window: deque = deque()
        for lo in range(0, len(texts), BATCH):
            window.append(pool.submit(_analyzed_batch, texts, lo))
            if len(window) > threads:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()


def analyze(texts: Sequence[str]) -> pl.DataFrame:
    """Lucene's tokens of each text: (text, term), one row per token, in text order."""
    return pl.concat([pl.DataFrame(schema={"text": pl.Int32, "term": pl.String}),
                      *_analyzed_batches(texts)])


def count_terms(tokens: pl.DataFrame) -> pl.DataFrame:
    """(text, term) tokens -> (text, term, tf): each text's distinct terms, sorted, with the
    number of times it holds them (a document's length is the sum of its tfs)."""
    return (tokens.group_by("text", "term").len("tf")
            .with_columns(pl.col("tf").cast(pl.Int32)).sort("text", "term"))


def term_counts(texts: Sequence[str], threads: int = 2) -> Iterator[pl.DataFrame]:
    """`count_terms` of texts, batch after batch (`_analyzed_batches`)."""
    for tokens in _analyzed_batches(texts, threads):
        yield count_terms(tokens)


def cap_query(text: str, doc_freq: dict[str, int], n_docs: int,
              max_terms: int = MAX_CLAUSES) -> tuple[str, bool]:
    """Keep at most `max_terms` unique terms, each repeated tf times: first the terms that
    occur in the pool (others cannot match), by tf-idf, highest first.

    Lucene refuses queries with more than 1024 clauses; Anserini makes one clause per unique
    analysed term, so only very long queries are cut (docs/retrieval.md).
    """
    terms = Counter(t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS)
    if len(terms) <= max_terms:
        return text, False

    def priority(term: str) -> tuple[bool, float, str]:
        df = doc_freq.get(term, 0)
        return df == 0, -terms[term] * math.log((n_docs + 1) / (df + 1)), term

    kept = sorted(terms, key=priority)[:max_terms]
    return " ".join(" ".join([t] * terms[t]) for t in sorted(kept)), True


def _document_frequencies(index_papers: pl.DataFrame) -> dict[str, int]:
    tokens = paper_text(index_papers).str.to_lowercase().str.extract_all(r"[a-z0-9]+")
    frame = pl.DataFrame({"doc": range(len(tokens)), "term": tokens}).explode("term").unique()
    counts = frame.group_by("term").len()
    return dict(zip(counts["term"], counts["len"], strict=True))


def query_texts(queries: pl.DataFrame, max_clauses: int = MAX_CLAUSES,
                pool_papers: Callable[[], pl.DataFrame] | None = None) -> tuple[list[str], list]:
    """Each query paper's text as searched (title + abstract, cut to `max_clauses` unique
    terms where longer), and the ids of the queries that were cut."""
    check_ids(queries["corpusid"], "query")
    texts = paper_text(queries).str.replace_all("\t", " ").to_list()
    too_long = [i for i, t in enumerate(texts) if len(set(_TOKEN.findall(t.lower()))) >
                max_clauses]
    capped: list = []
    if too_long:
        if pool_papers is None:
            raise ValueError("queries need capping: pass pool_papers for document frequencies")
        papers = pool_papers()
        doc_freq = _document_frequencies(papers)
        for i in too_long:
            texts[i], cut = cap_query(texts[i], doc_freq, papers.height, max_clauses)
            if cut:
                capped.append(queries["corpusid"][i])
        log.info(f"[bm25] {len(capped)} queries cut to {max_clauses} terms: {capped[:10]}")
    return texts, capped
