"""make download against a hostile or broken Datasets API (issue 39), the real client code
against tests/ingest/s2ag_server.py: server values that would become paths outside the raw
folder, a host that announces more bytes than it sends, a redirect to the file host, an API
that never answers or refuses connections, an invalid Retry-After, credentials in S2_API_URL,
two downloads into one folder, and damaged bytes that verify and make download must find."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import html
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from pipeline.core.errors import InputError
from pipeline.ingest.download import download
from pipeline.ingest.s2client import Settings
from pipeline.layout import DOWNLOAD_MANIFEST, released_shard
from tests.ingest.s2ag_server import KEY, S2Server, build_releases
from tests.servers import one_line_error

ROOT = Path(__file__).resolve().parents[2]
FIRST, MIDDLE, LAST = "2026-11-04", "2026-11-11", "2026-11-18"
SMALL = build_releases(n_papers=40)


@pytest.fixture
def server():
    with S2Server(SMALL, parts=2) as srv:
        yield srv


def settings(srv: S2Server | str, **options) -> Settings:
    base = srv if isinstance(srv, str) else srv.url
    return Settings(base_url=base, key=KEY, **{"parallel": 2, "retries": 3, "backoff": 0.01,
                                               **options})


def served(srv: S2Server, release: str, dataset: str) -> dict[str, str]:
    return {released_shard(p.rsplit("/", 1)[-1]): hashlib.sha256(srv.files[p]).hexdigest()
            for p in srv.listing[(release, dataset)]}


def on_disk(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.name.endswith(".jsonl.gz")}


# ---- case 1: no server value becomes a path outside the raw folder ---------------------------
HOSTILE = ("x/../../../../outside", "../../outside", "..", ".", "", "/", "2026-11-18\n",
           "2026-11-18/../../../outside", "..\\..\\outside", "%2e%2e%2foutside", "a\x00b",
           "2026-11-1８", "\u202e..", "x" * 300, ".download.json.part", "download.json",
           "2026-11-11/", "~", "$(touch X)")
NASTY_CHARS = st.sampled_from(list("./\\x-0123456789\n\x00%~é"))
HOSTILE_VALUES = st.one_of(st.sampled_from(HOSTILE), st.text(NASTY_CHARS, max_size=30),
                           st.just("ABSOLUTE"))  # ABSOLUTE: a folder outside, by full path


def _tree(root: Path, skip: Path) -> dict[str, str]:
    """Every path under `root` but `skip`'s subtree, with its bytes' digest (folders: '')."""
    found = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d != skip]
        for d in dirs:
            found[str((here / d).relative_to(root))] = ""
        for f in files:
            data = (here / f).read_bytes()
            found[str((here / f).relative_to(root))] = hashlib.sha256(data).hexdigest()
    return found


@pytest.fixture(scope="module")
def first_download(tmp_path_factory):
    """A server, and release FIRST of papers downloaded once (each example copies it)."""
    with S2Server(SMALL, parts=2) as srv:
        template = tmp_path_factory.mktemp("template") / "raw"
        download(template, settings(srv, parallel=1), release=FIRST, datasets=["papers"])
        yield srv, template


@hypothesis_settings(max_examples=25, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])
@given(role=st.sampled_from(["release_id", "step_release", "file_name", "dataset"]),
       value=HOSTILE_VALUES)
def test_no_path_the_download_writes_or_removes_is_outside_the_raw_folder(
        first_download, role, value):
    """Whatever the server answers (release ids, the releases of diff steps, file names in
    links, dataset names), a download and an update write and remove only inside the raw
    folder: the tree around it, an `outside` folder with a file of the user's among it, is
    byte for byte as before. A refusal is one InputError, never another exception."""
    srv, template = first_download
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        outside = root / "outside"
        outside.mkdir()
        (outside / "mine.txt").write_text("the user's own file\n")
        raw = root.joinpath(*[f"d{k}" for k in range(16)], "raw")  # deeper than any ../ run
        shutil.copytree(template, raw)
        hostile = str(outside) if value == "ABSOLUTE" else value
        before = _tree(root, raw)
        setattr(srv.faults, role, hostile)
        try:
            for dataset in (["papers"] if role != "dataset" else [hostile]):
                for update in (True, False):
                    target = raw if update else raw / "fresh"
                    with contextlib.suppress(InputError):  # a refusal is fine; any other
                        download(target, settings(srv, parallel=1), release=LAST,  # exception
                                 datasets=[dataset], update=update)  # fails the test
        finally:
            setattr(srv.faults, role, None)
        assert _tree(root, raw) == before, (role, value)


def test_a_hostile_step_release_is_refused_before_anything_is_written(first_download,
                                                                      tmp_path):
    srv, template = first_download
    raw = tmp_path / "a" / "b" / "raw"
    shutil.copytree(template, raw)
    srv.faults.step_release = "x/../../../../outside"
    try:
        with pytest.raises(InputError, match="names release 'x/../../../../outside', not a "
                                             "release date"):
            download(raw, settings(srv), release=LAST, datasets=["papers"], update=True)
    finally:
        srv.faults.step_release = None
    assert not (raw / ".diffs").exists() and not (tmp_path / "outside").exists()


# ---- case 6: every failure is bounded ---------------------------------------------------------
def test_a_host_announcing_more_bytes_than_it_sends_gives_up_after_the_tries(server, tmp_path):
    """Content-Length larger than the body, then 416 on the range: each restart from byte 0
    is no progress, so the file is one line after the tries, not a loop."""
    name = server.listing[(LAST, "papers")][0].rsplit("/", 1)[-1]
    server.faults.overstate = {name: 100}
    outcome: list[object] = []

    def run() -> None:
        try:
            download(tmp_path / "raw", settings(server, parallel=1), release=LAST,
                     datasets=["papers"])
            outcome.append("done")
        except InputError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    server.faults.overstate = {}  # let a looping download end, so the test can fail
    thread.join(30)
    assert outcome and isinstance(outcome[0], InputError), outcome
    assert f"papers file {released_shard(name)}: no progress after 4 tries" in str(outcome[0])
    asked = [r for r in server.requests("file") if r["path"].endswith(name)]
    assert len(asked) <= 2 * 4 + 1


# ---- case 13: a redirect to the file host is followed, without the key ----------------------
def test_a_file_link_that_redirects_is_followed_without_the_key(server, tmp_path):
    port = server.url.rsplit(":", 1)[1]
    server.faults.redirect_to = f"http://localhost:{port}"  # another host name for urllib3
    raw = tmp_path / "raw"
    download(raw, settings(server), release=LAST, datasets=["citations"])
    assert on_disk(raw / "citations") == served(server, LAST, "citations")
    assert len(server.requests("redirect")) == 2  # one 307 per file
    assert {r["key"] for r in server.requests("file")} == {None}
    assert {r["key"] for r in server.requests("redirect")} == {None}


# ---- case 14, 20: an API that never answers, or refuses; each retry logged; bounded ----------
def test_an_api_that_never_answers_is_retried_with_a_line_each_then_one_error(server, tmp_path,
                                                                             caplog):
    caplog.set_level(logging.INFO)
    server.faults.hang_api = 100
    started = time.monotonic()
    with pytest.raises(InputError) as caught:
        download(tmp_path / "raw", settings(server, read_timeout=0.1), release=LAST)
    assert time.monotonic() - started < server.faults.hang_api / 2  # not one whole hang
    assert "the connection failed (no answer within 0.1 s)" in str(caught.value)
    assert "after 3 retries (4 attempts)" in str(caught.value)
    retries = [r for r in caplog.records if "trying again in" in r.getMessage()]
    assert len(retries) == 3, caplog.text
    assert all(r.levelno == logging.WARNING for r in retries)


def test_the_total_wait_of_an_api_call_is_bounded(server, tmp_path):
    server.faults.hang_api = 1000
    started = time.monotonic()
    with pytest.raises(InputError, match=r"(gave up after|no reply within) the 0\.5 s an API "
                                         "call may take"):
        download(tmp_path / "raw", settings(server, read_timeout=1.0, retries=50,
                                            api_wait=0.5), release=LAST)
    assert time.monotonic() - started < 25  # not the 51 reads of 1 s its retries allow


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_connection_is_logged_each_try_and_credentials_never_shown(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    url = f"http://someone:hunter2@127.0.0.1:{_closed_port()}"
    with pytest.raises(InputError) as caught:
        download(tmp_path / "raw", settings(url), release=LAST)
    message = str(caught.value)
    assert "connection refused" in message and "hunter2" not in message
    assert "someone" not in message and "127.0.0.1" in message
    retries = [r for r in caplog.records if "trying again in" in r.getMessage()]
    assert len(retries) == 3
    assert "hunter2" not in caplog.text


def test_credentials_in_the_api_url_are_sent_but_never_written(server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    url = server.url.replace("http://", "http://someone:hunter2@")
    raw = tmp_path / "raw"
    download(raw, settings(url), release=LAST, datasets=["abstracts"])
    manifest = (raw / DOWNLOAD_MANIFEST).read_text()
    assert "hunter2" not in manifest and "someone" not in manifest
    assert json.loads(manifest)["api"] == server.url
    assert "hunter2" not in caplog.text
    api = server.requests("api")
    assert {r["auth"] for r in api} == {"Basic c29tZW9uZTpodW50ZXIy"}  # someone:hunter2
    assert {r["auth"] for r in server.requests("file")} == {None}


# ---- case 15: an invalid Retry-After; an empty DATASETS ------------------------------------
def test_an_invalid_retry_after_is_ignored_with_a_line_not_taken_for_no_answer(server,
                                                                              tmp_path, caplog):
    caplog.set_level(logging.INFO)
    server.faults.rate_limit = 2
    server.faults.retry_after = "soon"
    download(tmp_path / "raw", settings(server), release=LAST, datasets=["papers"])
    assert "an invalid Retry-After ('soon', ignored)" in caplog.text
    server.faults.rate_limit = 100
    with pytest.raises(InputError, match=r"it answered 429 with an invalid Retry-After "
                                         r"\('soon', ignored\) after 3 retries \(4 attempts\)"):
        download(tmp_path / "raw2", settings(server), release=LAST, datasets=["papers"])


def test_an_empty_list_of_datasets_is_refused(server, tmp_path):
    with pytest.raises(InputError, match="no dataset given"):
        download(tmp_path / "raw", settings(server), release=LAST, datasets=[])
    assert not (tmp_path / "raw").exists() and not server.log
    done = subprocess.run([sys.executable, "-m", "pipeline", "check"], cwd=ROOT,
                          env={**os.environ, "DATASETS": ""}, capture_output=True, text=True)
    assert done.returncode == 2 and "DATASETS: empty: name the datasets" in done.stderr, done.stderr


# ---- case 12: two downloads into one folder --------------------------------------------------
def test_two_downloads_into_one_folder_take_turns(tmp_path):
    with S2Server(build_releases(n_papers=1500)) as big:
        big.faults.throttle = 0.003
        raw = tmp_path / "raw"
        errors: list[BaseException] = []

        def run() -> None:
            try:
                download(raw, settings(big, parallel=3), release=LAST, datasets=["papers"])
            except BaseException as exc:  # noqa: BLE001  (what the other one died of)
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        assert on_disk(raw / "papers") == served(big, LAST, "papers")
        names = [r["path"].rsplit("/", 1)[-1] for r in big.requests("file")]
        assert len(names) == len(set(names)) == 3  # each file fetched once, by one of them


# ---- case 5: damaged bytes are found by verify and fetched again by make download -----------
def _flip_a_byte(path: Path) -> None:
    """One byte changed at the same size, the mtime put back (a bit flip on disk)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_verify_and_make_download_find_a_flipped_byte_in_a_downloaded_shard(server, tmp_path):
    import pipeline

    data = pipeline.Data(tmp_path / "data")
    raw = data.corpus("s2ag") / "s2ag"
    download(raw, settings(server), release=LAST, datasets=["papers", "abstracts"])
    assert pipeline.verify_data(data) == []  # a folder holding only a download: checked
    shard = sorted((raw / "papers").glob("*.jsonl.gz"))[1]
    _flip_a_byte(shard)
    problems = pipeline.verify_data(data)
    assert len(problems) == 1 and problems[0].startswith(f"CORRUPT {shard}: "), problems
    assert problems[0].endswith(f"repair: make download CORPUS=s2ag RELEASE={LAST} "
                                f"DATASETS=abstracts,papers DATA={tmp_path / 'data'}")
    seen = len(server.requests("file"))
    download(raw, settings(server), release=LAST, datasets=["abstracts", "papers"])
    fetched = [r["path"] for r in server.requests("file")[seen:]]
    assert [p.rsplit("/", 1)[-1] for p in fetched] == [
        p.rsplit("/", 1)[-1] for p in server.listing[(LAST, "papers")]
        if released_shard(p.rsplit("/", 1)[-1]) == shard.name]  # exactly that file
    assert on_disk(raw / "papers") == served(server, LAST, "papers")
    assert pipeline.verify_data(data) == []


