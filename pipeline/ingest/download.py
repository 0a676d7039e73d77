"""make download: the S2AG datasets (papers, abstracts, citations) from the Semantic Scholar
Datasets API, into the raw folder `make corpus SOURCE=s2ag` reads (corpora/<corpus>/s2ag).
The API's client (its protocol, the HTTP calls, retries and the checks of its answers) and
download.json are pipeline.ingest.s2client; the update by diffs is pipeline.ingest.s2diffs.

A file is written to a hidden partial file and continued with an HTTP range after any break
(a dropped connection, a kill -9: the next run goes on from the partial's size). It gets its
final name only once whole: the size the server announced, its gzip stream read to the end,
holding a record at least and no line longer than any record (a dataset is complete, in
download.json, only when each file it lists is so).
An expired link (403/400 from the file host) is asked for again; 429 and 5xx answers and
broken connections are retried with exponential backoff (Retry-After honoured), each retry
logged, a bounded number of times (and an API call for a bounded time by the wall clock; a
file's attempt at a least pace, core/http.Stall): a try counts as progress only when a file's
bytes go further than they ever did (by a window's bytes, for an attempt that stalled). A
bounded number of files download at once (threads: the work is waiting on the network); one
command at a time downloads into a folder (a lock on its download.json).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from pipeline.core.checksums import file_problem
from pipeline.core.errors import InputError
from pipeline.core.locks import file_lock
from pipeline.core.logs import progress
from pipeline.core.secrets import redacted
from pipeline.corpus.manifest import what_is_left
from pipeline.ingest.s2client import (
    LATEST,
    Client,
    Links,
    Manifest,
    Meter,
    Settings,
    Stopped,
    check_shard,
    checked_datasets,
    fetch_file,
)
from pipeline.ingest.s2diffs import update_datasets
from pipeline.ingest.shards import S2AG_DATASETS, list_shards
from pipeline.layout import DOWNLOAD_MANIFEST, S2_DATASET, S2_RELEASE

log = logging.getLogger(__name__)


def resolve(client: Client, release: str) -> dict[str, Any]:
    """The release's description (its date as `release_id`, its datasets), from `latest` or
    a date the API lists."""
    if release != LATEST and not S2_RELEASE.fullmatch(release):
        raise InputError(f"RELEASE={release}: give a release date such as 2026-11-18, or "
                         "latest")
    if release != LATEST:
        known = client.releases()
        if release not in known:
            raise InputError(f"the Semantic Scholar Datasets API has no release {release}: "
                             f"it lists {len(known)} releases"
                             + (f", {known[0]} to {known[-1]}, the latest three "
                                f"{', '.join(known[-3:])}" if known else "")
                             + "; give one of them as RELEASE, or latest")
    return client.release(release)


def _check_folder(raw_dir: Path, manifest: Manifest, release: str, datasets: list[str],
                  update: bool) -> None:
    """Refuse a folder holding shards that are not ours, or another release (without update)."""
    if not manifest.data:
        theirs = [d for d in S2AG_DATASETS if list_shards(raw_dir / d)]
        if theirs:
            raise InputError(f"{raw_dir} holds {'/'.join(theirs)} shards that make download "
                             f"did not write (no {DOWNLOAD_MANIFEST}); download into another "
                             "folder (another CORPUS, or RAW=)")
        return
    held = {d: manifest.datasets[d].get("release") for d in datasets if d in manifest.datasets}
    other = {d: r for d, r in held.items() if r != release}
    if other and not update:
        first = sorted(other)[0]
        raise InputError(f"{raw_dir} holds release {other[first]} of {first}, not {release}: "
                         f"UPDATE=1 applies the diffs from {other[first]} to {release}, or "
                         "download into another folder (another CORPUS, or RAW=)")


def download(raw_dir: Path, settings: Settings, release: str = LATEST,
             datasets: list[str] | None = None, first: int | None = None,
             update: bool = False) -> dict[str, Any]:
    """Download (or finish downloading) `datasets` of `release` into raw_dir/<dataset>/;
    `first`: only each dataset's first files (a trial); `update`: a folder holding an older
    release is brought to this one by the API's diffs (pipeline.ingest.s2diffs). The summary,
    logged: release, files and bytes per dataset. One command at a time works on a folder (a
    lock on its download.json); a second waits, then finds the files the first one fetched."""
    datasets = checked_datasets(S2AG_DATASETS if datasets is None else datasets)
    client = Client(settings)
    info = resolve(client, release)
    resolved = str(info["release_id"])
    offered = [str(d.get("name")) for d in info.get("datasets", []) if isinstance(d, dict)]
    missing = [d for d in datasets if d not in offered]
    if missing:
        raise InputError(f"release {resolved} has no dataset {', '.join(missing)}: "
                         "DATASETS is among "
                         + redacted(", ".join(o for o in offered if S2_DATASET.fullmatch(o)),
                                    client.secrets))
    raw_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(raw_dir / DOWNLOAD_MANIFEST, waiting=lambda: log.info(
            "%s: another make download is writing into it; waiting for it to finish",
            raw_dir)):
        summary = _download(client, raw_dir, release, resolved, datasets, first, update)
    for name, got in summary["datasets"].items():
        log.info("%s %s: %d of %d files, %.2f GB%s", name, summary["release"], got["files"],
                 got["listed"], got["bytes"] / 1e9, "" if got["complete"] else " (a trial)")
    return summary


def _download(client: Client, raw_dir: Path, release: str, resolved: str, datasets: list[str],
              first: int | None, update: bool) -> dict[str, Any]:
    """download(), under the folder's lock."""
    settings = client.settings
    manifest = Manifest(raw_dir)
    if manifest.damaged:
        left = what_is_left(raw_dir).get("release")
        if release == LATEST:
            said = f"{left} (what is left of the file says so)" if left else "<its date>"
            raise InputError(f"{manifest.path} is damaged, so which release {raw_dir} holds "
                             f"is unknown: give it as RELEASE={said}, "
                             "and make download verifies every shard against that release's "
                             "list and fetches only what is missing or damaged; or download "
                             "into another folder (another CORPUS, or RAW=)")
        log.warning("%s is damaged: every shard of %s is verified again against release %s "
                    "(its gzip stream read to the end), and only what is missing or damaged "
                    "is fetched", manifest.path, raw_dir, resolved)
    else:
        _check_folder(raw_dir, manifest, resolved, datasets, update)
    if update:
        stale = [d for d in datasets if d in manifest.datasets
                 and manifest.datasets[d].get("release") != resolved]
        if stale:
            update_datasets(client, raw_dir, manifest, stale, resolved)
    manifest.data["release"] = resolved
    manifest.data["requested_release"] = release
    manifest.data["api"] = settings.base_url
    summary: dict[str, Any] = {"release": resolved, "datasets": {}}
    plans: list[tuple[str, Links, list[str]]] = []
    for dataset in datasets:
        links = Links(lambda d=dataset: client.file_links(resolved, d),
                      f"{dataset} {resolved}", client.secrets)
        names = links.names()
        wanted = names[:first] if first else names
        entry = manifest.datasets.setdefault(dataset, {"files": []})
        if entry.get("release") not in (None, resolved):
            raise InputError(f"{raw_dir}/{dataset} is at release {entry.get('release')}, not "
                             f"{resolved}; UPDATE=1 brings it there")
        entry.update(release=resolved, listed=len(names), first=first,
                     complete=_complete(entry, manifest.files(dataset), names))
        if entry.get("updated_from"):
            wanted = []  # its files are the older release's with the diffs applied
        plans.append((dataset, links, wanted))
    manifest.save()
    meter = Meter()
    jobs: list[tuple[str, Links, str, list[str]]] = []
    for dataset, links, wanted in plans:
        folder = raw_dir / dataset
        folder.mkdir(exist_ok=True)
        if not manifest.datasets[dataset].get("updated_from"):
            _drop_unlisted(folder, manifest, dataset, links.names())
        else:
            _check_updated(folder, manifest, dataset)
        have = manifest.files(dataset)
        for name in wanted:
            path = folder / name
            done = have.get(name)
            if done and path.is_file():
                problem = file_problem(path, done, deep=False)  # sha256, stat-cached
                if problem is None:
                    continue
                log.warning("%s/%s: %s; downloading it again", dataset, name,
                            problem.replace("manifest", DOWNLOAD_MANIFEST))
                path.unlink()  # ours: download.json records it
            elif path.is_file():  # written whole, killed before it was recorded: checked again
                try:
                    manifest.add_file(dataset, {"name": name, **check_shard(path)}, links.names())
                    continue
                except ValueError:
                    log.warning("%s/%s: damaged; downloading it again", dataset, name)
                    path.unlink()
            jobs.append((dataset, links, name, links.names()))
    total = sum(len(w) for _, _, w in plans)
    log.info("release %s: %d files of %s to download (%d already here)%s", resolved,
             len(jobs), ", ".join(datasets), total - len(jobs),
             f", the first {first} of each dataset" if first else "")
    _run_jobs(client, raw_dir, manifest, jobs, meter, settings.parallel)
    for dataset, links, _ in plans:
        files = manifest.files(dataset)
        entry = manifest.datasets[dataset]
        entry["complete"] = _complete(entry, files, links.names())
        entry["first"] = None if entry["complete"] else first
        summary["datasets"][dataset] = {
            "files": len(files), "bytes": sum(f["bytes"] for f in files.values()),
            "listed": entry["listed"], "complete": entry["complete"]}
    manifest.save()
    summary["downloaded_bytes"] = meter.done
    return summary


