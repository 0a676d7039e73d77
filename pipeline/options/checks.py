"""The checks of option values, one per kind of value, for make, the command line and the API
alike (pipeline/options/declared.py says which option uses which): each takes the value as
given, the text of make and the command line or the API's typed value (a number, a path, a
bool, a dict), and returns it (or its parsed value), or raises InputError, which argparse
also reports as `argument --NAME: <message>`. Standard library only: make check runs them before the
environment exists."""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Mapping

from pipeline.core.errors import InputError, quoted
from pipeline.core.numbers import number_in, whole
from pipeline.glossary import parse_metrics
from pipeline.layout import (
    MAX_SYNTHETIC_SHARDS,
    S2_DATASET,
    check_name,
    check_path,
    parse_size,
)

DTYPES = ("float32", "float16")


MAX_INT = 2**31 - 1  # every whole-number variable: seeds, counts, threads, shards


def maximum(check: Callable[[str], object] | None) -> int | float | None:
    """The largest value `check` takes (its `most`, on this machine: per_core's follows the
    cores), None for a check without one: every count and every number has one (the docs'
    tables say it; tests/cli/test_counts.py tries one above it from every door)."""
    most = getattr(check, "most", None)
    return most() if callable(most) else None


def int_at_least(low: int, high: int = MAX_INT, why: str = ""):
    """A whole number from `low` to `high`, in ASCII digits (core/numbers.py); each refusal
    says the range (`why`: the reason for `high`, said when a value is above it)."""
    words = f"{low} or more" if high == MAX_INT else f"{low} to {high:,}"

    def parse(text: str) -> int:
        try:
            value = whole(text)
        except ValueError:
            raise InputError(f"{quoted(text)} is not a whole number in the digits 0-9: use "
                             f"{words}") from None
        if value < low:
            raise InputError(f"{value} is too small: use {words}")
        if value > high:
            raise InputError(f"{value} is too large: use at most {high:,}{why}")
        return value
    parse.__name__ = "int"
    parse.words = words  # type: ignore[attr-defined]
    if high < MAX_INT:  # a maximum (count's); MAX_INT only keeps a seed or a year an int32
        parse.most = lambda: high  # type: ignore[attr-defined]
    return parse


def count(low: int, high: int, why: str):
    """A count of things the pipeline makes, holds or starts (pools, queries, candidates,
    retries, files), from `low` to `high`: the most a 24 GiB machine (or the disk, or the
    time) survives, `why` saying what bounds it. MAX_INT is no bound for a count: a value of
    10**9 ran out of memory or wrote without end (issue 78)."""
    if high >= MAX_INT:
        raise ValueError(f"a count needs a maximum below {MAX_INT:,}: {why}")
    return int_at_least(low, high, f" ({why})")


positive = int_at_least(1)  # not a count: a threshold, a year
non_negative = int_at_least(0)  # not a count: a seed, a year
# processes or threads per CPU core: more only wait on one another, each holding its memory
PER_CORE = 4


