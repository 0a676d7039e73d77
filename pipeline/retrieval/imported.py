"""Runs made elsewhere, imported into the run store of one pool (`make import-run`,
`pipeline.import_run`), so that eval, collect and the report score them like any model's.

A run is given as a TREC file (`qid Q0 docid rank score tag`, whitespace separated), a polars
or pandas DataFrame (columns query, doc, score; or ranx's q_id, doc_id, score) or a ranx Run.
It is checked against the pool before anything is written:

- a query the pool does not have, or a document that is not a candidate of the pool (of the
  query's own list in an MDCR-style or CSFCube pool): refused, unless `drop_unknown`, which
  drops those lines and counts them;
- the same (query, doc) given twice: refused (trec_eval refuses it too);
- a query ranking its own paper (on CSFCube, the query `<paper>_<facet>` ranking `<paper>`):
  dropped and counted, as for every run the pipeline makes;
- score ties: kept, and broken as trec_eval breaks them (docid descending as a string);
  counted. The file's rank column is not read, as trec_eval does not read it;
- the pool's queries the run does not answer: counted (eval scores them 0).

The copy is written as every run is (`runs/<corpus>/<pool>/<model>.trec` and `.parquet`, in
trec_eval's order, every line kept: no top-k cut), with a manifest whose `details` say
`retriever: imported` and name the source (its file name and sha256). The copy is what later
stages check; the source may move or change. Importing the same source again does nothing;
another source under the same name (or over a damaged manifest) is refused unless `replace`.

Without a pool (`make import-run` without POOL), the run is one of the whole collection: each
pool of the corpus gets the lines of its queries (CSFCube's three facet pools, a BEIR test and
dev pool), pools that keep no line of it are left out, and every pool is checked before any
is written. That needs pools that share no query; otherwise the refusal lists the
pools to choose from.

A TREC file is read in blocks (`BLOCK_BYTES`) and its lines spilled to a scratch folder by
query; they are then checked and written a group of whole queries at a time (`GROUP_LINES`
lines), so memory stays bounded by the pool and the largest query's lines whatever the file's
size (benchmarks/import_memory.py); the copy is byte for byte what one pass over the whole run
writes.

Standard library at module level: `python3 -m pipeline check` asks `imported_pools` whether a
MODEL is an imported run before the virtual environment exists.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.errors import InputError
from pipeline.core.repair import Placeholder, Repair
from pipeline.layout import (
    IMPORT_RUN,
    VARIANT_SEP,
    Place,
    check_name,
    pool_names,
    run_paths,
    runs_dir,
)

if TYPE_CHECKING:
    import polars as pl

STAGE = IMPORT_RUN
IMPORTED = "imported"  # the retriever an imported run's manifest names (details.retriever)
TREC_FIELDS = 6  # qid Q0 docid rank score tag
COLUMNS = {"query": ("query", "q_id", "qid"), "doc": ("doc", "doc_id", "docid"),
           "score": ("score",)}  # a DataFrame's columns, by the names ours and ranx's use
BLOCK_BYTES = 1 << 23  # bytes of a TREC file parsed at a time (also the longest line taken)
FRAME_ROWS = 1 << 20  # rows of a DataFrame source spilled at a time
GROUP_LINES = 1 << 19  # lines (of whole queries) checked and ordered at a time
UNKNOWN_GROUPS = 64  # lines of queries the pool lacks are spread over these by a hash
SPILL_ROWS = 1 << 14  # rows per row group of a spilled block (a group's read skips the others)
# whitespace as Python's str.split() takes it (\s is Unicode's; Python adds \x1c-\x1f)
_WS, _NOT_WS = r"[\s\x1c-\x1f]", r"[^\s\x1c-\x1f]"
TREC_LINE = rf"^{_WS}*" + rf"{_WS}+".join([f"({_NOT_WS}+)"] * TREC_FIELDS) + rf"{_WS}*$"
BLANK = rf"^{_WS}*$"
# a score polars reads as Python's float() does; any other spelling is read by float() itself
PLAIN_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
NOT_TREC = (f"not a TREC run line (qid Q0 docid rank score tag, {TREC_FIELDS} fields, a finite "
            "score)")
log = logging.getLogger(__name__)


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


def import_run(place: Place, pool: str | None, run: Any, model: str, *,
               drop_unknown: bool = False, replace: bool = False) -> dict:
    """Check `run` against `pool` and write it as the run `model` of the pool; log and return
    its manifest (the existing one, unchanged, when the same source was imported already).
    `pool` None: a run of the whole collection (import_whole), {pool: its manifest}."""
    from pipeline.corpus.manifest import written_whole
    from pipeline.retrieval.runs import searched_pools

    check_model_name(model)
    if searched := searched_pools(place.runs_root, place.corpus, model):  # one name, one model
        raise InputError(f"MODEL={model!r} is a model searched in pool {', '.join(searched)} "
                         f"of corpus {place.corpus}: give the imported run a name of its own")
    if not isinstance(drop_unknown, bool) or not isinstance(replace, bool):
        raise InputError("import_run: drop_unknown and replace are True or False")
    if pool is None:
        return import_whole(place, run, model, drop_unknown, replace)
    known = pool_names(place.corpus_dir)
    if pool not in known and written_whole(place.corpus_dir):  # its pools came with it
        raise InputError(f"POOL={pool!r} is not a pool of corpus {place.corpus} (its pools: "
                         f"{listing(known)}): give one of them, or no POOL to import a run of "
                         "the whole collection")
    return _import(place, pool, run, model, drop_unknown, replace)  # else: load_pool says


def listing(pools: list[str], shown: int = 6) -> str:
    """Pools named in a message: all of them, or the first `shown` and how many more."""
    if not pools:
        return "none yet"
    more = f" and {len(pools) - shown} more" if len(pools) > shown else ""
    return ", ".join(pools[:shown]) + more


@dataclass(frozen=True)
class Whole:
    """A run of the whole collection, as one pool of it sees it: the collection's pools and
    the ids (as strings) of the other pools' queries, whose lines this pool leaves out."""

    pools: tuple[str, ...]
    elsewhere: frozenset[str]


