"""The judging assessors (pipeline/judging/assessor.py, chat.py) against a server on 127.0.0.1
that speaks OpenAI's chat completions protocol and grades each (query paper, candidate) pair
deterministically (a hash of their titles), with scripted faults (tests/servers.py, the served
embeddings' server too): judging resumes after kill
-9 without asking a recorded pair again, a reply that is no grade is counted and asked again,
retries and their waits are bounded, and the key is in no output, log or file. Also the
grade parser, the person's labels file, the stand-in and the judgments artifact."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.judging import assessor as judging
from pipeline.judging import chat
from pipeline.judging.assessor import (
    ASSESSORS,
    LABELS_HEADER,
    MAX_ASKS,
    PROMPT,
    PROMPT_DIGEST,
    STANDIN_CUTS,
    STANDIN_NOISE,
    TEMPLATE,
    ApiAssessor,
    FileAssessor,
    Pair,
    StandinAssessor,
    assessor,
    parse_grade,
)
from pipeline.judging.judgments import judge, judge_pool, read_judgments, with_texts
from pipeline.layout import PREFILTERED, judging_log_path, judgments_manifest, judgments_path
from tests.servers import URL_SECRET, LocalServer, running

ROOT = Path(__file__).resolve().parents[2]
MODEL = "org/judge-7b"
KEY = "sk-judge-0123456789-never-written"
CORPUS, POOL = "tiny", "all-1k-r0"
N_QUERIES, N_DOCS = 3, 4  # 12 pairs


def server_grade(query_title: str, doc_title: str) -> int:
    """The grade the server gives a pair: a hash of the two titles."""
    return hashlib.sha256(f"{query_title}|{doc_title}".encode()).digest()[0] % 4


def pair_titles(body: dict) -> tuple[str, str]:
    """The (query paper, candidate) titles a chat request asks about."""
    found = re.findall(r"^Title: (.*)$", body["messages"][1]["content"], re.MULTILINE)
    return found[0], found[1]


def asked_pairs(server: LocalServer) -> Counter[tuple[str, str]]:
    """How often each pair (its titles) was asked, in the order first asked."""
    return Counter(pair_titles(body) for body in server.bodies)


def answer(body: dict) -> str:
    """The server's reply to a pair: its server_grade as each of M, U and O."""
    grade = server_grade(*pair_titles(body))
    return json.dumps({"M": grade, "U": grade, "O": grade})


@pytest.fixture
def server():
    """The local server (tests/servers.py) grading pairs by server_grade."""
    with running(LocalServer(MODEL, answer=answer)) as served:
        yield served


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The retries' waits, counted and added to a clock instead of slept."""
    now, waited = [0.0], []

    def pause(seconds: float) -> None:
        waited.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(chat, "pause", pause)
    monkeypatch.setattr(chat, "clock", lambda: now[0])
    return waited


def make_corpus(folder: Path) -> tuple[Path, pl.DataFrame]:
    """A corpus folder holding prefiltered papers (query papers 1.., candidates 101..), and
    the pairs of a sample: every query with every candidate."""
    corpus_dir = folder / "corpora" / CORPUS
    corpus_dir.mkdir(parents=True)
    ids = list(range(1, N_QUERIES + 1)) + list(range(101, 101 + N_DOCS))
    pl.DataFrame({"corpusid": ids,
                  "title": [f"Paper {i} on protein folding" for i in ids],
                  "abstract": [f"Abstract {i}: graph networks predict structures." for i in ids],
                  "year": [2019] * len(ids)}).write_parquet(corpus_dir / PREFILTERED)
    pairs = pl.DataFrame({"query": [q for q in range(1, N_QUERIES + 1) for _ in range(N_DOCS)],
                          "doc": [d for _ in range(N_QUERIES) for d in range(101, 101 + N_DOCS)]})
    return corpus_dir, pairs


def expected_grades(pairs: pl.DataFrame) -> dict[tuple[int, int], int]:
    return {(q, d): server_grade(f"Paper {q} on protein folding", f"Paper {d} on protein folding")
            for q, d in pairs.iter_rows()}


