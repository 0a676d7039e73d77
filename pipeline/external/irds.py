"""Read a test collection of the ir_datasets package (`beir/scidocs`, `nfcorpus/test`,
`antique/test`, ...: any dataset id with documents, queries and qrels) into a corpus and one
pool, as the BEIR import does: the same corpus-writing path (`beir.write_collection`), so a
BEIR dataset read through ir_datasets gives the corpus that make import-beir gives of the same
files, with the same pool, counts and metric set (nDCG@10, R@100).

ir_datasets finds (or downloads) its files under IR_DATASETS_HOME (default ~/.ir_datasets),
read when the package is first imported. A document's title is its `title` field (empty
without one) and its abstract its `text` field, or the package's `default_text()` for a
document type without one (TREC documents: their body); a query's text is its `text`, or
`default_text()` (TREC topics: the title). Judgments keep their graded relevance; ir_datasets'
`iteration` column is not read. What is left out is counted as the BEIR import counts it
(docs/collections.md). ir_datasets' own log lines, download retries and progress bars are set
aside while it reads (`quiet`): a missing download is one line naming the file and where to put
it.

This module imports only the standard library at the top, so the command line's checks (of
DATASET, and of a corpus name that is a dataset id: `dataset_hint`) run before the
environment exists.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.core.errors import InputError

log = logging.getLogger(__name__)
COMMAND = "import-irds"
NEAREST = 3  # known ids named for an unknown DATASET
DATASET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")  # every id of ir_datasets 0.5 and 0.6


def dataset_ids() -> list[str]:
    """Every dataset id ir_datasets' registry knows, sorted."""
    import ir_datasets

    return sorted(ir_datasets.registry)


def import_command(dataset: str, corpus: str = "<name>") -> str:
    """The make command that imports `dataset` as the corpus `corpus` (shell-quoted)."""
    from shlex import quote

    return f"make import-irds DATASET={quote(dataset)} CORPUS={quote(corpus)}"


def dataset_hint(name: object) -> str:
    """For a corpus name that is an ir_datasets id (`beir/scidocs`, never a folder name): how
    to import it; else ''. Without the package (before the environment exists): ''."""
    if not isinstance(name, str) or "/" not in name:
        return ""
    try:
        known = name in dataset_ids()
    except ImportError:
        return ""
    if not known:
        return ""
    suggested = name.removeprefix("beir/").replace("/", "-")  # beir/scidocs: scidocs
    return (f"; {name!r} is an ir_datasets id: import it as a corpus with "
            f"{import_command(name, suggested)}")


def dataset_id(text: str) -> str:
    """DATASET's shape, checked before the environment exists: an ir_datasets id is letters,
    digits, '.', '_', '-' and '/' (whether the package knows it: `load_dataset`)."""
    if not isinstance(text, str) or not DATASET_ID.fullmatch(text):
        raise InputError(f"DATASET {text!r}: give an ir_datasets id such as beir/scidocs "
                         "(letters, digits, '.', '_', '-' and '/'; https://ir-datasets.com "
                         "lists them)")
    return text


def load_dataset(dataset: str) -> Any:
    """ir_datasets' dataset `dataset`, refused in one line when the id is unknown (with the
    nearest known ids) or when it lacks documents, queries or qrels."""
    import ir_datasets

    known = dataset_ids()
    dataset_id(dataset)
    if dataset not in known:
        nearest = difflib.get_close_matches(dataset, known, n=NEAREST)
        hint = f"the nearest known: {', '.join(nearest)}" if nearest else \
            "https://ir-datasets.com lists the known ids"
        raise InputError(f"DATASET {dataset!r} is not an ir_datasets id: {hint}")
    found = ir_datasets.load(dataset)
    missing = [part for part, has in (("documents", found.has_docs()),
                                      ("queries", found.has_queries()),
                                      ("qrels", found.has_qrels())) if not has]
    if missing:
        subsets = [d for d in known if d.startswith(f"{dataset}/")][:NEAREST]
        more = f" (one of its subsets has them, e.g. {', '.join(subsets)})" if subsets else ""
        raise InputError(f"DATASET {dataset!r} has no {' and no '.join(missing)}: a collection "
                         f"to score needs documents, queries and qrels{more}")
    return found


def _text_of(fields: tuple[str, ...]) -> Any:
    """A record's text: its `text` field, else ir_datasets' default_text()."""
    if "text" in fields:
        return lambda record: record.text
    return lambda record: record.default_text()


