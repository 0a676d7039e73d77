"""The ingest stage (see the package's docstring): raw shards read in parallel, merged into
the corpus files, or nothing done when the corpus is current (`ingest_is_current`)."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from pathlib import Path

from pipeline.core.atomic import atomic_path, disk_errors, scratch_dir
from pipeline.core.checksums import fingerprints, outputs_intact, sha256_file
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.core.locks import file_lock
from pipeline.core.manifests import manifest
from pipeline.corpus.files import INGEST_COUNTS
from pipeline.corpus.manifest import corpus_section, update_corpus_manifest
from pipeline.ingest.shards import add_counts, check_quarantined, per_dataset, quarantine_line
from pipeline.layout import (
    CITATIONS,
    DOWNLOAD_MANIFEST,
    MANIFEST,
    PAPERS,
    QUARANTINE,
    lines_file,
)
from pipeline.readers import reader

log = logging.getLogger(__name__)


def ingest(raw_dir: Path, corpus_dir: Path, strict: bool = False, workers: int = 1,
           source: str = "s2orc", fos_source: str = "external") -> dict:
    """Ingest under the corpus's lock: two ingests of one corpus run in turn. `source` names
    the reader (pipeline/readers.py)."""
    reader(source)  # an unknown source is refused before the lock
    if not corpus_section(corpus_dir, "ingest"):  # a new corpus: no shards, nothing made
        raw_shards(raw_dir, source, corpus_dir.name)
    with file_lock(corpus_dir):  # one corpus stage at a time
        current = ingest_is_current(raw_dir, corpus_dir, strict, source, fos_source)
        if current is not None:
            log.info("[ingest] up to date (same raw shards, settings and outputs)")
            return current
        return _ingest(raw_dir, corpus_dir, strict, workers, source, fos_source)


def raw_shards(raw_dir: Path, source: str, corpus: str) -> tuple[Path, list[Path]]:
    """The folder shard names are relative to, and the raw shards of `raw_dir`; a folder that
    does not exist is one line saying how it is made (`made_by`)."""
    if not raw_dir.exists():
        raise InputError(f"{raw_dir} does not exist: {made_by(source, corpus)}")
    return reader(source).raw_shards(raw_dir)


def made_by(source: str, corpus: str) -> str:
    """How the raw folder of `corpus` is made, for `source`, in words (its reader's MADE_BY)."""
    return reader(source).MADE_BY.format(corpus=corpus)


def _settings(source: str, fos_source: str) -> dict:
    """The reader's own options among the ingest's (S2AG: which field labels count)."""
    return {name: value for name, value in {"fos_source": fos_source}.items()
            if name in reader(source).SETTINGS}


def _raw_fingerprint(path: Path) -> dict:
    """A raw shard's size, sha256 and the stat that vouches for it: its mtime and its ctime
    (bytes rewritten and the mtime put back, `touch -r`, still change the ctime)."""
    stat = path.stat()
    return {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "ctime_ns": stat.st_ctime_ns, "sha256": sha256_file(path)}


def raw_origin(raw_dir: Path) -> str:
    """Where a raw folder's shards come from: `synthetic` when its manifest is the generator's
    (make demo, synth), `trial` when make download fetched only the first files of a dataset
    (FIRST=, its download.json says so), `unknown` when either manifest is unreadable, else
    `release` (S2ORC, or S2AG downloaded whole). The report compares published numbers only
    with cells measured on a release (docs/published.md)."""
    download = raw_dir / DOWNLOAD_MANIFEST
    if download.is_file():
        try:
            datasets = read_json(download).get("datasets", {})
        except InputError:
            return "unknown"
        return "release" if all(d.get("complete") for d in datasets.values()) else "trial"
    path = raw_dir / MANIFEST
    if not path.is_file():
        return "release"
    try:
        info = read_json(path)
    except InputError:
        return "unknown"
    return "synthetic" if isinstance(info, dict) and info.get("stage") == "synthetic" \
        else "release"


def ingest_is_current(raw_dir: Path, corpus_dir: Path, strict: bool, source: str,
                      fos_source: str) -> dict | None:
    """The ingest section when the corpus was ingested with these settings from shards with
    the same names and bytes, and its outputs are intact; else None. Shards whose stat
    changed (a copied or moved data folder) are hashed once and, when their bytes are the
    same, their new stat is recorded, so a move never makes the corpus ingest again. The raw
    folder's own path is not compared."""
    old = corpus_section(corpus_dir, "ingest")
    wanted = {"strict": strict, "source": source, **_settings(source, fos_source)}
    recorded = old.get("inputs", {})
    if not old or {k: old.get("parameters", {}).get(k) for k in wanted} != wanted \
            or not outputs_intact(corpus_dir, old):
        return None
    if not raw_dir.exists():  # raw shards removed after ingest (to save space): kept as is
        log.info(f"[ingest] {raw_dir} does not exist (removed after the ingest, or never "
                 f"made): the corpus ingested from {old.get('parameters', {}).get('raw_dir')} "
                 f"is kept as it is; to ingest again, {made_by(source, corpus_dir.name)}")
        return old
    base, shards = raw_shards(raw_dir, source, corpus_dir.name)
    names = [p.relative_to(base).as_posix() for p in shards]
    if sorted(names) != sorted(recorded):
        return None
    refreshed = {}
    for name, path in zip(names, shards, strict=True):
        before, stat = recorded[name], path.stat()
        if "sha256" not in before or stat.st_size != before["bytes"]:
            return None
        # a record without a ctime (an older pipeline's) is trusted on its mtime
        if stat.st_mtime_ns != before.get("mtime_ns") or \
                before.get("ctime_ns", stat.st_ctime_ns) != stat.st_ctime_ns:
            now = _raw_fingerprint(path)
            if now["sha256"] != before["sha256"]:
                return None
            refreshed[name] = now
    if refreshed:
        old = {**old, "inputs": {**recorded, **refreshed}}
        update_corpus_manifest(corpus_dir, "ingest", old)
    return old


def _ingest(raw_dir: Path, corpus_dir: Path, strict: bool, workers: int, source: str,
            fos_source: str) -> dict:
    """Stream the shards into `papers.parquet`, `citations.parquet` and `quarantine.jsonl`
    (all written atomically). `strict`: the first bad line is an InputError naming its file
    and line."""
    # the readers and the merge, loaded only when there is work (a current corpus: none)
    from pipeline.core.processes import worker_pool
    from pipeline.ingest.merge import dedupe, write_citations, write_papers

    raw_shards(raw_dir, source, corpus_dir.name)  # a folder that does not exist: one line
    start = time.perf_counter()
    totals = dict.fromkeys(INGEST_COUNTS, 0)
    by_reason: dict[str, int] = {}
    # writers close before the atomic renames (contexts exit in reverse order)
    with (
        scratch_dir(corpus_dir, "ingest") as work,
        atomic_path(corpus_dir / PAPERS) as papers_tmp,
        atomic_path(corpus_dir / CITATIONS) as cites_tmp,
        atomic_path(corpus_dir / QUARANTINE) as quarantine_tmp,
    ):
        settings = _settings(source, fos_source)
        inputs, n_buckets, results = reader(source).stage(raw_dir, work, strict, workers,
                                                          **settings)
        parameters = {"raw_dir": str(raw_dir), "strict": strict, "source": source, **settings}
        for result in results:
            add_counts(totals, result.counts)
            add_counts(by_reason, result.by_reason)
        datasets = per_dataset(results)
        check_quarantined(datasets, raw_dir, reader(source).WHAT)
        records = totals.pop("records")
        if records == 0:
            first = next((r.first_bad for r in results if r.first_bad), None)
            hint = f"; first bad line {first}" if first else ""
            raise InputError(
                f"no papers in {raw_dir}: its {len(inputs)} shard(s) hold "
                f"{totals['lines_read']} line(s), {totals['quarantined']} of them bad{hint}; "
                f"check that it is {reader(source).WHAT}"
            )
        phases = {"read": round(time.perf_counter() - start, 1)}
        with disk_errors(corpus_dir):
            dropped = dedupe(work, n_buckets, workers)
            totals["duplicate_records"] = len(dropped)
            phases["dedupe"] = round(time.perf_counter() - start - phases["read"], 1)
            writing = time.perf_counter()
            # the two files are independent: with 2+ workers, citations in a second process
            with worker_pool(1) if workers > 1 else contextlib.nullcontext() as pool:
                citations = (pool.submit(write_citations, work, n_buckets, cites_tmp, dropped)
                             if pool else None)
                totals["papers"] = write_papers(work, papers_tmp, dropped)
                phases["papers"] = round(time.perf_counter() - writing, 1)
                totals |= (citations.result() if citations
                           else write_citations(work, n_buckets, cites_tmp, dropped))
            # with 2+ workers the citations were written beside the papers, from `writing` on
            phases["citations"] = round(time.perf_counter() - writing, 1)
            phases["merge"] = round(time.perf_counter() - start - phases["read"], 1)
            with quarantine_tmp.open("wb") as out:
                for part in sorted((work / "quarantine").glob(lines_file("*"))):
                    with part.open("rb") as handle:
                        shutil.copyfileobj(handle, out)
        # the files are about to be replaced: until the new section is written, no manifest
        # vouches for them (a failure before this point leaves the old corpus as it was)
        update_corpus_manifest(corpus_dir, "ingest", None)
    base = raw_dir / "metadata" if source == "s2orc" else raw_dir  # shards named from here
    names = [p.relative_to(base).as_posix() for p in inputs]
    info = manifest("ingest", parameters, counts=totals, workers=workers, buckets=n_buckets,
                    phase_seconds=phases, raw_origin=raw_origin(raw_dir),
                    shards=names, line_by_line_shards=[
                        name for name, r in zip(names, results, strict=True) if r.line_by_line],
                    quarantine={"file": QUARANTINE, "by_reason": by_reason},
                    inputs={p.relative_to(base).as_posix(): _raw_fingerprint(p)
                            for p in inputs},
                    outputs=fingerprints(corpus_dir, [PAPERS, CITATIONS,
                                                      QUARANTINE]),
                    seconds=round(time.perf_counter() - start, 2))
    update_corpus_manifest(corpus_dir, "ingest", info)
    for data in datasets:  # on lines of their own, not among the summary's counts
        if line := quarantine_line(data, corpus_dir / QUARANTINE):
            log.info(f"[ingest] {line}")
    return info