def import_whole(place: Place, run: Any, model: str, drop_unknown: bool, replace: bool
                 ) -> dict[str, dict]:
    """A run of the whole collection: each pool of the corpus gets the lines of its queries;
    every pool is checked first (nothing is written if one refuses), then written; pools
    that keep no line of it (it names none of their queries) are left out, and said so, or
    refused where they keep an earlier import of `model` (two sources under one name).
    {pool: its manifest}."""
    from pipeline.pools.build import load_pool

    pools = pool_names(place.corpus_dir)
    if not pools:
        raise InputError(f"corpus {place.corpus} has no pool yet: make or import its pools "
                         "before a run of them")
    queries = {p: set(load_pool(place.corpus_dir, p)[0]["corpusid"].cast(str).to_list())
               for p in pools}
    for i, first in enumerate(pools):
        for second in pools[i + 1:]:
            if shared := queries[first] & queries[second]:
                raise InputError(
                    f"give POOL=: the pools of corpus {place.corpus} share queries ({first} "
                    f"and {second}: e.g. {min(shared)}), so a run cannot be split among them; "
                    f"its pools: {listing(pools)}")
    views = {p: Whole(tuple(pools), frozenset().union(*(queries[o] for o in pools if o != p)))
             for p in pools}
    checked = {p: _import(place, p, run, model, drop_unknown, replace, views[p], write=False)
               for p in pools}
    named = [p for p in pools if checked[p]["counts"]["rows"]]
    if not named:
        raise InputError(f"the run names no query of corpus {place.corpus}'s pools with a "
                         f"paper of its list ({listing(pools)}): was it made for this "
                         "collection?")
    left = [p for p in pools if p not in named]
    if kept := [p for p in left
                if run_paths(place.runs_root, place.corpus, p, model).manifest.exists()]:
        raise InputError(f"pools {listing(kept)} keep a run {model} imported before, and this "
                         "run names none of their queries: it would stand beside theirs as one "
                         "model; give POOL= for each pool this run covers, or another MODEL")
    written = {p: _import(place, p, run, model, drop_unknown, replace, views[p]) for p in named}
    log.info(f"[{STAGE}] run {model} of corpus {place.corpus} imported into {len(written)} "
             "pools (" + ", ".join(f"{p}: {written[p]['counts']['rows']:,} rows, "
                                   f"{written[p]['counts']['queries']:,} queries"
                                   for p in written) + ")"
             + (f"; {len(left)} pools left out, keeping no line of it: {listing(left)}"
                if left else ""))
    return written