def test_a_damaged_download_json_is_rebuilt_by_verifying_the_shards(server, tmp_path):
    import pipeline

    data = pipeline.Data(tmp_path / "data")
    raw = data.corpus("s2ag") / "s2ag"
    download(raw, settings(server), release=LAST, datasets=["papers"])
    good = json.loads((raw / DOWNLOAD_MANIFEST).read_text())
    text = (raw / DOWNLOAD_MANIFEST).read_text()
    (raw / DOWNLOAD_MANIFEST).write_text(text.replace('"lines": ', '"lines": 1', 1))
    problems = pipeline.verify_data(data)
    assert len(problems) == 1 and problems[0].startswith(f"CORRUPT {raw / DOWNLOAD_MANIFEST}")
    assert problems[0].endswith(f"repair: make download CORPUS=s2ag RELEASE={LAST} "
                                f"DATASETS=papers DATA={tmp_path / 'data'}")
    with pytest.raises(InputError, match=f"is damaged.*RELEASE={LAST}"):
        download(raw, settings(server), release="latest", datasets=["papers"])
    seen = len(server.requests("file"))
    download(raw, settings(server), release=LAST, datasets=["papers"])
    assert len(server.requests("file")) == seen  # every shard verified again, none fetched
    again = json.loads((raw / DOWNLOAD_MANIFEST).read_text())
    assert again["datasets"]["papers"]["files"] == good["datasets"]["papers"]["files"]
    assert pipeline.verify_data(data) == []


