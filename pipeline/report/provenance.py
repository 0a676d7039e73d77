"""Where a report's numbers come from: the code, the pools' and runs' parameters, the checksums
their manifests record, and the commands that make them again (the HTML page shows it).

Everything is read from the manifests the stages wrote (a pool's `manifest.json`, a run's
`<model>.manifest.json` and `<model>.eval.json`, `runs/results.manifest.json`); nothing is
hashed again, and the manifests' creation times are left out, so the page is the same bytes
for the same data. A manifest that is missing or unreadable is named and counted, never
skipped in silence.

A saved report is an artifact like every other: its manifest records, by the one staleness
rule (`core.inputs`), the sha256 of each file it was made from (`made_from`: the corpus
manifest, each reported pool's manifest, each run's manifest, evaluation and per-query values,
those collect left out, the judging files of its pools), so verify calls it STALE once one
changes. Those digests are the bytes the report read: nothing the report may read changed
between the start and the end of its building (`state`, compared by `unchanged`), else it is
built again (`ReportInputsChanged`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.checksums import stat_key
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.core.inputs import record
from pipeline.core.manifests import DISTRIBUTION, code_version, package_version
from pipeline.core.repair import Repair
from pipeline.layout import (
    JUDGMENTS,
    MANIFEST,
    RESULTS_FILE,
    RESULTS_MANIFEST,
    Place,
    judging_folders,
    judgments_manifest,
    pool_dir,
    pools_dir,
    run_paths,
)
from pipeline.pools.build import pool_repair
from pipeline.retrieval.runs import run_repair

NOT_RECORDED = "not recorded"
# manifest keys that are times or bookkeeping (they differ between two makings of the same
# bytes: BM25's analysed-text store says what it reused): not parameters
_NOT_PARAMETERS = ("created", "seconds", "queries_per_s", "analysed_text_store")


@dataclass(frozen=True)
class Provenance:
    """What made the numbers of one corpus's report, as tables of strings.

    `about`: (what, value) pairs: the package version and the code (`code_version`) that
    wrote the page, the checksum of results.parquet, the command that rebuilds the report;
    `pools` and `runs`: (header, rows) tables, one row per pool and per run reported;
    `commands`: run name -> the command that searches and scores it again; `missing`: the
    manifests not found."""

    about: tuple[tuple[str, str], ...]
    pools: tuple[list[str], list[list[str]]]
    runs: tuple[list[str], list[list[str]]]
    commands: dict[str, str]
    missing: tuple[str, ...] = ()


def _read(path: Path, missing: list[str], label: str | None = None) -> dict[str, Any] | None:
    """A manifest, or None (named in `missing` as `label`, default `<folder>/<file>`: never
    where the data lies, so the page does not change with it) when absent or unreadable."""
    label = label or f"{path.parent.name}/{path.name}"
    if not path.is_file():
        missing.append(f"{label} (missing)")
        return None
    try:
        return read_json(path)
    except InputError:
        missing.append(f"{label} (unreadable)")
        return None


def _flat(value: Any, prefix: str = "") -> list[str]:
    """`key=value` words of a (nested) mapping, keys sorted, nulls and empty texts left
    out."""
    if isinstance(value, dict):
        return [w for k in sorted(value) for w in _flat(value[k], f"{prefix}{k}.")]
    if value is None or value == "":
        return []
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value))
    return [f"{prefix.rstrip('.')}={value}"]


def parameters(info: dict[str, Any] | None, keys: tuple[str, ...]) -> str:
    """The manifest's `keys` (parameters, details...) as `key=value` lines."""
    if info is None:
        return NOT_RECORDED
    return "\n".join(w for key in keys if key in info
                     for w in _flat({k: v for k, v in info[key].items()
                                     if k not in _NOT_PARAMETERS}
                                    if isinstance(info[key], dict) else info[key]))


def checksums(info: dict[str, Any] | None) -> str:
    """The sha256 the manifest records of each output file, `file sha256` per line."""
    if info is None:
        return NOT_RECORDED
    outputs = info.get("outputs") or {}
    return "\n".join(f"{name} {record.get('sha256', NOT_RECORDED)}"
                     for name, record in sorted(outputs.items())) or NOT_RECORDED


def inputs(info: dict[str, Any] | None) -> str:
    """The sha256 the manifest records of each input, `input sha256` per line."""
    if info is None:
        return NOT_RECORDED
    return "\n".join(f"{name} {sha}" for name, sha in sorted((info.get("inputs") or {}).items()))


def made_by(*infos: dict[str, Any] | None) -> str:
    """The code versions the manifests record (one when they agree)."""
    found = sorted({str(i.get("code_version", NOT_RECORDED)) for i in infos if i is not None})
    return ", ".join(found) or NOT_RECORDED