def _import(place: Place, pool: str, run: Any, model: str, drop_unknown: bool, replace: bool,
            whole: Whole | None = None, write: bool = True) -> dict:
    """Check `run` against `pool` (only the lines of its queries, for a run of the `whole`
    collection) and, with `write`, write it as the pool's run `model`; return the manifest
    (without `write`: the manifest it would get, or the existing one when current)."""
    from pipeline.core.atomic import scratch_dir
    from pipeline.core.checksums import file_problem, fingerprints
    from pipeline.core.files import is_corrupt, read_json, write_json
    from pipeline.core.inputs import changed, record
    from pipeline.core.locks import file_lock
    from pipeline.core.manifests import manifest
    from pipeline.pools.build import load_pool, pool_files

    start = time.perf_counter()
    queries, candidates, _ = load_pool(place.corpus_dir, pool)  # a damaged pool: refused
    blocks, source = source_blocks(run)
    parameters = {"pool": pool, "model": model, "drop_unknown": drop_unknown,
                  **({"collection": list(whole.pools)} if whole else {})}
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    inputs = record(place.roots, pool_files(place.corpus_dir, pool))
    pool_variable = () if whole else (("POOL", pool),)
    over = Repair(STAGE, place.corpus, model, variables=(
        *pool_variable, ("RUN", source["path"] or Placeholder("the run file")),
        ("REPLACE", "1")))
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
                    *pool_variable, ("RUN", source["path"] or "<run file>"),
                    ("REPLACE", "1"))))
        intact = not any(file_problem(paths.trec.parent / name, expected, deep=True)
                         for name, expected in old.get("outputs", {}).items())
        if same and intact and old.get("parameters") == parameters and not changed(
                place.roots, old.get("inputs", {})) and "complete" in old.get("details", {}):
            return _logged(old, place, pool, model) if write else old  # nothing to do
    target = PoolView.of(queries, candidates, pool, drop_unknown, whole)
    # a check alone (write=False) locks nothing and leaves nothing in the pool's run folder
    lock = file_lock(paths.trec.parent / model) if write else nullcontext()
    with lock, scratch_dir(paths.trec.parent if write else paths.trec.parent.parent,
                           model) as scratch:
        spilled = spill(blocks, target, scratch)
        counts, (depth, shortest) = write_checked(spilled, target, paths, model, write)
        info = manifest(STAGE, parameters,
                        details={"retriever": IMPORTED, "source": source["name"],
                                 "source_path": source["path"],
                                 "source_sha256": source["sha256"], "depth": depth,
                                 "shortest": shortest,
                                 "complete": bool(counts["rows"])
                                 and not counts["queries_cut"]},
                        inputs=inputs,
                        outputs=fingerprints(paths.trec.parent,
                                             [paths.trec.name, paths.parquet.name])
                        if write else {},
                        counts=counts, seconds=round(time.perf_counter() - start, 2))
        if not write:
            return info
        write_json(info, paths.manifest)
    if counts["self_hits_removed"]:
        log.warning(f"[{STAGE}] {counts['self_hits_removed']} lines of run {model} rank their "
                    "query's own paper: dropped, as for every run (self_hits_removed in "
                    f"{paths.manifest})")
    return _logged(info, place, pool, model)


def _logged(info: dict, place: Place, pool: str, model: str) -> dict:
    """`info`, the manifest of the run imported, once its source and counts are logged."""
    counts = ", ".join(f"{name} {value:,}" for name, value in info["counts"].items())
    log.info(f"[{STAGE}] run {model} of pool {pool} (corpus {place.corpus}) from "
             f"{info['details']['source']} (sha256 {info['details']['source_sha256'][:12]}): "
             f"{counts}")
    return info


def source_blocks(run: Any) -> tuple[Iterator[pl.DataFrame], dict]:
    """The run's lines in blocks (query, doc, score, line: read_source's columns) and its
    source (read_source's); a TREC file is hashed first and read block by block."""
    from pipeline.core.checksums import sha256_file

    if isinstance(run, str | os.PathLike):
        path = Path(run)
        _check_file(path)
        return trec_blocks(path), {"name": path.name, "path": str(path.absolute()),
                                   "sha256": sha256_file(path)}
    frame, source = read_source(run)
    return frame.iter_slices(FRAME_ROWS), source


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


