"""The judging stage's own files read as data (issue 69; pipeline/judging/files.py): an
assessor's log whose grade is no JSON integer 0-3 (`2.0`, `1e0`, `true`) or whose other fields
are of another type stops `make judge` in one line naming the file, the line and its repair,
and verify names the same line with the same repair; a reply holding U+2028 is read back; a
collection's judged-only pool judged with 0 pairs is reported (exit 0, for every assessor
kind); a person's labels file is read a line at a time (bounded memory, a line-length bound), a
byte-order mark read past, a device or FIFO refused in one line, and two labels files of one
name keep their judgments apart."""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError, OptionError
from pipeline.core.inputs import Roots
from pipeline.evaluation.evaluate import collect_results, eval_run, pool_metrics
from pipeline.external.beir import import_beir
from pipeline.judging import assessor as judging
from pipeline.judging.assessor import (
    LABELS_HEADER,
    ApiAssessor,
    FileAssessor,
    StandinAssessor,
    assessor,
    judgment,
    read_labels,
)
from pipeline.judging.files import MAX_LINE
from pipeline.judging.judgments import (
    LOG_VERSION,
    Judged,
    judge_pool,
    read_judgments,
    write_judgments,
)
from pipeline.judging.stage import judge_corpus, sampling
from pipeline.layout import (
    PREFILTERED,
    Place,
    judging_log_path,
    judgments_path,
    pool_names,
)
from pipeline.models import get_model
from pipeline.report.build import report
from pipeline.retrieval.search import search_pool
from pipeline.verify import verify
from tests.servers import LocalServer, running

ROOT = Path(__file__).resolve().parents[2]
MODEL, KEY = "org/judge-7b", "sk-files-0123456789"
CORPUS, POOL = "tiny", "all-1k-r0"
QUERIES, DOCS = (1, 2, 3), (101, 102, 103, 104)  # 12 pairs


def make_corpus(root: Path) -> tuple[Path, pl.DataFrame]:
    """A corpus folder with prefiltered papers, and a sample's pairs: every query with every
    candidate."""
    corpus_dir = root / "corpora" / CORPUS
    corpus_dir.mkdir(parents=True)
    ids = [*QUERIES, *DOCS]
    pl.DataFrame({"corpusid": ids, "title": [f"Paper {i}" for i in ids],
                  "abstract": [f"Abstract {i}." for i in ids],
                  "year": [2019] * len(ids)}).write_parquet(corpus_dir / PREFILTERED)
    pairs = pl.DataFrame({"query": [q for q in QUERIES for _ in DOCS],
                          "doc": [d for _ in QUERIES for d in DOCS]})
    return corpus_dir, pairs


@pytest.fixture
def server():
    """A chat server grading every pair 2 (tests/servers.py)."""
    with running(LocalServer(MODEL, answer=lambda body: '{"M": 2, "U": 2, "O": 2}')) as served:
        yield served


def api(url: str) -> ApiAssessor:
    return assessor(f"api:{MODEL}", {"JUDGE_URL": url, "OPENAI_API_KEY": KEY})


def verify_runs(root: Path) -> list[str]:
    """make verify's lines for the runs folder (the made-up corpus has no manifest)."""
    return verify(Roots(root / "corpora", root / "indexes", root / "runs"), [root / "runs"])


def judged_log(root: Path, server: LocalServer) -> tuple[Path, pl.DataFrame, Path]:
    """The 12 pairs judged by the api assessor: the corpus, the pairs and the log."""
    corpus_dir, pairs = make_corpus(root)
    judge_pool(root / "runs", corpus_dir, CORPUS, POOL, pairs, api(server.url))
    return corpus_dir, pairs, judging_log_path(root / "runs", CORPUS, api(server.url).file_name)


def rewrite_line(path: Path, number: int, change: Callable[[str], str]) -> None:
    """Line `number` (from 1) of the log at `path`, as text, replaced by change(text)."""
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = change(lines[number - 1].decode()).encode()
    path.write_bytes(b"\n".join(lines))


