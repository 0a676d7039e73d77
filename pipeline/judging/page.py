"""The judging page: one static HTML file for a person to judge (query paper, candidate) pairs
0-3, opened from disk (no server, nothing fetched), whose labels `make judge
JUDGE=file:<labels.tsv>` reads (docs/judging.md, "The judging page").

The page shows the query paper's title and abstract (a collection's query, which is no paper of
the corpus: its own text, as make judge sends it) and one candidate at a time; keys 0-3 (or
the buttons) grade it, u or Backspace undoes the last grade, d downloads the labels as the
TSV the file assessor reads (assessor.LABELS_HEADER: query_id, docid, grade, assessor, time;
the person's name is asked at the first download and kept). The grades' meanings are the LLM
assessor's own, read from its prompt (grade_meanings), so a person and the model judge by one
definition. The labels are kept in the browser's localStorage under the page's digest (the
sha256 of what it shows), so a reload, or the same page written again, resumes where the person
stopped, and another page's labels never mix in.

Every paper's text goes into the page as JSON in a <script type="application/json"> block,
escaped so that no text can end the block (`</script>`, `<!--`), and the script sets it as
text, never as HTML: a title holding `<script>` shows as those characters. The page's bytes
are a function of the pairs and texts alone (no time, no random id): written again, the same.
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import re
from collections import Counter
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.errors import InputError
from pipeline.judging.assessor import GRADES, LABELS_HEADER, MISSING_TEXT, TEMPLATE
from pipeline.judging.judgments import own_queries, paper_texts, with_texts
from pipeline.layout import JUDGING_PAGE_SCRIPT, JUDGING_PAGE_STYLE, JUDGING_PAGE_TEMPLATE

log = logging.getLogger(__name__)

# the page's template, style and script: package data of pipeline.judging, written into it
PAGE_TEMPLATE, PAGE_STYLE, PAGE_SCRIPT = (JUDGING_PAGE_TEMPLATE, JUDGING_PAGE_STYLE,
                                          JUDGING_PAGE_SCRIPT)
TITLE = "Relevance judging"
DOC_COLUMNS = ("doc", "docid")  # the candidate's column: the sample's `doc`, or `docid`

_MEANING = re.compile(r"^(\d) = (.+?),?$", re.MULTILINE)
# what a <script> block's JSON may not hold as itself (as report/html.py's script_json, kept
# here: the report will read judgments, so judging may not import it): `<` (`</script>` ends
# the block; `<!--` then `<script` swallows the page's script), `>` and `&`
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def grade_meanings() -> dict[int, str]:
    """Each grade's meaning as the LLM assessor's prompt defines it (its `g = meaning` lines):
    one definition for the model and the person."""
    meanings = {int(grade): words for grade, words in _MEANING.findall(TEMPLATE)}
    if sorted(meanings) != list(GRADES):
        raise RuntimeError(f"the assessor's prompt defines grades {sorted(meanings)}, not "
                           f"{list(GRADES)}: keep its `g = meaning` lines (judging/assessor.py)")
    return meanings


def _asset(name: str) -> str:
    return resources.files("pipeline.judging").joinpath(name).read_text(encoding="utf-8")


def _script_json(value: object) -> str:
    """`value` as ASCII JSON that a <script> block holds whole, keys sorted (same bytes)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True).translate(_SCRIPT_UNSAFE)


def _pairs(pairs: pl.DataFrame) -> pl.DataFrame:
    """`pairs` as (query, doc): its `doc` or `docid` column; a sample's drawn rows only (where
    it has `sampled`, as sample.draw_sample writes it). One line when the columns are wrong."""
    doc = next((name for name in DOC_COLUMNS if name in pairs.columns), None)
    if "query" not in pairs.columns or doc is None:
        raise InputError(f"the pairs to judge have columns {pairs.columns}: give a frame with "
                         "`query` and `doc` (or `docid`), such as the pool's sample")
    if "sampled" in pairs.columns:
        pairs = pairs.filter(pl.col("sampled"))
    out = pairs.select("query", doc=doc)
    if out.select(pl.any_horizontal(pl.all().is_null()).any()).item():
        raise InputError("the pairs to judge hold an empty query or doc id: give every pair "
                         "both ids")
    if not out.height:
        raise InputError("no pairs to judge: give pairs (query, doc), such as the drawn rows "
                         "of the pool's sample")
    return out


def _checked_id(value: object) -> str:
    """An id as the labels' TSV writes it; one line when the TSV cannot carry it back."""
    text = str(value)
    if not text or text != text.strip() or any(c in text for c in "\t\r\n"):
        raise InputError(f"paper id {text!r}: the labels file cannot carry an id that is "
                         "empty, holds a tab or line break, or starts or ends with a space: "
                         "give the pairs ids without them")
    return text