def report_repair(corpus: str, seed: int, exclude: str | None = None,
                  training_sets: dict[str, str] | None = None,
                  shared_pairs: str = "first") -> Repair:
    """The command that writes the report (and this page) again: with the EXCLUDE,
    TRAINING_SETS (the files as the user named them) and SHARED_PAIRS (given when not the
    default) it was made with."""
    trained = " ".join(f"{model}={path}" for model, path in sorted((training_sets or {}).items()))
    return Repair("report", corpus, variables=(
        ("SEED", str(seed)), ("EXCLUDE", exclude), ("TRAINING_SETS", trained or None),
        ("SHARED_PAIRS", None if shared_pairs == "first" else shared_pairs)))


def report_parameters(corpus: str, seed: int, exclude: str | None = None,
                      training_sets: dict[str, str] | None = None,
                      shared_pairs: str = "first") -> dict[str, Any]:
    """What a saved report's manifest records of how it was asked for (`recorded_repair`
    makes its command again from them): SHARED_PAIRS too, which changes Table 3's numbers
    where a query is listed under two fields."""
    return {"corpus": corpus, "seed": seed, "exclude": exclude,
            "training_sets": dict(sorted((training_sets or {}).items())),
            "shared_pairs": shared_pairs}


def recorded_repair(corpus: str, info: dict[str, Any] | None) -> Repair:
    """The command that writes a saved report again, with the settings its manifest
    recorded (`report_parameters`); a manifest that cannot be read gives the corpus's report
    of seed 0, without EXCLUDE or TRAINING_SETS."""
    recorded = (info or {}).get("parameters") or {}
    return report_repair(corpus, int(recorded.get("seed", 0)), recorded.get("exclude"),
                         recorded.get("training_sets"), recorded.get("shared_pairs", "first"))


def provenance(rows: pl.DataFrame, runs_root: Path, corpora_root: Path, corpus: str,
               seed: int, exclude: str | None = None,
               training_sets: dict[str, str] | None = None,
               shared_pairs: str = "first") -> Provenance:
    """The provenance of the pools and runs of `rows` (a report's results), from their
    manifests, in the order of pool then run name; `exclude`, `training_sets` and
    `shared_pairs` as the report was asked for (`report_repair`)."""
    missing: list[str] = []
    corpus_dir = corpora_root / corpus
    pool_rows, run_rows, commands = [], [], {}
    pairs = rows.select("pool", "model").unique().sort("pool", "model").rows()
    for pool in sorted({p for p, _ in pairs}):
        info = _read(pool_dir(corpus_dir, pool) / MANIFEST, missing)
        pool_rows.append([pool, str((info or {}).get("level", NOT_RECORDED)),
                          parameters(info, ("parameters",)), made_by(info),
                          inputs(info), checksums(info),
                          pool_repair(corpus_dir, pool, info).command()])
    for pool, model in pairs:
        paths = run_paths(runs_root, corpus, pool, model)
        search, evaluation = _read(paths.manifest, missing), _read(paths.evaluation, missing)
        commands[model] = run_repair(corpus, model, runs_root, pool).command()
        run_rows.append([pool, model, parameters(search, ("parameters", "details")),
                         parameters(evaluation, ("parameters",)), made_by(search, evaluation),
                         "\n".join(c for c in (checksums(search), checksums(evaluation))
                                   if c != NOT_RECORDED) or NOT_RECORDED,
                         commands[model]])
    results = _read(runs_root / RESULTS_MANIFEST, missing, RESULTS_MANIFEST)
    recorded = ((results or {}).get("outputs") or {}).get(RESULTS_FILE, {})
    about = (
        ("package", f"{DISTRIBUTION} {package_version() or 'unknown (not installed)'}"),
        ("code that wrote this page", code_version()),
        ("code that collected the results", made_by(results)),
        (f"{RESULTS_FILE} sha256", recorded.get("sha256", NOT_RECORDED)),
        ("rebuild this page", report_repair(corpus, seed, exclude, training_sets,
                                            shared_pairs).command()),
        ("manifests not found", str(len(missing))),
    )
    return Provenance(
        about,
        (["pool", "level", "parameters", "made by", "inputs (sha256)",
          "files (sha256)", "rebuild"], pool_rows),
        (["pool", "run", "search parameters", "evaluation parameters", "made by",
          "files (sha256)", "rebuild"], run_rows),
        commands, tuple(missing))


# ---- what a report is made from ---------------------------------------------------------------
class ReportInputsChanged(InputError):
    """A file a report may read changed while it was being built (a `make eval` beside it):
    what it read is not one state of the data, so it is built again, never saved so."""