def check_ids(frame: pl.DataFrame, columns: tuple[str, ...], where: str) -> None:
    """Ids are identifiers, strings or integers: a column of floats is refused, naming it
    (1.0 would be read as "1.0", matching no "1": a score of 0 without a word)."""
    for column in columns:
        if frame[column].dtype.is_float() or frame[column].dtype.is_decimal():
            raise InputError(f"{where}: the column {column!r} holds {frame[column].dtype} ids: "
                             "ids are strings or integers (1.0 would read as '1.0', matching no "
                             f"'1'); cast it first, e.g. pl.col({column!r}).cast(pl.Int64)")


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
    check_ids(run, (picked["query"], picked["doc"]), "run")
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

    _check_file(path)
    frame = pl.concat(list(trec_blocks(path)))
    return frame, {"name": path.name, "path": str(path.absolute()),
                   "sha256": sha256_file(path)}


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise InputError(f"RUN={str(path)!r} is not a file: give a TREC run file "
                         "(qid Q0 docid rank score tag per line)")


def trec_blocks(path: Path) -> Iterator[pl.DataFrame]:
    """The lines of a TREC run file, `BLOCK_BYTES` at a time, as read_trec's columns (query,
    doc, score, line): the file read as text lines are (UTF-8, a byte-order mark allowed, a
    byte that is not UTF-8 refused with its line and column), each non-blank line split on
    whitespace as str.split() splits it; the first bad line refused with its number."""
    from pipeline.core.textfiles import BOM

    fix = "is it a TREC run file?"
    number, rest, any_line = 1, b"", False
    with path.open("rb") as handle:
        while True:
            data = handle.read(BLOCK_BYTES)
            end = len(data) < BLOCK_BYTES
            data = rest + (data.removeprefix(BOM) if number == 1 and not rest else data)
            cut = len(data) if end else data.rfind(b"\n") + 1
            if not cut:
                raise InputError(f"{path}:{number}: {NOT_TREC}: fix or remove it")
            block, rest = data[:cut], data[cut:]
            try:
                text = block.decode("utf-8")
            except UnicodeDecodeError as exc:
                line_start = block.rfind(b"\n", 0, exc.start) + 1
                _trec_lines(path, block[:line_start].decode("utf-8"), number)  # earlier lines
                line = number + block.count(b"\n", 0, exc.start)
                raise InputError(
                    f"{path}: line {line}, column "
                    f"{exc.start - line_start + 1}: byte 0x{block[exc.start]:02x} is not UTF-8 "
                    f"(save the file as UTF-8); {fix}") from None
            frame = _trec_lines(path, text, number)
            number += block.count(b"\n")
            if frame.height:
                any_line = True
                yield frame
            if end:
                break
    if not any_line:
        raise InputError(f"{path} holds no run line: give a TREC run file")