def cores() -> int:
    """The CPU cores this process may run on: its affinity (a SLURM job's or a container's
    share), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def per_core(what: str):
    """1 to PER_CORE `what` per CPU core of this machine."""
    def parse(text: str) -> int:
        value = positive(text)
        if value > PER_CORE * cores():
            raise InputError(f"{value} {what} on {cores()} CPU cores: use at most "
                             f"{PER_CORE * cores()} ({PER_CORE} per core)")
        return value
    parse.__name__ = "int"
    parse.words = f"1 to {PER_CORE} per CPU core of this machine"  # type: ignore[attr-defined]
    parse.most = lambda: PER_CORE * cores()  # type: ignore[attr-defined]
    return parse


# THREADS: ingest's processes, Lucene's and the search's threads
worker_count = per_core("worker processes or threads")
# TEST_WORKERS: each builds the session's fixture corpora (up to 1.3 GiB each)
xdist_workers = per_core("test processes")
# SHARDS: a SLURM array's tasks (the default MaxArraySize, 1001, allows indices 0 to 1000)
MAX_SHARDS = 1000
shard_count = count(1, MAX_SHARDS, "a SLURM job array's tasks: the default MaxArraySize allows "
                    "1,001")
shard_index = count(0, MAX_SHARDS - 1, "a shard of SHARDS, at most 1,000 of them")
synth_shard_count = count(1, MAX_SYNTHETIC_SHARDS, "shard files written at once; the S2ORC "
                          "release has 100")
parallel_downloads = count(1, 32, "files fetched at once share one network link and the API's "
                           "rate limit")
cpus_per_task = count(1, 1024, "CPUs of one SLURM task")
gpus_per_task = count(0, 64, "GPUs of one SLURM task; a node holds 16 at most")
# pools: REPEATS x sizes x fields pools on disk (each a folder of parquet files); 1e9 ran out
# of memory listing them, 1e5 wrote 1,226 pools a minute until killed
MAX_REPEATS = 100
repeat_count = count(1, MAX_REPEATS, "pool draws per size; the paper draws 3")
repeat_index = count(0, MAX_REPEATS - 1, "a pool draw of at most 100")
# query papers per pool: each query's top K are held at once (100k x 10k x 12 bytes: 12 GB)
query_count = count(1, 100_000, "query papers per pool; the paper's largest is 3,800")
# ranks per query (K, the judged depth, mdcr's top): the runs of a pool are queries x K rows
MAX_DEPTH = 10_000
depth = count(1, MAX_DEPTH, "ranks per query: a run holds queries x K rows; trec_eval's "
              "default depth is 1,000")
sample_count = count(1, 1_000, "pairs drawn per query, each judged by hand or by a model")
mdcr_count = count(1, 1_000, "papers per query of a benchmark; MDCR's: 5 positives, 10 per "
                   "type")
file_count = count(1, 100_000, "files per dataset; an S2AG dataset has about 30")
retry_count = count(0, 100, "tries again without progress; each pause up to 120 s")
MAX_BACKOFF = 120.0  # seconds: the longest pause between tries (s2client.MAX_PAUSE)
backoff = number_in(0.0, MAX_BACKOFF, "a first pause (seconds, doubling at each try)")
batch_count = count(1, 65_536, "papers per batch; the token budget bounds a batch's memory")
part_count = count(1, 1_000_000, "papers per store part, held in memory while it is written")


# a switch's values on make's command line (REPLACE=1); the API's are True and False (flag)
FLAG = ("", "0", "1")


def choice(options: tuple[str, ...]):
    def parse(text: str) -> str:
        if text not in options:
            shown = ", ".join(o or "(empty)" for o in options)
            raise InputError(f"{quoted(text)}: use one of {shown}")
        return text
    parse.__name__ = "value"
    shown = [f"`{option}`" for option in options if option]
    said = [", ".join(shown[:-1]), shown[-1]] if len(shown) > 1 else shown
    parse.words = " or ".join(said)  # type: ignore[attr-defined]
    return parse


def flag(value: str | bool) -> str:
    """A switch: '', 0 or 1 as make and the command line write it, or True or False as the
    API takes it (its 1 and 0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return _flag(value)


_flag = choice(FLAG)
flag.words = _flag.words  # type: ignore[attr-defined]


def corpus_name(text: str) -> str:
    """A corpus name (layout.check_name); an ir_datasets id given as one is refused with the
    command that imports it."""
    from pipeline.external.irds import dataset_hint

    try:
        return check_name("corpus", text)
    except InputError as exc:
        raise InputError(f"{exc}{dataset_hint(text)}") from None


def pool_name(text: str) -> str:
    return check_name("pool", text)


_PATH = re.compile(r"[A-Za-z0-9._/+,:@=~-]+")


def safe_path(path: str | os.PathLike) -> str:
    """A path the Makefile uses as a target: no spaces, quotes or shell characters."""
    text = os.fspath(path)
    if not isinstance(text, str) or not _PATH.fullmatch(text):
        raise InputError(f"{quoted(text)}: use a path of letters, digits and ._/+,:@=~- only (no "
                         "spaces, quotes, line breaks or shell characters)")
    return given_path(text)


def given_path(text: str) -> str:
    """Any path, as every door checks one (layout.check_path): not empty, no NUL byte, no
    name longer than a file system allows, short enough for what the pipeline writes under
    it."""
    return check_path(text)


def input_path(path: str | os.PathLike) -> str:
    """A user's file or folder a stage only reads (RUN, SRC): spaces allowed, but no control
    characters and no space at either end (no shell ever sees it)."""
    text = given_path(path)
    if not text.strip() or text != text.strip() or any(
            unicodedata.category(char) == "Cc" for char in text):
        raise InputError(f"{quoted(text)}: give the path of the file or folder, without control "
                         "characters or spaces at either end")
    return given_path(text)


def sizes(value: str | int) -> str:
    """One size or several, separated by spaces (an int: one)."""
    text = str(value)
    if not text.split():
        raise InputError("empty: give one or more sizes, e.g. 20k or '200k 500k'")
    for size in text.split():
        parse_size(size)
    return text


# a synthetic corpus's papers: its layout holds ~134 bytes a paper at once (268 MB measured
# for 2M), 2.7 GB at 20M; 1e9 (MAX_POOL_SIZE, a size's own bound) would not fit in 24 GiB
MIN_SYNTHETIC_PAPERS, MAX_SYNTHETIC_PAPERS = 100, 20_000_000


def synthetic_size(text: str | int) -> str | int:
    """The papers of a synthetic corpus: one size (20k, 2M), 100 to MAX_SYNTHETIC_PAPERS."""
    value = parse_size(text)
    if not MIN_SYNTHETIC_PAPERS <= value <= MAX_SYNTHETIC_PAPERS:
        raise InputError(f"{quoted(text)}: a synthetic corpus holds {MIN_SYNTHETIC_PAPERS} to "
                         f"{MAX_SYNTHETIC_PAPERS:,} papers (20M: its layout alone takes "
                         "2.7 GB of memory)")
    return text


synthetic_size.words = f"{MIN_SYNTHETIC_PAPERS} to {MAX_SYNTHETIC_PAPERS:,}"  # type: ignore
synthetic_size.most = lambda: MAX_SYNTHETIC_PAPERS  # type: ignore[attr-defined]


def synthetic_papers(value: str | int) -> int | str:
    """A synthetic corpus's papers (the API's synthetic=, papers=): a size (synthetic_size),
    or '' for those it was made with (the corpus command's --synth without a number)."""
    return value if value == "" else parse_size(synthetic_size(value))


synthetic_papers.words, synthetic_papers.most = synthetic_size.words, synthetic_size.most  # type: ignore


def field_names(text: str) -> str:
    """Fields as FIELD names them (pipeline.fields.resolve_fields), or none (empty)."""
    from pipeline.fields import resolve_fields

    if text.strip():
        resolve_fields(text)
    return text


def prompt_text(text: str) -> str:
    """A query prompt: no control character but a line break (`\\n` on make's command line)."""
    if any(ch < " " and ch != "\n" or ch == "\x7f" for ch in text):
        raise InputError(f"{quoted(text)} holds a control character: give printable text, a line "
                         "break written \\n")
    return text


def metric_list(text: str) -> str:
    if text != "auto":  # auto: each pool's own set
        parse_metrics(text)
    return text


def training_sets(value: str | Mapping[str, str | os.PathLike]) -> str | Mapping:
    """`<model>=<file>` pairs separated by spaces or commas, each model named once (the API's:
    a dict, model -> file)."""
    pairs = list(value.items()) if isinstance(value, Mapping) else []
    for word in [] if isinstance(value, Mapping) else value.replace(",", " ").split():
        model, sep, path = word.partition("=")
        if not (model and sep and path):
            raise InputError(f"{word!r}: write <model>=<file of its training papers>, e.g. "
                             "specter=lists/specter.txt")
        pairs.append((model, path))
    for _, path in pairs:
        safe_path(path)
    models = [model for model, _ in pairs]
    if len(set(models)) < len(models):
        raise InputError(f"{quoted(value)}: a model named twice")
    return value


def device(text: str) -> str:
    """One device (cpu, cuda, cuda:<index>), or several separated by commas, of one kind,
    each GPU by its index: a worker process each (cuda:0,cuda:1; cpu,cpu: CPU workers).
    Whether the GPUs are there is the embed stage's check (pipeline/encoding/workers.py)."""
    if "," not in text:
        if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
            raise InputError(f"{quoted(text)}: use cpu, cuda, cuda:<index> or a list such as "
                             "cuda:0,cuda:1")
        return text
    words = text.split(",")
    bad = next((word for word in words if not re.fullmatch(r"cpu|cuda:\d+", word)), None)
    if bad is not None:
        raise InputError(f"{quoted(text)}: {bad!r} in a list; name each device as cpu or "
                         "cuda:<index>, e.g. cuda:0,cuda:1")
    if len({word.partition(":")[0] for word in words}) > 1:
        raise InputError(f"{quoted(text)}: one kind of device, GPUs (cuda:0,cuda:1) or CPU workers "
                         "(cpu,cpu), not both")
    return text


def dataset_list(text: str) -> str:
    """S2AG dataset names separated by commas; empty is refused (not 'every dataset', which
    is hundreds of GB)."""
    names = text.replace(",", " ").split()
    if not names:
        raise InputError("empty: name the datasets, separated by commas (leave "
                         "DATASETS out for the default, papers,abstracts,citations)")
    for name in names:
        if not S2_DATASET.fullmatch(name):
            raise InputError(f"{name!r}: a dataset name is lowercase letters, digits, '-' and "
                             "'_' (such as papers or paper-ids)")
    return text


# ---- the values of the API's own arguments (their Check, on their parameters)
# The forms a model's name takes where it is given (MODEL's declaration: Variable.forms): a
# model to load; a model's runs (<model>~<variant>: a perturbed-query run's); a run scored or
# read (also one imported under its own name); a new imported run's name; imported vectors'
MODEL_FORMS = ("model", "run", "scored", "imported", "vectors")


def model_name(text: str, form: str = "model") -> str:
    """MODEL's one rule, `form` one of MODEL_FORMS (by the function or command it is given to):
    'model', what get_model resolves (a registered name written as registered, hf:, st:,
    vectors:, api:, rerank-api: or a composed name); 'run', also with a query variant
    ('bm25~title'); 'scored', also a run imported under its own name; 'imported', a new
    imported run's name, no model's; 'vectors', imported vectors' name (vectors--<name>). Its
    line names the model and what to give. make checks MODEL by RULES once the goals are known
    (Variable.with_goals)."""
    from pipeline.layout import run_name, split_run_name
    from pipeline.models import get_model, vectors_model

    if form == "imported":
        from pipeline.retrieval.imported import check_model_name

        return check_model_name(text)
    if form == "vectors":
        return vectors_model(text).name
    if form == "model":
        _registered(text)
        return text
    model, variant = split_run_name(text)
    if form == "scored":
        try:
            get_model(model)
        except InputError:
            return check_name("model", text)  # no model of the registry: an imported run's
    return run_name(_registered(model).name, variant)


def _registered(text: str):
    """The registry's entry of model `text`, refused unless a registered name is written as
    registered ('Bm25' is not 'bm25': a run's and a store's name is the registered one)."""
    from pipeline.models import (
        API_PREFIX,
        HF_PREFIX,
        RERANK_API_PREFIX,
        ST_PREFIX,
        VECTORS_PREFIX,
        get_model,
    )

    entry = get_model(text)
    if not text.startswith((HF_PREFIX, ST_PREFIX, VECTORS_PREFIX, API_PREFIX, RERANK_API_PREFIX)) \
            and entry.name != text:
        raise InputError(f"MODEL {quoted(text)}: write it as registered, {entry.name!r}")
    return entry


def first_stage(text: str) -> str:
    """make rerank's FIRST_STAGE: a model that searches or a run imported under its own name
    (model_name's scored form), not a perturbed-query run's (a reranked run takes full
    queries)."""
    from pipeline.layout import VARIANT_SEP

    if VARIANT_SEP in text:
        raise InputError(f"{quoted(text)} is a run of perturbed queries ({VARIANT_SEP!r}): a "
                         "reranked run takes full queries; give the model's name")
    return model_name(text, "scored")


def scored_runs(text: str) -> str:
    """Runs' names separated by commas or spaces, each a model_name of the 'scored' form (the
    text as given: the function splits it)."""
    for name in text.replace(",", " ").split():
        model_name(name, "scored")
    return text


def named(text: str) -> str:
    """A model's or metric's name as results.parquet holds it: not empty."""
    if not text.strip():
        raise InputError("give a non-empty name")
    return text


# what the values of the checks above take, in words, where their kind's words do not say it
# (docs/api.md's table of the arguments; a factory's checks say theirs)
named.words = "not empty"  # type: ignore[attr-defined]
sizes.words = "several in one str too, separated by spaces ('200k 500k')"  # type: ignore
