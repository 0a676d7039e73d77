"""make download against a local Datasets API (tests/ingest/s2ag_server.py): the real client
code, only the host differs. Full download, resume after kill -9, an expired link, 429, a
truncated body, a damaged file, a wrong or missing key, the trial subset, and diffs applied ==
a fresh ingest of the newer release."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.core.files import write_json
from pipeline.core.inputs import Roots, changed, record
from pipeline.ingest import ingest
from pipeline.ingest.download import download
from pipeline.ingest.s2client import Settings, check_shard
from pipeline.layout import DOWNLOAD_MANIFEST, released_shard
from tests.conftest import CHILD_BOUND_S
from tests.ingest.s2ag_server import KEY, S2Server, build_releases

ROOT = Path(__file__).resolve().parents[2]
FIRST, MIDDLE, LAST = "2026-11-04", "2026-11-11", "2026-11-18"
RELEASES = build_releases()


@pytest.fixture
def server():
    with S2Server(RELEASES) as srv:
        yield srv


def settings(srv: S2Server, key: str = KEY, parallel: int = 3) -> Settings:
    return Settings(base_url=srv.url, key=key, parallel=parallel, retries=4, backoff=0.01)


def served(srv: S2Server, release: str, dataset: str) -> dict[str, str]:
    """local name -> sha256 of each file the server holds for a release's dataset."""
    return {released_shard(p.rsplit("/", 1)[-1]): hashlib.sha256(srv.files[p]).hexdigest()
            for p in srv.listing[(release, dataset)]}