def api(server: LocalServer) -> ApiAssessor:
    return assessor(f"api:{MODEL}", {"JUDGE_URL": server.url, "OPENAI_API_KEY": KEY})


def files_holding(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


# ---- the grade parser -------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "grade"), [
    ('{"M": 2, "U": 1, "O": 1}', 1), ('{"m": 3, "u": 3, "o": 3}', 3), ("2", 2), (" 0\n", 0),
    ('```json\n{"M": 1, "U": 0, "O": 0}\n```', 0), ('Scores: {"M": 3, "O": 2}.', 2),
    ('{"O": 2} and again {"O": 2}', 2),
])
def test_a_grade_is_read_from_the_replies_umbrela_asks_for(reply, grade):
    assert parse_grade(reply) == grade


@pytest.mark.parametrize("reply", [
    "", "relevant", "4", "2.5", '{"O": 4}', '{"O": 2.0}', '{"O": "2"}', '{"O": true}',
    '{"M": 2, "U": 1}', '{"O": 1} then {"O": 3}', "Grade: 2", '{"O": 2', "[2]",
])
def test_a_reply_that_is_no_grade_is_never_guessed(reply):
    assert parse_grade(reply) is None


def test_the_prompt_is_umbrelas_structure_for_papers_and_its_digest_is_its_sha256():
    assert hashlib.sha256(PROMPT.encode()).hexdigest() == PROMPT_DIGEST
    assert PROMPT.endswith(TEMPLATE)
    for part in ("integer scale of 0 to 3", "Split this problem into steps:",
                 "decide on a final score (O)", "Produce a JSON dictionary of scores",
                 "{query_title}", "{query_abstract}", "{candidate_title}", "{candidate_abstract}"):
        assert part in TEMPLATE
    # the documented prompt is this one, verbatim
    docs = (ROOT / "docs" / "judging.md").read_text()
    assert TEMPLATE in docs and judging.SYSTEM in docs and PROMPT_DIGEST in docs


# ---- the api assessor against the local server -----------------------------------------------
def test_every_pair_is_graded_as_the_server_grades_it_and_the_request_is_recorded(
        server, tmp_path):
    corpus_dir, pairs = make_corpus(tmp_path)
    judge_ = api(server)
    judged = judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, judge_,
                        concurrency=3)
    grades = {(q, d): g for q, d, g in judged.frame.select("query", "doc", "grade").iter_rows()}
    assert grades == expected_grades(pairs)
    assert set(asked_pairs(server).values()) == {1} and len(asked_pairs(server)) == len(pairs)
    body = server.bodies[0]
    assert body["model"] == MODEL and body["temperature"] == 0
    assert body["messages"][0]["content"] == judging.SYSTEM
    assert server.authorizations == [f"Bearer {KEY}"] * len(pairs)
    frame = read_judgments(judgments_path(tmp_path / "runs", CORPUS, POOL, judge_.file_name))
    assert frame.equals(judged.frame)
    assert frame["query"].dtype == pl.Int64 and frame["grade"].dtype == pl.Int8
    assert set(frame["prompt_digest"]) == {PROMPT_DIGEST}
    assert set(frame["assessor"]) == {f"api:{MODEL}"}
    assert frame["replies"].to_list() == [[json.dumps({"M": g, "U": g, "O": g})]
                                          for g in frame["grade"]]
    made = json.loads(judgments_manifest(judgments_path(
        tmp_path / "runs", CORPUS, POOL, judge_.file_name)).read_text())
    described = made["parameters"]["assessor"]
    assert described["prompt"] == PROMPT and described["prompt_digest"] == PROMPT_DIGEST
    assert described["model"] == MODEL and described["temperature"] == 0
    assert made["counts"]["graded"] == len(pairs) and made["stand_in"] is False


