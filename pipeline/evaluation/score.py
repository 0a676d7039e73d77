"""Scoring that writes nothing (`pipeline.score(qrels, run, metrics)`, docs/api.md): any run
against any qrels, in ranx's order (the qrels first) as ranx's `evaluate` and ir_measures'
`calc_aggregate` take them, with the kernels `make eval` uses (pipeline/metrics.py) and the
same counting rule; a call in the old order (the run first) is refused where the arguments'
contents show it (`check_order`). Metric names: ranx's, ir_measures' or trec_eval's
(glossary.parse_metrics), each returned under the name it was asked by (`score_metrics`).

A run is a TREC run file (`query Q0 doc rank score tag`), a polars or pandas DataFrame with
columns query, doc, score, a dict of dicts {query: {doc: score}} (pytrec_eval's and BEIR's),
a list of ir_measures' ScoredDoc, or a ranx `Run`, read as `make import-run` reads it
(pipeline/retrieval/imported.py); qrels are a TREC qrels file (`query 0 doc
relevance`), a BEIR qrels .tsv (`query-id corpus-id score`, tab-separated, under BEIR's header
or none), a DataFrame with columns query, doc, relevance (an integer; or `rel`, as a pool's
qrels.parquet names it), a dict of dicts {query: {doc: grade}}, a list of ir_measures'
Qrel, or a ranx `Qrels`.
Ids are compared as strings, as trec_eval compares them, and a run is ranked as trec_eval
ranks it (score descending, ties by the doc id descending as a string), whatever its rank
column or row order says.

Counting rule (trec_eval `-c`, as `make eval`): every query of the qrels with a relevant
document is evaluated; one the run does not answer scores 0. Queries of the qrels without a
relevant document, and queries of the run the qrels do not judge, are left out; each count is
logged. A run that ranks a document twice for one query, or qrels that judge a pair twice with
different grades, have no one answer and are refused.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.annotations import Metrics, Qrels, Run
from pipeline.core.current import stale
from pipeline.core.errors import InputError
from pipeline.core.textfiles import read_text
from pipeline.glossary import METRIC_SETS, metric_names, parse_metrics
from pipeline.layout import BEIR_QRELS_HEADER, RUN_SUFFIXES, run_file_parts, run_paths
from pipeline.retrieval.imported import COLUMNS as RUN_COLUMNS
from pipeline.retrieval.imported import TREC_FIELDS, check_ids, read_source
from pipeline.retrieval.runs import recorded_run_repair, trec_eval_order

log = logging.getLogger(__name__)

QRELS_COLUMNS = ("query", "doc", "relevance")  # qrels given as a DataFrame
GRADES = (-(2**63), 2**63 - 1)  # the grades taken: int64's, as trec_eval reads them
OUTSIDE = (f"outside the grades taken ({GRADES[0]:,} to {GRADES[1]:,}, int64): give an integer "
           "grade such as 0 (not relevant), 1 or 2")
QRELS_LINE = "query 0 doc relevance"  # a TREC qrels line's four fields
BEIR_QRELS_LINE = BEIR_QRELS_HEADER.replace("\t", " ")  # a BEIR qrels .tsv line's fields


def _qrels_lines(path: Path) -> tuple[pl.DataFrame, str, str | None]:
    """A qrels file's non-blank lines (`line`, 1-based; `fields`, its fields) and its form
    (QRELS_LINE or BEIR_QRELS_LINE) told by its first line: three tab-separated fields
    (BEIR's, ids as its loader reads them) or three whitespace-separated fields are BEIR's,
    under its header (left out) or none; else TREC's four, separated by whitespace. Also
    the separator: a tab, or None for whitespace."""
    if not path.is_file():
        raise InputError(f"qrels {str(path)!r} is not a file: give a TREC qrels file "
                         f"({QRELS_LINE!r} per line), a BEIR qrels .tsv, a DataFrame or a ranx "
                         "object")
    text = read_text(path, "save the qrels as UTF-8 text")
    lines = (pl.DataFrame({"text": text.split("\n")}).with_row_index("line", offset=1)
             .filter(pl.col("text").str.strip_chars() != ""))
    first = lines["text"][0] if lines.height else ""
    tab = "\t" if len(first.split("\t")) == 3 else None
    form = BEIR_QRELS_LINE if len(first.split(tab)) == 3 else QRELS_LINE
    split = (pl.col("text").str.split("\t").list.eval(pl.element().str.strip_chars()) if tab
             else pl.col("text").str.extract_all(r"\S+"))
    lines = lines.select("line", fields=split)
    if form == BEIR_QRELS_LINE and first.strip().split(tab) == BEIR_QRELS_HEADER.split("\t"):
        lines = lines.slice(1)  # BEIR's header
    return lines, form, tab


def _read_qrels_file(path: Path) -> pl.DataFrame:
    """A TREC qrels file or a BEIR qrels .tsv (`_qrels_lines`) as query, doc, relevance,
    line; a line of other fields, or a relevance that is not an integer (`high`, `1.5`), is
    refused, naming it."""
    lines, form, tab = _qrels_lines(path)
    names = form.split()
    wrong = lines.filter(pl.col("fields").list.len() != len(names))
    if wrong.height:
        line, fields = wrong.select("line", pl.col("fields").list.len()).row(0)
        more = f" (and {wrong.height - 1} more lines)" if wrong.height > 1 else ""
        kind = "a TREC qrels" if form == QRELS_LINE else "a BEIR qrels"
        raise InputError(f"{path}:{line}: {fields} fields, not {len(names)}{more}: {kind} "
                         f"line is {form!r}, separated by {'tabs' if tab else 'whitespace'}")
    positions = (0, 1, 2) if form == BEIR_QRELS_LINE else (0, 2, 3)  # query, doc, relevance
    fields = lines.select("line", *(pl.col("fields").list.get(i).alias(name) for name, i in
                                    zip(QRELS_COLUMNS, positions, strict=True)))
    qrels = fields.with_columns(value=pl.col("relevance").cast(pl.Int64, strict=False))
    bad = qrels.filter(pl.col("value").is_null())
    if bad.height:
        line, text = bad.select("line", "relevance").row(0)
        if re.fullmatch(r"[+-]?[0-9]+", text):
            raise InputError(f"{path}:{line}: the grade {text} is {OUTSIDE}")
        header = (f" (BEIR's header line is {BEIR_QRELS_HEADER!r})"
                  if line == 1 and form == BEIR_QRELS_LINE else "")
        raise InputError(f"{path}:{line}: the relevance {text!r} is not an integer; write an "
                         f"integer grade (0 = not relevant){header}")
    return qrels.select("query", "doc", relevance="value", line="line")


def _frame(value: Any) -> pl.DataFrame | None:
    """A polars DataFrame of a polars or pandas DataFrame; None for anything else."""
    if isinstance(value, pl.DataFrame):
        return value
    if type(value).__module__.split(".")[0] == "pandas" and type(value).__name__ == "DataFrame":
        return pl.from_pandas(value)
    return None


def _columns(frame: pl.DataFrame, columns: tuple[str, ...], where: str) -> pl.DataFrame:
    """`frame`'s `columns`, ids as strings, with a `line` (the row, 1-based)."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{where}: a DataFrame without the column {missing[0]!r} (it has "
                         f"{', '.join(map(repr, frame.columns)) or 'none'}): give columns "
                         f"{', '.join(columns)}")
    nulls = [c for c in columns if frame[c].null_count()]
    if nulls:
        raise InputError(f"{where}: {frame[nulls[0]].null_count()} rows have no "
                         f"{nulls[0]!r}: fill or remove them")
    check_ids(frame, ("query", "doc"), where)
    return frame.select(pl.col("query", "doc").cast(pl.String), *columns[2:]).with_row_index(
        "line", offset=1)