def _files(folder: Path) -> list[Path]:
    """The files of a folder that a stage writes (no temporaries, locks or checksum caches:
    their names start with a dot), sorted."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_file())


def made_from(place: Place, runs: Iterable[tuple[str, str]], pools: Iterable[str]
              ) -> list[Path]:
    """The files a report of `runs` ((pool, run name) pairs: its rows and the evaluations
    collect left out) over `pools` is made from, those that exist: each pool's manifest (its
    parameters, its files' digests), each run's manifest (how it was searched: its depth,
    options, inputs), its evaluation and per-query values (the numbers), and the samples and
    judgments of the pools (the judged section). A manifest is recorded by what it vouches for
    (`core.inputs.input_sha256`). The corpus manifest is not among them: what the corpus is
    (its origin, for the published tables) changes only when the corpus is replaced, which
    replaces its pools; its ingest record names the raw folder, which a moved data folder
    changes."""
    files: list[Path] = []
    for pool in sorted(set(pools)):
        files.append(pool_dir(place.corpus_dir, pool) / MANIFEST)
        for folder in judging_folders(place.runs_root, place.corpus, pool):
            files += _files(folder)
    files += [path for pool, run in sorted(set(runs)) for path in _run_inputs(place, pool, run)]
    return [f for f in dict.fromkeys(files) if f.is_file()]


def _run_inputs(place: Place, pool: str, run: str) -> tuple[Path, ...]:
    """The files of a run a report reads: its manifest, evaluation and per-query values."""
    paths = run_paths(place.runs_root, place.corpus, pool, run)
    return paths.manifest, paths.evaluation, paths.metrics


def report_inputs(place: Place, runs: Iterable[tuple[str, str]], pools: Iterable[str]
                  ) -> dict[str, str]:
    """label -> sha256 of each file of `made_from`, labelled as every artifact labels its
    inputs (`core.inputs`: `runs/@/<pool>/<run>.eval.json`, `@` the report's corpus)."""
    return record(place.roots, made_from(place, runs, pools))


def left_out_inputs(place: Place, runs: Iterable[tuple[str, str]], judging: Iterable[Path]
                    ) -> list[str]:
    """The labels (as `report_inputs` keys them) of the inputs a report read and did not
    count, as its text says: the files of the runs collect left out as not current ((pool,
    run name) pairs) and the judging files its judged section left out, each with its
    manifest. The report depends on their bytes (a repaired one would count: STALE then), not
    on what is wrong with them, which it says itself (verify._reports_of_named)."""
    files = [path for pool, run in runs for path in _run_inputs(place, pool, run)]
    files += [path for left in judging for path in (left, judgments_manifest(left))]
    return sorted({place.roots.label(path) for path in files if path.is_file()})


def state(place: Place, results: bool = True) -> dict[str, tuple[int, ...]]:
    """The stat key of every file a report of the corpus may read: the collected
    results and their manifest (`results`; False: a caller that collects them next takes
    them after, `results_state`), the corpus and pool manifests, every file of its pools' run
    folders and judging folders (not the corpus's assessor logs or stage times, which other
    stages append to). Two equal states bracket a build that read one state of the data: a
    stage replaces a file by renaming a new one over it (another inode), as the stat cache
    of sha256 trusts (`file_sha256`)."""
    found = [place.corpus_dir / MANIFEST,
             *sorted(pools_dir(place.corpus_dir).glob(f"*/{MANIFEST}"))]
    corpus_runs = place.runs_root / place.corpus
    folders = sorted(p for p in corpus_runs.glob("*/") if p.is_dir() and p.name != JUDGMENTS
                     and not p.name.startswith(".")) if corpus_runs.is_dir() else []
    for folder in folders:
        found += _files(folder)
        judged = folder / JUDGMENTS
        found += _files(judged) + [f for sub in sorted(judged.glob("*/")) for f in _files(sub)]
    return {**_stats(found), **(results_state(place.runs_root) if results else {})}


def results_state(runs_root: Path) -> dict[str, tuple[int, ...]]:
    """`state` of the collected results and their manifest."""
    return _stats([runs_root / RESULTS_FILE, runs_root / RESULTS_MANIFEST])


def _stats(paths: list[Path]) -> dict[str, tuple[int, ...]]:
    """path -> its stat key (`checksums.stat_key`, the key the sha256 cache trusts), for the
    files that exist."""
    keys = {os.fspath(path): stat_key(path) for path in paths}
    return {path: tuple(key) for path, key in keys.items() if key is not None}


def unchanged(before: dict[str, tuple[int, ...]], place: Place, repair: Repair) -> None:
    """ReportInputsChanged (with `repair`, the report's command) when a file the report may
    read changed since `before` (`state`): it read a mix of two states of the data."""
    after = state(place)
    if after == before:
        return
    differ = sorted({*before.items()} ^ {*after.items()})
    raise ReportInputsChanged(
        f"the report of {place.corpus}: {differ[0][0]} changed while it was being built (a "
        "stage writing this corpus's runs beside it?); build it again once that stage ends",
        repair)