def _trec_lines(path: Path, text: str, first: int) -> pl.DataFrame:
    """The non-blank lines of `text` (lines `first`, ...) as query, doc, score, line."""
    import polars as pl

    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()  # the text ends with a newline
    frame = pl.DataFrame({"text": lines}, schema={"text": pl.String}).with_row_index(
        "line", offset=first).with_columns(pl.col("line").cast(pl.Int64)).filter(
        ~pl.col("text").str.contains(BLANK))
    fields = frame["text"].str.extract_groups(TREC_LINE).struct.unnest()
    token = fields[fields.columns[4]]
    fast = pl.select(pl.when(token.str.contains(PLAIN_NUMBER)).then(
        token.cast(pl.Float64, strict=False))).to_series()
    slow = token.is_not_null() & fast.is_null()  # other spellings: 1_000, Unicode digits
    if slow.any():
        fast = fast.scatter(slow.arg_true(), [_float(t) for t in token.filter(slow)])
    score = pl.select(pl.when(fast.is_finite()).then(fast)).to_series()
    bad = score.is_null()
    if bad.any():
        raise InputError(f"{path}:{frame['line'].filter(bad)[0]}: {NOT_TREC}: fix or remove it")
    return pl.DataFrame({"query": fields[fields.columns[0]], "doc": fields[fields.columns[2]],
                         "score": score, "line": frame["line"]})


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass
class PoolView:
    """What a run is checked against: the pool's queries in trec_eval's order (`order`: query,
    pos, and `paper`, the query's paper where its id is another's: CSFCube's `<paper>_<facet>`),
    its candidates (`docs`) or, on an MDCR-style pool, each query's own list (`pairs`); for a
    run of the `whole` collection, the lines of the other pools' queries are left out."""

    name: str
    order: pl.DataFrame
    docs: pl.Series
    pairs: pl.DataFrame | None
    drop_unknown: bool
    whole: Whole | None = None
    sizes: pl.DataFrame | None = None  # query, size: the candidates it may rank (`list_sizes`)

    @classmethod
    def of(cls, queries: pl.DataFrame, candidates: pl.DataFrame, pool: str,
           drop_unknown: bool, whole: Whole | None = None) -> PoolView:
        import polars as pl

        from pipeline.retrieval.runs import own_lists

        paper = pl.col("paper") if "paper" in queries.columns else pl.lit(None, pl.String)
        order = queries.select(query="corpusid", paper=paper).unique("query").sort(
            "query").with_row_index("pos")
        docs, pairs = candidates["corpusid"].unique(), own_lists(candidates)[0]
        return cls(pool, order.with_columns(pl.col("pos").cast(pl.Int64)), docs, pairs,
                   drop_unknown, whole, list_sizes(order, docs, pairs))

    def classify(self, block: pl.DataFrame) -> pl.DataFrame:
        """The block's lines with the pool's types (`tq`, `td`: null for an id not spelt as
        the pool's type, unknown) and `pos`: the query's place in trec_eval's order, or for
        a query the pool lacks one of UNKNOWN_GROUPS places after the pool's; `known_doc`;
        `own`: the line ranks its query's own paper."""
        import polars as pl

        typed = block.with_columns(tq=_as(block["query"], self.order["query"].dtype),
                                   td=_as(block["doc"], self.docs.dtype))
        typed = typed.join(self.order, left_on="tq", right_on="query", how="left")
        if self.pairs is None:
            known = pl.col("td").is_in(self.docs.implode()).fill_null(False)
        else:
            typed = typed.join(self.pairs.rename({"query": "tq", "doc": "td"}).with_columns(
                listed=pl.lit(True)), on=["tq", "td"], how="left")
            known = pl.col("listed").fill_null(False)
        unknown = self.order.height + pl.col("query").hash(seed=0) % UNKNOWN_GROUPS
        own = (pl.col("query") == pl.col("doc")) | (pl.col("paper") == pl.col("doc")).fill_null(
            False)
        return typed.select("line", "query", "doc", "score", "tq", "td",
                            pos=pl.coalesce("pos", unknown.cast(pl.Int64)), known_doc=known,
                            own=own)

    def mine(self, block: pl.DataFrame) -> pl.DataFrame:
        """The block without the lines of the other pools' queries (a run of the whole
        collection); the block itself otherwise."""
        import polars as pl

        if self.whole is None:
            return block
        return block.filter(~pl.col("query").is_in(list(self.whole.elsewhere)))

    def unknown_hint(self, ids: pl.Series) -> str:
        """Why queries the pool lacks may be unknown: ids of its query papers, where its
        queries are named otherwise (CSFCube's `<paper>_<facet>`)."""
        import polars as pl

        papers = self.order.filter(pl.col("paper").is_in(ids.cast(pl.String).implode()))
        if not papers.height:
            return ""
        query, paper = papers.select("query", "paper").row(0)
        return (f"; {paper} is a query paper, but the pool's queries are named "
                f"<paper>_<facet> (e.g. {query}): name each query so")


@dataclass
class Spilled:
    """A run's lines spilled by `spill`: the files (each sorted by pos) and the lines of each
    pos, from which the groups of whole queries are cut."""

    files: list[Path]
    lines: list[int] = field(default_factory=list)
    elsewhere: int = 0  # lines of the other pools' queries left out (a whole collection's run)

    def groups(self) -> Iterator[tuple[int, int]]:
        """(first pos, last pos) of consecutive queries of up to GROUP_LINES lines in all (a
        query of more lines alone)."""
        lo, total = 0, 0
        for pos, n in enumerate(self.lines):
            if total and total + n > GROUP_LINES:
                yield lo, pos - 1
                lo, total = pos, 0
            total += n
        if total:
            yield lo, len(self.lines) - 1

    def read(self, lo: int, hi: int) -> pl.DataFrame:
        """The lines of queries lo..hi, one spilled file at a time (each read skips the row
        groups of other queries: memory holds the group and a few row groups)."""
        import polars as pl

        return pl.concat([pl.scan_parquet(path).filter(pl.col("pos").is_between(lo, hi))
                          .collect() for path in self.files])


