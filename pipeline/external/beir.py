"""Read a test collection in BEIR's layout into a corpus and one pool (SciDocs, NFCorpus,
TREC-COVID, ...), so embed, index, search and eval run on it unchanged.

Input folder: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`),
`qrels/<split>.tsv` (header, then query-id, corpus-id, score). Output: `corpora/<name>/`
with `prefiltered.parquet` (every document: corpusid as a string, title, abstract = text), a
manifest with a `collection` section (no ingest or prefilter: the Makefile leaves it alone),
and the pool `beir-<documents>-r0` (`-val` for the dev split), whose queries carry their own
text (title = the query, abstract empty) and whose qrels keep the graded relevance. The pool
is scored with the `beir` metric set (nDCG@10, R@100) unless METRICS says otherwise.
Ids stay strings; a query whose id is also a document's never retrieves that document (as
BEIR's evaluation ignores identical ids; the search stage drops such self hits), and the import
counts such queries; a judgment of a query's own id is left out of the qrels and counted (no
run can rank it; BEIR's evaluation would keep it). Qrels naming an unknown query or document are
dropped and counted, and so are repeats of a judgment (same pair, same grade; a pair judged
with two grades is refused); queries without qrels in the split are not in the pool (counted).
A document or query record repeated exactly is read once (counted); an id given twice with
other contents is refused. A query without text (empty, null or missing) is left out with its
judgments, counted and logged; a document without text is kept (counted). The counts
reconcile: queries_read = queries + duplicate_queries_dropped + queries_without_text_left_out +
queries_without_qrels_left_out. The files are UTF-8, with or without a byte-order mark; a line
that is not (or not a JSON object) is refused with its number.

With `judged` (make import-beir JUDGED=1) a second pool, `judged-<longest list>-r0`, holds the
same queries, each ranking only the documents judged for it (grade 0 included), as SciDocs
scores its 5 cited + 25 uncited papers: its candidates name their query, as an MDCR-style
pool's do (pipeline/retrieval/runs.py: `own_lists`). Scored with the `judged` set (nDCG@10,
MAP, NDCG).
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import NamedTuple

import polars as pl

from pipeline.core.atomic import scratch_dir
from pipeline.core.checksums import fingerprint, fingerprints
from pipeline.core.errors import InputError
from pipeline.core.files import write_json, write_parquet
from pipeline.core.inputs import corpus_label
from pipeline.core.manifests import manifest
from pipeline.core.textfiles import read_bytes, read_jsonl, utf8_problem
from pipeline.corpus.install import claim_corpus, install_corpus
from pipeline.layout import (
    BEIR_CORPUS,
    BEIR_QRELS_HEADER,
    BEIR_QUERIES,
    BEIR_SPLITS,
    MANIFEST,
    POOL_FILES,
    PREFILTERED,
    beir_qrels_file,
    pool_dir,
    pool_name,
    pool_split,
)

log = logging.getLogger(__name__)


def _read_jsonl(path: Path, columns: dict[str, pl.DataType], what: str
                ) -> tuple[pl.DataFrame, int]:
    """The records of a BEIR JSON-lines file (with `record`, 1-based) and how many repeat an
    earlier record exactly (dropped, counted). An id given twice with other contents has no
    one answer: refused, naming both records."""
    if not path.exists():
        raise InputError(f"{path} does not exist: give SRC=<folder> holding corpus.jsonl, "
                         "queries.jsonl and qrels/ (BEIR's layout)")
    frame = read_jsonl(path, columns, "fix that line (BEIR's layout: a JSON object per line)"
                       ).with_row_index("record", offset=1)
    return unique_records(frame, what, str(path))


def unique_records(frame: pl.DataFrame, what: str, where: str) -> tuple[pl.DataFrame, int]:
    """`frame`'s records (`_id`, its fields, `record`: 1-based) each once, and how many repeat
    an earlier record exactly (dropped, counted). An id given twice with other contents has no
    one answer: refused, naming both records of `where` (the file or collection read); so is
    an id that a TREC run cannot hold (empty, or holding whitespace)."""
    from pipeline.retrieval.bm25.analysis import check_ids

    if frame["_id"].null_count():
        raise InputError(f"{where}: {frame['_id'].null_count()} records have no _id; fix or "
                         "remove them")
    check_ids(frame["_id"], what, where)
    fields = [c for c in frame.columns if c != "record"]
    unique = frame.unique(fields, keep="first", maintain_order=True)
    clash = unique.filter(pl.len().over("_id") > 1)
    if clash.height:
        first, second = clash.filter(pl.col("_id") == clash["_id"][0])["record"].head(2)
        raise InputError(f"{where}: the {what} id {clash['_id'][0]!r} is given twice with "
                         f"different contents (records {first} and {second}): keep one")
    return unique, frame.height - unique.height


def _read_qrels(path: Path) -> pl.DataFrame:
    """The judgments (query, doc, rel, line: 1-based in the file) under the header line. A
    first line that is a judgment (its score an integer: the header was left out) would be
    lost as the header, a grade that is not an integer would be guessed at, and a pair judged
    twice with different grades has no one answer: each is refused. Blank lines are not
    judgments. Each line is one judgment, its fields taken literally: a quote is part of an id
    (BEIR's csv reader would start a quoted field at it, joining the lines up to the next
    quote), as export-beir writes it."""
    if not path.exists():
        raise InputError(f"{path} does not exist: the split's judgments (qrels/<split>.tsv); "
                         "choose SPLIT=test or SPLIT=dev")
    data = read_bytes(path, "BEIR's qrels (tab-separated query-id, corpus-id, score under a "
                            "header line)")
    try:  # every field literal: a quote is part of an id, never a field's start
        rows = pl.read_csv(io.BytesIO(data), separator="\t", has_header=False,
                           infer_schema=False, quote_char=None)
    except pl.exceptions.PolarsError as exc:
        problem = utf8_problem(path) or f"unreadable ({str(exc).splitlines()[0]})"
        raise InputError(f"{path}: {problem}; BEIR's qrels are tab-separated query-id, "
                         "corpus-id, score under a header line") from None
    if rows.width != 3:
        raise InputError(f"{path}: {rows.width} tab-separated columns, not 3: BEIR's qrels are "
                         "query-id, corpus-id, score under a header line")
    rows = rows.rename(dict(zip(rows.columns, ["query", "doc", "grade"], strict=True)))
    rows = rows.with_row_index("line", offset=1).with_columns(
        rel=pl.col("grade").str.strip_chars().cast(pl.Int32, strict=False))
    if rows.height and rows["rel"][0] is not None:
        first = "\t".join(str(v) for v in rows.row(0)[1:4])
        raise InputError(f"{path}: the header line is missing (line 1 is a judgment, "
                         f"{first!r}): add the line {BEIR_QRELS_HEADER!r} at the top, as BEIR's "
                         "qrels have")
    rows = rows.slice(1).filter(~pl.all_horizontal(pl.col("query", "doc", "grade").is_null()))
    bad = rows.filter(pl.col("rel").is_null())
    if bad.height:
        line, grade = bad.select("line", "grade").row(0)
        what = "has no score" if grade is None else f"has the score {grade!r}, not an integer"
        more = f" (and {bad.height - 1} more lines)" if bad.height > 1 else ""
        raise InputError(f"{path}:{line}: the judgment {what}{more}; write an integer grade "
                         "(0 = not relevant)")
    return one_grade_per_pair(rows.select("query", "doc", "rel", "line"), str(path))


def one_grade_per_pair(qrels: pl.DataFrame, where: str) -> pl.DataFrame:
    """`qrels` (query, doc, rel, line: 1-based in `where`) unless a pair is judged twice with
    different grades, which has no one answer: refused, naming both lines."""
    clash = qrels.filter(pl.col("rel").n_unique().over("query", "doc") > 1).sort("line")
    if clash.height:
        query, doc, rel, line = clash.select("query", "doc", "rel", "line").row(0)
        other = clash.filter(pl.col("query") == query, pl.col("doc") == doc,
                             pl.col("rel") != rel).select("rel", "line").row(0)
        raise InputError(f"{where}: the pair query {query}, document {doc} is judged twice "
                         f"with different grades ({rel} on line {line}, {other[0]} on line "
                         f"{other[1]}): keep one judgment per pair")
    return qrels


def import_beir(src: Path, corpus_dir: Path, split: str = "test", replace: bool = False,
                derived: tuple[Path, ...] = (), judged: bool = False) -> dict:
    """Write the collection at `src` as the corpus `corpus_dir` and its `split` pool (and with
    `judged` its judged-only pool): a new corpus; the same collection again (nothing changes, or
    the split's pools are added beside the others); or, only with `replace`, in place of a
    collection with other contents, whose `derived` indexes and runs are removed
    (`corpus.install.install_corpus`)."""
    split = pool_split(split)
    claim_corpus(corpus_dir, "make import-beir")
    docs, repeated_docs = _read_jsonl(src / BEIR_CORPUS, {
        "_id": pl.String, "title": pl.String, "text": pl.String}, "document")
    queries, repeated_queries = _read_jsonl(src / BEIR_QUERIES, {
        "_id": pl.String, "text": pl.String}, "query")
    qrels = _read_qrels(src / beir_qrels_file(split))
    return write_collection(
        Collection(docs, repeated_docs, queries, repeated_queries, qrels,
                   f"{src}: no query of {BEIR_QUERIES} has judgments in "
                   f"{beir_qrels_file(split)} that name a document of {BEIR_CORPUS}"),
        corpus_dir, split, "import-beir", {"source": str(src), "split": BEIR_SPLITS[split],
                                           "field": None}, replace, derived, judged)


class Collection(NamedTuple):
    """A test collection as read, before anything is left out: documents (`_id`, `title`,
    `text`, `record`) and queries (`_id`, `text`, `record`), each record once
    (`unique_records`) with the number of exact repeats dropped; judgments (`query`, `doc`,
    `rel`, `line`), one grade per pair (`one_grade_per_pair`); and the one line refusing it
    when no query is left with a judgment."""

    docs: pl.DataFrame
    repeated_docs: int
    queries: pl.DataFrame
    repeated_queries: int
    qrels: pl.DataFrame
    no_queries: str


def write_collection(read: Collection, corpus_dir: Path, split: str, command: str,
                     parameters: dict, replace: bool = False,
                     derived: tuple[Path, ...] = (), judged: bool = False) -> dict:
    """Write the collection `read` (by `command`, from `parameters`) as the corpus
    `corpus_dir` and its `split` pool, and with `judged` its judged-only pool (`judged_pool`):
    what every import of a BEIR-style collection shares (BEIR's files, an ir_datasets
    collection), so the same collection gives the same corpus whichever way it came. Leaves
    out, counts and logs what no run could be scored on (module docstring), then what was kept
    (`summary`)."""
    docs, repeated_docs = read.docs, read.repeated_docs
    queries, repeated_queries, qrels = read.queries, read.repeated_queries, read.qrels
    # queries_read = queries (the pool's) + repeated + without text + without qrels
    counts = {"documents_read": docs.height + repeated_docs,
              "duplicate_documents_dropped": repeated_docs,
              "documents_without_text": docs.filter(
                  pl.concat_str(pl.col("title", "text").fill_null("")).str.strip_chars() == ""
              ).height,
              "queries_read": queries.height + repeated_queries,
              "duplicate_queries_dropped": repeated_queries, "qrels_read": qrels.height}
    docs = docs.drop("record").sort("_id")
    textless = queries.filter(pl.col("text").fill_null("").str.strip_chars() == "")
    counts["queries_without_text_left_out"] = textless.height
    queries = queries.join(textless.select("_id"), on="_id", how="anti").drop("record")
    # qrels_read = kept + duplicate pairs (same grade) + of queries without text + unknown
    # document or query + of the query itself
    qrels = qrels.unique(["query", "doc"], keep="first").drop("line")
    counts["qrels_duplicate_pairs_dropped"] = counts["qrels_read"] - qrels.height
    of_textless = qrels.join(textless.select(query="_id"), on="query", how="semi")
    counts["qrels_of_queries_without_text_dropped"] = of_textless.height
    qrels = qrels.join(textless.select(query="_id"), on="query", how="anti")
    known = qrels.join(docs.select(doc="_id"), on="doc", how="semi").join(
        queries.select(query="_id"), on="query", how="semi")
    counts["qrels_dropped_unknown_document_or_query"] = qrels.height - known.height
    # a query is never its own candidate: its id among the documents is never ranked for it
    # (the search stage drops self hits), so a judgment of it is left out, counted
    itself = known.filter(pl.col("query") == pl.col("doc"))
    counts["qrels_of_the_query_itself_left_out"] = itself.height
    counts["qrels_of_the_query_itself_relevant"] = itself.filter(pl.col("rel") > 0).height
    qrels = known.filter(pl.col("query") != pl.col("doc")).sort("query", "doc")
    with_qrels = queries.join(qrels.select(_id="query").unique(), on="_id", how="semi")
    counts["queries_without_qrels_left_out"] = queries.height - with_qrels.height
    queries = with_qrels.sort("_id")
    counts["queries_whose_id_is_a_document"] = queries.join(
        docs.select("_id"), on="_id", how="semi").height
    if textless.height:
        log.warning(f"[{command}] {textless.height} queries without text (empty, null or "
                    f"missing, e.g. {textless['_id'].sort()[0]}) left out, with their "
                    f"{of_textless.height} judgments: a query without text retrieves nothing")
    if itself.height:
        log.warning(f"[{command}] {itself.height} judgments of a query's own id as a "
                    f"document ({counts['qrels_of_the_query_itself_relevant']} relevant, e.g. "
                    f"{itself['query'].sort()[0]}) left out: a query never retrieves itself")
    if queries.is_empty():
        raise InputError(read.no_queries)
    papers = docs.select(corpusid="_id", title=pl.col("title").fill_null(""),
                         abstract=pl.col("text").fill_null(""))
    name = pool_name("beir", papers.height, 0, 0, split)
    counts.update(queries=queries.height, candidates=papers.height, qrels=qrels.height,
                  relevant=qrels.filter(pl.col("rel") > 0).height)
    query_table = queries.select(corpusid="_id", field=pl.lit(None, pl.String), title="text",
                                 abstract=pl.lit(""))
    pools = [Pool(name, "beir", "beir", parameters, counts,
                  (query_table, papers.select("corpusid", type=pl.lit("document")), qrels))]
    if judged:
        pools.append(judged_pool(query_table, qrels, split, parameters))
    with scratch_dir(corpus_dir.parent, corpus_dir.name) as tmp:
        write_parquet(papers.to_arrow(), tmp / PREFILTERED)
        made_from = {corpus_label(PREFILTERED):
                     fingerprint(tmp / PREFILTERED)["sha256"]}
        for pool in pools:
            folder = pool_dir(tmp, pool.name)
            for file, table in zip(POOL_FILES, pool.tables, strict=True):
                write_parquet(table.to_arrow(), folder / file)
            write_json(manifest(command, pool.parameters, name=pool.name, scope=pool.scope,
                                split=split, level="collection", metrics=pool.metrics,
                                inputs=made_from, outputs=fingerprints(folder, POOL_FILES),
                                counts=pool.counts),
                       folder / MANIFEST)
        info = {"collection": manifest(command, parameters, outputs=fingerprints(
            tmp, [PREFILTERED]), counts=counts, pools=[pool.name for pool in pools])}
        write_json(info, tmp / MANIFEST)
        info["collection"]["installed"] = install_corpus(tmp, corpus_dir, list(derived),
                                                         replace, "collection")
    log.info(summary(command, corpus_dir.name, info["collection"]))
    for pool in pools[1:]:  # the judged-only pool
        log.info(f"[{command}] judged-only pool {pool.name}: each of its "
                 f"{pool.counts['queries']} queries ranks only its own judged documents "
                 f"({pool.counts['pairs']} pairs, {pool.counts['relevant']} relevant)")
    return info


class Pool(NamedTuple):
    """A pool of a collection as written: its name, scope, metric set, parameters, counts and
    tables (queries, candidates, qrels)."""

    name: str
    scope: str
    metrics: str
    parameters: dict
    counts: dict
    tables: tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]


JUDGED_SCOPE = "judged"  # the scope of a collection's judged-only pool


def judged_pool(queries: pl.DataFrame, qrels: pl.DataFrame, split: str,
                parameters: dict) -> Pool:
    """The judged-only pool of a collection: its `queries` (the whole pool's), each ranking
    only the documents its `qrels` judge (grade 0 included), as SciDocs scores its 5 cited +
    25 uncited papers. Its candidates name their query (query, corpusid), as an MDCR-style
    pool's do, so search ranks each query's own list (retrieval/runs.py: `own_lists`). Named
    after its longest list. Refused where no judgment grades a document 0 or below: every list
    would hold relevant documents only."""
    lists = qrels.group_by("query").agg(pairs=pl.len(), judged_not_relevant=(
        pl.col("rel") <= 0).sum())
    if not lists["judged_not_relevant"].sum():
        raise InputError(f"JUDGED=1: the {split} judgments grade no document 0 (not "
                         "relevant), so each query's judged documents are all relevant and "
                         "every ranking of them scores 1: leave out JUDGED")
    candidates = qrels.select("query", corpusid="doc")
    counts = {"queries": queries.height, "candidates": candidates["corpusid"].n_unique(),
              "pairs": candidates.height, "qrels": qrels.height,
              "relevant": qrels.filter(pl.col("rel") > 0).height,
              "min_candidates_per_query": int(lists["pairs"].min()),
              "max_candidates_per_query": int(lists["pairs"].max()),
              "queries_without_judged_not_relevant": lists.filter(
                  pl.col("judged_not_relevant") == 0).height}
    name = pool_name(JUDGED_SCOPE, counts["max_candidates_per_query"], 0, 0, split)
    return Pool(name, JUDGED_SCOPE, "judged", {**parameters, "judged": True}, counts,
                (queries, candidates, qrels))


def summary(command: str, corpus: str, info: dict) -> str:
    """What an import of a BEIR-style collection kept and left out: each count of what was
    read adds up, read = kept + each reason (docs/collections.md)."""
    counts = info["counts"]
    return (f"[{command}] corpus {corpus} ({info['installed']}), pool "
            f"{info['pools'][0]}: {counts['candidates']} documents of "
            f"{counts['documents_read']} read ({counts['duplicate_documents_dropped']} exact "
            f"repeats), {counts['queries']} queries of {counts['queries_read']} read "
            f"({counts['duplicate_queries_dropped']} exact repeats, "
            f"{counts['queries_without_text_left_out']} without text, "
            f"{counts['queries_without_qrels_left_out']} without judgments in this split), "
            f"{counts['qrels']} judgments of {counts['qrels_read']} read "
            f"({counts['qrels_duplicate_pairs_dropped']} repeated, "
            f"{counts['qrels_of_queries_without_text_dropped']} of queries without text, "
            f"{counts['qrels_dropped_unknown_document_or_query']} naming an unknown document "
            f"or query, {counts['qrels_of_the_query_itself_left_out']} of the query itself)")