def test_a_rerun_asks_nothing_and_rewrites_nothing(server, tmp_path):
    corpus_dir, pairs = make_corpus(tmp_path)
    runs = tmp_path / "runs"
    judge_pool(runs, corpus_dir, CORPUS, POOL, pairs, api(server))
    path = judgments_path(runs, CORPUS, POOL, api(server).file_name)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (path, judgments_manifest(path))}
    asked = sum(asked_pairs(server).values())
    again = judge_pool(runs, corpus_dir, CORPUS, POOL, pairs, api(server))
    assert sum(asked_pairs(server).values()) == asked and again.asked == 0
    assert again.recorded == len(pairs)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before
    # a nested pool's sample, a subset of the pairs: judged from the log, nothing asked
    subset = pairs.filter(pl.col("query") == 1)
    judge_pool(runs, corpus_dir, CORPUS, "all-500-r0", subset, api(server))
    assert sum(asked_pairs(server).values()) == asked


KILLED = """
import sys
from pathlib import Path
import polars as pl
from pipeline.judging.assessor import assessor
from pipeline.judging.judgments import judge_pool
runs, corpus_dir, pairs = Path(sys.argv[1]), Path(sys.argv[2]), pl.read_parquet(sys.argv[3])
judge_pool(runs, corpus_dir, "{corpus}", "{pool}", pairs, assessor("api:{model}"),
           concurrency=1)
"""