def _complete(entry: dict[str, Any], files: dict[str, Any], listed: list[str]) -> bool:
    """Whether a dataset's download is whole: brought forward by diffs, or holding a verified
    record (bytes, sha256, lines, one record at least) of every file the release lists. Said
    so in download.json only then: a run stopped by an error leaves it false."""
    return bool(entry.get("updated_from")) or all(name in files for name in listed)


def _check_updated(folder: Path, manifest: Manifest, dataset: str) -> None:
    """A dataset brought forward by diffs holds files no release lists, so none can be fetched
    again: one whose bytes are wrong is refused, naming what repairs it."""
    entry = manifest.datasets[dataset]
    for record in entry.get("files", []):
        problem = file_problem(folder / record["name"], record, deep=False)
        if problem:
            why = problem.replace("manifest", DOWNLOAD_MANIFEST)
            raise InputError(f"{folder / record['name']}: {why}; "
                             f"this dataset was brought to release {entry.get('release')} by "
                             "the API's diffs, so its files cannot be fetched again one by "
                             "one: download that release into another folder (another "
                             "CORPUS, or RAW=)")


def _drop_unlisted(folder: Path, manifest: Manifest, dataset: str, listed: list[str]) -> None:
    """Shards of this folder that the release no longer lists (it was published again under
    other file names): removed when this command wrote them (download.json records them),
    else an error, so that no record is read twice and nothing of the user's is deleted."""
    ours = manifest.files(dataset)
    extra = [p for p in list_shards(folder) if p.name not in listed]
    foreign = [p.name for p in extra if p.name not in ours]
    if foreign:
        raise InputError(f"{folder} holds {', '.join(foreign[:3])}, which release "
                         f"{manifest.datasets[dataset]['release']} does not list and make "
                         "download did not write; move it away, then run again")
    for path in extra:
        log.warning("%s/%s: no longer listed by the release; removed", dataset, path.name)
        path.unlink()
    if extra:
        with manifest.lock:
            manifest.datasets[dataset]["files"] = [
                f for f in manifest.datasets[dataset]["files"] if f["name"] in listed]
        manifest.save()