def test_make_corpus_on_a_damaged_downloaded_shard_names_make_download(server, tmp_path):
    """The stage that reads a download refuses a damaged shard with the command that fetches
    it again (it said 'download it again', which only a user's own download needs)."""
    from pipeline.ingest import ingest

    raw = tmp_path / "corpora" / "s2ag" / "s2ag"
    download(raw, settings(server), release=LAST, datasets=["papers", "abstracts",
                                                             "citations"])
    shard = sorted((raw / "papers").glob("*.jsonl.gz"))[0]
    data = shard.read_bytes()
    shard.write_bytes(data[:-12] + bytes(12))  # the gzip trailer (CRC, size) damaged
    with pytest.raises(InputError) as caught:
        ingest(raw, tmp_path / "corpora" / "s2ag", source="s2ag")
    assert caught.value.repair.command() == (f"make download CORPUS=s2ag RELEASE={LAST} "
                                             "DATASETS=abstracts,citations,papers")


# ---- issue 78: every wait bounded by the one client; no key in any form ---------------------
@pytest.mark.slow
def test_an_api_answer_trickled_a_byte_a_second_ends_at_the_calls_deadline(server, tmp_path):
    """A 200 of Content-Length 100,000 sent a byte at a time (each byte restarted the read
    timeout, and the 600 s bound was checked only between tries: still running at 1,000 s):
    with api_wait=1, the call gives up in one line naming the deadline, after one attempt."""
    server.faults.trickle_api = 100
    caught = one_line_error(lambda: download(tmp_path / "raw", settings(server, api_wait=1.0),
                                   release=LAST))
    assert str(caught) == (f"the Semantic Scholar Datasets API at {server.url} (list of "
                           "releases): gave up after the 1 s an API call may take, its reply "
                           "still arriving (1 attempt): check the server, then run the "
                           "download again (the files downloaded so far are kept)")
    assert len(server.requests("trickle")) == 1