def test_judging_resumes_after_kill_9_without_asking_a_recorded_pair_again(
        server, tmp_path, caplog):
    corpus_dir, pairs = make_corpus(tmp_path)
    runs = tmp_path / "runs"
    pairs.write_parquet(tmp_path / "pairs.parquet")
    script = tmp_path / "judge.py"
    script.write_text(KILLED.format(corpus=CORPUS, pool=POOL, model=MODEL))
    server.hold_at = 6  # the 6th request is never answered: the judge is killed waiting
    env = {**os.environ, "JUDGE_URL": server.url, "OPENAI_API_KEY": KEY}
    process = subprocess.Popen([sys.executable, str(script), str(runs), str(corpus_dir),
                                str(tmp_path / "pairs.parquet")], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.held.wait(60), "the judge never reached the held request"
        process.send_signal(signal.SIGKILL)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    server.release.set()
    log_path = judging_log_path(runs, CORPUS, api(server).file_name)
    lines = log_path.read_text().splitlines()
    assert len(lines) == 1 + 5  # the assessor, then the 5 pairs answered before the kill
    recorded = {(json.loads(line)["query"], json.loads(line)["doc"]) for line in lines[1:]}
    held = list(asked_pairs(server))[-1]  # the pair of the request held when the judge was killed
    with log_path.open("ab") as torn:  # a line the kill cut short, as a kill mid-write leaves
        torn.write(b'{"doc": "104", "grade": 2, "query": "3", "repl')
    with caplog.at_level(logging.INFO):
        judged = judge_pool(runs, corpus_dir, CORPUS, POOL, pairs, api(server))
    assert "cut short" in caplog.text
    assert judged.recorded == 5 and judged.asked == len(pairs) - 5
    # every pair asked once, but the one asked when the judge was killed: twice
    assert len(asked_pairs(server)) == len(pairs)
    assert {pair: n for pair, n in asked_pairs(server).items() if n != 1} == {held: 2}
    titles = {(f"Paper {q} on protein folding", f"Paper {d} on protein folding")
              for q, d in (map(int, pair) for pair in recorded)}
    assert all(asked_pairs(server)[pair] == 1 for pair in titles)
    grades = {(q, d): g for q, d, g in judged.frame.select("query", "doc", "grade").iter_rows()}
    assert grades == expected_grades(pairs)
    lines = log_path.read_text().splitlines()
    assert len(lines) == 1 + len(pairs)  # the torn line dropped, each pair once
    assert all(json.loads(line) for line in lines)
    for text in (out.decode(), err.decode(), caplog.text):
        assert KEY not in text
    assert not files_holding(tmp_path, KEY)


def test_a_reply_that_is_no_grade_is_counted_and_asked_again_never_guessed(
        server, tmp_path, caplog):
    corpus_dir, pairs = make_corpus(tmp_path)
    runs = tmp_path / "runs"
    pairs = pairs.head(2)
    # the first pair: two replies that are no grade (one echoing the key), then its grade;
    # the second: no grade in MAX_ASKS replies
    server.faults = ["garbage", "echo", ""] + ["garbage"] * MAX_ASKS  # "": a grade
    with caplog.at_level(logging.INFO):
        judged = judge_pool(runs, corpus_dir, CORPUS, POOL, pairs, api(server), concurrency=1)
    first, second = [tuple(p) for p in pairs.iter_rows()]
    assert judged.frame.height == 1 and judged.frame["doc"].to_list() == [first[1]]
    row = judged.frame.row(0, named=True)
    assert row["grade"] == expected_grades(pairs)[first]
    assert row["asked"] == 3 and row["not_grades"] == 2
    assert row["replies"][0] == "The candidate seems quite relevant to me."
    assert row["replies"][1] == "I cannot grade this. bad key: Bearer <key>"  # raw, key hidden
    assert judged.not_grades == 2 + MAX_ASKS
    assert judged.ungraded == [(str(second[0]), str(second[1]))]
    assert sum(asked_pairs(server).values()) == 3 + MAX_ASKS
    made = json.loads(judgments_manifest(judgments_path(
        runs, CORPUS, POOL, api(server).file_name)).read_text())
    assert made["ungraded"] == [[str(second[0]), str(second[1])]]
    assert made["counts"]["not_grades"] == 2 + MAX_ASKS and made["counts"]["ungraded"] == 1
    # the ungraded pair is recorded: a rerun does not ask it again
    judge_pool(runs, corpus_dir, CORPUS, POOL, pairs, api(server))
    assert sum(asked_pairs(server).values()) == 3 + MAX_ASKS
    assert KEY not in caplog.text and not files_holding(tmp_path, KEY)


def test_retries_wait_as_the_server_says_and_are_bounded(server, tmp_path, waits):
    corpus_dir, pairs = make_corpus(tmp_path)
    texts = with_texts(pairs.head(1), pl.read_parquet(corpus_dir / PREFILTERED))
    log_path = tmp_path / "log.jsonl"
    server.faults = ["503", "429", "drop"]
    judged = judge(texts, api(server), log_path)
    assert judged.frame.height == 1 and sum(asked_pairs(server).values()) == 4
    assert waits == [chat.BACKOFF, 2.0, chat.BACKOFF * 4]  # backoff, Retry-After, backoff
    # a server that never answers: RETRIES retries, then one line, nothing recorded
    server.always = "503"
    waits.clear()
    texts = with_texts(pairs.slice(1, 1), pl.read_parquet(corpus_dir / PREFILTERED))
    with pytest.raises(InputError) as refused:
        judge(texts, api(server), log_path)
    assert sum(asked_pairs(server).values()) == 4 + chat.RETRIES + 1
    assert f"after {chat.RETRIES} retries" in str(refused.value)
    assert f"JUDGE api:{MODEL} at {server.url}/v1/chat/completions" in str(refused.value)
    assert len(log_path.read_text().splitlines()) == 2  # the assessor, the first pair
    # a server asking for long waits: they are cut to MAX_WAIT, and the total to DEADLINE
    server.always = "long429"
    waits.clear()
    with pytest.raises(InputError, match="no reply within"):
        judge(texts, api(server), log_path)
    assert waits and max(waits) == chat.MAX_WAIT and sum(waits) <= chat.DEADLINE


@pytest.mark.parametrize(("fault", "words"), [
    ("401", "answered 401 (bad key: Bearer <key>): set OPENAI_API_KEY"),
    ("404", "answered 404"), ("redirect", "a redirect to http://<user:password>@elsewhere"),
    ("notjson", "its reply is not JSON"), ("nochoices", "holds no choices[0].message"),
])
def test_a_refusal_is_one_line_asked_once_and_never_shows_the_key(
        server, tmp_path, waits, fault, words):
    corpus_dir, pairs = make_corpus(tmp_path)
    texts = with_texts(pairs.head(2), pl.read_parquet(corpus_dir / PREFILTERED))
    server.always = fault
    with pytest.raises(InputError) as refused:
        judge(texts, api(server), tmp_path / "log.jsonl", concurrency=1)
    message = str(refused.value)
    assert words in message and "\n" not in message and KEY not in message
    assert URL_SECRET not in message  # the redirect's password and token
    assert sum(asked_pairs(server).values()) == 1 and not waits  # no retry, no second pair sent


def test_the_endpoint_and_key_are_checked_as_for_embeddings(server):
    for url, shown in ((f"http://user:{KEY}@127.0.0.1:8000", "<user:password>@"),
                       (f"http://127.0.0.1:8000/v1?key={KEY}", "?<query>"),
                       ("ftp://127.0.0.1", "not an http(s) URL")):
        with pytest.raises(InputError) as refused:
            assessor(f"api:{MODEL}", {"JUDGE_URL": url})
        assert str(refused.value).startswith("JUDGE_URL=") and shown in str(refused.value)
        assert KEY not in str(refused.value)
    with pytest.raises(InputError, match="OPENAI_API_KEY holds a space"):
        assessor(f"api:{MODEL}", {"JUDGE_URL": server.url, "OPENAI_API_KEY": "sk-a b"})
    with pytest.raises(InputError, match="needs --judge-url"):  # the command line's words
        assessor(f"api:{MODEL}", {})
    for given in ("http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/chat/completions"):
        assert chat.chat_url(given) == "http://h:1/v1/chat/completions"


def test_a_log_of_another_assessor_or_a_damaged_one_is_refused(server, tmp_path):
    corpus_dir, pairs = make_corpus(tmp_path)
    texts = with_texts(pairs.head(1), pl.read_parquet(corpus_dir / PREFILTERED))
    log_path = tmp_path / "log.jsonl"
    judge(texts, api(server), log_path)
    other = assessor("api:other-model", {"JUDGE_URL": server.url})
    with pytest.raises(InputError, match="written by another assessor .its model differ"):
        judge(texts, other, log_path)
    lines = log_path.read_text().splitlines()
    log_path.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(InputError, match="line 2 is not a judgment"):
        judge(texts, api(server), log_path)


# ---- a person's labels, the stand-in, the registry --------------------------------------------
def test_a_persons_labels_file_is_read_back_as_the_judging_page_writes_it(tmp_path):
    corpus_dir, pairs = make_corpus(tmp_path)
    labels = tmp_path / "labels.tsv"
    labels.write_text("\t".join(LABELS_HEADER) + "\n"
                      "1\t101\t3\tana\t2026-11-26T10:00:00Z\n"
                      "1\t102\t0\tana\t2026-11-26T10:00:05Z\n"
                      "1\t101\t2\tana\t2026-11-26T10:00:09Z\n"  # relabelled: the later wins
                      "9\t999\t1\tana\t2026-11-26T10:00:12Z\n")  # not in this sample
    person = assessor(f"file:{labels}")
    judged = judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, person)
    assert judged.frame.select("query", "doc", "grade", "assessor", "time").rows() == [
        (1, 101, 2, "ana", "2026-11-26T10:00:09Z"), (1, 102, 0, "ana", "2026-11-26T10:00:05Z")]
    assert judged.unjudged == len(pairs) - 2 and judged.frame["prompt_digest"].is_null().all()
    assert not judging_log_path(tmp_path / "runs", CORPUS, person.file_name).exists()


