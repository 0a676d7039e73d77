"""Runs made elsewhere, imported into the run store of one pool (`make import-run`,
`pipeline.import_run`), so that eval, collect and the report score them like any model's.

A run is given as a TREC file (`qid Q0 docid rank score tag`, whitespace separated), a polars
or pandas DataFrame (columns query, doc, score; or ranx's q_id, doc_id, score) or a ranx Run.
It is checked against the pool before anything is written:

- a query the pool does not have, or a document that is not a candidate of the pool (of the
  query's own list in an MDCR-style or CSFCube pool): refused, unless `drop_unknown`, which
  drops those lines and counts them;
- the same (query, doc) given twice: refused (trec_eval refuses it too);
- a query ranking its own paper: dropped and counted, as for every run the pipeline makes;
- score ties: kept, and broken as trec_eval breaks them (docid descending as a string);
  counted. The file's rank column is not read, as trec_eval does not read it;
- the pool's queries the run does not answer: counted (eval scores them 0).

The copy is written as every run is (`runs/<corpus>/<pool>/<model>.trec` and `.parquet`, in
trec_eval's order, every line kept: no top-k cut), with a manifest whose `details` say
`retriever: imported` and name the source (its file name and sha256). The copy is what later
stages check; the source may move or change. Importing the same source again does nothing;
another source under the same name (or over a damaged manifest) is refused unless `replace`.

Standard library at module level: `python3 -m pipeline check` asks `imported_pools` whether a
MODEL is an imported run before the virtual environment exists.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.errors import InputError
from pipeline.core.repair import Placeholder, Repair
from pipeline.layout import IMPORT_RUN, VARIANT_SEP, Place, check_name, run_paths, runs_dir

if TYPE_CHECKING:
    import polars as pl

STAGE = IMPORT_RUN
IMPORTED = "imported"  # the retriever an imported run's manifest names (details.retriever)
TREC_FIELDS = 6  # qid Q0 docid rank score tag
COLUMNS = {"query": ("query", "q_id", "qid"), "doc": ("doc", "doc_id", "docid"),
           "score": ("score",)}  # a DataFrame's columns, by the names ours and ranx's use


def imported_pools(runs_root: Path, corpus: str, model: str) -> list[str]:
    """The pools of `corpus` where `model` is an imported run (its manifest says so), sorted;
    [] for a model searched here or not run at all. Reads JSON only (the check uses it)."""
    folder = runs_dir(runs_root, corpus, "pool").parent  # the corpus's run folders
    if not folder.is_dir():
        return []
    pools = []
    for pool in sorted(p.name for p in folder.iterdir() if p.is_dir()):
        manifest = run_paths(runs_root, corpus, pool, model).manifest
        if not manifest.is_file():
            continue
        try:
            info = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # damaged: load_run and verify name it
        if isinstance(info, dict) and info.get("stage") == STAGE:
            pools.append(pool)
    return pools


def import_run(place: Place, pool: str, run: Any, model: str, *, drop_unknown: bool = False,
               replace: bool = False) -> dict:
    """Check `run` against `pool` and write it as the run `model` of the pool; return its
    manifest (the existing one, unchanged, when the same source was imported already)."""
    from pipeline.core.checksums import file_problem, fingerprints
    from pipeline.core.files import is_corrupt, read_json, write_json
    from pipeline.core.inputs import changed, record
    from pipeline.core.locks import file_lock
    from pipeline.core.manifests import manifest
    from pipeline.pools.build import load_pool, pool_files
    from pipeline.retrieval.runs import own_lists, write_run

    start = time.perf_counter()
    check_model_name(model)
    if not isinstance(drop_unknown, bool) or not isinstance(replace, bool):
        raise InputError("import_run: drop_unknown and replace are True or False")
    queries, candidates, _ = load_pool(place.corpus_dir, pool)  # a damaged pool: refused
    frame, source = read_source(run)
    parameters = {"pool": pool, "model": model, "drop_unknown": drop_unknown}
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    inputs = record(place.roots, pool_files(place.corpus_dir, pool))
    over = Repair(STAGE, place.corpus, model, variables=(
        ("POOL", pool), ("RUN", source["path"] or Placeholder("the run file")), ("REPLACE", "1")))
    if paths.manifest.exists() and not (replace and is_corrupt(paths.manifest)):
        old = read_json(paths.manifest, over)  # damaged: REPLACE=1 imports over it
        if old.get("stage") != STAGE:
            raise InputError(f"{paths.parquet} is a run made by the search stage, not an "
                             f"imported one: give the imported run another MODEL name")
        same = old.get("details", {}).get("source_sha256") == source["sha256"]
        if not same and not replace:
            raise InputError(
                f"run {model} of pool {pool} was imported from "
                f"{old.get('details', {}).get('source')!r} (other contents than "
                f"{source['name']!r}): give another MODEL name, or REPLACE=1 "
                "(replace=True) to import this one in its place",
                Repair(STAGE, place.corpus, model, variables=(
                    ("POOL", pool), ("RUN", source["path"] or "<run file>"),
                    ("REPLACE", "1"))))
        intact = not any(file_problem(paths.trec.parent / name, expected, deep=True)
                         for name, expected in old.get("outputs", {}).items())
        if same and intact and old.get("parameters") == parameters and not changed(
                place.roots, old.get("inputs", {})):
            return old  # the same source, checked against the same pool: nothing to do
    ranked, counts = check_against_pool(frame, queries, candidates, pool, drop_unknown,
                                        own_lists(candidates)[0])
    with file_lock(paths.trec.parent / model):  # the run
        write_run(ranked, paths, tag=model, decimals=None)
        info = manifest(STAGE, parameters,
                        details={"retriever": IMPORTED, "source": source["name"],
                                 "source_path": source["path"],
                                 "source_sha256": source["sha256"],
                                 "depth": int(ranked.group_by("query").len()["len"].max())},
                        inputs=inputs,
                        outputs=fingerprints(paths.trec.parent,
                                             [paths.trec.name, paths.parquet.name]),
                        counts=counts, seconds=round(time.perf_counter() - start, 2))
        write_json(info, paths.manifest)
    return info


def check_model_name(model: object) -> str:
    """A name for an imported run: a valid model name that is no registered, `hf:` or fused
    model's (their runs are made by search) and no perturbed-query run's."""
    from pipeline.models import get_model

    check_name("model", model)
    assert isinstance(model, str)
    if VARIANT_SEP in model:
        raise InputError(f"MODEL={model!r}: {VARIANT_SEP!r} marks runs of perturbed queries; "
                         "name the imported run without it")
    try:
        get_model(model)
    except InputError:
        return model
    raise InputError(f"MODEL={model!r} is a model the pipeline searches with (make models): "
                     "give the imported run a name of its own")


def read_source(run: Any) -> tuple[pl.DataFrame, dict]:
    """(query, doc, score as strings, strings, float64; `line`, the source line or row number)
    and the source: its file name and path (None for a frame) and the sha256 of its bytes (of
    its rows, for a frame)."""
    import polars as pl

    if isinstance(run, str | os.PathLike):
        return read_trec(Path(run))
    if hasattr(run, "to_dataframe") and hasattr(run, "to_dict"):  # a ranx Run
        run = run.to_dataframe()
    if type(run).__module__.startswith("pandas"):
        run = pl.from_pandas(run)
    if not isinstance(run, pl.DataFrame):
        raise InputError(f"run: a TREC file's path, a DataFrame (query, doc, score) or a ranx "
                         f"Run, not {type(run).__name__}")
    picked = {}
    for column, names in COLUMNS.items():
        found = [n for n in names if n in run.columns]
        if not found:
            raise InputError(f"run: the DataFrame has no column {' or '.join(names)} (has "
                             f"{', '.join(run.columns) or 'none'})")
        picked[column] = found[0]
    if not run[picked["score"]].dtype.is_numeric():
        raise InputError(f"run: the column {picked['score']} holds {run[picked['score']].dtype}"
                         ", not numbers")
    frame = run.select(query=pl.col(picked["query"]).cast(pl.String),
                       doc=pl.col(picked["doc"]).cast(pl.String),
                       score=pl.col(picked["score"]).cast(pl.Float64)).with_row_index(
        "line", offset=1)
    nulls = frame.filter(pl.any_horizontal(pl.all().is_null()) | ~pl.col("score").is_finite())
    if nulls.height:
        raise InputError(f"run: row {nulls['line'][0]} has no query, doc or finite score "
                         f"({nulls.height} such rows): give every row all three")
    digest = hashlib.sha256()
    for row in frame.select("query", "doc", "score").iter_rows():
        digest.update(f"{row[0]}\t{row[1]}\t{row[2]!r}\n".encode())
    return frame, {"name": None, "path": None, "sha256": digest.hexdigest()}


def read_trec(path: Path) -> tuple[pl.DataFrame, dict]:
    """A TREC run file's lines (blank lines skipped), each `qid Q0 docid rank score tag`; a
    line of other fields, or a score that is not a finite number, refused with its number."""
    import polars as pl

    from pipeline.core.checksums import sha256_file
    from pipeline.core.textfiles import text_lines

    if not path.is_file():
        raise InputError(f"RUN={str(path)!r} is not a file: give a TREC run file "
                         "(qid Q0 docid rank score tag per line)")
    rows: list[tuple[str, str, float, int]] = []
    for number, line in text_lines(path, "is it a TREC run file?"):
        fields = line.split()
        if not fields:
            continue
        score = _float(fields[4]) if len(fields) == TREC_FIELDS else None
        if score is None:
            raise InputError(f"{path}:{number}: not a TREC run line (qid Q0 docid rank score "
                             f"tag, {TREC_FIELDS} fields, a finite score): fix or remove it")
        rows.append((fields[0], fields[2], score, number))
    if not rows:
        raise InputError(f"{path} holds no run line: give a TREC run file")
    frame = pl.DataFrame(rows, schema={"query": pl.String, "doc": pl.String,
                                       "score": pl.Float64, "line": pl.Int64}, orient="row")
    return frame, {"name": path.name, "path": str(path.absolute()),
                   "sha256": sha256_file(path)}


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def check_against_pool(frame: pl.DataFrame, queries: pl.DataFrame, candidates: pl.DataFrame,
                       pool: str, drop_unknown: bool, pairs: pl.DataFrame | None
                       ) -> tuple[pl.DataFrame, dict]:
    """The run in trec_eval's order (query, doc, rank, score; ids in the pool's types) and its
    counts; refused: duplicates, and unknown ids unless `drop_unknown` (module docstring)."""
    import polars as pl

    from pipeline.retrieval.runs import trec_eval_order

    where = f"the run for pool {pool}"
    dup = frame.filter(pl.struct("query", "doc").is_duplicated())
    if dup.height:
        first = dup.sort("line").row(0, named=True)
        raise InputError(f"{where} gives {dup.select('query', 'doc').unique().height} (query, "
                         f"doc) pairs more than once (e.g. query {first['query']} doc "
                         f"{first['doc']}, line {first['line']}): keep one line each")
    typed = frame.with_columns(query=_as(frame["query"], queries["corpusid"].dtype),
                               doc=_as(frame["doc"], candidates["corpusid"].dtype))
    known_query = typed["query"].is_in(queries["corpusid"].implode())
    if pairs is None:
        known_doc = typed["doc"].is_in(candidates["corpusid"].implode())
    else:
        known_doc = typed.join(pairs.with_columns(listed=pl.lit(True)), on=["query", "doc"],
                               how="left", maintain_order="left")["listed"].fill_null(False)
    # an id not spelt as the pool's type (null here) is unknown, never dropped unseen
    typed = typed.with_columns(known_query=known_query.fill_null(False),
                               known_doc=known_doc.fill_null(False))
    unknown_queries = typed.filter(~pl.col("known_query"))
    unknown_docs = typed.filter(pl.col("known_query") & ~pl.col("known_doc"))
    if not drop_unknown:
        for bad, what, column in ((unknown_queries, "queries the pool does not have", "query"),
                                  (unknown_docs, "papers that are not candidates of the pool"
                                   + (" (of the query's own list)" if pairs is not None else ""),
                                   "doc")):
            if bad.height:
                first = bad.sort("line").row(0, named=True)
                raw = frame.filter(pl.col("line") == first["line"])[column][0]
                raise InputError(f"{where} names {bad[column].n_unique()} {what} (e.g. "
                                 f"{raw}, line {first['line']}; {bad.height} lines): was it "
                                 "made for this pool? DROP_UNKNOWN=1 (drop_unknown=True) drops "
                                 "and counts them")
    kept = typed.filter(pl.col("known_query") & pl.col("known_doc"))
    self_hits = kept.filter(pl.col("query").cast(pl.String) == pl.col("doc").cast(pl.String))
    kept = kept.filter(pl.col("query").cast(pl.String) != pl.col("doc").cast(pl.String))
    if not kept.height:
        raise InputError(f"{where}: no line is left to import (every line names an unknown "
                         "query or paper): was it made for this pool?")
    ties = kept.filter(pl.len().over("query", "score") > 1)
    ranked = trec_eval_order(kept).select("query", "doc", "rank", "score")
    answered = ranked["query"].n_unique()
    counts = {"lines": frame.height, "rows": ranked.height, "queries": answered,
              "unknown_query_lines_dropped": unknown_queries.height,
              "unknown_doc_lines_dropped": unknown_docs.height,
              "self_hits_removed": self_hits.height,
              "tied_lines": ties.height,
              "queries_with_ties": ties["query"].n_unique(),
              "pool_queries_not_in_run_scored_0": queries.height - answered}
    return ranked, counts


def _as(ids: pl.Series, dtype: pl.DataType) -> pl.Series:
    """Ids read as strings in the pool's id type; an id that is not that type's canonical
    spelling (`007` for the integer 7) becomes null, unknown: trec_eval compares strings."""
    import polars as pl

    if dtype == pl.String:
        return ids
    cast = ids.cast(dtype, strict=False)
    return pl.select(pl.when(cast.cast(pl.String) == ids).then(cast)).to_series().alias(
        ids.name)