def _read(dataset: str, found: Any) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """The documents (id, title, text), queries (id, text) and judgments (query, doc, grade)
    of `found` as ir_datasets iterates them. Its own failures (a missing or damaged download,
    a file it cannot parse) are one line naming the dataset and where its files live."""
    import ir_datasets

    doc_fields = found.docs_cls()._fields
    doc_text = _text_of(doc_fields)
    query_text = _text_of(found.queries_cls()._fields)
    has_title = "title" in doc_fields
    try:
        with quiet():
            docs = [(d.doc_id, d.title if has_title else "", doc_text(d))
                    for d in found.docs_iter()]
            queries = [(q.query_id, query_text(q)) for q in found.queries_iter()]
            qrels = [(j.query_id, j.doc_id, j.relevance) for j in found.qrels_iter()]
    except Exception as exc:  # the package's, from files it downloaded: not ours to name
        first = str(exc).splitlines()[0] if str(exc) else ""
        home = Path(ir_datasets.util.home_path())
        try:
            missing = [str(path.relative_to(home)) if path.is_relative_to(home) else str(path)
                       for path in missing_downloads(found)]
        except Exception:  # noqa: BLE001 (the package's internals: no file named, the advice)
            missing = []
        place = (f", where {', '.join(missing)} is missing: place it there (a node without "
                 "network) or download it again" if missing else
                 ": download them again, or place them as https://ir-datasets.com describes")
        raise InputError(f"ir_datasets could not read {dataset} ({type(exc).__name__}: "
                         f"{first}); its files live under IR_DATASETS_HOME ({home}){place}"
                         ) from None
    return docs, queries, qrels


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """ir_datasets' own output set aside while it reads: its `[INFO]` lines, each download try
    and retry, its progress bars (all written to `sys.stderr` as it is then), so that a
    failure is the import's one line, naming the missing file. The pipeline's log handlers
    keep their own stream."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        yield


def missing_downloads(found: Any) -> list[Path]:
    """The files ir_datasets downloads for `found` (its `Download` objects' cache paths, found
    through the dataset's handlers) that are not there yet, sorted: what to place under
    IR_DATASETS_HOME on a node without network (`beir/scifact/source.zip`)."""
    from ir_datasets.util import Download

    paths, seen, stack = set(), set(), [found]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Download) and getattr(node, "_cache_path", None):
            paths.add(Path(node._cache_path))
        if isinstance(node, list | tuple):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif type(node).__module__.startswith("ir_datasets") and hasattr(node, "__dict__"):
            stack.extend(vars(node).values())
    return sorted(path for path in paths if not path.exists())


def import_irds(dataset: str, corpus_dir: Path, split: str = "test", replace: bool = False,
                derived: tuple[Path, ...] = (), judged: bool = False) -> dict:
    """Write the ir_datasets collection `dataset` as the corpus `corpus_dir` and its `split`
    pool (test, or validation: a pool BM25 tunes on), and with `judged` its judged-only pool,
    as `beir.import_beir` writes BEIR's files: a new corpus, the same collection again
    (nothing changes), or with `replace` in place of a collection with other contents."""
    import polars as pl

    from pipeline.corpus.install import claim_corpus
    from pipeline.external.beir import (
        Collection,
        one_grade_per_pair,
        unique_records,
        write_collection,
    )
    from pipeline.layout import pool_split

    split = pool_split(split)
    found = load_dataset(dataset)
    claim_corpus(corpus_dir, f"make {COMMAND}")
    docs, queries, qrels = _read(dataset, found)
    where = f"ir_datasets {dataset}"
    docs, repeated_docs = unique_records(pl.DataFrame(
        docs, schema={"_id": pl.String, "title": pl.String, "text": pl.String},
        orient="row").with_row_index("record", offset=1), "document", f"{where} documents")
    queries, repeated_queries = unique_records(pl.DataFrame(
        queries, schema={"_id": pl.String, "text": pl.String}, orient="row"
    ).with_row_index("record", offset=1), "query", f"{where} queries")
    graded = one_grade_per_pair(pl.DataFrame(
        qrels, schema={"query": pl.String, "doc": pl.String, "rel": pl.Int32}, orient="row"
    ).with_row_index("line", offset=1), f"{where} qrels")
    read = Collection(docs, repeated_docs, queries, repeated_queries,
                      graded.select("query", "doc", "rel", "line"),
                      f"{where}: no query has judgments that name one of its documents")
    return write_collection(read, corpus_dir, split, COMMAND,
                            {"source": f"ir_datasets:{dataset}", "dataset": dataset,
                             "split": split, "field": None}, replace, derived, judged)