def on_disk(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


def test_full_download_survives_429_truncation_damage_and_an_expired_link(server, tmp_path,
                                                                          caplog):
    caplog.set_level(logging.DEBUG)
    names = {d: [p.rsplit("/", 1)[-1] for p in server.listing[(LAST, d)]]
             for d in ("papers", "abstracts", "citations")}
    server.faults.rate_limit = 2  # the first two requests (API calls) answer 429
    server.faults.retry_after = "0.25"  # each asking for a wait of 0.25 s
    server.faults.truncate = {names["papers"][0]: 1}  # broken off halfway, once
    server.faults.corrupt = {names["abstracts"][1]: 1}  # damaged bytes, once
    server.faults.expire_next = 1  # the first file request finds its link expired
    raw = tmp_path / "raw"
    summary = download(raw, settings(server), release="latest")
    assert summary["release"] == LAST  # latest resolved to its date
    for dataset in ("papers", "abstracts", "citations"):
        assert on_disk(raw / dataset) == served(server, LAST, dataset)  # byte for byte
    manifest = json.loads((raw / DOWNLOAD_MANIFEST).read_text())
    assert manifest["release"] == LAST and manifest["requested_release"] == "latest"
    papers = manifest["datasets"]["papers"]
    assert papers["complete"] and papers["first"] is None and papers["listed"] == 3
    assert [f["name"] for f in papers["files"]] == list(served(server, LAST, "papers"))
    assert all(f["sha256"] == check_shard(raw / "papers" / f["name"])["sha256"]
               for f in papers["files"])
    assert sum(f["lines"] for f in papers["files"]) == len(RELEASES[LAST]["papers"])
    # 429s answered, then retried
    assert [r["status"] for r in server.log[:3]] == [429, 429, 200]
    # the truncated file went on with a range from where it broke
    tries = [r for r in server.requests("file") if r["path"].endswith(names["papers"][0])]
    assert tries[0]["range"] is None and tries[-1]["range"].startswith("bytes=")
    assert int(tries[-1]["range"][len("bytes="):-1]) > 0 and tries[-1]["status"] == 206
    # the damaged file was downloaded whole again
    damaged = [r for r in server.requests("file") if r["path"].endswith(names["abstracts"][1])]
    assert [r["status"] for r in damaged] == [200, 200]
    # the expired link: a 403, then the dataset's links asked for again
    assert [r["status"] for r in server.requests("file")].count(403) == 1
    listings = [r for r in server.requests("api") if "/dataset/" in r["path"]]
    assert len(listings) == 4
    # the key went as a header, and nowhere else
    assert {r["key"] for r in listings} == {KEY}
    assert {r["key"] for r in server.requests("file")} == {None}  # not to the file host
    text = (raw / DOWNLOAD_MANIFEST).read_text() + caplog.text
    assert KEY not in text and "Signature" not in text
    assert not list(raw.rglob(".*.part"))  # no partial file left


def test_a_rate_limited_file_waits_as_told_then_downloads(server, tmp_path):
    raw = tmp_path / "raw"
    server.faults.file_rate_limit = 2
    server.faults.retry_after = "0.25"
    started = time.monotonic()
    download(raw, settings(server, parallel=1), release=LAST, datasets=["citations"])
    assert time.monotonic() - started >= 2 * 0.25  # both waits as long as each 429 asked
    statuses = [r["status"] for r in server.requests("file")]
    assert statuses[:2] == [429, 429] and statuses.count(200) == 3
    assert on_disk(raw / "citations") == served(server, LAST, "citations")


def test_files_the_release_no_longer_lists_are_removed_only_if_ours(server, tmp_path):
    raw = tmp_path / "raw"
    download(raw, settings(server), release=LAST, datasets=["papers"])
    manifest = json.loads((raw / DOWNLOAD_MANIFEST).read_text())
    gone = raw / "papers" / "renamed-since.jsonl.gz"  # as if the release listed it before
    (raw / "papers" / manifest["datasets"]["papers"]["files"][0]["name"]).rename(gone)
    manifest["datasets"]["papers"]["files"][0]["name"] = gone.name
    manifest.pop("self_sha256")
    write_json(manifest, raw / DOWNLOAD_MANIFEST)
    download(raw, settings(server), release=LAST, datasets=["papers"])
    assert on_disk(raw / "papers") == served(server, LAST, "papers")  # ours: removed
    (raw / "papers" / "mine.jsonl.gz").write_bytes(b"")
    with pytest.raises(InputError, match="mine.jsonl.gz, which release .* does not list and "
                                         "make download did not write"):
        download(raw, settings(server), release=LAST, datasets=["papers"])
    assert (raw / "papers" / "mine.jsonl.gz").exists()  # never deleted


def test_a_damaged_manifest_is_one_line(server, tmp_path):
    """Without the release it holds (RELEASE=latest), a folder whose download.json is damaged
    is one line naming the release what is left of the file says; with it, the shards are
    verified again (tests/ingest/test_download_hostile.py)."""
    raw = tmp_path / "raw"
    download(raw, settings(server), release=LAST, datasets=["abstracts"])
    text = (raw / DOWNLOAD_MANIFEST).read_text()
    (raw / DOWNLOAD_MANIFEST).write_text(text.replace('"abstracts"', '"abstract"', 1))
    with pytest.raises(InputError, match="download.json is damaged, so which release .* "
                                         f"RELEASE={LAST} "):
        download(raw, settings(server), release="latest", datasets=["abstracts"])


def test_a_second_run_downloads_nothing(server, tmp_path):
    raw = tmp_path / "raw"
    download(raw, settings(server), release=LAST)
    before = len(server.requests("file"))
    again = download(raw, settings(server), release=LAST)
    assert len(server.requests("file")) == before and again["downloaded_bytes"] == 0


def test_a_missing_key_is_one_line(monkeypatch):
    monkeypatch.delenv("S2_API_KEY", raising=False)
    with pytest.raises(InputError, match="no Semantic Scholar API key: set S2_API_KEY"):
        Settings.from_environment()
    monkeypatch.setenv("S2_API_KEY", KEY)
    monkeypatch.setenv("S2_API_URL", "http://127.0.0.1:9/")
    assert Settings.from_environment().base_url == "http://127.0.0.1:9"
    assert KEY not in repr(Settings.from_environment())


def test_a_refused_key_is_one_line_that_never_shows_the_key(server, tmp_path):
    wrong = "wrong-key-123"
    with pytest.raises(InputError) as caught:
        download(tmp_path / "raw", settings(server, key=wrong), release=LAST)
    message = str(caught.value)
    assert "it answered 403 (Forbidden): check the key in S2_API_KEY" in message
    assert wrong not in message
    assert "\n" not in message
    assert not list((tmp_path / "raw").rglob("*.gz"))


def test_an_unknown_release_or_dataset_is_refused(server, tmp_path):
    with pytest.raises(InputError, match=f"has no release 2020-01-01: it lists 3 releases, "
                                         f"{FIRST} to {LAST}"):
        download(tmp_path / "raw", settings(server), release="2020-01-01")
    with pytest.raises(InputError, match="RELEASE=last-week: give a release date"):
        download(tmp_path / "raw", settings(server), release="last-week")
    with pytest.raises(InputError, match="has no dataset tldrs"):
        download(tmp_path / "raw", settings(server), datasets=["papers", "tldrs"])


def test_a_file_that_stays_damaged_is_an_error_naming_it(server, tmp_path):
    name = server.listing[(LAST, "citations")][2].rsplit("/", 1)[-1]
    server.faults.corrupt = {name: 5}
    with pytest.raises(InputError, match=f"citations file {released_shard(name)}.*downloaded "
                                         "whole 3 times, not a whole gzip stream"):
        download(tmp_path / "raw", settings(server), release=LAST)
    assert not (tmp_path / "raw" / "citations" / released_shard(name)).exists()


def test_server_errors_are_retried_then_reported(server, tmp_path):
    server.faults.server_errors = 2
    download(tmp_path / "raw", settings(server), release=LAST, datasets=["papers"])
    assert [r["status"] for r in server.log[:3]] == [503, 503, 200]
    server.faults.server_errors = 100
    with pytest.raises(InputError, match=r"it answered 503 after 4 retries \(5 attempts\): "
                       "check the server, then run the download again"):
        download(tmp_path / "raw2", settings(server), release=LAST, datasets=["papers"])


def test_trial_subset_then_the_rest_then_ingest(server, tmp_path):
    raw = tmp_path / "raw"
    trial = download(raw, settings(server), release=LAST, first=2)
    for dataset in ("papers", "abstracts", "citations"):
        assert list(on_disk(raw / dataset)) == list(served(server, LAST, dataset))[:2]
        assert trial["datasets"][dataset] | {"files": 2, "listed": 3, "complete": False} \
            == trial["datasets"][dataset]
    manifest = json.loads((raw / DOWNLOAD_MANIFEST).read_text())
    assert manifest["datasets"]["papers"]["first"] == 2
    small = ingest(raw, tmp_path / "trial", source="s2ag")  # the real pipeline on it
    assert 0 < small["counts"]["papers"] < len(RELEASES[LAST]["papers"])
    assert small["raw_origin"] == "trial"  # never compared with published numbers
    before = len(server.requests("file"))
    download(raw, settings(server), release=LAST)  # the rest: one more file per dataset
    assert len(server.requests("file")) - before == 3
    manifest = json.loads((raw / DOWNLOAD_MANIFEST).read_text())
    assert manifest["datasets"]["papers"]["complete"]
    assert manifest["datasets"]["papers"]["first"] is None
    assert ingest(raw, tmp_path / "trial", source="s2ag")["raw_origin"] == "release"
    with pytest.raises(InputError, match="a trial"):  # a trial is not updated
        trial_raw = tmp_path / "trial-raw"
        download(trial_raw, settings(server), release=FIRST, first=1)
        download(trial_raw, settings(server), release=LAST, update=True)


def test_a_folder_of_other_files_or_another_release_is_refused(server, tmp_path):
    raw = tmp_path / "raw"
    (raw / "papers").mkdir(parents=True)
    (raw / "papers" / "mine.jsonl.gz").write_bytes(b"")
    with pytest.raises(InputError, match="that make download did not write"):
        download(raw, settings(server), release=LAST)
    other = tmp_path / "other"
    download(other, settings(server), release=FIRST, datasets=["papers"])
    with pytest.raises(InputError, match=f"holds release {FIRST} of papers, not {LAST}: "
                                         "UPDATE=1 applies the diffs"):
        download(other, settings(server), release=LAST, datasets=["papers"])


def _sorted(path: Path, *keys: str) -> pl.DataFrame:
    return pl.read_parquet(path).sort(*keys)


def test_diffs_applied_equal_a_fresh_ingest_of_the_newer_release(server, tmp_path):
    """Release FIRST downloaded and ingested, then brought to LAST by two diff steps: the
    corpus equals a fresh download and ingest of LAST, and what was made from the old corpus
    files is stale by the rule of every changed input. (One worker: the shards rewritten by
    several processes are compared with one in the test below.)"""
    corpora = tmp_path / "corpora"
    raw = corpora / "old" / "s2ag"
    download(raw, settings(server, parallel=1), release=FIRST)
    old = ingest(raw, corpora / "old", source="s2ag")
    roots = Roots.of(corpora / "old")
    made_from = record(roots, [corpora / "old" / "papers.parquet",
                               corpora / "old" / "citations.parquet"])
    assert changed(roots, made_from) == []
    server.faults.expire_next = 1  # a diff file's link expires too
    seen = len(server.log)
    update = download(raw, settings(server, parallel=1), release=LAST, update=True)
    assert update["release"] == LAST and update["downloaded_bytes"] == 0
    assert [r["status"] for r in server.log[seen:]].count(403) == 1
    manifest = json.loads((raw / DOWNLOAD_MANIFEST).read_text())
    steps = manifest["datasets"]["papers"]["updates"]
    assert [(s["from"], s["to"]) for s in steps] == [(FIRST, MIDDLE), (MIDDLE, LAST)]
    assert all(s["records_removed"] > 0 and s["update_records"] > 0 for s in steps)
    assert manifest["datasets"]["citations"]["updated_from"] == FIRST
    assert not (raw / ".diffs").exists()  # the diff files, applied, are gone
    updated = ingest(raw, corpora / "old", source="s2ag")
    assert updated["counts"] != old["counts"]  # ingested again
    assert len(changed(roots, made_from)) == 2  # pools, embeddings, runs: stale
    fresh_raw = corpora / "fresh" / "s2ag"
    download(fresh_raw, settings(server, parallel=1), release=LAST)
    fresh = ingest(fresh_raw, corpora / "fresh", source="s2ag")
    assert updated["counts"] == fresh["counts"]
    assert fresh["counts"]["papers"] == len(RELEASES[LAST]["papers"])
    for name, keys in (("papers.parquet", ("corpusid",)),
                       ("citations.parquet", ("citing", "cited"))):
        mine = _sorted(corpora / "old" / name, *keys)
        theirs = _sorted(corpora / "fresh" / name, *keys)
        assert mine.equals(theirs), name
    # and applying again changes nothing (a rerun after a kill)
    again = download(raw, settings(server, parallel=1), release=LAST, update=True)
    assert again["downloaded_bytes"] == 0
    assert ingest(raw, corpora / "old", source="s2ag")["counts"] == fresh["counts"]


@pytest.mark.slow
def test_a_download_killed_with_sigkill_goes_on_where_it_stopped(tmp_path):
    with S2Server(build_releases(n_papers=4000)) as big:
        _kill_and_resume(big, tmp_path)


def _kill_and_resume(server: S2Server, tmp_path: Path) -> None:
    """make download killed with SIGKILL (make and the pipeline under it, as a batch system
    kills a job's process group), then make download again."""
    server.faults.throttle = 0.02  # about 200 KB/s: a file takes about a second
    (tmp_path / "installed").touch()
    env = {**os.environ, "MAKEFLAGS": "", "S2_API_URL": server.url, "S2_API_KEY": KEY}
    command = ["make", "--no-print-directory", "download", "CORPUS=big", f"RELEASE={LAST}",
               "DATASETS=papers", f"DATA={tmp_path / 'data'}", f"PY={sys.executable}",
               f"STAMP={tmp_path / 'installed'}"]
    raw = tmp_path / "data" / "corpora" / "big" / "s2ag"
    proc = subprocess.Popen([*command, "PARALLEL=1"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    partial = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and partial is None:
        found = [p for p in (raw / "papers").glob(".*.part") if p.stat().st_size > 8192] \
            if (raw / "papers").is_dir() else []
        partial = found[0] if found else None
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert partial is not None, "the download never started"
    kept = partial.stat().st_size
    assert kept > 0 and not list((raw / "papers").glob("*.jsonl.gz"))  # nothing half-named
    server.faults.throttle = 0
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={**env, "PIPELINE_PROGRESS_INTERVAL": "0"})
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err[-2000:]
    assert on_disk(raw / "papers") == served(server, LAST, "papers")
    ranges = [r["range"] for r in server.requests("file") if r["range"]]
    assert ranges and int(ranges[0][len("bytes="):-1]) >= kept
    assert KEY not in out + err and "Signature" not in out + err
    assert "next: make corpus CORPUS=big SOURCE=s2ag" in err
    assert "[download] 3/3 files (100.0%)" in err  # progress lines, in a log (no terminal)


@pytest.mark.slow
def test_make_download_trial_then_make_corpus(server, tmp_path):
    (tmp_path / "installed").touch()
    env = {**os.environ, "MAKEFLAGS": "", "S2_API_URL": server.url, "S2_API_KEY": KEY}
    common = [f"DATA={tmp_path / 'data'}", f"PY={sys.executable}",
              f"STAMP={tmp_path / 'installed'}"]

    def make(*args: str, key: str = KEY) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", *args, *common], cwd=ROOT,
                              capture_output=True, text=True, timeout=CHILD_BOUND_S,
                              env={**env, "S2_API_KEY": key})

    missing = make("download", "CORPUS=s2ag", "FIRST=1", key="")
    assert missing.returncode == 2
    lines = [x for x in missing.stderr.splitlines() if x.startswith("error")]
    assert len(lines) == 1 and "no Semantic Scholar API key: set S2_API_KEY" in lines[0]
    refused = make("download", "CORPUS=s2ag", "FIRST=1", key="not-the-key")
    assert refused.returncode != 0
    lines = [x for x in refused.stderr.splitlines() if x.startswith("error")]
    assert len(lines) == 1
    assert "it answered 403 (Forbidden): check the key in S2_API_KEY" in lines[0]
    assert "not-the-key" not in refused.stdout + refused.stderr
    done = make("download", "CORPUS=s2ag", "FIRST=2", "PARALLEL=2")
    assert done.returncode == 0, done.stderr[-2000:]
    raw = tmp_path / "data" / "corpora" / "s2ag" / "s2ag"
    assert len(list((raw / "citations").glob("*.jsonl.gz"))) == 2
    corpus = make("corpus", "CORPUS=s2ag")
    assert corpus.returncode == 0, corpus.stderr[-2000:]
    manifest = json.loads((raw.parent / "manifest.json").read_text())
    assert manifest["ingest"]["parameters"]["source"] == "s2ag"
    assert manifest["ingest"]["counts"]["papers"] > 0


@pytest.mark.slow
def test_make_download_with_faults_then_update_equals_a_fresh_download(server, tmp_path):
    """End to end through make: a full download meeting a 429, a body cut short and an
    expired link; make corpus; a newer release refused without UPDATE=1, then applied by its
    diffs; make corpus again equals make download + make corpus of the newer release."""
    (tmp_path / "installed").touch()
    env = {**os.environ, "MAKEFLAGS": "", "S2_API_URL": server.url, "S2_API_KEY": KEY}

    def make(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", *args,
                               f"DATA={tmp_path / 'data'}", f"PY={sys.executable}",
                               f"STAMP={tmp_path / 'installed'}"], cwd=ROOT,
                              capture_output=True, text=True, timeout=CHILD_BOUND_S, env=env)

    first_papers = server.listing[(FIRST, "papers")][0].rsplit("/", 1)[-1]
    server.faults.rate_limit = 1
    server.faults.truncate = {first_papers: 1}
    server.faults.expire_next = 1
    for args in (("download", "CORPUS=s2ag", f"RELEASE={FIRST}"), ("corpus", "CORPUS=s2ag")):
        done = make(*args)
        assert done.returncode == 0, done.stderr[-2000:]
    statuses = [r["status"] for r in server.log]
    assert 429 in statuses and 403 in statuses and 206 in statuses
    corpora = tmp_path / "data" / "corpora"
    assert on_disk(corpora / "s2ag" / "s2ag" / "papers") == served(server, FIRST, "papers")
    refused = make("download", "CORPUS=s2ag")
    assert refused.returncode == 2 and "UPDATE=1 applies the diffs" in refused.stderr
    for args in (("download", "CORPUS=s2ag", "UPDATE=1"), ("corpus", "CORPUS=s2ag"),
                 ("download", "CORPUS=fresh"), ("corpus", "CORPUS=fresh", "SOURCE=s2ag")):
        done = make(*args)
        assert done.returncode == 0, (args, done.stderr[-2000:])
    updated, fresh = (json.loads((corpora / c / "manifest.json").read_text())["ingest"]
                      for c in ("s2ag", "fresh"))
    assert updated["counts"] == fresh["counts"]
    assert updated["raw_origin"] == fresh["raw_origin"] == "release"
    for name, keys in (("papers.parquet", ("corpusid",)),
                       ("citations.parquet", ("citing", "cited")),
                       ("prefiltered.parquet", ("corpusid",))):
        assert _sorted(corpora / "s2ag" / name, *keys).equals(
            _sorted(corpora / "fresh" / name, *keys)), name