@pytest.mark.slow
@pytest.mark.parametrize("how, last", [
    ("body", "stalled: fewer than 1,000 bytes in 0.5 s"),
    ("headers", "no answer within 1 s"),
])
def test_a_file_trickled_a_byte_a_second_ends_after_its_tries(server, tmp_path, caplog, how,
                                                             last):
    """A file host trickling a file's body (or its headers) a byte at a time (it once showed
    '0/1 files ... MBps=0.0' forever): each attempt ends at the pace bound (fewer than
    stall_bytes in a stall_window; headers within the connect and read timeouts), counts as a
    try without progress, and the file is one line after its tries, its bytes kept; urllib3's
    own warning about the headers the watchdog cut (with its traceback) reaches no user.
    A byte every 0.05 s: a tenth of the read timeout, which so never ends an attempt."""
    caplog.set_level(logging.DEBUG)
    server.faults.trickle_files = how
    server.faults.trickle_every = 0.05
    caught = one_line_error(lambda: download(
        tmp_path / "raw", settings(server, parallel=1, retries=1, stall_window=0.5,
                                   stall_bytes=1000, connect_timeout=0.5, read_timeout=0.5),
        release=LAST, datasets=["papers"]))
    path = server.listing[(LAST, "papers")][0]
    name = released_shard(path.rsplit("/", 1)[-1])
    assert str(caught) == (f"papers file {name}: no progress after 2 tries (last: {last}); run "
                           "again later (the bytes downloaded so far are kept)")
    assert len([r for r in server.requests("trickle") if r["path"].endswith(path)]) == 2
    loud = [r for r in caplog.records
            if r.name.startswith("urllib3") and (r.levelno > logging.DEBUG or r.exc_info)]
    assert not loud, [r.getMessage() for r in loud]


