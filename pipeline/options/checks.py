"""The checks of option values, shared by make's variables, the command line's options and
the Python API's arguments (pipeline/options/declared.py declares which option uses which).
Each takes the value's text and returns it (or its parsed value), or raises BadValue: one
line naming what to give. Standard library only, so the Makefile's variable check runs before
the environment exists."""

from __future__ import annotations

import argparse
import os
import re
import unicodedata

from pipeline.core.errors import InputError
from pipeline.glossary import parse_metrics
from pipeline.layout import (
    MAX_COMPONENT,
    MAX_SYNTHETIC_SHARDS,
    S2_DATASET,
    check_name,
    check_path_length,
    parse_size,
)

DTYPES = ("float32", "float16")


_PATH = re.compile(r"[A-Za-z0-9._/+,:@=~-]+")


class BadValue(InputError, argparse.ArgumentTypeError):
    """A value refused by a check: the project's InputError for the library and the API, and
    the exception argparse reports as `argument --NAME: <message>` when a check is an
    option's type, so one check serves make, the command line and the API alike."""


MAX_INT = 2**31 - 1  # every whole-number variable: seeds, counts, threads, shards


def int_at_least(low: int, what: str, high: int = MAX_INT, why: str = ""):
    """An argparse type: a whole number from `low` to `high` (`why`: the reason for `high`,
    said when a value is above it)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise BadValue(f"{text!r} is not a whole number ({what})") from None
        if value < low:
            raise BadValue(f"{value} is too small: {what}")
        if value > high:
            raise BadValue(f"{value} is too large: use at most {high:,}{why}")
        return value
    parse.__name__ = "int"
    return parse


positive = int_at_least(1, "use 1 or more")


non_negative = int_at_least(0, "use 0 or more")


# ---- process, thread and shard counts: each bounded (docs/errors.md, Guarantees) -------------
# processes or threads per CPU core: more only wait on one another, each holding its memory
PER_CORE = 4


def cores() -> int:
    """The CPU cores this process may run on: its affinity (a SLURM job's or a container's
    share), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def per_core(what: str):
    """An argparse type: 1 to PER_CORE `what` per CPU core of this machine (cores)."""
    def parse(text: str) -> int:
        value = positive(text)
        most = PER_CORE * cores()
        if value > most:
            raise BadValue(
                f"{value} {what} on {cores()} CPU cores: use at most {most} ({PER_CORE} per "
                "core)")
        return value
    parse.__name__ = "int"
    return parse


# THREADS, --threads, --workers and the API's threads= and workers=: ingest's and the
# synthetic generator's processes, Lucene's and the search's threads
worker_count = per_core("worker processes or threads")
# TEST_WORKERS: pytest-xdist starts as many as it is asked for, each building the session's
# fixture corpora (up to 1.3 GiB each)
xdist_workers = per_core("test processes")
MAX_SHARDS = 1000  # SLURM's default MaxArraySize (1001) allows array indices 0 to 1000
# SHARDS, --num-shards: the embed stage's shards (a SLURM array's tasks)
shard_count = int_at_least(1, "use 1 or more", MAX_SHARDS,
                           " (a SLURM job array's tasks: the default MaxArraySize allows 1,001)")
# synth --shards, the API's build_corpus(shards=): the synthetic corpus's shard files
synth_shard_count = int_at_least(1, "use 1 or more", MAX_SYNTHETIC_SHARDS,
                                 " (shard files written at once; the S2ORC release has 100)")
MAX_PARALLEL = 32  # downloads at once: more only share one network link and the API's limit
# PARALLEL, --parallel: files download fetches at once (one thread each)
parallel_downloads = int_at_least(1, "use 1 or more", MAX_PARALLEL,
                                  " (files fetched at once share one network link and the "
                                  "API's rate limit)")
MAX_CPUS_PER_TASK = 1024  # --cpus-per-task of a SLURM job: the nodes' own limit is sbatch's
cpus_per_task = int_at_least(1, "use 1 or more", MAX_CPUS_PER_TASK,
                             " (CPUs of one SLURM task)")


def choice(options: tuple[str, ...]):
    def parse(text: str) -> str:
        if text not in options:
            shown = ", ".join(o or "(empty)" for o in options)
            raise BadValue(f"{text!r}: use one of {shown}")
        return text
    parse.__name__ = "value"
    return parse


def corpus_name(text: str) -> str:
    """A corpus name (CORPUS, MDCR, --corpus, --out), by the rule the Python API also checks
    (layout.check_name); an ir_datasets id given as one is refused with the command that
    imports it."""
    from pipeline.external.irds import dataset_hint

    try:
        return check_name("corpus", text)
    except InputError as exc:
        raise BadValue(f"{exc}{dataset_hint(text)}") from None


def pool_name(text: str) -> str:
    """A pool name (--pool), by the rule the Python API also checks (layout.check_name)."""
    try:
        return check_name("pool", text)
    except InputError as exc:
        raise BadValue(str(exc)) from None


def safe_path(text: str) -> str:
    """Paths the Makefile uses as targets: no spaces, quotes or shell characters, and no
    component longer than the file system allows."""
    if not _PATH.fullmatch(text):
        raise BadValue(
            f"{text!r}: use a path of letters, digits and ._/+,:@=~- only (no spaces, quotes, "
            "line breaks or shell characters)")
    return given_path(text)