# ir_measures' named tuples (ScoredDoc, Qrel): the field of each that holds the value
NAMED_TUPLE_VALUES = {"run": "score", "qrels": "relevance"}


def _named_tuples(value: Any) -> str | None:
    """"run" for a list of ir_measures' ScoredDoc (query_id, doc_id, score), "qrels" for one
    of its Qrel (query_id, doc_id, relevance, ...); None for anything else."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    fields = set(getattr(value[0], "_fields", ()))
    return next((kind for kind, field in NAMED_TUPLE_VALUES.items()
                 if {"query_id", "doc_id", field} <= fields), None)


def _nested(value: Any) -> bool:
    """Whether `value` is a dict of dicts, {query: {doc: value}}: pytrec_eval's, BEIR's and
    ranx's form of a run and of qrels."""
    return (isinstance(value, Mapping) and bool(value)
            and all(isinstance(docs, Mapping) for docs in value.values()))


def plain(value: Any, kind: str, where: str) -> Any:
    """A run or qrels (`kind`) given as a dict of dicts or a list of ir_measures' named tuples
    as a polars DataFrame of query, doc and score (a run) or relevance (qrels), as
    pytrec_eval, BEIR and ir_measures read them; any other value as it is. A value that is not
    a number is refused, naming its query and document."""
    column = "score" if kind == "run" else "relevance"
    if _nested(value):
        rows = [(query, doc, number) for query, docs in value.items()
                for doc, number in docs.items()]
    elif _named_tuples(value) == kind:
        field = NAMED_TUPLE_VALUES[kind]
        rows = [(item.query_id, item.doc_id, getattr(item, field)) for item in value]
    else:
        return value
    wrong = next(((q, d, v) for q, d, v in rows
                  if isinstance(v, bool) or not isinstance(v, (int, float))), None)
    if wrong is not None:
        query, doc, number = wrong
        raise InputError(f"{where}: query {query!r}, document {doc!r} has the {column} "
                         f"{number!r}, not a number: give a number for every pair")
    return pl.DataFrame(rows, schema=["query", "doc", column], orient="row")