@pytest.mark.parametrize(("text", "words"), [
    ("query\tdoc\tgrade\n1\t101\t2\n", "its first line is not the header"),
    ("\t".join(LABELS_HEADER) + "\n1\t101\t5\tana\tt\n", "line 2 grades '5', not 0, 1, 2 or 3"),
    ("\t".join(LABELS_HEADER) + "\n1\t101\t2\tana\n", "line 2 has 4 fields, not 5"),
    ("\t".join(LABELS_HEADER) + "\n\n1\t\t2\tana\tt\n", "line 3 has an empty field"),
])
def test_a_labels_file_that_is_not_the_pages_is_one_line_naming_the_line(tmp_path, text, words):
    labels = tmp_path / "labels.tsv"
    labels.write_text(text)
    with pytest.raises(InputError) as refused:
        assessor(f"file:{labels}")
    assert words in str(refused.value) and str(labels) in str(refused.value)
    with pytest.raises(InputError, match="no such file"):
        assessor(f"file:{tmp_path / 'absent.tsv'}")


def test_the_stand_in_grades_by_word_overlap_deterministically_and_says_it_is_one(tmp_path):
    def pair(i: int, shared: int) -> Pair:
        """Query and candidate sharing `shared` of their 20 words each."""
        query = [f"word{chr(97 + k // 26)}{chr(97 + k % 26)}" for k in range(20)]
        doc = query[:shared] + [f"other{chr(97 + k // 26)}{chr(97 + k % 26)}"
                                for k in range(20 - shared)]
        return Pair(str(i), str(1000 + i), "", " ".join(query), "", " ".join(doc))

    standin, n = StandinAssessor(0), 2000
    # for each grade, the fewest shared words whose overlap (shared / (40 - shared)) has it
    cases = {next(s for s in range(21) if sum(s / (40 - s) >= cut for cut in STANDIN_CUTS) == g):
             g for g in range(4)}
    grades = {shared: [standin.grade(pair(i, shared)) for i in range(n)] for shared in cases}
    for shared, grade in cases.items():
        moved = sum(g != grade for g in grades[shared]) / n
        assert all(abs(g - grade) <= 1 for g in grades[shared])
        # STANDIN_NOISE of the pairs moved one grade up or down; at 0 and 3 only one way
        share = STANDIN_NOISE / (2 if grade in (0, 3) else 1)
        assert share / 2 < moved < share * 1.5
    assert grades == {s: [standin.grade(pair(i, s)) for i in range(n)] for s in cases}
    assert grades != {s: [StandinAssessor(1).grade(pair(i, s)) for i in range(n)]
                      for s in cases}
    corpus_dir, pairs = make_corpus(tmp_path)
    judge_pool(tmp_path / "runs", corpus_dir, CORPUS, POOL, pairs, assessor("standin:0"))
    made = json.loads(judgments_manifest(judgments_path(
        tmp_path / "runs", CORPUS, POOL, "standin-0")).read_text())
    assert made["stand_in"] is True and "stand-in" in made["parameters"]["assessor"]["note"]
    assert made["assessor"] == "standin:0"


def test_assessors_are_a_registry_and_a_bad_judge_is_one_line():
    assert set(ASSESSORS) == {"api", "file", "standin"}
    assert ASSESSORS["file"] is FileAssessor
    for spec, words in (("gpt-4", "give api:<model>"), ("bogus:x", "give api:<model>"),
                        ("standin:x", "the stand-in's seed"), ("api:a b", "without spaces"),
                        ("file:", "give the labels file")):
        with pytest.raises(InputError, match=re.escape(words)):
            assessor(spec, {})


def test_judging_without_a_log_is_refused_for_an_assessor_that_keeps_one(server, tmp_path):
    corpus_dir, pairs = make_corpus(tmp_path)
    texts = with_texts(pairs.head(1), pl.read_parquet(corpus_dir / PREFILTERED))
    with pytest.raises(ValueError, match="give its log's path"):
        judge(texts, api(server), None)
    missing = pairs.head(1).with_columns(doc=pl.lit(555, pl.Int64))
    with pytest.raises(InputError, match="1 pairs name a doc paper the corpus lacks"):
        with_texts(missing, pl.read_parquet(corpus_dir / PREFILTERED))