KEY_FORMS = {
    "percent": lambda text: "".join(f"%{byte:02X}" for byte in text.encode()).encode(),
    "html named": lambda text: text.replace("-", "&hyphen;").replace(":", "&colon;").encode(),
    "html decimal": lambda text: "".join(f"&#{ord(c)};" for c in text).encode(),
    "html hex": lambda text: "".join(f"&#X{ord(c):X}" for c in text).encode(),
    "json": lambda text: json.dumps({"message": "".join(f"\\u{ord(c):04x}" for c in text)})
    .encode(),
    "utf-16": lambda text: f"<html>{text}</html>".encode("utf-16"),
}


@pytest.mark.parametrize("form", KEY_FORMS)
def test_a_key_echoed_in_any_form_is_in_no_output_log_or_file(server, tmp_path, caplog, form):
    """The Datasets API refusing the key with a 401 that echoes it (`x-api-key: <key>`) in each
    form a server may write it in: the one line names the refusal and its repair; it, the log
    and every file written hold no 4 characters of the key in a row, whatever the escapes."""
    caplog.set_level(logging.DEBUG)
    write = KEY_FORMS[form]
    server.faults.echo = lambda key: write(f"bad key: x-api-key: {key}")
    caught = one_line_error(lambda: download(tmp_path / "raw", settings(server), release=LAST,
                                   datasets=["papers"]))
    assert f"(dataset papers of release {LAST}): it answered 401 (" in str(caught)
    assert str(caught).endswith("): check the key in S2_API_KEY (or ask for one at "
                                "https://www.semanticscholar.org/product/api)")
    texts = [str(caught), caplog.text, *(p.read_bytes().decode(errors="replace")
                                         for p in tmp_path.rglob("*") if p.is_file())]
    pieces = {KEY[i:i + 4].lower() for i in range(len(KEY) - 3)}
    for text in texts:
        for _ in range(2):
            text = unquote(html.unescape(text.encode().decode("unicode_escape", "replace")))
        seen = "".join(c for c in text if c.isprintable() or c.isspace()).lower()
        assert not [piece for piece in pieces if piece in seen], text