def _is_ranx(value: Any, kind: str) -> bool:
    return type(value).__module__.split(".")[0] == "ranx" and type(value).__name__ == kind


def _from_ranx(value: Any, value_column: str) -> pl.DataFrame:
    """A ranx Run's or Qrels' {query: {doc: value}} as query, doc, `value_column`, line."""
    from pipeline.metrics import cache_typed_containers  # numba: loaded only for ranx's

    cache_typed_containers()  # its typed dicts' methods, compiled per process otherwise
    rows = [(str(q), str(d), v) for q, docs in value.to_dict().items() for d, v in docs.items()]
    return pl.DataFrame(rows, schema=["query", "doc", value_column], orient="row").with_row_index(
        "line", offset=1)


def check_vouched_run(run: Any) -> None:
    """A run file of the pipeline's (`runs/<c>/<pool>/<model>.trec` or `.parquet` with its
    `<model>.manifest.json` beside it) checked against its manifest, as every stage checks a
    run before reading it: a damaged one is refused, naming it and the command that makes it
    again. Any other run (a file of one's own, a DataFrame) is read as given."""
    if not isinstance(run, (str, os.PathLike)) or len(Path(run).parents) < 3:
        return
    path = Path(run)
    if not path.name.endswith(tuple(f".{suffix}" for suffix in RUN_SUFFIXES)):
        return
    corpus, pool, model, _ = run_file_parts(path)
    paths = run_paths(path.parents[2], corpus, pool, model)
    if path not in (paths.trec, paths.parquet) or not paths.manifest.exists():
        return
    if problem := stale(paths.manifest, None, files=path.parent):
        raise InputError(f"run {path}: it does not match its manifest ({problem.reason})",
                         recorded_run_repair(path.parents[2], corpus, pool, model))


