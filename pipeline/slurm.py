"""SLURM job arrays for the embed stage, and the eval work that follows them.

`submit_embed` writes `<runs-root>/slurm/embed-<corpus>-<model>.sbatch`, a job array with one
task per shard (each task runs `python -m pipeline embed --shard $SLURM_ARRAY_TASK_ID
--shards N`), submits it with `sbatch --parsable` and records the job id beside the script.
`submit_after_embed` submits a command (make eval's: the search and eval stages, in one shell
line) as a job that starts when the array has succeeded (`--dependency=afterok:<id>`), or
returns None when every shard is already in, so the caller runs the command itself. Logs are
written beside the scripts. Standard library only at import time (the Makefile's check uses the
validators).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.atomic import atomic_path
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.repair import Repair
from pipeline.encoding.families import routed
from pipeline.layout import Place, sbatch_path, slurm_dir, slurm_record
from pipeline.models import ModelEntry, get_model

log = logging.getLogger(__name__)

EXECUTORS = ("local", "slurm")
# SLURM's --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or no limit.
_TIME = re.compile(r"^(\d+(:\d{1,2}){0,2}|\d+-\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE)$",
                   re.ASCII)
_PARTITION = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
# What sbatch says when it cannot talk to a controller at all (no slurm.conf or configless
# source, controller down or unreachable, munge authentication failing), as opposed to a
# controller that refuses what the script asks for (partition, gres, time limit, account).
_UNREACHABLE = re.compile(
    r"unable to contact slurm controller|unable to establish a connection|"
    r"could not establish a configuration source|unable to process configuration file|"
    r"slurm\.conf|resolve_ctls_from_dns_srv|connection refused|connection timed out|"
    r"connect failure|no route to host|socket timed out|zero bytes were transmitted|"
    r"communication connection failure|munge|invalid authentication credential|"
    r"authentication failure|slurm_load_partitions|slurm_load_ctl_conf", re.IGNORECASE)
_ASKED = re.compile(r"^#SBATCH --(partition|gres|time)=(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Resources:
    """What each job asks SLURM for; None / 0 leaves the cluster's default."""

    partition: str | None = None
    gpus_per_task: int = 0
    time: str | None = None
    cpus_per_task: int | None = None


def check_executor(text: str) -> str:
    """EXECUTOR: local (this machine) or slurm (sbatch job arrays)."""
    if text not in EXECUTORS:
        raise InputError(f"{text!r}: use local (this machine) or slurm (job arrays)")
    return text


def check_time(text: str) -> str:
    """A SLURM time limit: minutes, H:M:S or D-H:M:S (e.g. 90, 4:00:00, 1-12:00:00)."""
    if not _TIME.match(text):
        raise InputError(f"{text!r}: give a SLURM time limit such as 90 (minutes), "
                         "4:00:00 or 1-12:00:00")
    return text


def check_partition(text: str) -> str:
    """A partition name, or several separated by commas."""
    if not _PARTITION.match(text):
        raise InputError(f"{text!r}: give a partition name (letters, digits, ._-) "
                         "or several separated by commas")
    return text


def job_name(stage: str, corpus: str, model: str) -> str:
    return f"{stage}-{corpus}-{model}"


def _header(name: str, log: Path, resources: Resources, extra: list[str]) -> list[str]:
    lines = ["#!/bin/bash",
             "# Written by mdcr-pipeline (pipeline/slurm.py); submit with sbatch.",
             f"#SBATCH --job-name={name}", f"#SBATCH --output={log}", *extra]
    if resources.partition:
        lines.append(f"#SBATCH --partition={resources.partition}")
    if resources.gpus_per_task:
        lines.append(f"#SBATCH --gres=gpu:{resources.gpus_per_task}")
    if resources.time:
        lines.append(f"#SBATCH --time={resources.time}")
    if resources.cpus_per_task:
        lines.append(f"#SBATCH --cpus-per-task={resources.cpus_per_task}")
    return lines


def _body(command: list[str], workdir: Path, resources: Resources) -> list[str]:
    lines = ["set -euo pipefail", f"cd {shlex.quote(str(workdir))}"]
    if resources.cpus_per_task:
        lines.append(f"export OMP_NUM_THREADS={resources.cpus_per_task}")
    return [*lines, "exec " + " ".join(command)]


def embed_script(command: list[str], num_shards: int, name: str, log_dir: Path,
                 resources: Resources, workdir: Path) -> str:
    """sbatch script of a job array, task i running `command --shard i --shards n`."""
    log = log_dir / f"{name}-%A_%a.log"
    shard_args = ['--shard "$SLURM_ARRAY_TASK_ID"', f"--shards {num_shards}"]
    return "\n".join([
        *_header(name, log, resources, [f"#SBATCH --array=0-{num_shards - 1}"]),
        *_body([shlex.join(command), *shard_args], workdir, resources)]) + "\n"