def spill(blocks: Iterator[pl.DataFrame], target: PoolView, scratch: Path) -> Spilled:
    """Each block of lines classified (PoolView.classify) and written to `scratch`, sorted
    by pos, with the lines counted per pos."""
    import numpy as np

    spilled = Spilled([])
    counts = np.zeros(target.order.height + UNKNOWN_GROUPS, dtype=np.int64)
    for number, block in enumerate(blocks):
        mine = target.mine(block)
        spilled.elsewhere += block.height - mine.height
        lines = target.classify(mine).sort("pos", "line")
        path = scratch / f"block-{number:06d}"  # parquet, read back by Spilled.read only
        lines.write_parquet(path, compression="lz4", row_group_size=SPILL_ROWS, statistics=True)
        spilled.files.append(path)
        counts += np.bincount(lines["pos"].to_numpy(), minlength=len(counts))
    spilled.lines = counts.tolist()
    return spilled


@dataclass
class Problems:
    """What the groups found that refuses the run (in this order: pairs given twice, then,
    without drop_unknown, unknown queries and unknown papers), each counted with its first
    line; distinct unknown ids as trec_eval would see them (all not-canonical ones as one)."""

    twice: int = 0
    twice_at: tuple | None = None  # (line, query, doc)
    unknown: dict = field(default_factory=lambda: {"query": [], "doc": []})

    def add_twice(self, frame: pl.DataFrame) -> None:
        import polars as pl

        dup = frame.filter(pl.struct("query", "doc").is_duplicated())
        if dup.height:
            self.twice += dup.select("query", "doc").unique().height
            first = dup.sort("line").row(0, named=True)
            here = (first["line"], first["query"], first["doc"])
            self.twice_at = min(self.twice_at or here, here)

    def raise_first(self, counts: dict, where: str, target: PoolView) -> None:
        import polars as pl

        if self.twice:
            line, query, doc = self.twice_at
            raise InputError(f"{where} gives {self.twice} (query, doc) pairs more than once "
                             f"(e.g. query {query} doc {doc}, line {line}): keep one line each")
        for column, what, key in (
                ("query", "queries no pool of the corpus has" if target.whole else
                 "queries the pool does not have", "unknown_query_lines_dropped"),
                ("doc", "papers that are not candidates of the pool"
                 + (" (of the query's own list)" if target.pairs is not None else ""),
                 "unknown_doc_lines_dropped")):
            found = self.unknown[column]
            if not found:
                continue
            ids = pl.concat([ids for ids, _ in found])
            line, raw = min(first for _, first in found)
            hint = target.unknown_hint(ids) if column == "query" else ""
            raise InputError(f"{where} names {ids.n_unique()} {what} (e.g. {raw}, line "
                             f"{line}; {counts[key]} lines){hint or ': was it made for this pool?'}"
                             "; DROP_UNKNOWN=1 (drop_unknown=True) drops and counts them")


def list_sizes(order: pl.DataFrame, docs: pl.Series, pairs: pl.DataFrame | None
               ) -> pl.DataFrame:
    """Each query's (`order`: query, paper) number of candidates it may rank: the pool's
    (`docs`), or its own list (`pairs`, an MDCR-style or CSFCube pool), less its own paper.
    A run whose answered queries rank that many each cut nothing (runs.RunCut.complete)."""
    import polars as pl

    paper = pl.coalesce("paper", pl.col("query").cast(pl.String))
    if pairs is None:
        own = paper.is_in(docs.cast(pl.String).implode()) | pl.col("query").is_in(
            docs.implode())
        return order.select("query", size=pl.lit(docs.len(), pl.Int64) - own.cast(pl.Int64))
    listed = pairs.join(order.select("query", "paper"), on="query", how="inner").filter(
        pl.col("doc") != pl.col("query"),
        (pl.col("doc").cast(pl.String) != pl.col("paper")).fill_null(True))
    return order.select("query").join(listed.group_by("query").agg(size=pl.len().cast(
        pl.Int64)), on="query", how="left").with_columns(pl.col("size").fill_null(0))