def _run_jobs(client: Client, raw_dir: Path, manifest: Manifest,
              jobs: list[tuple[str, Links, str, list[str]]], meter: Meter,
              parallel: int) -> None:
    """The files, `parallel` at a time, with a progress line every interval (files done,
    bytes, rate); the first error stops the rest (their partial files are kept)."""
    if not jobs:
        return
    stop = threading.Event()
    start = time.monotonic()
    with progress(len(jobs), "download", unit="files") as bar:
        bar_lock = threading.Lock()

        def tick(n: int) -> None:
            with bar_lock:
                seconds = max(time.monotonic() - start, 1e-9)
                bar.set_postfix(GB=f"{meter.done / 1e9:.2f}",
                                MBps=f"{meter.done / 1e6 / seconds:.1f}")
                bar.update(n)

        def one(job: tuple[str, Links, str, list[str]]) -> None:
            dataset, links, name, order = job
            if stop.is_set():
                return
            try:
                record = fetch_file(client, links, name, raw_dir / dataset, meter, dataset,
                                    stop)
            except Stopped:
                return
            manifest.add_file(dataset, record, order)
            log.debug("%s/%s: %d bytes, sha256 %s", dataset, name, record["bytes"],
                      record["sha256"])
            tick(1)

        def heartbeat() -> None:
            while not stop.wait(1.0):
                tick(0)

        beat = threading.Thread(target=heartbeat, daemon=True)
        beat.start()
        try:
            with ThreadPoolExecutor(max_workers=min(parallel, len(jobs))) as pool:
                futures = [pool.submit(one, job) for job in jobs]
                try:  # the first error, as soon as it happens, stops the others
                    wait(futures, return_when=FIRST_EXCEPTION)
                    failed = next((f for f in futures if f.done() and f.exception()), None)
                    if failed is not None:
                        raise failed.exception()  # type: ignore[misc]
                except BaseException:
                    stop.set()
                    raise
        finally:
            stop.set()
            beat.join()