def follow_up_script(command: list[str], after: str, name: str, log_dir: Path,
                     resources: Resources, workdir: Path) -> str:
    """sbatch script running `command` once job `after` (every task of it) has succeeded; it
    is cancelled if that job fails."""
    extra = [f"#SBATCH --dependency=afterok:{after}", "#SBATCH --kill-on-invalid-dep=yes"]
    return "\n".join([*_header(name, log_dir / f"{name}-%j.log", resources, extra),
                      *_body([shlex.join(command)], workdir, resources)]) + "\n"


def write_script(path: Path, text: str) -> Path:
    """Write the script atomically (executable, so it can also be run by hand)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text)
        tmp.chmod(tmp.stat().st_mode | 0o111)
    return path


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise InputError(f"EXECUTOR=slurm needs `{name}`, which is not on PATH: run this on a "
                         "SLURM login node, or use EXECUTOR=local")
    return path


def _first_error(output: str) -> str:
    """sbatch's first error line (`sbatch: error: ...`, `sbatch: fatal: ...`), else its first
    line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"\b(error|fatal)\b", line, re.IGNORECASE)]
    return (errors or lines or ["no message"])[0]


def sbatch_failure(output: str, script_text: str = "") -> str:
    """The one-line message for a failed sbatch: a machine that cannot reach a SLURM
    controller (not configured here, or the controller is down) is told so; a request the
    cluster rejects names what was asked and the variables that set it. Both quote sbatch."""
    line = _first_error(output)
    if _UNREACHABLE.search(output):
        return (f"EXECUTOR=slurm: sbatch cannot reach a SLURM controller from this machine "
                f"(SLURM is not configured here or its controller is down; sbatch said: "
                f"{line}): run on a login node of a configured SLURM cluster, or use "
                "EXECUTOR=local")
    asked = (", ".join(f"--{k}={v}" for k, v in _ASKED.findall(script_text))
             or "the cluster's default partition and time limit, no GPUs")
    return (f"the SLURM cluster rejected the job (asked for {asked}; sbatch said: {line}): "
            "fix PARTITION, GPUS_PER_TASK or the time limit for this cluster (sinfo lists its "
            "partitions and limits)")