def as_run(run: Any, where: str = "run") -> pl.DataFrame:
    """Any accepted run (module doc), read as `make import-run` reads it (read_source), as
    query, doc (strings), score, rank in trec_eval's order; a document ranked twice for one
    query is refused; a run file of the pipeline's is checked first (`check_vouched_run`); a
    dict of dicts or ir_measures' ScoredDocs are read as a DataFrame (`plain`)."""
    run = plain(run, "run", where)
    check_vouched_run(run)
    try:
        frame, _ = read_source(run)
    except InputError as exc:
        raise InputError(exc.message if where == "run" else f"{where}: {exc.message}") from None
    twice = frame.filter(pl.len().over("query", "doc") > 1).sort("line")
    if twice.height:
        query, doc, line = twice.select("query", "doc", "line").row(0)
        raise InputError(f"{where}: query {query} ranks the document {doc} twice (row or line "
                         f"{line} and another; {twice.height} rows in all): keep one score per "
                         "pair, as trec_eval requires")
    return trec_eval_order(frame.select("query", "doc", "score"))


def as_qrels(qrels: Any, where: str = "qrels") -> pl.DataFrame:
    """Any accepted qrels (module doc) as query, doc (strings), rel (Int64); a pair judged
    twice with one grade is kept once and counted, with two grades refused; a dict of dicts
    or ir_measures' Qrels are read as a DataFrame (`plain`)."""
    qrels = plain(qrels, "qrels", where)
    if isinstance(qrels, (str, os.PathLike)):
        frame, where = _read_qrels_file(Path(qrels)), str(qrels)
    elif (given := _frame(qrels)) is not None:
        if "relevance" not in given.columns and "rel" in given.columns:  # a pool's qrels.parquet
            given = given.rename({"rel": "relevance"})
        frame = _columns(given, QRELS_COLUMNS, where)
        relevance = frame["relevance"]
        if not relevance.dtype.is_numeric() or (
                relevance.dtype.is_float() and (relevance != relevance.round()).any()):
            raise InputError(f"{where}: the relevance column holds {relevance.dtype} values "
                             "that are not integers: give integer grades (0 = not relevant)")
        graded = frame.with_columns(value=pl.col("relevance").cast(pl.Int64, strict=False))
        outside = graded.filter(pl.col("value").is_null())
        if outside.height:
            line, grade = outside.select("line", "relevance").row(0)
            raise InputError(f"{where}: row {line}: the grade {grade} is {OUTSIDE}")
        frame = graded.select("query", "doc", "line", relevance="value")
    elif _is_ranx(qrels, "Qrels"):
        frame = _from_ranx(qrels, "relevance").with_columns(pl.col("relevance").cast(pl.Int64))
    else:
        raise InputError(f"{where}: {type(qrels).__name__} is not qrels: give a TREC qrels "
                         f"file's path, a DataFrame with columns {', '.join(QRELS_COLUMNS)}, "
                         "a dict of dicts {query: {doc: grade}}, a list of ir_measures' Qrel "
                         "or a ranx Qrels")
    clash = frame.filter(pl.col("relevance").n_unique().over("query", "doc") > 1).sort("line")
    if clash.height:
        query, doc = clash.select("query", "doc").row(0)
        grades = sorted(clash.filter(pl.col("query") == query, pl.col("doc") == doc)[
            "relevance"].unique().to_list())
        raise InputError(f"{where}: query {query}, document {doc} is judged twice with "
                         f"different grades ({', '.join(map(str, grades))}): keep one judgment "
                         "per pair")
    unique = frame.unique(["query", "doc"], keep="first").sort("query", "doc")
    if unique.height < frame.height:
        log.warning(f"[score] {where}: {frame.height - unique.height} judgments repeat a pair "
                    "with the same grade: each counted once")
    return unique.select("query", "doc", rel="relevance")