def check_group(frame: pl.DataFrame, target: PoolView, problems: Problems
                ) -> tuple[pl.DataFrame, dict]:
    """One group of whole queries checked (module docstring): its lines to import in
    trec_eval's order (query, doc, rank, score; ids in the pool's types) and its counts;
    what refuses the run is added to `problems`."""
    import polars as pl

    from pipeline.retrieval.runs import trec_eval_order

    problems.add_twice(frame)
    known_query = pl.col("pos") < target.order.height
    own = known_query & pl.col("own")  # a self hit, candidate or not
    unknown = {"query": frame.filter(~known_query),
               "doc": frame.filter(known_query & ~own & ~pl.col("known_doc"))}
    if not target.drop_unknown:
        for column, bad in unknown.items():
            if bad.height:
                first = bad.sort("line").row(0, named=True)
                problems.unknown[column].append((bad[f"t{column[0]}"].unique(),
                                                 (first["line"], first[column])))
    kept = frame.filter(known_query & ~own & pl.col("known_doc")).select(
        "line", query="tq", doc="td", score="score")
    ties = kept.filter(pl.len().over("query", "score") > 1)
    ranked = trec_eval_order(kept).select("query", "doc", "rank", "score")
    lengths = ranked.group_by("query").len().join(target.sizes, on="query", how="left")
    counts = {"lines": frame.height, "rows": ranked.height, "queries": ranked["query"].n_unique(),
              "queries_cut": lengths.filter(pl.col("len") < pl.col("size")).height,
              "unknown_query_lines_dropped": unknown["query"].height,
              "unknown_doc_lines_dropped": unknown["doc"].height,
              "self_hits_removed": frame.filter(own).height,
              "tied_lines": ties.height, "queries_with_ties": ties["query"].n_unique()}
    return ranked, counts


def write_checked(spilled: Spilled, target: PoolView, paths: Any, model: str,
                  write: bool = True) -> tuple[dict, tuple[int, int]]:
    """Check the spilled run a group at a time and (with `write`) write it as the run
    (runs.RunWriter); on a problem nothing is written (the old run and its manifest stay).
    Returns its counts (`queries_cut`: answered queries ranking fewer candidates than they
    may, list_sizes) and its depth and shortest list (the most and the fewest lines of an
    answered query). A pool of a whole collection's run may be left with no line (the caller
    leaves it out)."""
    from pipeline.retrieval.runs import RunWriter

    problems, depth, shortest = Problems(), 0, None
    counts = dict.fromkeys(("lines", "rows", "queries", "queries_cut",
                            "unknown_query_lines_dropped",
                            "unknown_doc_lines_dropped", "self_hits_removed", "tied_lines",
                            "queries_with_ties"), 0)
    with RunWriter(paths, tag=model, decimals=None) if write else nullcontext() as writer:
        for lo, hi in spilled.groups():
            ranked, found = check_group(spilled.read(lo, hi), target, problems)
            counts = {key: counts[key] + found[key] for key in counts}
            if writer and not problems.twice and not any(problems.unknown.values()):
                writer.write(ranked)
            depth = max(depth, ranked["rank"].max() or 0)
            if ranked.height:
                fewest = int(ranked.group_by("query").len()["len"].min())
                shortest = fewest if shortest is None else min(shortest, fewest)
        where = f"the run for pool {target.name}"
        problems.raise_first(counts, where, target)
        if not counts["rows"] and not target.whole:
            raise InputError(f"{where}: no line is left to import (every line names an unknown "
                             "query or paper): was it made for this pool?")
    counts["pool_queries_not_in_run_scored_0"] = target.order.height - counts["queries"]
    if target.whole:
        counts["other_pools_lines"] = spilled.elsewhere
    return counts, (int(depth), int(shortest or 0))


def _as(ids: pl.Series, dtype: pl.DataType) -> pl.Series:
    """Ids read as strings in the pool's id type; an id that is not that type's canonical
    spelling (`007` for the integer 7) becomes null, unknown: trec_eval compares strings."""
    import polars as pl

    if dtype == pl.String:
        return ids
    cast = ids.cast(dtype, strict=False)
    return pl.select(pl.when(cast.cast(pl.String) == ids).then(cast)).to_series().alias(
        ids.name)