def with_grade(text: str) -> Callable[[str], str]:
    """A change of a log line's grade into `text`, written as JSON text (2.0, 1e0, true)."""
    return lambda line: re.sub(r'"grade": [^,}]+', f'"grade": {text}', line)


def with_field(name: str, value: object) -> Callable[[str], str]:
    """A change of a log line's field `name` into `value` (KeyError: the field left out)."""
    def change(line: str) -> str:
        record = json.loads(line)
        if value is KeyError:
            del record[name]
        else:
            record[name] = value
        return json.dumps(record)
    return change


# ---- the assessor's log: every grade a JSON integer 0-3 or null --------------------------------
BAD_LINES = {
    "2.0": with_grade("2.0"), "1e0": with_grade("1e0"), "true": with_grade("true"),
    "false": with_grade("false"), "text": with_grade('"2"'), "4": with_grade("4"),
    "NaN": with_grade("NaN"), "asked text": with_field("asked", "1"),
    "not_grades missing": with_field("not_grades", KeyError),
    "not_grades huge": with_field("not_grades", 10 ** 6),
    "reply a number": with_field("replies", [2]), "assessor a number": with_field("assessor", 5),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_log_line_that_is_no_judgment_stops_judge_and_verify_names_it_alike(
        case, server, tmp_path):
    """`2.0` or `1e0` once ended make judge in a TypeError and passed verify; `true` was read
    as 1. Now make judge stops in one line naming the log, the line and its repair, verify
    names the same line with the same repair, and the repair, done, judges that pair again."""
    corpus_dir, pairs, log_path = judged_log(tmp_path, server)
    assert verify_runs(tmp_path) == []
    rewrite_line(log_path, 4, BAD_LINES[case])
    with pytest.raises(InputError) as refused:
        judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, api(server.url))
    said = str(refused.value)
    assert said.startswith(f"{log_path}: line 4 is not a judgment") and "\n" not in said
    assert "repair: delete line 4 of it, and the next make judge asks that pair again" in said
    [line] = verify_runs(tmp_path)
    assert line.startswith(f"CORRUPT {log_path}: line 4 is not a judgment: ")
    assert line.endswith(f"repair: {refused.value.repair.command()}")
    assert line.split(": ", 1)[1].split(";")[0] in said  # the same words
    asked = len(server.bodies)
    rewrite_line(log_path, 4, lambda line: "")  # the repair: the line deleted
    log_path.write_bytes(log_path.read_bytes().replace(b"\n\n", b"\n"))
    judged = judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, api(server.url))
    assert len(server.bodies) == asked + 1 and judged.frame.height == len(pairs)
    assert verify_runs(tmp_path) == []


def test_a_grade_is_an_integer_0_to_3_or_null_in_the_log_and_never_a_bool_or_float(
        server, tmp_path):
    """The rule at its edges: 0 and 3 are grades, null is no grade (an ungraded pair), and
    a bool or a float of an integral value is not a grade."""
    corpus_dir, pairs, log_path = judged_log(tmp_path, server)
    for number, text in ((2, "0"), (3, "3"), (4, "null")):
        rewrite_line(log_path, number, with_grade(text))
    judged = judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, api(server.url))
    assert sorted(judged.frame["grade"].to_list()) == [0, *[2] * 9, 3]
    assert len(judged.ungraded) == 1 and verify_runs(tmp_path) == []
    for text in ("0.0", "3.0", "true", "false"):
        rewrite_line(log_path, 2, with_grade(text))
        [problem] = verify_runs(tmp_path)
        assert problem.startswith(f"CORRUPT {log_path}: line 2 is not a judgment: its grade "
                                  f"is {text}, not an integer 0-3 or null")


