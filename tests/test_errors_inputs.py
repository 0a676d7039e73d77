"""Bad input files and output paths, through the command line as a user runs it: the official
MDCR files (scores, benchmark) and their OUT paths, BEIR qrels, 0-byte shards. Each refusal is
exit status 2 and one line naming the input and the fix, with nothing written; what is kept
(a repeated judgment, an empty plain shard) is counted or read as it is."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.layout import Place, pool_names
from pipeline.mdcr import official
from pipeline.mdcr.official import evaluate_files, import_benchmark
from pipeline.models import get_model
from pipeline.retrieval.search import search_pool
from tests.conftest import CHILD_BOUND_S
from tests.ingest.test_ingest_s2ag import s2ag_release
from tests.mdcr.test_mdcr_official import BENCHMARK, SCORES, _official_files
from tests.test_errors import ROOT, _snapshot, cli

METRIC_ORDER = ["map", "ndcg", "recall_5"]


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "MAKEFLAGS": "", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=CHILD_BOUND_S)


def refused(root: Path, cmd: list[str], message: str) -> str:
    """Run `cmd`: exit 2, one line matching `message`, nothing new or rewritten under root."""
    before = _snapshot(root)
    done = run(cmd)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1, lines
    assert re.search(message, lines[0]), lines[0]
    after = _snapshot(root)
    assert {p for p in after if before.get(p) != after[p]} == set()
    assert not list(root.rglob("*.tmp")), "half-written temporaries left behind"
    return lines[0]


# --- mdcr-evaluate: the scores file -------------------------------------------------------


def _evaluate(root: Path, benchmark: Path, scores: Path) -> list[str]:
    return cli(root, "mdcr-evaluate", "--benchmark", str(benchmark), "--scores", str(scores))


BAD_SCORES = [  # (the scores file's text, the message)
    (json.dumps({**SCORES, "q1_c": "nan"}), r'scores\.json: score of q1_c is "nan", not a '
     r"finite number; write a number"),
    (json.dumps({**SCORES, "q2_g": "inf"}), r'score of q2_g is "inf", not a finite number'),
    (json.dumps({**SCORES, "q1_a": None}), r"score of q1_a is null, not a finite number"),
    (json.dumps({**SCORES, "q1_a": "abc"}), r'score of q1_a is "abc", not a finite number'),
    (json.dumps({**SCORES, "q1_a": True}), r"score of q1_a is true, not a finite number"),
    (json.dumps({**SCORES, "q1_a": [1]}), r"score of q1_a is \[1\], not a finite number"),
    (json.dumps({**SCORES, "q1_a": 1, "q1_c": "1", "q1_b": None}),
     r'score of q1_c is "1", not a finite number \(and 1 more\)'),
    (json.dumps(SCORES).replace("0.9", "NaN"),
     r"scores\.json: score of q1_a is nan, not a finite number"),  # read, then refused
    (json.dumps(SCORES).replace("0.9", "-Infinity"),
     r"scores\.json: score of q1_a is -inf, not a finite number"),
    (json.dumps(list(SCORES.values())), r"scores\.json: holds a list, not an object"),
]


@pytest.mark.parametrize(("text", "message"), BAD_SCORES,
                         ids=["nan", "inf", "null", "abc", "bool", "list", "two", "NaN-literal",
                              "Infinity-literal", "top-list"])
def test_mdcr_evaluate_refuses_a_score_that_is_not_a_finite_number(tmp_path, text, message):
    benchmark, scores = _official_files(tmp_path)
    scores.write_text(text)
    line = refused(tmp_path, _evaluate(tmp_path, benchmark, scores), message)
    assert "download" not in line  # the scores file is the user's own


BAD_BENCHMARKS = [  # (the benchmark file's value, the message)
    ([BENCHMARK], r"mdcr_test\.json: holds a list, not an object \{field:"),
    ({"Art": {"q1": [["a", "b"]]}},
     r"mdcr_test\.json: query q1 of field 'Art' holds a list, not an object of lists"),
    ({"Art": {"q1": {"bm25": ["c"], "true": "ab"}}},
     r"mdcr_test\.json: list 'true' of query q1 of field 'Art' is a string \(\"ab\"\), not a "
     r"list of paper ids"),
    ({"Art": {"q1": {"bm25": {"c": 1}, "true": ["a"]}}},
     r"list 'bm25' of query q1 of field 'Art' is an object"),
    ({"Art": {"q1": {"bm25": ["c"], "true": ["a", None]}}},
     r"list 'true' of query q1 of field 'Art' holds null, not a paper id \(a string or an "
     r"integer\)"),
    ({"Art": {"q1": {"bm25": [1.5], "true": ["a"]}}},
     r"list 'bm25' of query q1 of field 'Art' holds 1\.5, not a paper id"),
    ({"Art": {"q1": {"bm25": [{"id": "c"}], "true": ["a"]}}},
     r"list 'bm25' of query q1 of field 'Art' holds \{\"id\":\"c\"\}, not a paper id"),
]


@pytest.mark.parametrize(("value", "message"), BAD_BENCHMARKS,
                         ids=["top-list", "query-list", "true-string", "list-object",
                              "id-null", "id-float", "id-object"])
def test_a_benchmark_file_of_the_wrong_shape_is_refused(tmp_path, value, message):
    benchmark, scores = _official_files(tmp_path)
    benchmark.write_text(json.dumps(value))
    refused(tmp_path, _evaluate(tmp_path, benchmark, scores), message)


def test_import_mdcr_refuses_a_benchmark_file_that_is_a_list(tmp_path):
    benchmark, _ = _official_files(tmp_path)
    benchmark.write_text(json.dumps([BENCHMARK]))
    (tmp_path / "mdcr_test_data.jsonl").write_text("")
    refused(tmp_path, cli(tmp_path, "import-mdcr", "--corpus", "m", "--src", str(tmp_path)),
            r"mdcr_test\.json: holds a list, not an object")


def test_mdcr_evaluate_prints_map_ndcg_recall_5_in_that_order_on_every_line(tmp_path):
    benchmark, scores = _official_files(tmp_path)
    done = run(_evaluate(tmp_path, benchmark, scores))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert [line.split("\t")[0] for line in lines] == ["Art", "Physics", "AVG"]
    for line in lines:
        assert [cell.split(":")[0] for cell in line.split("\t")[1:]] == METRIC_ORDER, line
    for _ in range(10):  # the order polars's group_by meets the metrics in varies by run
        fields, averages = evaluate_files(benchmark, scores)
        assert fields.columns == ["field", *METRIC_ORDER]
        assert list(averages) == METRIC_ORDER


# --- export-mdcr and mdcr-scores: OUT --------------------------------------------------------


@pytest.fixture(scope="module")
def benchmark_root(tmp_path_factory) -> Path:
    """A data root holding the benchmark corpus `b` (the hand-written official files
    imported) and a random run of each of its pools."""
    root = tmp_path_factory.mktemp("official")
    _official_files(root)
    ids = {i for queries in BENCHMARK.values() for q, lists in queries.items()
           for i in [q, *(d for docs in lists.values() for d in docs)]}
    (root / "mdcr_test_data.jsonl").write_text("".join(
        json.dumps({"paper_id": i, "title": f"Paper {i}", "abstract": "text"}) + "\n"
        for i in sorted(ids)))
    corpus = root / "corpora" / "b"
    import_benchmark(root, corpus)
    for pool in pool_names(corpus):
        search_pool(Place(corpus, root / "indexes", root / "runs"), pool, get_model("random"))
    return root


def _export(root: Path, out: Path) -> list[str]:
    return cli(root, "export-mdcr", "--corpus", "b", "--out", str(out))


def _scores(root: Path, out: Path) -> list[str]:
    return cli(root, "mdcr-scores", "--corpus", "b", "--model", "random", "--out", str(out))


def test_export_mdcr_refuses_an_out_it_cannot_write(benchmark_root, tmp_path):
    root = benchmark_root
    (root / "a-file").write_text("kept")
    refused(root, _export(root, root / "a-file"),
            r"OUT .*/a-file is an existing file, not a folder: give OUT a folder")
    assert (root / "a-file").read_text() == "kept"
    refused(root, _export(root, root / "missing" / "out"),
            r"OUT .*/missing/out: the folder .*/missing does not exist .*create it first")
    assert not (root / "missing").exists()
    refused(root, _export(root, root / "a-file" / "out"),
            r"OUT .*/a-file/out: the folder .*/a-file does not exist \(or is not a folder\)")
    locked = root / "locked"
    locked.mkdir(mode=0o555)
    if not os.access(locked, os.W_OK):  # root writes anywhere: see the unit test below
        refused(root, _export(root, locked), r"OUT .*/locked is read-only")
        refused(root, _export(root, locked / "out"), r"OUT .*/locked/out: the folder .*/locked "
                r"is read-only")
    done = run(_export(root, tmp_path / "release"))  # what it can write: a new folder
    assert done.returncode == 0, done.stderr[-2000:]
    written = (tmp_path / "release" / "mdcr_test.json").read_bytes()
    # never replaces a file: the same folder again is refused, the files kept
    refused(root, _export(root, tmp_path / "release"), r"OUT .*/release: mdcr_test\.json, "
            r"mdcr_test_data\.jsonl already exists there; .* never replaces one")
    assert (tmp_path / "release" / "mdcr_test.json").read_bytes() == written
    (tmp_path / "other").mkdir()  # an existing folder without those files: written into
    assert run(_export(root, tmp_path / "other")).returncode == 0


def test_mdcr_scores_refuses_an_out_it_cannot_write(benchmark_root, tmp_path):
    root = benchmark_root
    (root / "a-folder").mkdir()
    refused(root, _scores(root, root / "a-folder"),
            r"OUT .*/a-folder is an existing folder, not a file: give OUT a file path")
    refused(root, _scores(root, root / "missing" / "scores.json"),
            r"OUT .*/missing/scores\.json: the folder .*/missing does not exist")
    assert not (root / "missing").exists()
    (root / "b-file").write_text("kept")
    refused(root, _scores(root, root / "b-file" / "scores.json"),
            r"OUT .*/b-file/scores\.json: the folder .*/b-file does not exist \(or is not a")
    locked = root / "locked-scores"
    locked.mkdir(mode=0o555)
    if not os.access(locked, os.W_OK):
        refused(root, _scores(root, locked / "scores.json"),
                r"OUT .*/locked-scores/scores\.json: the folder .* is read-only")
    (tmp_path / "scores.json").write_text("old")  # a file of the user's: never replaced
    refused(root, _scores(root, tmp_path / "scores.json"),
            r"OUT .*/scores\.json: scores\.json already exists there; .* never replaces one")
    assert (tmp_path / "scores.json").read_text() == "old"
    done = run(_scores(root, tmp_path / "new-scores.json"))  # what it can write: a new file
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(json.loads((tmp_path / "new-scores.json").read_text())) == set(SCORES)


def test_read_only_outs_are_refused_before_any_work(tmp_path, monkeypatch):
    """What os.access says decides (tests may run as root, for whom chmod stops nothing)."""
    monkeypatch.setattr(official.os, "access", lambda path, mode: False)
    (tmp_path / "folder").mkdir()
    (tmp_path / "scores.json").write_text("{}")
    with pytest.raises(InputError, match=r"OUT .*/folder is read-only: make it writable"):
        official.export_benchmark(tmp_path / "no-corpus", tmp_path / "folder")
    with pytest.raises(InputError, match=r"OUT .*/new: the folder .* is read-only"):
        official.export_benchmark(tmp_path / "no-corpus", tmp_path / "new")
    with pytest.raises(InputError, match=r"OUT .*/scores\.json is read-only"):
        official.scores_file(None, None, tmp_path / "scores.json")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"OUT .*/other\.json: the folder .* is read-only"):
        official.scores_file(None, None, tmp_path / "other.json")  # type: ignore[arg-type]


# --- import-beir: the qrels -------------------------------------------------------------------


def _collection(root: Path, qrels: str) -> Path:
    """Three documents, two queries, and the given qrels/test.tsv."""
    src = root / "beir"
    (src / "qrels").mkdir(parents=True)
    (src / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": f"d{i}", "title": f"Title {i}", "text": "text"}) + "\n"
        for i in (1, 2, 3)))
    (src / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in (1, 2)))
    (src / "qrels" / "test.tsv").write_text(qrels)
    return src


def _import_beir(root: Path, src: Path) -> list[str]:
    return cli(root, "import-beir", "--corpus", "t", "--src", str(src))


HEADER = "query-id\tcorpus-id\tscore\n"
BAD_QRELS = [
    ("q1\td1\t1\nq2\td2\t1\n",
     r"qrels/test\.tsv: the header line is missing \(line 1 is a judgment, 'q1\\td1\\t1'\): add "
     r"the line 'query-id\\tcorpus-id\\tscore' at the top"),
    (HEADER + "q1\td1\t1\nq2\td2\t1\nq1\td1\t2\n",
     r"qrels/test\.tsv: the pair query q1, document d1 is judged twice with different grades "
     r"\(1 on line 2, 2 on line 4\): keep one judgment per pair"),
    (HEADER + "q1\td1\t1\nq2\td2\t1.5\n",
     r"qrels/test\.tsv:3: the judgment has the score '1\.5', not an integer; write an integer"),
    (HEADER + "q1\td1\thigh\nq2\td2\t\n",
     r"qrels/test\.tsv:2: the judgment has the score 'high', not an integer \(and 1 more lines\)"),
]


@pytest.mark.parametrize(("qrels", "message"), BAD_QRELS,
                         ids=["no-header", "two-grades", "float-grade", "text-grade"])
def test_import_beir_refuses_qrels_it_would_misread(tmp_path, qrels, message):
    src = _collection(tmp_path, qrels)
    refused(tmp_path, _import_beir(tmp_path, src), message)


def test_import_beir_counts_a_repeated_judgment(tmp_path):
    """q1-d1 twice with the same grade: kept once, counted; every judgment read is accounted
    for (kept + unknown + repeated)."""
    src = _collection(tmp_path, HEADER + "q1\td1\t1\nq1\td1\t1\nq2\td2\t2\nq2\td9\t1\n\n")
    done = run(_import_beir(tmp_path, src))
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"2 judgments of 4 read \(1 repeated, 0 of queries without text, 1 "
                     r"naming an unknown document or query, 0 of the query itself\)",
                     done.stderr)
    counts = json.loads((tmp_path / "corpora" / "t" / "manifest.json").read_text())[
        "collection"]["counts"]
    assert counts["qrels_duplicate_pairs_dropped"] == 1 and counts["qrels"] == 2
    assert counts["qrels_read"] == (counts["qrels"] + counts["qrels_duplicate_pairs_dropped"]
                                    + counts["qrels_dropped_unknown_document_or_query"])


# --- ingest: a 0-byte shard -------------------------------------------------------------------


def _s2orc_raw(root: Path) -> Path:
    """Two small gzip shards of hand-written papers."""
    raw = root / "raw"
    (raw / "metadata").mkdir(parents=True)
    for shard, ids in enumerate(((1, 2, 3), (4, 5, 6))):
        rows = [{"paper_id": str(i), "title": f"T{i}", "abstract": "A", "year": 2019,
                 "mag_field_of_study": ["Medicine"], "outbound_citations": [],
                 "inbound_citations": []} for i in ids]
        with gzip.open(raw / "metadata" / f"metadata_{shard}.jsonl.gz", "wb") as handle:
            handle.write(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    return raw


def test_ingest_refuses_a_zero_byte_gzip_shard_as_an_incomplete_download(tmp_path):
    raw = _s2orc_raw(tmp_path)
    (raw / "metadata" / "metadata_2.jsonl").write_bytes(b"")  # plain and empty: no records
    done = run(cli(tmp_path, "ingest", "--corpus", "ok", "--raw", str(raw)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "corpora" / "ok" / "manifest.json").read_text())[
        "ingest"]["counts"]["papers"] == 6
    (raw / "metadata" / "metadata_1.jsonl.gz").write_bytes(b"")  # a failed download
    for workers in ("1", "2"):
        refused(tmp_path, cli(tmp_path, "ingest", "--corpus", "c", "--raw", str(raw),
                              "--threads", workers),
                r"metadata_1\.jsonl\.gz: cannot read it \(.*0 bytes.*\).*incomplete download")


def test_s2ag_ingest_refuses_a_zero_byte_gzip_shard(tmp_path):
    raw = s2ag_release(tmp_path)
    (raw / "citations" / "part-1.jsonl.gz").write_bytes(b"")
    refused(tmp_path, cli(tmp_path, "ingest", "--corpus", "c", "--raw", str(raw), "--source",
                          "s2ag"),
            r"citations/part-1\.jsonl\.gz: cannot read it \(.*0 bytes.*\).*incomplete download")