def score_metrics(metrics: Any) -> dict[str, str]:
    """`metrics` (a set's name, or metric names as a string or a list) checked: each name as
    asked -> ranx's name of its measure (parse_metrics), in the order asked, each name once; a
    set gives its own names (ranx's, as docs/evaluation.md lists them). "auto" needs a pool,
    so it is refused here."""
    if isinstance(metrics, str):
        if metrics.strip() == "auto":
            raise InputError("metrics='auto' is a pool's own set, and scoring outside a pool "
                             f"has none: give a set ({', '.join(METRIC_SETS)}) or metric names")
        names = metric_names(metrics)
    elif (not isinstance(metrics, Sequence) or not metrics
            or not all(isinstance(m, str) for m in metrics)):
        raise InputError(f"metrics={metrics!r}: give a set's name ({', '.join(METRIC_SETS)}) "
                         "or a list of metric names such as ['map', 'ndcg@10']")
    else:
        names = list(metrics)
    if len(names) == 1 and len(canonical := parse_metrics(names)) > 1:  # a set's name
        return {name: name for name in canonical}
    return {name: parse_metrics([name])[0] for name in dict.fromkeys(names)}


def under_asked_names(values: pl.DataFrame, asked: dict[str, str]) -> pl.DataFrame:
    """`query_values`' frame (columns named as ranx names the measures) with one column per
    metric as asked (`score_metrics`), as ir_measures returns each measure under the name it
    was given: `nDCG@10` is `result["nDCG@10"]`, never only `ndcg@10`."""
    return values.select("query", *(pl.col(canonical).alias(name)
                                    for name, canonical in asked.items()))


def query_values(run: pl.DataFrame, qrels: pl.DataFrame, metrics: Sequence[str],
                 where: str = "run") -> pl.DataFrame:
    """One row per evaluated query (column `query`, sorted as strings), one column per metric:
    `run` as `as_run` gives it scored against `qrels` as `as_qrels` gives it, by the counting
    rule of the module doc (what is left out is logged)."""
    from pipeline.metrics import per_query  # numba: loaded only to score

    queries = qrels["query"].unique().sort()
    judged = run.filter(pl.col("query").is_in(queries.implode()))
    values, dropped = per_query(judged, qrels, queries, metrics)
    if not values.height:
        raise InputError(f"{where}: no query of the qrels has a relevant document (relevance "
                         "> 0): nothing to score; check that the qrels are the run's")
    unjudged = run["query"].n_unique() - judged["query"].n_unique()
    unanswered = values.height - judged.filter(
        pl.col("query").is_in(values["query"].implode()))["query"].n_unique()
    left = [f"{n} {what}" for n, what in (
        (unjudged, "queries of the run that the qrels do not judge, left out"),
        (dropped, "queries of the qrels without a relevant document, left out"),
        (unanswered, "queries of the qrels that the run does not answer, scored 0"))
        if n]
    if left:
        log.warning(f"[score] {where}: {values.height} queries scored; {'; '.join(left)}")
    return values


def _shape(value: Any) -> str | None:
    """What `value` holds where its content says so unambiguously: "a run" (a ranx Run, a
    DataFrame with a run's columns and no relevance, a file whose first line has a TREC run
    line's 6 fields, ir_measures' ScoredDocs), "qrels" (a ranx Qrels, a DataFrame with a
    relevance column and no score, a file of 4 or 3 fields a line, ir_measures' Qrels, a dict
    of dicts holding a value that is no whole number: a score, never a grade), "a dict of
    runs" (compare's); else None (a dict of dicts of whole numbers: a run's or qrels')."""
    if _is_ranx(value, "Run") or _is_ranx(value, "Qrels"):
        return "a run" if _is_ranx(value, "Run") else "qrels"
    if (named := _named_tuples(value)) is not None:
        return "a run" if named == "run" else "qrels"
    if isinstance(value, Mapping):
        if not any(isinstance(v, Mapping) for v in value.values()):
            return "a dict of runs"
        scored = any(isinstance(x, float) and not x.is_integer() for v in value.values()
                     if isinstance(v, Mapping) for x in v.values())
        return "a run" if scored else None
    if (frame := _frame(value)) is not None:
        columns = set(frame.columns)
        scored = all(columns & set(names) for names in RUN_COLUMNS.values())  # read_source's
        graded = bool({"relevance", "rel"} & columns)
        return "a run" if scored and not graded else "qrels" if graded and not scored else None
    return {6: "a run", 4: "qrels", 3: "qrels"}.get(_first_fields(value) or 0)