def test_a_reply_holding_a_line_separator_is_read_back_whole(tmp_path):
    """json.dumps writes U+2028, U+2029 and U+0085 as they are, and str.splitlines took them
    for line ends: a log whose reply held one was refused as "not a judgment"."""
    corpus_dir, pairs = make_corpus(tmp_path)
    judge_ = api("http://127.0.0.1:9")  # nothing is asked: the log holds every pair
    log_path = judging_log_path(tmp_path / "runs", CORPUS, judge_.file_name)
    log_path.parent.mkdir(parents=True)
    reply = '{"O": 1}\u2028\u2029\x85 end'
    log_path.write_text("".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n"
                                for line in [
        {"judging_log": LOG_VERSION, "assessor": judge_.describe()},
        *({"query": str(q), "doc": str(d), **judgment(1, "t", judge_.name, [reply])}
          for q, d in pairs.iter_rows())]), encoding="utf-8")
    judged = judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, judge_)
    assert judged.asked == 0 and judged.frame["replies"].to_list() == [[reply]] * len(pairs)
    assert verify_runs(tmp_path) == []


def test_judgments_whose_grades_are_not_integers_0_to_3_are_refused(tmp_path):
    """A judgments file, vouched for by its manifest, whose grade column is a float is
    refused when it is read (the report leaves it out), not counted."""
    _, pairs = make_corpus(tmp_path)
    judged = Judged(pairs.with_columns(grade=pl.lit(2.0), assessor=pl.lit("x")))
    path = tmp_path / "judged.parquet"
    write_judgments(judged, path, StandinAssessor(0), pairs)
    with pytest.raises(InputError, match=r"its grades are of type Float64, not integers 0-3"):
        read_judgments(path)