def given_path(text: str) -> str:
    """A path option whose characters are free (the command line's --raw, --model-path):
    no folder or file name longer than the file system allows, and not so long that what the
    pipeline writes or reads under it fails (layout.MAX_GIVEN_PATH)."""
    long = [part for part in text.split("/") if len(part.encode()) > MAX_COMPONENT]
    if long:
        raise BadValue(
            f"a folder name of {len(long[0])} characters ({long[0][:20]}...): file systems "
            f"allow at most {MAX_COMPONENT}")
    try:
        return check_path_length(text)
    except InputError as exc:
        raise BadValue(str(exc)) from None


def input_path(text: str) -> str:
    """A file or folder a stage only reads (RUN, SRC), which may be a user's own, spaces and
    all: any characters but control characters, none at either end a space. No shell ever
    sees the value (the goals run their stages in this process), and the repairs that name
    such a file print it quoted, so they run as printed."""
    if not text.strip() or text != text.strip() or any(
            unicodedata.category(char) == "Cc" for char in text):
        raise BadValue(
            f"{text!r}: give the path of the file or folder, without control characters or "
            "spaces at either end")
    return given_path(text)


def sizes(text: str) -> str:
    if not text.split():
        raise BadValue("SIZE is empty: give one or more sizes, e.g. 20k or "
                                         "'200k 500k'")
    try:
        for size in text.split():
            parse_size(size)
    except InputError as exc:
        raise BadValue(str(exc)) from None
    return text


def checked(check):
    """An argparse type from a validator that raises InputError."""
    def parse(text: str) -> str:
        try:
            return check(text)
        except InputError as exc:
            raise BadValue(str(exc)) from None
    parse.__name__ = "value"
    return parse


def prompt_text(text: str) -> str:
    """A query prompt (QUERY_PROMPT): text without control characters but a line break (on
    make's command line written `\\n`: models.query_prompt_text)."""
    if any(ch < " " and ch != "\n" or ch == "\x7f" for ch in text):
        raise InputError(f"{text!r} holds a control character: give printable text, a line "
                         "break written \\n")
    return text


def metric_list(text: str) -> str:
    if text != "auto":  # auto: each pool's own set (large-scale; mdcr for MDCR-style pools)
        parse_metrics(text)
    return text


def training_sets(text: str) -> str:
    """TRAINING_SETS: `<model>=<file>` pairs separated by spaces or commas, each model named
    once (the files are read by the report)."""
    models = []
    for word in text.replace(",", " ").split():
        model, sep, path = word.partition("=")
        if not (model and sep and path):
            raise BadValue(
                f"{word!r}: write <model>=<file of its training papers>, e.g. "
                "specter=lists/specter.txt")
        safe_path(path)
        models.append(model)
    if len(set(models)) < len(models):
        raise BadValue(f"{text!r}: a model named twice")
    return text


def device(text: str) -> str:
    if not re.match(r"^(cpu|cuda(:\d+)?)$", text):
        raise BadValue(f"{text!r}: use cpu, cuda or cuda:<index>")
    return text


def dataset_list(text: str) -> str:
    """DATASETS: S2AG dataset names separated by commas, each a folder name of the download
    (layout.S2_DATASET); empty is refused, as every other empty variable is (it is not 'every
    dataset', which is hundreds of GB)."""
    names = [n for n in text.replace(",", " ").split() if n]
    if not names:
        raise BadValue("DATASETS is empty: name the datasets, separated by "
                                         "commas (leave DATASETS out for the default, "
                                         "papers,abstracts,citations)")
    for name in names:
        if not S2_DATASET.fullmatch(name):
            raise BadValue(f"{name!r}: a dataset name is lowercase letters, "
                                             "digits, '-' and '_' (such as papers or "
                                             "paper-ids)")
    return text


# ---- the values of the API's own arguments (no make variable: declared.py's keyword())
def model_run(text: str) -> str:
    """A model's name, or a run's ('bm25~title'): the registry knows the model."""
    from pipeline.layout import run_name, split_run_name
    from pipeline.models import get_model

    model, variant = split_run_name(text)
    return run_name(get_model(model).name, variant)


def scored_run(text: str) -> str:
    """A run to score: a registered model's run, or a run imported under its own name (its
    pool's run store knows it: evaluate refuses a name with no run there)."""
    try:
        return model_run(text)
    except InputError:
        return check_name("model", text)


def scored_runs(text: str) -> list[str]:
    """Runs to score, separated by commas or spaces (MODELS=bm25,minilm)."""
    return [scored_run(name) for name in text.replace(",", " ").split()]


def imported_name(text: str) -> str:
    """The name a run made elsewhere is imported under."""
    from pipeline.retrieval.imported import check_model_name

    return check_model_name(text)


def vectors_name(text: str) -> str:
    """The name vectors made elsewhere are imported under (vectors:<name>)."""
    from pipeline.models import vectors_model

    return vectors_model(text).name


def significance(text: str) -> str:
    from pipeline.evaluation.significance import significance_test

    return significance_test(text)


def correction(text: str) -> str:
    from pipeline.report.compare import CORRECTIONS

    if text not in CORRECTIONS:
        raise InputError(f"use one of {', '.join(CORRECTIONS)}")
    return text


def named(text: str) -> str:
    """A model's or metric's name as results.parquet holds it: not empty."""
    if not text.strip():
        raise InputError("give a non-empty name")
    return text


def power(text: str) -> float:
    if not 0 < float(text) < 1:
        raise InputError("give a power between 0 and 1, such as 0.8")
    return float(text)


def probability(text: str) -> float:
    if not 0 < float(text) < 1:
        raise InputError("give a significance level between 0 and 1, such as 0.05")
    return float(text)
