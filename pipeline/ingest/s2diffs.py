"""make download UPDATE=1: a downloaded S2AG release brought to a newer one by the API's diffs.

The API gives, for each release step between two releases (`from_release` -> `to_release`),
two lists of files per dataset: `update_files`, whole records to insert or to put in place of
the record with the same key, and `delete_files`, records naming keys to remove. The key of a
dataset is a registry (KEYS): `corpusid` for papers and abstracts, `citationid` for citations.

A step is applied to a dataset folder as a whole: every shard is written again without the
records whose key an update or delete file names (a shard that loses none is kept as it is,
by a hard link), and the update files join the folder as shards of their own. The new folder
replaces the old one in one rename, then download.json records the new release and the files'
checksums. Applying a step twice gives the same folder, so a kill at any point is repaired by
running again. The corpus manifest records the raw shards' checksums, so the next `make corpus`
ingests again, and pools, embeddings and runs made from the old corpus are stale by the rule
every changed input follows (pipeline/core/inputs.py).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from isal import igzip

from pipeline.core.atomic import atomic_dir
from pipeline.core.errors import InputError
from pipeline.core.secrets import Secrets
from pipeline.ingest.merge import in_order
from pipeline.ingest.s2client import (
    Client,
    Links,
    Manifest,
    Meter,
    check_shard,
    checked_release,
    fetch_file,
    iter_records,
)
from pipeline.ingest.shards import BadLine, list_shards, read_id
from pipeline.layout import DIFF_KEYS, DIFF_SHARD, DOWNLOAD_DIFFS

log = logging.getLogger(__name__)

KEYS = {"papers": "corpusid", "abstracts": "corpusid", "citations": "citationid"}
BLOCK = 65_536  # lines of a shard filtered at a time
LEVEL = 3  # gzip level of a rewritten shard (ISA-L: 0-3)


def update_datasets(client: Client, raw_dir: Path, manifest: Manifest, datasets: list[str],
                    end: str) -> None:
    """Bring each of `datasets` (downloaded whole, at an older release) to release `end`."""
    for dataset in datasets:
        entry = manifest.datasets[dataset]
        start = str(entry["release"])
        if not entry.get("complete"):
            raise InputError(f"{raw_dir}/{dataset} holds only the first {entry.get('first')} "
                             f"files of release {start} (a trial): diffs apply to a whole "
                             "release; download the trial again into a new folder instead")
        if dataset not in KEYS:
            raise InputError(f"DATASETS={dataset}: no update rule for it (known: "
                             f"{', '.join(KEYS)}); download it whole into another folder")
        if end < start:
            raise InputError(f"{raw_dir}/{dataset} is at release {start}, newer than {end}")
        steps = client.diffs(start, end, dataset)
        _check_chain(steps, start, end, dataset, client.secrets)
        for index, step in enumerate(steps):
            apply_step(client, raw_dir, manifest, dataset, start, end, index, step)


def _check_chain(steps: list[dict[str, Any]], start: str, end: str, dataset: str,
                 secrets: Secrets) -> None:
    """The steps lead from start to end, one after the other, each to a later release; every
    release they name is a date (it names a folder of the step's files: nothing else is
    taken, so no answer makes a path outside the raw folder; a line shows what it names
    redacted of the API's `secrets`)."""
    what = f"diffs of {dataset} from {start} to {end}"
    at = start
    for step in steps:
        if not isinstance(step, dict) or not isinstance(step.get("update_files"), list) \
                or not isinstance(step.get("delete_files"), list):
            raise InputError(f"{what}: the API's answer holds a step without its lists of "
                             "files; run again later")
        source = checked_release(step.get("from_release"), what, secrets)
        target = checked_release(step.get("to_release"), what, secrets)
        if source != at or target <= source:
            raise InputError(f"{what}: the API's steps do not lead on from {at}; run again "
                             "later")
        at = target
    if at != end:
        raise InputError(f"diffs of {dataset} from {start} to {end}: the API's steps end at "
                         f"{at}; run again later")


def apply_step(client: Client, raw_dir: Path, manifest: Manifest, dataset: str, start: str,
               end: str, index: int, step: dict[str, Any]) -> dict[str, int]:
    """Download one step's files, then apply them to raw_dir/<dataset> (see the module)."""
    what = f"diffs of {dataset} from {start} to {end}"
    source = checked_release(step.get("from_release"), what, client.secrets)
    target = checked_release(step.get("to_release"), what, client.secrets)
    entry = manifest.datasets[dataset]
    if entry["release"] != source:  # applied already (the run was killed after it)
        return {}
    staging = raw_dir / DOWNLOAD_DIFFS / f"{source}_{target}" / dataset
    what = f"{dataset} diff {source}->{target}"
    files: dict[str, list[Path]] = {}
    for kind in ("update_files", "delete_files"):
        def listing(kind: str = kind) -> list[str]:
            return client.diffs(start, end, dataset)[index][kind]
        links = Links(listing, f"{what} {kind}", client.secrets)
        folder = staging / kind
        folder.mkdir(parents=True, exist_ok=True)
        meter = Meter()
        files[kind] = []
        for name in links.names():
            path = folder / name
            if not path.is_file():
                fetch_file(client, links, name, folder, meter, what, records=False)
            files[kind].append(path)
    log.info("%s: %d update and %d delete files", what, len(files["update_files"]),
             len(files["delete_files"]))
    keys_file = staging / DIFF_KEYS
    np.save(keys_file, _keys(files["update_files"] + files["delete_files"], KEYS[dataset]))
    counts = _rewrite(raw_dir / dataset, files["update_files"], keys_file, KEYS[dataset],
                      target, client.settings.parallel)
    # a shard the step left without a record (all of them deleted) is one still
    new_files = [{"name": p.name, **check_shard(p, records=False)}
                 for p in list_shards(raw_dir / dataset)]
    entry.update(release=target, files=new_files, listed=len(new_files), complete=True,
                 updated_from=entry.get("updated_from") or source)
    entry.setdefault("updates", []).append({"from": source, "to": target, **counts})
    manifest.save()
    shutil.rmtree(staging)  # the step's files, which this command downloaded
    for folder in (staging.parent, staging.parent.parent):  # and its folders, once empty
        if not any(folder.iterdir()):
            folder.rmdir()
    log.info("%s applied: %s", what, ", ".join(f"{k}={v}" for k, v in counts.items()))
    return counts


def _key_of(line: bytes, key: str) -> int | None:
    """A record's key as ingest reads the id (an integer or its digits), else None."""
    try:
        return read_id(orjson.loads(line), key)
    except (orjson.JSONDecodeError, AttributeError, BadLine):  # AttributeError: not an object
        return None


def _keys(paths: list[Path], key: str) -> np.ndarray:
    """The sorted distinct keys named by the step's update and delete files."""
    arrays = [np.empty(0, dtype=np.int64)]
    for path in paths:  # a file's keys as Python ints at a time, then as an array
        found: list[int] = []
        for number, line in iter_records(path):
            if not line.strip():
                continue
            value = _key_of(line, key)
            if value is None:
                raise InputError(f"{path}:{number}: a diff record without an integer {key}; "
                                 "remove the folder .diffs/ beside it and run make download "
                                 "UPDATE=1 again")
            found.append(value)
        arrays.append(np.unique(np.asarray(found, dtype=np.int64)))
    return np.unique(np.concatenate(arrays))


def _rewrite(folder: Path, updates: list[Path], keys_file: Path, key: str, target: str,
             workers: int) -> dict[str, int]:
    """The dataset folder again: each shard without the records of the keys in `keys_file`
    (hard-linked when it loses none; `workers` processes, one shard each, the output the same
    for any number), then the update files as shards named after the target release."""
    counts = {"records_removed": 0, "unkeyed_kept": 0, "shards_rewritten": 0,
              "update_records": 0}
    names = {DIFF_SHARD.format(target, k) for k in range(len(updates))}
    with atomic_dir(folder) as new:
        shards = [s for s in list_shards(folder) if s.name not in names]  # (names: this
        # step's own update shards, from a killed run: written again below)
        tasks = [(shard, new / shard.name, keys_file, key) for shard in shards]
        for shard, (removed, unkeyed) in zip(shards, in_order(
                _filter_shard, tasks, workers, f"update {folder.name}", "shards"), strict=True):
            counts["unkeyed_kept"] += unkeyed
            if removed:
                counts["records_removed"] += removed
                counts["shards_rewritten"] += 1
            else:
                (new / shard.name).unlink()
                _link(shard, new / shard.name)
        for k, path in enumerate(updates):
            _link(path, new / DIFF_SHARD.format(target, k))
            counts["update_records"] += sum(1 for _, line in iter_records(path) if line.strip())
    return counts


def _link(source: Path, target: Path) -> None:
    """A hard link (no copy of a shard that did not change), or a copy where the file system
    has none."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _filter_shard(task: tuple[Path, Path, Path, str]) -> tuple[int, int]:
    """One shard filtered in a worker process (the keys memory-mapped, shared by all):
    (records left out, lines without a key kept)."""
    shard, out, keys_file, key = task
    counts = {"unkeyed_kept": 0}
    removed = _filter(shard, out, np.load(keys_file, mmap_mode="r"), key, counts)
    return removed, counts["unkeyed_kept"]


def _filter(shard: Path, out: Path, keys: np.ndarray, key: str, counts: dict[str, int]) -> int:
    """Write `shard` to `out` without the lines whose key is in `keys`; how many were left out.
    A line without a key (bad JSON, say) is kept for ingest to quarantine, and counted."""
    removed = 0
    with igzip.IGzipFile(out, "wb", compresslevel=LEVEL, mtime=0) as handle:
        block: list[bytes] = []

        def flush() -> int:
            values = np.array([-1 if v is None else v for v in
                               (_key_of(line, key) for line in block)], dtype=np.int64)
            counts["unkeyed_kept"] += int((values == -1).sum())
            at = np.searchsorted(keys, values)
            hit = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == values) \
                & (values != -1) if len(keys) else np.zeros(len(values), dtype=bool)
            handle.write(b"".join(line for line, drop in zip(block, hit, strict=True)
                                  if not drop))
            block.clear()
            return int(hit.sum())

        for _, line in iter_records(shard):
            block.append(line if line.endswith(b"\n") else line + b"\n")
            if len(block) >= BLOCK:
                removed += flush()
        if block:
            removed += flush()
    return removed