@pytest.mark.slow
def test_an_update_killed_after_its_folder_was_replaced_is_finished_by_running_again(
        server, tmp_path, monkeypatch):
    """The step's new papers folder is in place but download.json still names the old
    release (killed between the two): the same command finishes it, to the same files."""
    from pipeline.ingest import s2client as module

    raw = tmp_path / "raw"
    download(raw, settings(server), release=FIRST, datasets=["papers"])
    real_save = module.Manifest.save
    calls = {"n": 0}

    def killed_once(self):
        if self.data["datasets"]["papers"].get("updates") and not calls["n"]:
            calls["n"] += 1
            raise KeyboardInterrupt  # as a kill would, after the folder was replaced
        real_save(self)

    monkeypatch.setattr(module.Manifest, "save", killed_once)
    with pytest.raises(KeyboardInterrupt):
        download(raw, settings(server), release=MIDDLE, datasets=["papers"], update=True)
    assert json.loads((raw / DOWNLOAD_MANIFEST).read_text())["datasets"]["papers"][
        "release"] == FIRST
    assert any(p.name.startswith("update-") for p in (raw / "papers").iterdir())
    monkeypatch.setattr(module.Manifest, "save", real_save)
    download(raw, settings(server), release=MIDDLE, datasets=["papers"], update=True)
    once = tmp_path / "once"  # and with one worker process where the others had three
    download(once, settings(server, parallel=1), release=FIRST, datasets=["papers"])
    download(once, settings(server, parallel=1), release=MIDDLE, datasets=["papers"],
             update=True)
    assert on_disk(raw / "papers") == on_disk(once / "papers")  # byte for byte