# ---- a collection's judged-only pool, judged with 0 pairs -------------------------------------
@pytest.fixture(scope="module")
def judged_only(corpus_dir, tmp_path_factory) -> tuple[Path, str]:
    """A BEIR collection imported with its judged-only pool (JUDGED=1: every candidate of a
    query judged, so a sample draws nothing), BM25's runs of both pools scored."""
    papers = pl.read_parquet(corpus_dir / PREFILTERED).head(120)
    ids = [f"d{i}" for i in papers["corpusid"]]
    src = tmp_path_factory.mktemp("collection") / "src"
    (src / "qrels").mkdir(parents=True)
    (src / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": i, "title": t, "text": a}) + "\n"
        for i, t, a in zip(ids, papers["title"], papers["abstract"], strict=True)))
    (src / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{n}", "text": papers["title"][n * 10]}) + "\n" for n in range(4)))
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{n}\t{ids[n * 10 + j]}\t{int(j < 2)}\n" for n in range(4) for j in range(10)))
    root = tmp_path_factory.mktemp("judged-only")
    corpus = root / "corpora" / "scidocs"
    import_beir(src, corpus, judged=True)
    place = Place(corpus, root / "indexes", root / "runs")
    for pool in pool_names(corpus):
        search_pool(place, pool, get_model("bm25"), threads=1)
        eval_run(place, pool, "bm25", pool_metrics(corpus, pool))
    collect_results(root / "corpora", root / "indexes", root / "runs")
    [judged] = [pool for pool in pool_names(corpus) if pool.startswith("judged-")]
    return root, judged


@pytest.mark.parametrize("kind", ["standin", "file", "api"])
def test_a_judged_only_pool_judged_with_0_pairs_is_reported(kind, judged_only, tmp_path):
    """`judged-10-r0: 0 of 0 drawn pairs`, then make report: an IndexError in inferred.py's
    _lists and no report, for every assessor kind. Now a report, its judged section showing
    the pool with 0 judged pairs, and each model's values the citations' (nothing drawn)."""
    root, pool = judged_only
    shutil.copytree(root, tmp_path / "data")
    root = tmp_path / "data"
    labels = tmp_path / "labels.tsv"
    labels.write_text("\t".join(LABELS_HEADER) + "\n")
    judge_ = {"standin": StandinAssessor(0), "file": FileAssessor(labels),
              "api": api("http://127.0.0.1:9")}[kind]  # nothing to ask: never reached
    place = Place(root / "corpora" / "scidocs", root / "indexes", root / "runs")
    [row] = judge_corpus(place, sampling(["bm25"], 3), judge_, [pool],
                         progress=False).iter_rows(named=True)
    assert (row["drawn"], row["graded"]) == (0, 0)
    text = report(root / "runs", "scidocs", corpora_root=root / "corpora")
    missed = text[text.index(f"relevant papers the citations miss, judged by {judge_.name}"):]
    [line] = [line for line in missed.splitlines() if line.startswith(f"| {pool} |")]
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[3:5] == ["0", "0"]  # judged, relevant found
    means = text[text.index(f"beyond citations, judged by {judge_.name}"):]
    rows = [line for line in means[:means.index("relevant papers")].splitlines()
            if line.startswith("| judged")]
    assert rows and all(line.split("|")[6] == line.split("|")[7] for line in rows)


# ---- a person's labels file ----------------------------------------------------------------
HEADER = "\t".join(LABELS_HEADER) + "\n"


def labels_text(rows: list[tuple[int, int, int, str]]) -> str:
    return HEADER + "".join(f"{q}\t{d}\t{g}\t{who}\t2026-01-0{1 + i % 9}T10:00:00Z\n"
                            for i, (q, d, g, who) in enumerate(rows))


def test_a_byte_order_mark_before_the_header_is_read_past(tmp_path):
    """Spreadsheet programs save UTF-8 with a byte-order mark: once "its first line is not
    the header"; now read past. A UTF-16 file is named as such."""
    path = tmp_path / "labels.tsv"
    path.write_bytes(b"\xef\xbb\xbf" + labels_text([(1, 101, 2, "ann")]).encode())
    labels, sha = read_labels(path)
    assert labels == {("1", "101"): (2, "ann", "2026-01-01T10:00:00Z")}
    assert sha == hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_bytes(labels_text([(1, 101, 2, "ann")]).encode("utf-16"))
    with pytest.raises(OptionError, match=r"is UTF-16 text"):
        read_labels(path)


def judge_cli(root: Path, labels: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m pipeline judge ... --judge file:<labels>` in a process whose address space
    is bounded (3 GB: a file read whole fails there, not on the machine; one thread per pool,
    so that the bound holds on a machine of many cores)."""
    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    return subprocess.run(
        [sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
         "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"), "judge",
         "--corpus", CORPUS, "--models", "bm25", "--judge", f"file:{labels}"],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, preexec_fn=bounded,
        env={**os.environ, "MALLOC_ARENA_MAX": "2", **dict.fromkeys(
            ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"), "1")})


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_labels_file_that_is_no_regular_file_is_refused_in_one_line(special, tmp_path):
    """JUDGE=file:/dev/zero read until a MemoryError traceback, a FIFO blocked for ever: now
    neither is opened for reading, one line each, exit 2."""
    make_corpus(tmp_path)
    if special == "fifo":
        special = str(tmp_path / "labels.tsv")
        os.mkfifo(special)
    done = judge_cli(tmp_path, special)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines[-5:]
    assert f"file:{special} is not a regular file (a device, a pipe or a socket)" in lines[0]


def test_a_line_past_the_bound_is_refused_naming_it(tmp_path):
    """A regular file of zeros, or any line longer than MAX_LINE bytes: refused at that line,
    having read no more of it than the bound."""
    path = tmp_path / "labels.tsv"
    with path.open("wb") as out:
        out.write(labels_text([(1, 101, 2, "ann")]).encode())
        out.truncate(out.tell() + 64 * MAX_LINE)  # zeros, no line end
    with pytest.raises(OptionError, match=rf"line 3 is longer than {MAX_LINE} bytes"):
        read_labels(path)


def test_reading_a_labels_file_takes_memory_for_its_labels_not_its_size(tmp_path):
    """A 258 MB file peaked at 3.9 GB (read whole, decoded, split). Streamed, a 20 MB file
    of 100,000 lines relabelling 1,000 pairs peaks at a small part of its size, counted by
    tracemalloc (the bytes, the text and the lines all were Python objects)."""
    path = tmp_path / "labels.tsv"
    line = "{q}\t{d}\t{g}\tann\t2026-01-01T10:00:00Z {pad}\n"
    with path.open("w") as out:
        out.write(HEADER)
        for i in range(100_000):
            out.write(line.format(q=i // 20 % 50, d=1000 + i % 20, g=i % 4, pad="x" * 160))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        labels, _ = read_labels(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(labels) == 1000 and size > 19e6
    assert peak < size / 20, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB file"


def test_a_labels_file_labels_max_labels_pairs_at_most(monkeypatch, tmp_path):
    """What reading keeps is bounded too: a pair past MAX_LABELS is refused, naming its line;
    relabels of the pairs kept are not counted again."""
    monkeypatch.setattr(judging, "MAX_LABELS", 3)
    path = tmp_path / "labels.tsv"
    rows = [(1, 101, 2, "ann"), (1, 102, 1, "ann"), (1, 103, 0, "ann"), (1, 101, 3, "ann")]
    path.write_text(labels_text(rows))
    assert read_labels(path)[0][("1", "101")][0] == 3
    path.write_text(labels_text([*rows, (2, 101, 1, "ann")]))
    with pytest.raises(OptionError, match=r"line 6 labels a pair beyond the first 3 "):
        read_labels(path)


def test_two_labels_files_of_one_name_keep_their_judgments_apart(tmp_path):
    """Alice's and Bob's downloads of one judging page share its name (labels-<digest>.tsv):
    judging Bob's once replaced Alice's judgments without a word. Each file's judgments are
    now its own (named by the people it names and its sha256), and a person's later file
    judges beside the earlier one, never over it."""
    corpus_dir, pairs = make_corpus(tmp_path)
    runs = tmp_path / "runs"
    files = {}
    for who, grade in (("Alice", 3), ("Bob", 0), ("Alice", 1)):
        folder = tmp_path / f"{who}-{grade}"
        folder.mkdir()
        files[who, grade] = folder / "labels-3f2a9c1b7d04.tsv"
        files[who, grade].write_text(labels_text([(q, d, grade, who)
                                                  for q, d in pairs.iter_rows()]))
    judges = {key: FileAssessor(path) for key, path in files.items()}
    for judge_ in judges.values():
        judge_pool(runs, corpus_dir, CORPUS, POOL, pairs, judge_, progress=False)
    assert len({j.file_name for j in judges.values()}) == 3
    for (who, grade), judge_ in judges.items():
        assert judge_.file_name.startswith(f"file--{who}-") and who in judge_.name
        frame = read_judgments(judgments_path(runs, CORPUS, POOL, judge_.file_name))
        assert set(frame["grade"]) == {grade} and set(frame["assessor"]) == {who}


def test_a_byte_order_mark_before_a_logs_first_line_is_named(server, tmp_path):
    """The hostile trial's J4: a log an editor saved with a byte-order mark was "first line
    does not describe an assessor", the mark unnamed (and its repair asks every pair again).
    make judge and verify name the mark and its repair, in the same words."""
    corpus_dir, pairs, log_path = judged_log(tmp_path, server)
    log_path.write_bytes(b"\xef\xbb\xbf" + log_path.read_bytes())
    with pytest.raises(InputError) as refused:
        judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, api(server.url))
    said = "starts with a UTF-8 byte-order mark (an editor saved the log so); remove those 3 bytes"
    assert said in str(refused.value)
    [line] = verify_runs(tmp_path)
    assert line.startswith(f"CORRUPT {log_path}: its first line") and said in line
    log_path.write_bytes(log_path.read_bytes()[3:])  # the repair: every judgment counts again
    asked = len(server.bodies)
    judged = judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, api(server.url))
    assert len(server.bodies) == asked and judged.frame.height == len(pairs)