def test_a_file_larger_than_any_s2_file_is_one_line_its_partial_removed(server, tmp_path,
                                                                        monkeypatch):
    """A host sending without end (no size cap: the partial file grew until the disk was
    full): past MAX_FILE bytes (64 GiB; here 500) the download ends in one line naming the
    file, its partial removed."""
    from pipeline.ingest import s2client

    monkeypatch.setattr(s2client, "MAX_FILE", 500)
    raw = tmp_path / "raw"
    caught = one_line_error(lambda: download(raw, settings(server, parallel=1), release=LAST,
                                   datasets=["citations"]))
    name = released_shard(server.listing[(LAST, "citations")][0].rsplit("/", 1)[-1])
    assert str(caught).startswith(f"citations file {name}: its host sent more than 500 "
                                  "bytes, more than any S2 file holds (its partial file "
                                  "removed)"), caught
    assert not [p for p in (raw / "citations").iterdir() if p.name.endswith(".part")]


# ---- a file of no records is no complete download --------------------------------------------
@pytest.mark.parametrize("content, words", [
    (b"a" * 5000, "its gzip stream is whole, but its line 1 is longer than 1000 bytes, more than "
                  "any record holds"),
    (b"", "its gzip stream is whole, but holds no record (0 lines, none of them a record)"),
    (b"\n \n\n", "its gzip stream is whole, but holds no record (3 lines, none of them a "
                 "record)"),
])
def test_a_file_of_no_records_is_one_line_and_nothing_of_it_looks_complete(
        server, tmp_path, monkeypatch, content, words):
    """The 8th trial: a data file of 1 GB of one character without a line break (gzipped to
    1 MB) downloaded with rc 0, `"lines": 0, "complete": true`. A download's completeness is
    from its records: a whole gzip stream holding none, or a line longer than any record
    (shards.MAX_RECORD, here 1,000 bytes, read no further), is one line at once (no retry
    changes it), nothing of the file is kept, and download.json does not call it complete."""
    from pipeline.ingest import shards

    monkeypatch.setattr(shards, "MAX_RECORD", 1000)
    path = server.listing[(LAST, "citations")][0]
    server.files[path] = gzip.compress(content, mtime=0)
    raw = tmp_path / "raw"
    caught = one_line_error(lambda: download(raw, settings(server, parallel=1), release=LAST,
                                             datasets=["citations"]))
    name = released_shard(path.rsplit("/", 1)[-1])
    assert str(caught) == (f"citations file {name} ({server.url}/files/{path}): {words}, which "
                           "no retry changes; run again later (or report it to Semantic "
                           "Scholar)")
    assert [r["path"] for r in server.requests("file")].count(path) == 1
    assert not [p.name for p in (raw / "citations").iterdir() if name in p.name]  # nor .part
    entry = json.loads((raw / DOWNLOAD_MANIFEST).read_text())["datasets"]["citations"]
    assert name not in [f["name"] for f in entry["files"]] and entry["complete"] is False


def test_a_server_value_holding_the_key_is_refused_without_showing_it(server, tmp_path,
                                                                    caplog):
    """The values of the API's answers that a line shows or a file is named by: a release id,
    a file link's name, each holding the key, are refused in one line that, like the log and
    every file written, holds no 4 characters of the key in a row."""
    caplog.set_level(logging.DEBUG)
    lines = []
    for fault, words in (("release_id", "names release 'x<key>"),
                         ("file_name", "a link whose path holds the key (not shown)")):
        setattr(server.faults, fault, f"x{KEY}")
        caught = one_line_error(lambda: download(tmp_path / "raw", settings(server),
                                                 release=LAST, datasets=["papers"]))
        assert words in str(caught), caught
        lines.append(str(caught))
        setattr(server.faults, fault, None)
    pieces = {KEY[i:i + 4].lower() for i in range(len(KEY) - 3)}
    for text in (*lines, caplog.text, *(p.read_text(errors="replace")
                                        for p in tmp_path.rglob("*") if p.is_file())):
        assert not [piece for piece in pieces if piece in text.lower()], text