@pytest.mark.slow
def test_after_an_update_make_verify_names_the_pools_of_the_old_corpus_stale(server, tmp_path):
    """The existing rule, unchanged: a pool records the sha256 of the corpus files it was
    drawn from; the update changes them, so verify names the pool stale (and its repair), and
    an S2AG corpus's raw shards (`papers/<file>`) are not taken for data-root inputs."""
    import pipeline

    data = pipeline.Data(tmp_path / "data")
    raw = data.corpus("s2ag") / "s2ag"
    download(raw, settings(server), release=FIRST)
    pipeline.build_corpus(data, "s2ag", source="s2ag")
    pool = pipeline.build_pool(data, "s2ag", size=150, queries=5)
    assert pipeline.verify_data(data) == []
    download(raw, settings(server), release=LAST, update=True)
    pipeline.build_corpus(data, "s2ag", source="s2ag")
    problems = pipeline.verify_data(data)
    assert len(problems) == 1 and problems[0].startswith("STALE")
    assert f"pools/{pool}/manifest.json: its input corpora/s2ag/prefiltered.parquet changed " \
           "since; repair: make pools CORPUS=s2ag" in problems[0]


def test_the_first_error_stops_the_other_files_and_keeps_their_bytes(tmp_path):
    with S2Server(build_releases(n_papers=4000)) as big:
        big.faults.throttle = 0.02  # each papers file takes a second or more
        gone = big.listing[(LAST, "papers")][2]
        del big.files[gone]  # a 404: the release withdrawn under our feet
        raw = tmp_path / "raw"
        with pytest.raises(InputError, match=f"papers file {released_shard(gone.rsplit('/')[-1])}"
                                             " is gone from the file host \\(HTTP 404"):
            download(raw, settings(big, parallel=3), release=LAST, datasets=["papers"])
        assert not list((raw / "papers").glob("*.jsonl.gz"))  # the other two: stopped
        kept = [p for p in (raw / "papers").glob(".*.part") if p.stat().st_size > 0]
        assert kept  # their bytes kept (a thread the error beat to the start has none)
        big.faults.throttle = 0
        big.files[gone] = gz_of(big, LAST)
        download(raw, settings(big), release=LAST, datasets=["papers"])  # goes on from there
        assert on_disk(raw / "papers") == served(big, LAST, "papers")
        ranged = [r for r in big.requests("file") if r["range"]]
        assert len(ranged) == len(kept)  # each went on from its partial