def sbatch(script: Path) -> str:
    """Submit `script` with `sbatch --parsable`; return the job id."""
    done = subprocess.run([_tool("sbatch"), "--parsable", str(script)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        text = script.read_text() if script.exists() else ""
        raise InputError(sbatch_failure(done.stderr + "\n" + done.stdout, text))
    return done.stdout.strip().split(";")[0]  # "<id>" or "<id>;<cluster>"


def _submit(path: Path, text: str) -> str:
    """Write the script and submit it; when sbatch fails, leave nothing behind: the script
    (and the folders made for it) are removed, or an earlier script is put back."""
    before = path.read_bytes() if path.exists() else None
    made = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
    write_script(path, text)
    try:
        return sbatch(path)
    except InputError:
        if before is None:
            path.unlink(missing_ok=True)
            for folder in made:  # innermost first
                try:
                    folder.rmdir()
                except OSError:
                    break
        else:
            with atomic_path(path) as tmp:
                tmp.write_bytes(before)
                tmp.chmod(tmp.stat().st_mode | 0o111)
        raise


def in_queue(job_id: str) -> bool:
    """Whether any task of the job is still pending or running."""
    done = subprocess.run([_tool("squeue"), "--noheader", "--jobs", job_id, "--format", "%i"],
                          capture_output=True, text=True)
    return done.returncode == 0 and bool(done.stdout.strip())


def missing_per_shard(place: Place, entry: ModelEntry, pools: list[str] | None,
                      num_shards: int) -> list[int]:
    """Papers of the pools that shard i of n has still to embed, for each i (all 0: every
    shard is in). Models that embed nothing (bm25, random) have nothing missing."""
    if not entry.embedded:
        return [0] * num_shards
    import numpy as np

    from pipeline.encoding.coverage import missing_ids
    from pipeline.encoding.store import shard_of
    from pipeline.layout import pool_names, store_dir

    pools = pools or pool_names(place.corpus_dir)
    if not pools:
        raise InputError(f"no pools under {place.corpus_dir}/pools: build one",
                         Repair("pool", place.corpus))
    store = store_dir(place.index_root, place.corpus, entry.name)
    _, missing = missing_ids(place.corpus_dir, store, pools)
    return np.bincount(shard_of(missing, num_shards), minlength=num_shards).tolist()


def embed_command(place: Place, model: str, options: dict[str, object],
                  python: str | None = None) -> list[str]:
    """`python -m pipeline ... embed` for one shard (without --shard / --shards); options
    maps embed flags to values (None: left out; a list: the flag repeated)."""
    corpora_root, index_root, runs_root = (
        str(p.absolute()) for p in (place.corpus_dir.parent, place.index_root, place.runs_root))
    command = [os.path.abspath(python or sys.executable), "-m", "pipeline",
               "--corpora-root", corpora_root, "--index-root", index_root,
               "--runs-root", runs_root, "embed", "--corpus", place.corpus, "--model", model]
    for flag, value in options.items():
        for item in value if isinstance(value, list) else [value]:
            if item is not None:
                command += [flag, str(item)]
    return command


def _record_path(runs_root: Path, corpus: str, model: str) -> Path:
    return slurm_record(runs_root, job_name("embed", corpus, model))


def replace_before_array(place: Place, entry: ModelEntry, model_path: str | None,
                         replace: bool) -> None:
    """A store of the model's name embedded by another model (another model identity), found
    before the array is submitted: refused in one line (its repair: the same submission with
    REPLACE=1), or with `replace` removed here, once, with the runs searched from it. The
    array's tasks are not given --replace: each would find the old store and remove it,
    racing with the others' new parts; they fill the new store as any array fills one. An
    array of this model still queued or running would write into the store being removed:
    refused until it has ended."""
    if not entry.embedded:
        return
    from pipeline.encoding.store_identity import (
        changed_identity,
        check_identity,
        model_variables,
    )
    from pipeline.layout import store_dir

    store = store_dir(place.index_root, place.corpus, entry.name)
    if replace and changed_identity(place, store, entry, model_path):
        record = _record_path(place.runs_root, place.corpus, entry.name)
        if record.exists() and in_queue(job := str(read_json(record)["job_id"])):
            raise InputError(f"REPLACE=1 would remove {store}, which embed array {job} "
                             f"(still queued or running) writes into: wait for it to end, "
                             f"or cancel it (scancel {job}), then submit again")
    check_identity(place, entry, model_path, replace, repair=Repair(
        "embed", place.corpus, entry.name,
        (*model_variables(entry, model_path), ("EXECUTOR", "slurm"), ("REPLACE", "1"))))


def submit_embed(place: Place, model: str, num_shards: int, resources: Resources,
                 options: dict[str, object] | None = None, workdir: Path | None = None,
                 replace: bool = False) -> str:
    """Write and submit the embed job array (one task per shard); return its job id. A store
    of another model under the model's name is refused, or with `replace` (REPLACE=1)
    removed before anything is submitted (`replace_before_array`). `num_shards` is SHARDS as
    its door checked it (options/checks.shard_count: 1 to MAX_SHARDS)."""
    _tool("sbatch")
    model_path = (options or {}).get("--model-path")
    model_path = None if model_path is None else str(model_path)
    replace_before_array(place, routed(get_model(model), model_path), model_path, replace)
    runs_root, corpus = place.runs_root, place.corpus
    name = job_name("embed", corpus, model)
    folder = slurm_dir(runs_root)
    command = embed_command(place, model, options or {})
    script = sbatch_path(runs_root, name)
    job_id = _submit(script, embed_script(command, num_shards, name, folder, resources,
                                          (workdir or Path.cwd()).absolute()))
    write_json({"job_id": job_id, "num_shards": num_shards, "script": str(script),
                "logs": str(folder / f"{name}-{job_id}_*.log")},
               _record_path(runs_root, corpus, model))
    log.info(f"[slurm] submitted embed array {job_id} ({num_shards} tasks); script and "
             f"logs in {folder}")
    return job_id


def submit_after_embed(place: Place, entry: ModelEntry, num_shards: int, resources: Resources,
                       command: list[str], pools: list[str] | None = None, stage: str = "eval",
                       workdir: Path | None = None, model_path: str | None = None
                       ) -> str | None:
    """Submit `command` as a job after the recorded embed array; None when all shards are in
    (the caller runs `command` itself). An error when papers are missing and no array is
    pending or running to embed them, and when the store was embedded by another model than
    the one loaded from `model_path`: its papers are not in, and the repair is the array's
    (make embed EXECUTOR=slurm REPLACE=1), not a search here that would embed them all."""
    replace_before_array(place, entry, model_path, replace=False)
    missing = missing_per_shard(place, entry, pools, num_shards)
    if not any(missing):
        log.info(f"[slurm] every embed shard of {entry.name} is in: running the command here")
        return None
    short = ", ".join(f"{i}: {n}" for i, n in enumerate(missing) if n)
    record_path = _record_path(place.runs_root, place.corpus, entry.name)
    embed = Repair("embed", place.corpus, entry.name, variables=(("EXECUTOR", "slurm"),))
    if not record_path.exists():
        raise InputError(f"{sum(missing)} papers of MODEL {entry.name} are not embedded yet "
                         f"(missing per shard {short}) and no embed array was submitted: "
                         "submit one first", embed)
    record = read_json(record_path)
    if not in_queue(record["job_id"]):
        raise InputError(f"embed array {record['job_id']} has ended but {sum(missing)} papers "
                         f"of MODEL {entry.name} are missing (per shard {short}): see its logs "
                         f"{record['logs']}, then submit it again", embed)
    name = job_name(stage, place.corpus, entry.name)
    folder = slurm_dir(place.runs_root)
    job_id = _submit(sbatch_path(place.runs_root, name), follow_up_script(
        command, record["job_id"], name, folder, resources,
        (workdir or Path.cwd()).absolute()))
    log.info(f"[slurm] submitted job {job_id}: runs {' '.join(command[:4])} ... after the "
             "embed array succeeds")
    return job_id


def run_here(command: list[str]) -> int:
    """Run the follow-up command in this process's place (every embed shard is already in)."""
    return subprocess.run(command).returncode
