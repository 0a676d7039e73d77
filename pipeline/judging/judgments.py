"""Judging a sample's pairs by an assessor (judging/assessor.py) into judgments: the
assessor's log, the judging run and the judgments artifact (docs/judging.md).

An api assessor's every answer is appended to its log (layout.judging_log_path: one JSON line
per pair, written whole and fsync'd before the next is asked), so a run killed even with -9
and run again asks only the pairs its log lacks; a last line cut short by the kill is dropped
and its pair asked again. The log is the assessor's record: its first line describes the
assessor (model, endpoint, temperature, the prompt's text and sha256), each pair's line holds
every reply raw. A pool's judgments (layout.judgments_path) are graded qrels of their own,
written atomically with a manifest, never merged into the citation qrels.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.atomic import atomic_path, disk_errors
from pipeline.core.checksums import fingerprint, outputs_intact
from pipeline.core.errors import InputError, first_line
from pipeline.core.files import read_json, read_parquet, write_json
from pipeline.core.http import each_at_once
from pipeline.core.locks import file_lock
from pipeline.core.logs import Progress
from pipeline.core.manifests import manifest
from pipeline.core.repair import Repair
from pipeline.core.secrets import shown_url
from pipeline.judging.assessor import MAX_ASKS, Assessor, Pair
from pipeline.judging.chat import JUDGE_URL
from pipeline.judging.files import (
    MOVE_LOG,
    described_assessor,
    frame_grade_problem,
    head_problem,
    line_repair,
    log_lines,
    parse_record,
)
from pipeline.layout import (
    POOL_QUERIES,
    PREFILTERED,
    judging_log_path,
    judgments_manifest,
    judgments_path,
    pool_dir,
)
from pipeline.pools.queries import own_text

log = logging.getLogger(__name__)


# ---- the log: an assessor's answers, one JSON line per pair, appended and fsync'd -----------
LOG_VERSION = 1


class JudgingLog:
    """An assessor's log at `path`, opened: `recorded` holds its pairs' records by (query,
    doc); `append(record)` adds one durably. Its first line describes the assessor; a log of
    another assessor is refused, a last line cut short (a kill while writing) dropped."""

    def __init__(self, path: Path, assessor: Assessor) -> None:
        self.path, self.lock = path, threading.Lock()
        self.recorded: dict[tuple[str, str], dict[str, Any]] = {}
        with disk_errors(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not path.exists()
            self.fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            if fresh:
                _sync_folder(path.parent)
            data = os.pread(self.fd, os.fstat(self.fd).st_size, 0)
            whole = data[:data.rfind(b"\n") + 1]
            if len(whole) < len(data):
                log.warning(f"[judge] {path}: its last line was cut short (a run stopped while "
                            "writing it); that pair is asked again")
                os.ftruncate(self.fd, len(whole))
                os.fsync(self.fd)
        lines, _ = log_lines(whole)  # split at "\n" alone: a reply may hold U+2028
        if not lines:
            self._write({"judging_log": LOG_VERSION, "assessor": assessor.describe()})
            return
        try:
            self._check_head(lines[0], assessor)
            for number, line in enumerate(lines[1:], 2):
                record, why = parse_record(line)  # the rule verify applies: files.py
                if record is None:
                    raise InputError(f"{path}: line {number} is not a judgment: {why} (the "
                                     "file was changed or damaged)", line_repair(number))
                self.recorded[record["query"], record["doc"]] = record
        except BaseException:
            os.close(self.fd)
            raise

    def _check_head(self, line: bytes, assessor: Assessor) -> None:
        made = described_assessor(line, LOG_VERSION)
        if made is None:
            raise InputError(f"{self.path}: {head_problem(line)} (the file is not a judging "
                             "log, or was changed or damaged)", MOVE_LOG)
        wanted = assessor.identity()
        differs = sorted(k for k in {*wanted, *made} if k != "endpoint"
                         and made.get(k) != wanted.get(k))
        if differs:
            raise InputError(f"{self.path}: written by another assessor (its {', '.join(differs)} "
                             "differ): move it away, or judge with the assessor that wrote it")

    def append(self, record: dict[str, Any]) -> None:
        """Adds `record`, whole and on disk (fsync'd) before this returns."""
        with self.lock:
            self._write(record)
            self.recorded[record["query"], record["doc"]] = record

    def _write(self, obj: dict[str, Any]) -> None:
        data = (json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n").encode()
        with disk_errors(self.path.parent):
            written = 0
            while written < len(data):
                written += os.write(self.fd, data[written:])
            os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def _sync_folder(folder: Path) -> None:
    """The folder's entry of a new file on disk (a kill -9 or a crash keeps the file)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- judging a sample's pairs -----------------------------------------------------------------
@dataclass
class Judged:
    """What judging pairs gave: `frame` (JUDGMENT_SCHEMA, the graded pairs, sorted); this
    run's pairs asked, pairs the log already held and replies that were no grade; the pairs
    asked and left without a grade, the pairs the assessor has no judgment of (those the
    server refused among them: `refused`, each with the server's words), and the replies that
    were no grade among all the pairs' answers."""

    frame: pl.DataFrame
    asked: int = 0
    recorded: int = 0
    not_grades: int = 0
    ungraded: list[tuple[str, str]] = field(default_factory=list)
    unjudged: int = 0
    not_grades_all: int = 0
    refused: list[tuple[str, str, str]] = field(default_factory=list)
    labels_outside: int | None = None  # a labels file's labels of no pair judged (outside)

    def counts(self) -> dict[str, Any]:
        """The counts the manifest records: the same for the same answers, however many runs
        asked them (and, for a labels file, how many of its labels name no pair judged)."""
        grades = self.frame["grade"].value_counts().sort("grade")
        return {"graded": self.frame.height, "ungraded": len(self.ungraded),
                "unjudged": self.unjudged, "refused": len(self.refused),
                "grades": {str(g): n for g, n in grades.iter_rows()},
                "not_grades": self.not_grades_all,
                **({} if self.labels_outside is None else
                   {"labels_outside": self.labels_outside})}


def outside(assessor: Assessor, pairs: Collection[tuple[str, str]]) -> int | None:
    """How many of `assessor`'s own labels (a labels file's) name none of `pairs` (query,
    doc as strings, as Pair holds them); None for an assessor that judges any pair asked."""
    labelled = assessor.labelled
    if labelled is None:
        return None
    wanted = set(pairs)
    return sum(key not in wanted for key in labelled)


PAIR_TEXTS = ("query_title", "query_abstract", "doc_title", "doc_abstract")


def with_texts(pairs: pl.DataFrame, papers: pl.DataFrame,
               queries: pl.DataFrame | None = None) -> pl.DataFrame:
    """`pairs` (query, doc) with both sides' titles and abstracts: the candidates' from
    `papers` (corpusid, title, abstract), the queries' from `queries` where given (a
    collection's queries, with text of their own: own_queries), else from `papers`; a pair
    whose paper or query they lack is one line."""
    out = pairs.select("query", "doc").unique().sort("query", "doc")
    for side, source in (("query", queries), ("doc", None)):
        texts = (papers if source is None else source).select("corpusid", "title", "abstract")
        out = out.join(texts.rename({"corpusid": side, "title": f"{side}_title",
                                     "abstract": f"{side}_abstract"}),
                       on=side, how="left", coalesce=True)
        lacking = out.filter(pl.col(f"{side}_title").is_null()
                             & pl.col(f"{side}_abstract").is_null())
        missing = lacking.join(texts.select(**{side: "corpusid"}), on=side, how="anti")
        if missing.height:
            lacks = "paper the corpus lacks" if source is None else "the pool's queries lack"
            raise InputError(f"{missing.height} pairs name a {side} {lacks} (first: "
                             f"{missing[side][0]}): judge pairs of the pool's own queries and "
                             "candidates")
    return out.sort("query", "doc")


JUDGMENT_SCHEMA = {"grade": pl.Int8, "assessor": pl.String, "time": pl.String,
                   "prompt_digest": pl.String, "asked": pl.Int16, "not_grades": pl.Int16,
                   "replies": pl.List(pl.String), "model": pl.String,
                   "endpoint": pl.String}  # after query and doc, of the pairs' types


def judge(pairs: pl.DataFrame, assessor: Assessor, log_path: Path | None = None,
          concurrency: int = 4, progress: bool = True) -> Judged:
    """Judge `pairs` (query, doc and PAIR_TEXTS: with_texts) by `assessor`. An assessor
    whose answers are cached (api) appends each to the log at `log_path`, under its lock, and
    asks only pairs the log lacks, `concurrency` at once; after a failed request no further
    pair is sent, and what was answered stays recorded."""
    if assessor.cached and log_path is None:
        raise ValueError(f"{assessor.name} records its answers: give its log's path")
    table = pairs.unique(["query", "doc"]).sort("query", "doc")
    rows = [Pair(str(row["query"]), str(row["doc"]), *(row[c] for c in PAIR_TEXTS))
            for row in table.iter_rows(named=True)]
    if not assessor.cached:
        records = {(p.query, p.doc): r for p in rows if (r := assessor.judge(p)) is not None}
        return _judged(table, rows, records, assessor, asked=0, recorded=0, not_grades=0)
    assert log_path is not None
    with file_lock(log_path):
        book = JudgingLog(log_path, assessor)
        try:
            _same_endpoint(book, assessor)
            todo = [p for p in rows if (p.query, p.doc) not in book.recorded]
            recorded = len(rows) - len(todo)
            if recorded:
                log.info(f"[judge] {assessor.name}: {recorded} of {len(rows)} pairs judged "
                         f"before ({log_path}); {len(todo)} to ask")
            new = _ask(todo, assessor, book, concurrency, progress)
            records = {key: book.recorded[key] for key in ((p.query, p.doc) for p in rows)
                       if key in book.recorded}
        finally:
            book.close()
    return _judged(table, rows, records, assessor, asked=len(new), recorded=recorded,
                   not_grades=sum(r["not_grades"] for r in new))


def _same_endpoint(book: JudgingLog, assessor: Assessor) -> None:
    """Refuses a log holding pairs judged at another endpoint than `assessor`'s (each record
    names its endpoint), in one line naming both and the repair: grades made elsewhere are
    never merged with this endpoint's, as the served embeddings refuse a store embedded at
    another URL (docs/encoders.md)."""
    endpoint = assessor.describe().get("endpoint")
    elsewhere = [str(r["endpoint"]) for r in book.recorded.values()
                 if r.get("endpoint") not in (None, endpoint)]
    if elsewhere:
        was = shown_url(min(elsewhere))
        raise InputError(f"{book.path}: {len(elsewhere)} of its pairs were judged at {was}"
                         f"{' and elsewhere' if len(set(elsewhere)) > 1 else ''}, not at "
                         f"{endpoint}: judge with {JUDGE_URL}={was} as they were, or move the "
                         f"log away to judge every pair again at {endpoint} (grades of two "
                         "endpoints are never merged)")


def _ask(todo: list[Pair], assessor: Assessor, book: JudgingLog, concurrency: int,
         progress: bool) -> list[dict[str, Any]]:
    """Asks `todo`, `concurrency` at once (core/http.each_at_once: after a failed request
    no further pair is sent; a Ctrl-C leaves the requests in flight behind), each answer
    appended to `book` as it comes; an answer arriving once this has returned (the book
    closed) is dropped, never written."""
    new: list[dict[str, Any]] = []
    over, gate = threading.Event(), threading.Lock()
    bar = Progress(len(todo), "judge", "pairs", show=progress and bool(todo))

    def one(pair: Pair) -> None:
        record = assessor.judge(pair)
        with gate:
            if over.is_set():
                return
            if record is not None:
                record = {"query": pair.query, "doc": pair.doc, **record}
                book.append(record)
                new.append(record)
            bar.update(1)

    try:
        for _ in each_at_once(one, todo, concurrency):
            pass
    finally:
        with gate:
            over.set()
        bar.close()
    return new


def _judged(table: pl.DataFrame, rows: list[Pair], records: dict[tuple[str, str], dict],
            assessor: Assessor, asked: int, recorded: int, not_grades: int) -> Judged:
    """The graded pairs of `records` as a frame (ids of `table`'s types), and the counts (the
    pairs without a record that the server refused named, with its words)."""
    keep = [i for i, p in enumerate(rows)
            if records.get((p.query, p.doc), {}).get("grade") is not None]
    got = [records[rows[i].query, rows[i].doc] for i in keep]
    columns = {name: [record.get(name) for record in got] for name in JUDGMENT_SCHEMA}
    columns["prompt_digest"] = [assessor.prompt_digest] * len(got)
    frame = table.select("query", "doc")[keep].with_columns(
        pl.Series(name, columns[name], dtype=dtype) for name, dtype in JUDGMENT_SCHEMA.items())
    ungraded = [(p.query, p.doc) for p in rows
                if (p.query, p.doc) in records and records[p.query, p.doc]["grade"] is None]
    unjudged = sum((p.query, p.doc) not in records for p in rows)
    not_grades_all = sum(records[p.query, p.doc]["not_grades"] for p in rows
                         if (p.query, p.doc) in records)
    if ungraded:
        log.warning(f"[judge] {assessor.name}: {len(ungraded)} pairs without a grade after "
                    f"{MAX_ASKS} replies (the log keeps their replies)")
    refused = [(p.query, p.doc, why) for p in rows if (p.query, p.doc) not in records
               and (why := assessor.refusal(p.query, p.doc)) is not None]
    if unjudged:
        log.info(f"[judge] {assessor.name}: no judgment of {unjudged} of {len(rows)} pairs"
                 + (f" ({len(refused)} refused by the server, asked again at the next run; "
                    f"first: query {refused[0][0]}, candidate {refused[0][1]})"
                    if refused else ""))
    return Judged(frame, asked, recorded, not_grades, ungraded, unjudged, not_grades_all,
                  refused, outside(assessor, [(p.query, p.doc) for p in rows]))


# ---- the judgments artifact -----------------------------------------------------------------
# what remakes a pool's judgments that cannot be used (an api assessor's log keeps its answers)
JUDGE_AGAIN = Repair("", note="judge again: the log's pairs are not asked again")


def pairs_digest(pairs: pl.DataFrame) -> str:
    """The sha256 of a sample's pairs (sorted `query<TAB>doc` lines): what the judgments are
    of, recorded in their manifest."""
    keys = pairs.select(pl.col("query", "doc").cast(pl.String)).unique().sort("query", "doc")
    text = "".join(f"{q}\t{d}\n" for q, d in keys.iter_rows())
    return hashlib.sha256(text.encode()).hexdigest()


def write_judgments(judged: Judged, path: Path, assessor: Assessor, pairs: pl.DataFrame,
                    **fields: Any) -> bool:
    """Write `judged`'s graded pairs to `path` (parquet, atomically) and its manifest last
    (the assessor described, the pairs' digest, the counts, the ungraded pairs, the pairs the
    server refused with its words, `fields`); nothing is rewritten
    when the file holds these bytes already and its manifest the same parameters, so a rerun
    leaves both as they were. True when written."""
    import pyarrow.parquet as pq

    buffer = BytesIO()
    pq.write_table(judged.frame.to_arrow(), buffer, compression="zstd")
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    parameters = {"assessor": assessor.describe(), "pairs": pairs_digest(pairs)}
    ungraded = [list(key) for key in judged.ungraded]
    refused = [list(row) for row in judged.refused]
    record = judgments_manifest(path)
    if record.exists() and path.exists():
        try:
            made = read_json(record)
        except InputError:
            made = {}
        if (made.get("parameters") == parameters and outputs_intact(path.parent, made)
                and made.get("outputs", {}).get(path.name, {}).get("sha256") == sha
                and made.get("counts") == judged.counts() and made.get("ungraded") == ungraded
                and made.get("refused") == refused):
            log.info(f"[judge] {path}: current, kept")
            return False
    record.unlink(missing_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    write_json(manifest("judge", parameters, assessor=assessor.name,
                        stand_in=assessor.stand_in, outputs={path.name: fingerprint(path)},
                        counts=judged.counts(), ungraded=ungraded, refused=refused,
                        **fields), record)
    return True


def read_judgments(path: Path) -> pl.DataFrame:
    """A pool's judgments, checked against their manifest (one line naming what is wrong)."""
    record = judgments_manifest(path)
    made = read_json(record)
    if not outputs_intact(path.parent, made):
        raise InputError(f"{path}: its bytes differ from its manifest's (changed or "
                         "damaged)", JUDGE_AGAIN)
    frame = read_parquet(path, repair=JUDGE_AGAIN)
    if problem := frame_grade_problem(frame):
        raise InputError(f"{path}: {problem}", JUDGE_AGAIN)
    return frame


def paper_texts(corpus_dir: Path, ids: pl.Series) -> pl.DataFrame:
    """corpusid, title, abstract of the papers `ids` names, from the corpus's prefiltered
    papers (read lazily: only those rows)."""
    source = corpus_dir / PREFILTERED
    try:
        return (pl.scan_parquet(source).select("corpusid", "title", "abstract")
                .filter(pl.col("corpusid").is_in(ids.unique().implode())).collect())
    except FileNotFoundError:
        raise InputError(f"{source} is missing: build the corpus first (make corpus)") from None
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = first_line(exc)
        raise InputError(f"{source} cannot be read ({first}): make verify names the repair"
                         ) from None


def own_queries(corpus_dir: Path, pool: str) -> pl.DataFrame | None:
    """A pool's queries (corpusid, title, abstract) where they carry their own text (a
    collection's, make import-beir: pools.queries.own_text), which are no papers of its
    corpus; None where its queries are the corpus's papers (or it has no queries file)."""
    path = pool_dir(corpus_dir, pool) / POOL_QUERIES
    if not path.exists():
        return None
    queries = read_parquet(path)
    return queries.select("corpusid", "title", "abstract") if own_text(queries) else None


def judge_pool(runs_root: Path, corpus_dir: Path, corpus: str, pool: str, pairs: pl.DataFrame,
               assessor: Assessor, concurrency: int = 4, progress: bool = True,
               sampling: str | None = None, parameters: dict[str, Any] | None = None) -> Judged:
    """Judge a pool's sampled `pairs` (query, doc) by `assessor` with the papers' texts from
    the corpus (a query's own text where the pool's queries carry one: own_queries), an api
    assessor's answers in its corpus's log, and write the pool's judgments
    (layout.judgments_path: in the folder of the sampling `sampling`, whose settings,
    `parameters`, its manifest records) with their manifest."""
    start = time.perf_counter()
    queries = own_queries(corpus_dir, pool)
    ids = pairs["doc"].cast(pairs["query"].dtype)
    if queries is None:
        ids = pl.concat([pairs["query"], ids])
    texts = with_texts(pairs, paper_texts(corpus_dir, ids), queries)
    log_path = judging_log_path(runs_root, corpus, assessor.file_name)
    judged = judge(texts, assessor, log_path if assessor.cached else None, concurrency,
                   progress)
    path = judgments_path(runs_root, corpus, pool, assessor.file_name, sampling)
    written = write_judgments(judged, path, assessor, pairs, corpus=corpus, pool=pool,
                              **({"sampling": parameters} if parameters is not None else {}))
    counts = judged.counts()
    log.info(f"[judge] {pool}: {counts['graded']} pairs graded by {assessor.name}"
             f"{' (a stand-in)' if assessor.stand_in else ''}, {judged.asked} asked now, "
             f"{judged.recorded} from its log, {counts['ungraded']} ungraded, "
             f"{counts['unjudged']} unjudged ({counts['refused']} refused by the server)"
             + ("" if judged.labels_outside is None else
                f", {judged.labels_outside} of the file's {len(assessor.labelled or ())} "
                "labels name no pair of this sample")
             + f" -> {path}{'' if written else ' (kept)'} "
             f"in {time.perf_counter() - start:.1f} s")
    return judged