def gz_of(srv: S2Server, release: str) -> bytes:
    """The bytes the server held for the third papers file (made again from its records)."""
    from tests.ingest.s2ag_server import gz, split

    return gz(split(srv.releases[release]["papers"], 3)[2])


def test_paper_ids_downloaded_turn_specter_shas_into_corpus_ids(tmp_path):
    """`make download DATASETS=paper-ids` fetches S2AG's SHA -> CorpusID mapping, which
    `make training-ids` reads to turn SPECTER's training list into an EXCLUDE list."""
    from pipeline.ingest.training_ids import convert

    shas = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(6)]
    releases = build_releases(ids=(LAST,), n_papers=20)
    releases[LAST]["paper-ids"] = [{"sha": sha, "corpusid": 500 + i, "primary": True}
                                   for i, sha in enumerate(shas[:5])]
    with S2Server(releases, parts=2) as srv:
        done = download(tmp_path / "raw", settings(srv), release=LAST, datasets=["paper-ids"])
    assert done["release"] == LAST and (tmp_path / "raw" / "paper-ids").is_dir()
    (tmp_path / "train.txt").write_text("".join(f"{sha}\n" for sha in shas))  # SPECTER's
    counts = convert(tmp_path / "train.txt", tmp_path / "raw" / "paper-ids", tmp_path / "x.txt")
    assert counts == {"shas": 6, "corpus_ids": 5, "shas_not_found": 1}
    assert (tmp_path / "x.txt").read_text() == "".join(f"{500 + i}\n" for i in range(5))
