"""The official MDCR release's files (github.com/zoranmedic/mdcr; docs/mdcr.md).

- `mdcr_<split>.json`: {field: {query_id: {"bm25": [ids], ..., "true": [cited ids]}}};
- `mdcr_<split>_data.jsonl`: one paper per line, `paper_id`, `title`, `abstract`;
- a scores file: {"<query_id>_<candidate_id>": score} for every pair, higher = more relevant.

Ids are kept as strings, as the release writes them. The official evaluator labels "true"
candidates 1 and every other 0 ("true" wins when an id is listed twice), computes trec_eval's
map, ndcg (no cut-off) and recall_5 per field, x100, rounded to 4 decimals, and averages the
fields (macro); `official_numbers` gives the same numbers from per-query values, and
`evaluate_files` from the two files, as the official script does.

A query listed under two fields has its shared pairs scored in each field's pool, and the
scores file holds one score per pair: `official_scores` is the one rule (SHARED_PAIRS) that
`make mdcr-scores` writes by and the report's Table 3 scores by (`model_numbers`), so Table 3
is the official evaluator on the file mdcr-scores writes with the same SHARED_PAIRS.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.errors import InputError
from pipeline.core.textfiles import read_json, read_jsonl
from pipeline.corpus.install import claim_corpus
from pipeline.evaluation.evaluate import OFFICIAL_TYPES, POSITIVE_TYPE
from pipeline.evaluation.significance import ordered
from pipeline.fields import MAG_FIELDS
from pipeline.layout import MDCR_BENCHMARK, MDCR_DATA, Place, pool_split
from pipeline.mdcr.benchmark import (
    benchmark_pools,
    benchmark_table,
    read_benchmark,
    write_benchmark,
)
from pipeline.retrieval.runs import trec_eval_order

TRUE = "true"  # the official name of the positives
log = logging.getLogger(__name__)
OFFICIAL_METRICS = {"map": "map", "ndcg": "ndcg", "recall_5": "recall@5"}  # official -> ranx
FILE_SPLITS = {"test": "test", "validation": "val"}  # a pool's split -> the release's name


def check_out(out: Path, folder: bool, files: Sequence[str] = ()) -> None:
    """Refuse an output path that cannot be written, before any work: `out` is a folder to
    write `files` into (`folder`) or a file to write; its parent must be an existing, writable
    folder, and `out` itself, when it exists, of the right kind and writable. A file that
    exists already (OUT itself, or one of `files` in the folder) is refused: these commands
    write new files and never replace one of the user's. Files are written beside their final
    name and renamed, so without this a wrong OUT would show as a traceback only after the
    work was done."""
    kind, other = ("folder", "file") if folder else ("file", "folder")
    what = ("a folder to write the official files into" if folder
            else "a file path for the scores (JSON)")
    if out.exists():
        if out.is_dir() != folder:
            raise InputError(f"OUT {out} is an existing {other}, not a {kind}: give OUT {what} "
                             f"(or move the {other} away)")
        if not os.access(out, os.W_OK | (os.X_OK if folder else 0)):
            raise InputError(f"OUT {out} is read-only: make it writable or give another OUT")
        existing = [name for name in files if (out / name).exists()] if folder else [out.name]
        if existing:
            raise InputError(f"OUT {out}: {', '.join(existing)} already exists there; this "
                             "command writes new files and never replaces one: give another "
                             "OUT, or move that file away first")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise InputError(f"OUT {out}: the folder {parent} does not exist (or is not a folder): "
                         "create it first, or give OUT in an existing folder")
    # a file is renamed into its folder; a new folder is made in its parent
    if (not folder or not out.exists()) and not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"OUT {out}: the folder {parent} is read-only: make it writable or "
                         "give OUT in a folder you can write")


def export_benchmark(corpus_dir: Path, out_dir: Path, split: str = "test") -> dict:
    """Write `mdcr_<split>.json` and `mdcr_<split>_data.jsonl` for a benchmark corpus. Every
    official type gets a list (the official evaluator reads all six); types of other names
    (models other than bm25/specter/scincl) are written too, and counted: the official
    evaluator ignores them. Logs what it wrote."""
    split = pool_split(split)
    check_out(out_dir, folder=True, files=[MDCR_BENCHMARK.format(FILE_SPLITS[split]),
                                           MDCR_DATA.format(FILE_SPLITS[split])])
    table, papers = read_benchmark(corpus_dir, split)
    table = table.with_columns(pl.col("query", "doc").cast(pl.String),
                               type=pl.col("type").replace(POSITIVE_TYPE, TRUE))
    nested: dict = {}
    for field, query, kind, docs in (table.group_by("field", "query", "type", maintain_order=True)
                                     .agg("doc").sort("field", "query", "type").iter_rows()):
        lists = nested.setdefault(field, {}).setdefault(
            query, {t: [] for t in (*OFFICIAL_TYPES, TRUE)})
        lists[kind] = docs
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out_dir / MDCR_BENCHMARK.format(FILE_SPLITS[split])) as tmp:
        tmp.write_bytes(orjson.dumps(nested))
    with (atomic_path(out_dir / MDCR_DATA.format(FILE_SPLITS[split])) as tmp,
          tmp.open("wb") as handle):
        for row in papers.select(paper_id=pl.col("corpusid").cast(pl.String), title="title",
                                 abstract="abstract").iter_rows(named=True):
            handle.write(orjson.dumps(row) + b"\n")
    ignored = table.filter(~pl.col("type").is_in([*OFFICIAL_TYPES, TRUE]))
    name = FILE_SPLITS[split]
    info = {"files": f"{out_dir / MDCR_BENCHMARK.format(name)} and {MDCR_DATA.format(name)}",
            "fields": len(nested), "queries": table["query"].n_unique(), "papers": papers.height,
            "ignored_by_official_evaluator": dict(ignored.group_by("type").len().sort("type")
                                                  .iter_rows())}
    log.info(f"[export-mdcr] {info['files']}: "
             f"{info['fields']} fields, {info['queries']} queries, {info['papers']} papers")
    if info["ignored_by_official_evaluator"]:
        log.info(f"[export-mdcr] note: types the official evaluator does not read (it knows "
                 f"bm25, specter, scincl, graph, most_cited, random): "
                 f"{info['ignored_by_official_evaluator']}")
    return info


def _json_type(value: object) -> str:
    """What a parsed JSON value is, in JSON's words (for messages)."""
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _show(value: object) -> str:
    """A parsed JSON value as the file writes it, cut to 40 characters."""
    text = repr(value) if isinstance(value, float) else orjson.dumps(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."


def _read_json(path: Path, missing: str, invalid: str) -> object:
    """A JSON file's value; a missing, unreadable or invalid file (bytes not UTF-8, a key
    repeated with another value: pipeline.core.textfiles.read_json) is one line ending with the
    fix given (`missing`, `invalid`): the benchmark is downloaded, a scores file written; a
    folder, a FIFO or a device is refused as read_json refuses it. A key repeated with the
    same value is read once."""
    if not path.exists():
        raise InputError(f"{path} does not exist: {missing}")
    value, repeated = read_json(path, invalid)
    if repeated:
        log.info(f"{path}: {repeated} keys repeated with the same value, read once")
    return value


def read_official(benchmark_file: Path) -> pl.DataFrame:
    """The official benchmark file as the tidy table (field, query, doc, type), ids as strings,
    positives typed "cited". Each level must be of its type ({field: {query: {list: [ids]}}},
    ids strings or integers): anything else is refused, not read as something else (a string
    as a list of characters)."""
    nested = _read_json(benchmark_file, "give the folder holding the MDCR files",
                        "download it again")
    if not isinstance(nested, dict):
        raise InputError(f"{benchmark_file}: holds {_json_type(nested)}, not an object "
                         "{field: {query: {list: [ids]}}}; is this an mdcr_<split>.json file?")
    rows = {"field": [], "query": [], "doc": [], "type": []}
    for field, queries in nested.items():
        if not isinstance(queries, dict):
            raise InputError(f"{benchmark_file}: field {field!r} does not hold an object of "
                             "queries; is this an mdcr_<split>.json file?")
        for query, lists in queries.items():
            if not isinstance(lists, dict):
                raise InputError(f"{benchmark_file}: query {query} of field {field!r} holds "
                                 f"{_json_type(lists)}, not an object of lists "
                                 "{\"bm25\": [ids], ..., \"true\": [ids]}; fix the file or "
                                 "download it again")
            if TRUE not in lists:
                raise InputError(f"{benchmark_file}: query {query} of {field} has no \"true\" "
                                 "list (its cited papers)")
            for kind, docs in lists.items():
                where = f"{benchmark_file}: list {kind!r} of query {query} of field {field!r}"
                if not isinstance(docs, list):
                    raise InputError(f"{where} is {_json_type(docs)} ({_show(docs)}), not a "
                                     "list of paper ids; fix the file or download it again")
                bad = [d for d in docs if isinstance(d, bool) or not isinstance(d, str | int)]
                if bad:
                    raise InputError(f"{where} holds {_show(bad[0])}, not a paper id (a string "
                                     "or an integer); fix the file or download it again")
                rows["field"] += [field] * len(docs)
                rows["query"] += [str(query)] * len(docs)
                rows["doc"] += [str(d) for d in docs]
                rows["type"] += [POSITIVE_TYPE if kind == TRUE else kind] * len(docs)
    return pl.DataFrame(rows, schema={k: pl.String for k in rows})


def import_benchmark(src: Path, corpus_dir: Path, split: str = "test", replace: bool = False,
                     derived: tuple[Path, ...] = ()) -> dict:
    """Read `mdcr_<split>.json` and `mdcr_<split>_data.jsonl` from `src` into the benchmark
    corpus `corpus_dir` (string ids), so every stage runs on it (make eval CORPUS=...). A
    corpus holds one split: import `val` into a corpus of its own (validation pools). Over a
    benchmark with other contents only with `replace` (`write_benchmark`). A query listed as
    its own candidate is left out of its lists (a query is never its own candidate), counted
    per field and type in the pools' manifests (`query_itself_left_out`) and logged."""
    claim_corpus(corpus_dir, "make import-mdcr")
    split = pool_split(split)
    benchmark = src / MDCR_BENCHMARK.format(FILE_SPLITS[split])
    table, itself = leave_out_query_itself(read_official(benchmark))
    custom = sorted(set(table["field"].unique()) - set(MAG_FIELDS))
    if custom:  # a custom benchmark's own fields are imported; a misspelling is seen here
        log.warning(f"[import-mdcr] {benchmark}: {len(custom)} fields are not among the 19 "
                    f"official MDCR fields (MAG's: {', '.join(MAG_FIELDS)}): "
                    f"{', '.join(map(repr, custom))}, each imported as a field pool of its own")
    data = src / MDCR_DATA.format(FILE_SPLITS[split])
    if not data.exists():
        raise InputError(f"{data} does not exist: the benchmark's titles and abstracts come "
                         "from it (download it beside the json)")
    read = read_jsonl(data, {"paper_id": pl.String, "title": pl.String, "abstract": pl.String},
                      "download it again").with_row_index("record", offset=1)
    papers = read.unique(["paper_id", "title", "abstract"], keep="first", maintain_order=True)
    clash = papers.filter(pl.len().over("paper_id") > 1)
    if clash.height:
        first, second = clash.filter(pl.col("paper_id") == clash["paper_id"][0])["record"][:2]
        raise InputError(f"{data}: paper {clash['paper_id'][0]} is given twice with other "
                         f"contents (records {first} and {second}): keep one, or download the "
                         "file again")
    duplicated = read.height - papers.height  # repeated exactly: read once
    papers = papers.drop("record").rename({"paper_id": "corpusid"})
    parameters = {"source": str(src), "split": FILE_SPLITS[split]}
    extra = {field: {"query_itself_left_out": {
        "pairs": mine.height, "by_type": dict(mine.group_by("type").len().sort("type")
                                              .iter_rows())}}
        for field in table["field"].unique()
        for mine in [itself.filter(pl.col("field") == field)]}
    info = write_benchmark(corpus_dir, papers, table, "import-mdcr", parameters,
                           split=split, extra=extra, replace=replace, derived=derived)
    info["duplicate_paper_records_dropped"] = duplicated
    info["query_itself_left_out"] = itself.height
    counts = info["benchmark"]["counts"]
    log.info(f"[import-mdcr] corpus {corpus_dir.name} ({info['installed']}): {counts['fields']} "
             f"fields, {counts['queries']} queries, {counts['papers']} papers, {counts['pairs']} "
             f"pairs; {duplicated} duplicate paper records dropped")
    return info


def leave_out_query_itself(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The official table (field, query, doc, type) without rows listing a query as its own
    candidate, and those rows (logged: the search stage never ranks a query's own paper for
    it, and such a pair would have no score)."""
    own = pl.col("query") == pl.col("doc")
    itself = table.filter(own)
    if itself.height:
        positives = itself.filter(pl.col("type") == POSITIVE_TYPE).height
        log.warning(f"[import-mdcr] {itself.height} listings of a query as its own candidate "
                    f"({positives} in its \"{TRUE}\" list; e.g. query {itself['query'][0]} "
                    f"of {itself['field'][0]}) left out: a query is never its own candidate")
    return table.filter(~own), itself


@dataclass(frozen=True)
class Shared:
    """The listed pairs a run scored more than once (a query listed under two fields has its
    pairs in two fields' pools, each searched apart) and what `official_scores` kept: `pairs`, how
    many; `example`, one of them ("<query>_<doc>") with its pools; `kept`, SHARED_PAIRS's
    choice."""

    pairs: int = 0
    example: str = ""
    kept: str = "first"

    def words(self) -> str:
        """The log's words for them ("" when no pair was scored twice)."""
        if not self.pairs:
            return ""
        kept = ("the score of the pool first in the benchmark's order of fields (pool names "
                "sorted)" if self.kept == "first" else "the higher score")
        return (f"; {self.pairs:,} pairs sit in two fields' pools (a query listed under two "
                f"fields, e.g. {self.example}) and were scored in each: kept {kept} "
                "(SHARED_PAIRS)")

    def note(self) -> str:
        """Table 3's note on the rule its numbers were scored by (`model_numbers`)."""
        said = (f"the official evaluator's (mdcr-evaluate) on the scores file make mdcr-scores "
                f"writes with SHARED_PAIRS={self.kept}")
        if not self.pairs:
            return (f"These numbers are {said}; no pair is listed under two fields here, so "
                    "SHARED_PAIRS changes none of them.")
        kept = ("the score of the field whose pool is first in pool-name order"
                if self.kept == "first" else "the higher of the two scores")
        return (f"These numbers are {said}: {self.pairs:,} pairs sit in two fields' pools (a "
                f"query listed under two fields, e.g. {self.example}), each scored in both, "
                f"and the file holds one score per pair, {kept}.")


def one_score_per_pair(runs: pl.DataFrame, shared: str = "first") -> tuple[pl.DataFrame,
                                                                          Shared]:
    """`runs` (query, doc, score; `pool`, in the benchmark's order, where several pools' runs
    are together) with one score per (query, doc) pair, as the official scores file holds
    one: "first" keeps the first pool's, "max" the higher one, "refuse" refuses the run
    naming the pairs scored twice. What was found is returned (Shared)."""
    if "pool" not in runs.columns:
        runs = runs.with_columns(pool=pl.lit(""))
    runs = runs.with_row_index("order")
    twice = runs.filter(pl.len().over("query", "doc") > 1)
    if twice.is_empty():
        return runs.select("query", "doc", "score"), Shared(kept=shared)
    first = twice.sort("query", "doc", "order").row(0, named=True)
    pools = twice.filter(pl.col("query") == first["query"], pl.col("doc") == first["doc"])[
        "pool"].to_list()
    found = Shared(twice.select("query", "doc").unique().height,
                   f"{first['query']}_{first['doc']} in {' and '.join(pools)}", shared)
    if shared == "refuse":
        raise InputError(f"{found.pairs:,} listed pairs are in two fields' pools (a query "
                         f"listed under two fields) and have a score in each (e.g. "
                         f"{found.example}), and the official scores file holds one: give "
                         "SHARED_PAIRS=first (the first field's, in the benchmark's order) or "
                         "SHARED_PAIRS=max (the higher)")
    if shared == "max":
        runs = runs.sort("order").group_by("query", "doc", maintain_order=True).agg(
            pl.col("score").max())
    else:
        runs = runs.sort("order").unique(["query", "doc"], keep="first", maintain_order=True)
    return runs.select("query", "doc", "score"), found


def official_scores(runs: pl.DataFrame, pairs: pl.DataFrame, shared: str = "first"
                    ) -> tuple[pl.DataFrame, Shared]:
    """The official scores file's content for a run of every pool of a benchmark: one score
    (query, doc, score; ids as strings, sorted) per listed (query, candidate) pair of `pairs`,
    a pair scored in two pools given one as `shared` says (one_score_per_pair); a pair the run
    lacks is an error (the official evaluator would fail on it). The one rule `make
    mdcr-scores` writes and the report's Table 3 scores by. Also returns the pairs scored
    twice."""
    pairs = pairs.select(pl.col("query", "doc").cast(pl.String)).unique().sort("query", "doc")
    runs = runs.with_columns(pl.col("query", "doc").cast(pl.String)).join(
        pairs, on=["query", "doc"], how="semi", maintain_order="left")
    runs, found = one_score_per_pair(runs, shared)
    scored = pairs.join(runs, on=["query", "doc"], how="left", maintain_order="left")
    missing = scored.filter(pl.col("score").is_null())
    if missing.height:
        raise InputError(f"{missing.height} listed pairs have no score in the run (e.g. "
                         f"{missing['query'][0]}_{missing['doc'][0]}): search the benchmark again")
    return scored, found


def scores_file(runs: pl.DataFrame, pairs: pl.DataFrame, out: Path, shared: str = "first"
                ) -> tuple[int, Shared]:
    """Write the official scores file {"<query>_<candidate>": score} of `official_scores`.
    Returns the number of keys the file holds, and the pairs scored twice."""
    check_out(out, folder=False)
    scored, found = official_scores(runs, pairs, shared)
    _write_scores(scored, out)
    return scored.height, found


def _write_scores(scored: pl.DataFrame, out: Path) -> None:
    """Write `official_scores`'s (query, doc, score) as the file {"<query>_<doc>": score}."""
    keys = dict(scored.select(key=pl.format("{}_{}", "query", "doc"), score="score")
                .iter_rows())
    with atomic_path(out) as tmp:
        tmp.write_bytes(orjson.dumps(keys))


# model -> the official evaluator's per-field numbers and averages (`official_numbers`): Table 3
Numbers = Mapping[str, tuple[pl.DataFrame, dict[str, float]]]


def official_round(values: pl.Series) -> pl.Series:
    """Values rounded to 4 decimals as the official script rounds them (numpy's `round`: the
    value x 10^4 to the nearest integer, halves to even), not as Python's `round` or polars'
    (the exact binary value, or halves away from zero), which differ from it on a half."""
    return pl.Series(values.name, np.round(values.to_numpy(), 4), dtype=pl.Float64)


def official_numbers(per_query: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, float]]:
    """The official evaluator's numbers from per-query values (field, metric, value; metric in
    ranx's names): per field the mean x100 rounded to 4 decimals, then the mean of the fields
    rounded to 4 decimals (means summed over sorted values: the same bits whatever the rows'
    order). Returns (field x official metric table, averages)."""
    names = {ranx: official for official, ranx in OFFICIAL_METRICS.items()}
    fields = (per_query.filter(pl.col("metric").is_in(list(names)))
              .group_by("field", "metric").agg(value=ordered("value").mean() * 100)
              .with_columns(pl.col("value").map_batches(official_round, return_dtype=pl.Float64),
                            pl.col("metric").replace_strict(names))
              .pivot("metric", index="field", values="value").sort("field"))
    # the pivot's columns come in the order group_by met the metrics, which varies: fix it
    fields = fields.select("field", *(m for m in OFFICIAL_METRICS if m in fields.columns))
    averages = {m: float(np.round(np.mean(fields[m].to_numpy()), 4))
                for m in OFFICIAL_METRICS if m in fields}
    return fields, averages


def _finite_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond a double's range
        return False


def read_scores(path: Path) -> dict[str, float]:
    """A scores file {"<query>_<candidate>": score}: every score a finite JSON number (not a
    string such as "nan", not null, a boolean or a list), as floats. The file is the user's
    own, so what is wrong is named (pair and value), never guessed at or skipped."""
    scores = _read_json(path, "give the scores file (mdcr-scores writes one)",
                        "write one JSON object of finite numbers (a NaN or Infinity "
                        "literal is not JSON)")
    if not isinstance(scores, dict):
        raise InputError(f"{path}: holds {_json_type(scores)}, not an object "
                         "{\"<query>_<candidate>\": score}; write one object of scores")
    bad = [key for key, value in scores.items() if not _finite_number(value)]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise InputError(f"{path}: score of {bad[0]} is {_show(scores[bad[0]])}, not a finite "
                         f"number{more}; write a number for every pair")
    return {key: float(value) for key, value in scores.items()}


READ_TYPES = (*OFFICIAL_TYPES, POSITIVE_TYPE)  # the lists the official evaluator reads


def evaluate_files(benchmark_file: Path, scores_path: Path) -> tuple[pl.DataFrame,
                                                                    dict[str, float]]:
    """The official evaluation of a scores file against a benchmark file
    (`official_evaluation`); lists the official script never reads are left out (and logged),
    and every pair of those it reads needs a score."""
    table = read_official(benchmark_file)
    read = table.filter(pl.col("type").is_in(READ_TYPES))
    if read.height < table.height:  # as the official script: other lists are not read
        unread = table.filter(~pl.col("type").is_in(READ_TYPES))
        only = unread.join(read, on=["query", "doc"], how="anti").select("query", "doc")
        by_type = dict(unread.group_by("type").len().sort("type").iter_rows())
        log.info(f"[mdcr-evaluate] lists the official evaluator does not read, left out: "
                 f"{by_type} ({only.unique().height} candidates are only in them)")
    scores = read_scores(scores_path)
    listed = read.select("query", "doc").unique().sort("query", "doc")
    keys = listed.select(pl.format("{}_{}", "query", "doc")).to_series().to_list()
    missing = [k for k in keys if k not in scores]
    if missing:
        raise InputError(f"{scores_path}: {len(missing)} listed pairs have no score (e.g. "
                         f"{missing[0]}); score every query-candidate pair")
    return official_evaluation(read, listed.with_columns(
        score=pl.Series([scores[k] for k in keys], dtype=pl.Float64)))


def official_evaluation(table: pl.DataFrame, scores: pl.DataFrame
                        ) -> tuple[pl.DataFrame, dict[str, float]]:
    """The official evaluator's numbers (`official_numbers`) of `scores` (query, doc, score:
    one per pair, as a scores file holds them, every pair it reads scored) on the benchmark
    `table` (field, query, doc, type), through the pipeline's metric kernels (trec_eval's
    definitions): per field, every candidate of the lists it reads (READ_TYPES) ranked by
    score as trec_eval ranks a run (`trec_eval_order`: ties, in single precision, by candidate
    id descending as a string), the positives relevant; every query counts, one without a
    positive too (it scores 0, as pytrec_eval scores a query whose judged candidates are all
    0: the official script averages it in)."""
    from pipeline.metrics import per_query

    read = table.filter(pl.col("type").is_in(READ_TYPES)).with_columns(
        pl.col("query", "doc").cast(pl.String))
    run = read.select("field", "query", "doc").unique().join(
        scores.select(pl.col("query", "doc").cast(pl.String), "score"), on=["query", "doc"],
        how="left")
    frames = []
    for (field,), rows in run.sort("field", "query", "doc").group_by("field",
                                                                    maintain_order=True):
        # every candidate judged, as the official script's qrels: the positives 1, others 0
        qrels = (read.filter(pl.col("field") == field)
                 .group_by("query", "doc")
                 .agg(rel=(pl.col("type") == POSITIVE_TYPE).any().cast(pl.Int32)))
        values, _ = per_query(trec_eval_order(rows.select("query", "doc", "score")), qrels,
                              rows["query"].unique(), list(OFFICIAL_METRICS.values()),
                              every_judged=True)
        frames.append(values.unpivot(index="query", variable_name="metric")
                      .with_columns(field=pl.lit(field)))
    return official_numbers(pl.concat(frames))


def model_scores(place: Place, model: str, split: str, shared: str = "first",
                 pools: Collection[str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame,
                                                                Shared]:
    """The benchmark's table (`benchmark_table`) of `split` (of `pools` only, when given) and
    the scores its official scores file holds for `model`'s runs of those pools
    (`official_scores`: a pair in two fields' pools, a query listed under two fields, gets
    the score SHARED_PAIRS `shared` says: the first field's pool, in pool-name order, the
    higher one, or a refusal naming them), with the pairs scored twice."""
    from pipeline.retrieval.runs import load_run

    split = pool_split(split)
    table = benchmark_table(place.corpus_dir, split, pools)
    runs = pl.concat([load_run(place, p, model)
                      .select(pl.col("query", "doc").cast(pl.String), "score", pool=pl.lit(p))
                      for p in benchmark_pools(place.corpus_dir, split)  # the benchmark's order
                      if pools is None or p in pools])
    scored, found = official_scores(runs, table, shared)
    return table, scored, found


def model_numbers(place: Place, model: str, split: str, shared: str = "first",
                  pools: Collection[str] | None = None
                  ) -> tuple[pl.DataFrame, dict[str, float], Shared]:
    """The official evaluator's numbers on the scores file `make mdcr-scores` writes for
    `model` with SHARED_PAIRS `shared` (`model_scores`), without writing it: the report's
    Table 3. Also the pairs scored twice."""
    table, scored, found = model_scores(place, model, split, shared, pools)
    fields, averages = official_evaluation(table, scored)
    return fields, averages, found


def model_scores_file(place: Place, model: str, split: str, out: Path,
                      shared: str = "first") -> int:
    """The official scores file of `model`'s runs of every pool of a benchmark's `split`
    (`make mdcr-scores`; `model_scores`, SHARED_PAIRS `shared`). Logs the file's keys and
    what was kept; returns the number of keys written."""
    check_out(out, folder=False)  # before reading the runs
    _, scored, found = model_scores(place, model, split, shared)
    _write_scores(scored, out)
    log.info(f"[mdcr-scores] {out}: {scored.height:,} query-candidate scores of {model}"
             f"{found.words()}")
    return scored.height


def official_table(fields: pl.DataFrame, averages: dict[str, float]) -> str:
    """`evaluate_files`'s numbers as the official evaluator prints them: a line per field, then
    the average, the metrics in OFFICIAL_METRICS's order."""
    lines = ["\t".join([row["field"], *(f"{m}: {row[m]}" for m in OFFICIAL_METRICS if m in row)])
             for row in fields.iter_rows(named=True)]
    average = "\t".join(f"{m}: {averages[m]}" for m in OFFICIAL_METRICS if m in averages)
    return "\n".join([*lines, f"\nAVG\t{average}"])