def _first_fields(value: Any) -> int | None:
    """The number of whitespace-separated fields of the first non-blank line of the file
    `value` names; None for anything else, or a file that cannot be read (its reader says
    why)."""
    if not isinstance(value, (str, os.PathLike)) or not Path(value).is_file():
        return None
    try:
        with Path(value).open("rb") as handle:
            head = handle.read(1 << 16).decode("utf-8", "replace").split("\n")
    except OSError:
        return None
    return len(next((line for line in head if line.strip()), "").split())


def check_order(function: str, qrels: Any, run: Any) -> None:
    """Refuse a call in the run-first order `score` had before issue 50 where the arguments'
    contents show it (a run has scores, qrels have relevance grades): one line saying the
    order (ranx's: qrels first), rather than scoring the qrels as a run. A second argument
    that looks like qrels after qrels is no swap but a malformed run (a TREC run line of 4
    fields): refused saying what a run line and a qrels line hold. Run once, at the API's door
    (options/arguments.validated) of each function taking (qrels, run or runs, ...): the
    functions behind it trust the order."""
    first, second = _shape(qrels), _shape(run)
    swapped = first in ("a run", "a dict of runs")
    if second == "qrels" and not swapped:  # not the order: the run is no run
        fields = _first_fields(run)
        where = f"run {str(run)!r}" if fields else function
        said = (f"its first line has {fields} fields, as a qrels line" if fields else
                "the second argument holds relevance grades, as qrels do")
        raise InputError(f"{where}: {said}, not a run: a TREC run line has {TREC_FIELDS} "
                         f"fields (qid Q0 docid rank score tag), a qrels line 4 ({QRELS_LINE}); "
                         f"a DataFrame run has columns {', '.join(RUN_COLUMNS)}")
    found = [f"the first argument is {first}"] if swapped else []
    found += ["the second is qrels"] if second == "qrels" else []
    if found:
        runs = "runs" if function == "compare" else "run"
        raise InputError(f"{function} takes (qrels, {runs}, metrics), the qrels first as in ranx "
                         f"and ir_measures, but {' and '.join(found)}: put the qrels first")


def score(qrels: Qrels, run: Run, metrics: Metrics, *,
          per_query: bool = False) -> dict[str, float] | pl.DataFrame:
    """`run` scored against `qrels` with `metrics` (ranx's order: the qrels first), writing
    nothing: {metric: mean over the evaluated queries}, or with `per_query=True` a polars
    DataFrame (query, one column per metric) of each evaluated query. Accepted forms and the
    counting rule: module doc; metric names in ranx's, ir_measures' or trec_eval's words (any
    letter case where unambiguous), each returned under the name it was asked by, a set's
    metrics under its own names (`score_metrics`). Its arguments are checked at its door,
    `pipeline.score` (their order and types: options/arguments.validated)."""
    asked = score_metrics(metrics)
    values = under_asked_names(query_values(as_run(run), as_qrels(qrels),
                                            tuple(dict.fromkeys(asked.values()))), asked)
    if per_query:
        return values
    return {m: float(values[m].mean()) for m in asked}  # as `make eval` averages them