def _as_ids(wanted: pl.DataFrame, column: str, texts: pl.DataFrame) -> pl.DataFrame:
    """`wanted`'s `column` cast to the type of `texts`' corpusid (ids given as text); one line
    when they are not such ids."""
    kind = texts.schema.get("corpusid")
    if kind is None or wanted.schema[column] == kind:
        return wanted
    cast = wanted.with_columns(pl.col(column).cast(kind, strict=False))
    if cast[column].null_count():
        raise InputError(f"the pairs' {column} ids ({wanted.schema[column]}) are not the "
                         f"papers' corpus ids ({kind}): give pairs of the corpus's papers")
    return cast


def page_data(pairs: pl.DataFrame, papers: pl.DataFrame,
              queries: pl.DataFrame | None = None) -> dict[str, Any]:
    """What the page shows and writes, as its script reads it: the pairs in order (query,
    then candidate), each paper's (title, abstract) once, each pair's place (query n of Q,
    candidate m of M), the grades' meanings, the TSV's header and file name, the digest.
    `queries` (corpusid, title, abstract): the queries' own texts where they are no papers of
    the corpus (a collection's, as make judge sends them: judgments.own_queries), kept apart
    from the papers' (`query_texts`: a claim's id may be a document's too)."""
    wanted = _as_ids(_pairs(pairs), "doc", papers)
    wanted = _as_ids(wanted, "query", papers if queries is None else queries)
    texts = with_texts(wanted, papers, queries)  # unique, sorted by (query, doc)
    order: list[list[str]] = []
    shown: dict[str, list[str | None]] = {}
    asked: dict[str, list[str | None]] = shown if queries is None else {}
    for query, doc, q_title, q_abstract, d_title, d_abstract in texts.select(
            "query", "doc", "query_title", "query_abstract", "doc_title",
            "doc_abstract").iter_rows():
        q, d = _checked_id(query), _checked_id(doc)
        asked[q], shown[d] = [q_title, q_abstract], [d_title, d_abstract]
        order.append([q, d])
    number = {q: n for n, q in enumerate(dict.fromkeys(q for q, _ in order), 1)}
    per_query, seen = Counter(q for q, _ in order), Counter[str]()
    places = []
    for q, _ in order:
        seen[q] += 1
        places.append([number[q], seen[q], per_query[q]])
    data: dict[str, Any] = {
        "pairs": order, "papers": shown, "places": places, "queries": len(number),
        "grades": [[grade, words] for grade, words in grade_meanings().items()],
        "header": list(LABELS_HEADER), "missing": MISSING_TEXT}
    if queries is not None:  # only then: a page of paper queries keeps its digest
        data["query_texts"] = asked
    digest = hashlib.sha256(_script_json(data).encode()).hexdigest()
    return {**data, "digest": digest, "file": f"labels-{digest[:12]}.tsv"}


def query_texts(corpus_dir: Path, pairs: Mapping[str, pl.DataFrame]) -> pl.DataFrame | None:
    """The queries' texts of `pairs` (pool -> its drawn pairs) as make judge sends them to the
    assessor: a pool's own query texts where its queries carry them (judgments.own_queries: a
    collection's, make import-beir), else its query papers' (the corpus's); None where every
    pool's queries are papers of the corpus (page_data then reads them from the papers)."""
    own = {pool: own_queries(corpus_dir, pool) for pool in pairs}
    if all(texts is None for texts in own.values()):
        return None
    parts = []
    for pool, texts in own.items():
        ids = pairs[pool]["query"].unique()
        parts.append(paper_texts(corpus_dir, ids) if texts is None
                     else texts.filter(pl.col("corpusid").is_in(ids.implode())))
    kind = next(t for t in own.values() if t is not None).schema["corpusid"]
    return (pl.concat([part.with_columns(pl.col("corpusid").cast(kind)) for part in parts])
            .unique("corpusid", keep="first", maintain_order=True))


def render_page(data: dict[str, Any], title: str = TITLE) -> str:
    """The page's HTML: `data` (page_data) written into page.html with its style and script."""
    return Template(_asset(PAGE_TEMPLATE)).substitute(
        title=html.escape(title, quote=True), style=_asset(PAGE_STYLE),
        script=_asset(PAGE_SCRIPT), data=_script_json(data))


def write_page(pairs: pl.DataFrame, papers: pl.DataFrame, out: Path,
               title: str = TITLE, queries: pl.DataFrame | None = None) -> str:
    """Write the judging page of `pairs` (query, doc or docid: the pool's sample, its drawn
    rows) with the papers' texts from `papers` (corpusid, title, abstract), the queries' from
    `queries` where they carry their own (query_texts), to `out`, atomically; returns its
    digest (the key its labels are kept under; the download is `labels-<its first 12
    characters>.tsv`). A pair whose paper or query the texts lack is one line."""
    data = page_data(pairs, papers, queries)
    with atomic_path(out) as tmp:
        tmp.write_text(render_page(data, title), encoding="utf-8")
    digest = data["digest"]
    log.info(f"[judge-page] {out}: {len(data['pairs'])} pairs of {data['queries']} query "
             f"papers, digest {digest[:12]}: open it in a browser, grade with keys 0-3, "
             "press d to download the labels")
    return digest
