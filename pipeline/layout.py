"""Every artifact path and naming rule of the pipeline: pool sizes and names, run names,
the files of a corpus, a pool, a run, an embedding store, a Lucene index. Standard library
only (the Makefile's input check runs it before the environment exists).

The data root holds three folders, each a tree per corpus:
    corpora/<corpus>/   raw inputs, papers.parquet, citations.parquet, prefiltered.parquet,
                        pools/<pool>/{queries,candidates,qrels}.parquet
    indexes/<corpus>/   embeddings/<model>/part-*.arrow, <pool>/bm25/ (Lucene),
                        bm25-analysed/<analyzer>/part-*.arrow (each paper's Lucene terms),
                        bm25-tuning/<group>.json
    runs/<corpus>/      <pool>/<model>.{trec,parquet,manifest.json,metrics.parquet,eval.json},
                        stage-times.jsonl; runs/results.parquet, runs/reports/, runs/slurm/
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pipeline.core.errors import InputError, quoted
from pipeline.core.inputs import Roots
from pipeline.glossary import check_variant, split_prompt_tag

# ASCII digits, nothing around them: re's \d and float() take other scripts' digits too
# (core/numbers.py), so that '２０k' or ' 20k' would be read as 20k
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([kKmM]?)")


MAX_POOL_SIZE = 1_000_000_000  # papers: far above any corpus (S2AG holds about 2e8)
def parse_size(text: str) -> int:
    """'20000', '20k', '2M', '1.5M' -> number of candidate papers."""
    match = _SIZE.fullmatch(str(text))
    if not match:
        raise InputError(
            f"malformed SIZE {quoted(text)}: write a number of papers such as 20000, 20k or 2M"
        )
    number, unit = match.groups()
    value = float(number) * {"": 1, "k": 1_000, "m": 1_000_000}[unit.lower()]
    if value != int(value) or value < 1:
        raise InputError(f"malformed SIZE {quoted(text)}: it must be a whole number of papers >= 1")
    if value > MAX_POOL_SIZE:
        raise InputError(f"SIZE {text!r} is over {format_size(MAX_POOL_SIZE)} papers, more than "
                         "any corpus holds: give a pool size such as 2M")
    return int(value)


def format_size(size: int) -> str:
    """20000 -> '20k', 2000000 -> '2M', 1500 -> '1500' (the inverse of parse_size)."""
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


SPLITS = ("test", "validation")  # a pool's split: the test pools, or those BM25 is tuned on
# SPLIT=.. as users write it: the MDCR release names its validation files `val`, BEIR `dev`
SPLIT_NAMES = {"test": "test", "validation": "validation", "val": "validation",
               "dev": "validation"}


def pool_split(text: str) -> str:
    """A split as users write it (test, validation, val, dev) -> a pool's split."""
    if text not in SPLIT_NAMES:
        raise InputError(f"SPLIT {text!r}: use test, or validation (also written val or dev)")
    return SPLIT_NAMES[text]


# ---- names that become folder and file names: a corpus's, a pool's, a model's (its runs) ----
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# a run's model: registered names, hf--<org>--<name>--<pooling>, <name>+bf16, <name>+q<tag>
# (a query prompt), <name>~<variant>
_RUN_NAME = re.compile(r"[A-Za-z0-9][\w.+~-]*", re.ASCII)
MAX_NAME = 100  # characters of a corpus name: room for the suffixes of the files named after it
MAX_COMPONENT = 255  # bytes of one path component (NAME_MAX on Linux and macOS)
_LONGEST_RUN_SUFFIX = len(".metrics.parquet")
MAX_PATH = 4095  # bytes of a whole path (PATH_MAX on Linux, less its NUL)
# bytes of a path the user gives (DATA, RAW, SRC, OUT, RUN, ..., made absolute): the rest of
# MAX_PATH is room for the folders and names the pipeline writes under it (corpus, pool, model,
# file names, temporaries: about 900 bytes at most)
MAX_GIVEN_PATH = 3072


def check_path(path: str | os.PathLike) -> str:
    """`path` as text, if the pipeline can read and write under it, else a one-line InputError
    saying why: the one check of a path at every door (the API's arguments, Data, make's and
    the command line's path options). Its os.fspath must be a str (an os.PathLike may give
    bytes, which the pipeline's paths never are) and not empty (never read as the folder
    '.'); no NUL byte, which no file name can hold (Python's 'embedded null byte' later); no
    name over MAX_COMPONENT bytes and at most MAX_GIVEN_PATH bytes in all once made absolute
    (longer ones would fail later with the file system's 'File name too long')."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise InputError(f"a path of {type(text).__name__} ({text!r:.40}): give it as a str "
                         "or an os.PathLike of one (os.fsdecode decodes bytes)")
    if not text:
        raise InputError("an empty path: give a file or folder")
    if "\0" in text:
        raise InputError(f"a path holding a NUL byte ({text!r:.40}): no file name can hold "
                         "one; give the path without it")
    if long := [part for part in text.split("/")
                if len(part.encode(errors="surrogateescape")) > MAX_COMPONENT]:
        raise InputError(f"a folder name of {len(long[0])} characters ({long[0][:20]}...): "
                         f"file systems allow at most {MAX_COMPONENT}")
    length = len(os.path.abspath(text).encode(errors="surrogateescape"))
    if length > MAX_GIVEN_PATH:
        raise InputError(f"a path of {length:,} bytes ({text[:24]}...): use at most "
                         f"{MAX_GIVEN_PATH:,} (Linux allows {MAX_PATH:,} in all, and the "
                         "pipeline's folders and file names go under it)")
    return text


@dataclass(frozen=True)
class NameRule:
    """What a name that becomes a folder or file name may hold: `pattern` (so it can never
    climb out of its folder, be absolute or empty), at most `longest` characters."""

    pattern: re.Pattern
    longest: int
    shape: str


# ASCII only: a name is set in every output, pdflatex's tables (which stop at 'к' or '漢')
# and the plots' fonts included, so a name no output can set is refused where it enters
_LETTERS = "letters A-Z or a-z, digits 0-9"
_FOLDER_SHAPE = (f"{_LETTERS}, '.', '_' or '-', starting with a letter or digit (a folder "
                 "name)")
NAME_RULES: dict[str, NameRule] = {
    "corpus": NameRule(_FOLDER_NAME, MAX_NAME, _FOLDER_SHAPE),
    "pool": NameRule(_FOLDER_NAME, MAX_COMPONENT, _FOLDER_SHAPE),
    "model": NameRule(_RUN_NAME, MAX_COMPONENT - _LONGEST_RUN_SUFFIX,
                      f"{_LETTERS}, '.', '_', '+', '~' or '-', starting with a letter or "
                      "digit (its runs' file names, set in every table and plot)"),
}


def check_name(kind: str, name: object) -> str:
    """`name` if it is a valid name of a `kind` (NAME_RULES: corpus, pool, model), else a
    one-line InputError naming it. The command line's argument types and the Python API both
    check here, so a name given either way never becomes a path outside its folder."""
    rule = NAME_RULES[kind]
    if not isinstance(name, str) or not rule.pattern.fullmatch(name):
        raise InputError(f"{quoted(name)}: a {kind} name is {rule.shape}")
    if len(name) > rule.longest:
        raise InputError(f"a {kind} name of {len(name)} characters: use at most "
                         f"{rule.longest}")
    clash = reserved_clash(kind, name)
    if clash:
        raise InputError(f"{name!r}: a {kind} name that is {clash}: give another name")
    return name


def reserved_clash(kind: str, name: str) -> str | None:
    """What a `kind` name would collide with in the layout (None when nothing): a corpus's
    folders lie beside the runs root's own files and folders (results.parquet, reports/, ...),
    a pool's beside its corpus's stores and retired/ folder, and a model `<m>.metrics` would
    write its table onto run <m>'s evaluation (`<m>.metrics.parquet`). Compared ignoring case,
    as macOS's file systems do."""
    folded = name.lower()
    reserved = RESERVED_NAMES.get(kind, frozenset())
    if folded in reserved:
        return (f"the name of what the pipeline writes beside each {kind}'s folders "
                f"({', '.join(sorted(reserved))})")
    ending = next((e for e in RUN_NAME_CLASHES if folded.endswith(e)), None)
    if kind == "model" and ending:
        other = name[: -len(ending)]
        return (f"run {other}'s name plus {ending!r}: its table would be {other}'s "
                f"evaluation ({other}{ending}.{RUN_TABLE})")
    return None


class PoolName(NamedTuple):
    scope: str
    size: int
    repeat: int
    seed: int
    split: str = "test"
    exclusion: str = ""  # the tag of the exclusion list its queries were drawn without


EXCLUSION_TAG = 8  # hex digits of an exclusion list's digest that name its pools


def exclusion_tag(digest: str) -> str:
    """The part of an exclusion list's digest (the sha256 of its sorted ids) that names the
    pools drawn without it: two lists never share a pool name."""
    return digest[:EXCLUSION_TAG]


def pool_name(scope: str, size: int, repeat: int, seed: int = 0, split: str = "test",
              exclusion: str = "") -> str:
    """Folder name of a pool: scope is 'all' (dataset-level) or a field slug. The seed is part
    of the name unless it is 0, so pools of two seeds never overwrite each other; so is the tag
    of the list of papers excluded from the queries (EXCLUDE: `-x<tag>`), so pools of two
    lists never do; validation pools (MDCR §3: for tuning BM25) end in '-val'."""
    seed_part = f"-s{seed}" if seed else ""
    exclusion_part = f"-x{exclusion_tag(exclusion)}" if exclusion else ""
    split_part = "-val" if split == "validation" else ""
    return f"{scope}-{format_size(size)}{seed_part}{exclusion_part}-r{repeat}{split_part}"


def parse_pool_name(name: str) -> PoolName:
    """Inverse of pool_name: 'medicine-20k-r0' -> ('medicine', 20000, 0, 0, 'test', ''),
    'all-10k-s1-x3fa2b1c9-r2-val' -> ('all', 10000, 2, 1, 'validation', '3fa2b1c9')."""
    match = re.match(rf"^(.+)-([0-9.]+[kM]?)(?:-s(\d+))?(?:-x([0-9a-f]{{{EXCLUSION_TAG}}}))?"
                     r"-r(\d+)(-val)?$", name)
    if not match:
        raise InputError(f"malformed pool name {name!r}: expected <scope>-<size>[-s<seed>]"
                         "[-x<exclusion>]-r<repeat>[-val]")
    scope, size, seed, exclusion, repeat, val = match.groups()
    return PoolName(scope, parse_size(size), int(repeat), int(seed or 0),
                    "validation" if val else "test", exclusion or "")


# Perturbed queries (pipeline/pools/queries.py): QUERY_VARIANT and the names of their runs.
VARIANT_SEP = "~"


def run_name(model: str, variant: str = "full") -> str:
    """The name a run is written under: the model's, plus `~<variant>` for perturbed queries."""
    return model if check_variant(variant) == "full" else f"{model}{VARIANT_SEP}{variant}"


def split_run_name(name: str) -> tuple[str, str]:
    """`bm25~title` -> ("bm25", "title"); `bm25` -> ("bm25", "full")."""
    model, _, variant = name.partition(VARIANT_SEP)
    return model, check_variant(variant or "full")


class RunPaths(NamedTuple):
    """A run's files, `<model>.<suffix>` for the RUN_SUFFIXES in order."""

    trec: Path
    parquet: Path
    manifest: Path
    metrics: Path  # its evaluation's per-query values
    evaluation: Path  # its evaluation's manifest

    def of(self, suffix: str) -> Path:
        """The file of one of RUN_SUFFIXES."""
        return self[RUN_SUFFIXES.index(suffix)]


def run_paths(runs_root: Path, corpus: str, pool: str, model: str) -> RunPaths:
    """A run's files: trec, parquet, manifest.json, metrics.parquet, eval.json."""
    folder = runs_dir(runs_root, corpus, pool)
    return RunPaths(*(folder / f"{model}.{suffix}" for suffix in RUN_SUFFIXES))


# make export-mteb: a run as MTEB's results tree holds one,
# <model name, "/" as "__">/<revision>/<task>.json, the pool a custom task named
# <corpus>.<pool>, the revision MTEB's name for a model without one
MTEB_REVISION = "no_revision_available"


def mteb_task_name(corpus: str, pool: str) -> str:
    """A pool's task name where MTEB has no task of it (external/mteb_results.task_name)."""
    return f"{corpus}.{pool}"


def mteb_model_dir(out: Path, name: str, revision: str) -> Path:
    """A model's folder in MTEB's results tree, as `mteb.ResultCache` makes it: its name with
    "/" as "__" and " " as "_" (`ModelMeta.model_name_as_path`), then its revision."""
    return out / name.replace("/", "__").replace(" ", "_") / revision


def mteb_result_path(out: Path, name: str, revision: str, task: str) -> Path:
    """A TaskResult file in MTEB's results tree: model, revision, `<task name>.json`."""
    return mteb_model_dir(out, name, revision) / f"{task}{JSON_SUFFIX}"


def mteb_model_meta_path(out: Path, name: str, revision: str) -> Path:
    """The model's `model_meta.json` beside its results, as MTEB's ResultCache saves it."""
    return mteb_model_dir(out, name, revision) / "model_meta.json"


# The stat cache of model files' sha256 (pipeline/encoding/identity.py), one per index root:
# path -> [size, mtime_ns, ctime_ns, inode, sha256], so a checkpoint is hashed once per DATA
MODEL_DIGESTS = ".model-digests.json"


def model_digests_path(index_root: Path) -> Path:
    return index_root / MODEL_DIGESTS


def store_dir(index_root: Path, corpus: str, model: str) -> Path:
    """The embedding store of `model`: a model with a query prompt (`<name>+q<tag>`) has its
    base model's, as the prompt changes only the queries' vectors (glossary.PROMPT_TAG)."""
    return index_root / corpus / EMBEDDINGS / split_prompt_tag(model)[0]


def store_dirs(index_root: Path) -> list[Path]:
    """Every embedding store of an index root (each corpus's, each model's), sorted."""
    return sorted(path for path in index_root.glob(f"*/{EMBEDDINGS}/*") if path.is_dir())


def group_name(pool: str) -> str:
    """The test pool's group: what its validation pools share (scope, size, seed, exclusion
    list)."""
    name = parse_pool_name(pool)
    return (f"{name.scope}-{format_size(name.size)}" + (f"-s{name.seed}" if name.seed else "")
            + (f"-x{name.exclusion}" if name.exclusion else ""))


def tuning_path(index_root: Path, corpus: str, pool: str) -> Path:
    return index_root / corpus / TUNING / f"{group_name(pool)}{JSON_SUFFIX}"


def slurm_dir(runs_root: Path) -> Path:
    """Where the sbatch scripts, their records and their logs live."""
    return Path(runs_root).absolute() / SLURM


def sbatch_path(runs_root: Path, job: str) -> Path:
    """A job's sbatch script: `slurm/<job>.sbatch`."""
    return slurm_dir(runs_root) / f"{job}{SBATCH_SUFFIX}"


def slurm_record(runs_root: Path, job: str) -> Path:
    """What was submitted for a job (its ids, beside its script): `slurm/<job>.json`."""
    return slurm_dir(runs_root) / f"{job}{JSON_SUFFIX}"


# ---- files and folders ---------------------------------------------------------------------
PAPERS = "papers.parquet"
CITATIONS = "citations.parquet"
PREFILTERED = "prefiltered.parquet"
# optional column of PREFILTERED: an abstract's own sentences (list of strings), where a
# collection ships its split (CSFCube); multi-vector encoders read it instead of splitting
ABSTRACT_SENTENCES = "abstract_sentences"
POOL_QUERIES, POOL_CANDIDATES, POOL_QRELS = "queries.parquet", "candidates.parquet", "qrels.parquet"
POOL_FILES = (POOL_QUERIES, POOL_CANDIDATES, POOL_QRELS)
POOL_SPEC = ".spec.json"  # a pool's parameters, written before its files (its manifest: after)
RESULTS_FILE = "results.parquet"
QUARANTINE = "quarantine.jsonl"  # a corpus's bad input lines, with their reasons
LUCENE = "lucene"  # a BM25 index folder's Lucene files: indexes/<corpus>/<pool>/bm25/lucene/
SLURM = "slurm"  # runs/slurm/: sbatch scripts, their records and logs
TIMES_FILE = "stage-times.jsonl"
RESULTS_MANIFEST = "results.manifest.json"
# runs/: what collect gathered last, by the stat keys of the files that decided each evaluation
# (pipeline/evaluation/evaluate.py Collected): a cache, like .checksums.json
RESULTS_COLLECTED = ".results.collected.json"
POOLS, EMBEDDINGS, TUNING = "pools", "embeddings", "bm25-tuning"  # folder names
ANALYSED = "bm25-analysed"  # BM25's analysed-text store (pipeline/retrieval/bm25/store.py)
MANIFEST = "manifest.json"  # what an artifact (a folder, a run) was made from and holds
# a run's files, `<model>.<suffix>` (RunPaths): the ranking, as TREC and as a table, its manifest,
# its evaluation's per-query values and the evaluation's manifest
RUN_TABLE, RUN_METRICS, RUN_EVALUATION = "parquet", "metrics.parquet", "eval.json"
RUN_SUFFIXES = ("trec", RUN_TABLE, MANIFEST, RUN_METRICS, RUN_EVALUATION)
IMPORT_RUN = "import-run"  # the stage of a run made elsewhere (its manifest's `stage`)
# A model name ending in one of these (`.metrics`) would name one of its files as another
# run's: `<m>.metrics` + `.parquet` is run <m>'s evaluation table.
RUN_NAME_CLASHES = tuple(f".{longer[: -len(shorter) - 1]}" for longer in RUN_SUFFIXES
                         for shorter in RUN_SUFFIXES if longer.endswith(f".{shorter}"))


# the kinds of file, by suffix: a stage's scratch files are `<name><suffix>` in its work folder
TABLE_SUFFIX, LINES_SUFFIX, JSON_SUFFIX, ARRAY_SUFFIX = ".parquet", ".jsonl", ".json", ".npy"
SBATCH_SUFFIX = ".sbatch"  # a SLURM job's script (sbatch_path)


def table_file(stem: str) -> str:
    """A parquet file's name (`*` for a pattern): `<stem>.parquet`."""
    return f"{stem}{TABLE_SUFFIX}"


def lines_file(stem: str) -> str:
    """A JSON-lines file's name: `<stem>.jsonl`."""
    return f"{stem}{LINES_SUFFIX}"


def array_file(stem: str) -> str:
    """A numpy array's file name: `<stem>.npy`."""
    return f"{stem}{ARRAY_SUFFIX}"


def pools_dir(corpus_dir: Path) -> Path:
    return corpus_dir / POOLS


def pool_dir(corpus_dir: Path, pool: str) -> Path:
    return pools_dir(corpus_dir) / pool


def pool_names(corpus_dir: Path) -> list[str]:
    """The pools of a corpus that are complete (a manifest), sorted."""
    return sorted(p.parent.name for p in pools_dir(corpus_dir).glob(f"*/{MANIFEST}"))


def runs_dir(runs_root: Path, corpus: str, pool: str) -> Path:
    return runs_root / corpus / pool


RETIRED = "retired"  # <root>/<corpus>/retired/<pool>/: a retired pool's files, index, runs


def retired_dir(folder: Path, pool: str) -> Path:
    """Where `make retire-pool` moves what a pool had in one corpus's folder of a data root
    (corpora/<c>, indexes/<c>, runs/<c>): `<folder>/retired/<pool>`, which no stage reads and
    verify skips (a pool's name never is `retired`)."""
    return folder / RETIRED / pool


def is_retired(path: Path, root: Path) -> bool:
    """Whether `path`, under the data root `root`, lies in a corpus's retired/ folder."""
    parts = path.relative_to(root).parts
    return len(parts) > 2 and parts[1] == RETIRED


BM25_INDEX = "bm25"  # a pool's Lucene index: indexes/<corpus>/<pool>/bm25/
STORE_PART = "part-{}.arrow"  # a store's parts (embeddings, analysed texts), by a digest of ids
PART_DIGEST = 16  # hex digits of the digest that names a part


def analysed_dir(index_root: Path, corpus: str, analyzer: str) -> Path:
    """The analysed-text store of a corpus: each paper's terms under `analyzer`, in parts."""
    return index_root / corpus / ANALYSED / analyzer


def bm25_index_dir(index_root: Path, corpus: str, pool: str) -> Path:
    return index_root / corpus / pool / BM25_INDEX


IMPACT_INDEX = "impact"  # a learned sparse model's Lucene impact index of a pool


def impact_index_dir(index_root: Path, corpus: str, pool: str, model: str) -> Path:
    """A pool's Lucene impact index of a learned sparse model's quantised weights
    (SPARSE_ENGINE=lucene): indexes/<corpus>/<pool>/impact/<model>/."""
    return index_root / corpus / pool / IMPACT_INDEX / model


def store_parts_glob() -> str:
    """The pattern of exactly the names the stores give their parts (`part-<16 hex>.arrow`): a
    file of another name in a store's folder is never taken for an orphan part and removed."""
    return STORE_PART.format("[0-9a-f]" * PART_DIGEST)


def run_file_parts(path: Path) -> tuple[str, str, str, str]:
    """runs/<corpus>/<pool>/<model>.<suffix> -> (corpus, pool, model, suffix); the suffix is
    one of RUN_SUFFIXES (a model name may hold dots)."""
    suffix = next(s for s in sorted(RUN_SUFFIXES, key=len, reverse=True)
                  if path.name.endswith(f".{s}"))
    return path.parts[-3], path.parts[-2], path.name[: -len(suffix) - 1], suffix


def run_files(runs_root: Path, suffix: str) -> list[Path]:
    """Every run file with this suffix (RUN_SUFFIXES) under the runs root, sorted."""
    return sorted(p for p in runs_root.glob(f"*/*/*.{suffix}")
                  if run_file_parts(p)[3] == suffix)


# ---- judgments (pipeline/judging): (query paper, candidate) pairs graded 0-3 by an assessor,
# an artifact of their own, never merged into a pool's citation qrels. An assessor's log (its
# cache: one line per pair asked, fsync'd) is its corpus's, so nested pools ask a pair once:
# runs/<corpus>/judgments/<assessor>.jsonl; a pool's judgments, the pairs its sample holds:
# runs/<corpus>/<pool>/judgments/<assessor>.parquet and its manifest beside it
JUDGMENTS = "judgments"


def judging_log_path(runs_root: Path, corpus: str, assessor: str) -> Path:
    """An assessor's log of the pairs it was asked (`assessor`: its file name)."""
    return runs_root / corpus / JUDGMENTS / lines_file(assessor)


# a pool's samples of unjudged candidates to judge (pipeline/judging/sample.py), one per
# sampling setting (MODELS, SAMPLE, SAMPLE_SEED, JUDGE_DEPTH), each in a folder of its own with
# the judgments of it: `<pool>/judgments/sampling-<12 hex of the settings' digest>/sample.parquet`
# and `.../<assessor>.parquet` (an assessor's file name always holds a '-'), so judging with
# other settings never replaces a sample, nor the judgments made of it. Before that (issue 60)
# a pool had one sample, `<pool>/judgments/sample.parquet` with its judgments beside it: the
# folder `sampling=None` names, still read (judging_folders)
JUDGING_SAMPLE = "sample"
SAMPLING_PREFIX = "sampling-"


def sampling_name(digest: str) -> str:
    """A sampling setting's folder name, from the sha256 of its settings (judging.stage)."""
    return f"{SAMPLING_PREFIX}{digest[:12]}"


def judging_folder(runs_root: Path, corpus: str, pool: str, sampling: str | None = None
                   ) -> Path:
    """The folder of one sample of a pool and its judgments: `<pool>/judgments/<sampling>/`
    (`sampling`: sampling_name's), or with None the one folder of the layout before it."""
    folder = runs_dir(runs_root, corpus, pool) / JUDGMENTS
    return folder if sampling is None else folder / sampling


def judging_folders(runs_root: Path, corpus: str, pool: str) -> list[Path]:
    """Every folder of a pool that holds a sample or judgments: the old layout's first (when
    it has any), then each sampling's, sorted."""
    folder = judging_folder(runs_root, corpus, pool)
    found = sorted(p for p in folder.glob(f"{SAMPLING_PREFIX}*/") if p.is_dir())
    old = any(folder.glob(f"*{TABLE_SUFFIX}")) or any(folder.glob(f"*.{MANIFEST}"))
    return [folder, *found] if old else found


def judgments_path(runs_root: Path, corpus: str, pool: str, assessor: str,
                   sampling: str | None = None) -> Path:
    """A pool's judgments by one assessor of one sample: `<sampling folder>/<assessor>.parquet`."""
    return judging_folder(runs_root, corpus, pool, sampling) / table_file(assessor)


def judgments_manifest(judgments: Path) -> Path:
    """What vouches for a judgments file (or a sample, or the judging page):
    `<stem>.manifest.json` beside it, written last."""
    stem = judgments.name.removesuffix(TABLE_SUFFIX).removesuffix(REPORT_PAGE_SUFFIX)
    return judgments.with_name(f"{stem}.{MANIFEST}")


def sample_path(runs_root: Path, corpus: str, pool: str, sampling: str | None = None) -> Path:
    """A pool's judging sample: `runs/<corpus>/<pool>/judgments/<sampling>/sample.parquet`."""
    return judging_folder(runs_root, corpus, pool, sampling) / table_file(JUDGING_SAMPLE)


def judgments_files(runs_root: Path, corpus: str, pool: str, sampling: str | None = None
                    ) -> list[Path]:
    """Every assessor's judgments of one sample of a pool (not the sample), sorted."""
    folder = judging_folder(runs_root, corpus, pool, sampling)
    return sorted(p for p in folder.glob(f"*{TABLE_SUFFIX}")
                  if p.name != table_file(JUDGING_SAMPLE))


# the judging page of a corpus's samples (make judge-page: pipeline/judging/stage.py), beside
# its assessors' logs: one page for every pool, since nested pools share their pairs; its
# manifest (judgments_manifest: `judging-page.manifest.json`) records the sampling it shows
JUDGING_PAGE = "judging-page"


def judging_page_path(runs_root: Path, corpus: str) -> Path:
    """The corpus's judging page: `runs/<corpus>/judgments/judging-page.html`."""
    return runs_root / corpus / JUDGMENTS / f"{JUDGING_PAGE}{REPORT_PAGE_SUFFIX}"


def judging_logs(runs_root: Path, corpus: str) -> list[Path]:
    """A corpus's assessors' logs (judging_log_path's files), sorted."""
    return sorted((runs_root / corpus / JUDGMENTS).glob(f"*{LINES_SUFFIX}"))


AGREEMENT = "agreement"  # runs/<corpus>/judgments/agreement/<assessor>/: judging/agreement.py
AGREEMENT_FILES = ("kappas.parquet", "confusion.parquet", "agreement.md")


def agreement_paths(runs_root: Path, corpus: str, assessor: str) -> tuple[Path, Path, Path, Path]:
    """An assessor's agreement with the corpus's expert grades, a folder of its own below the
    corpus's judgments (deeper than runs/<corpus>/<pool>/<model>.<suffix>, so never taken for a
    run): the kappas per facet, the confusion matrices, both in markdown, and the manifest."""
    folder = runs_root / corpus / JUDGMENTS / AGREEMENT / assessor
    kappas, confusion, markdown = (folder / name for name in AGREEMENT_FILES)
    return kappas, confusion, markdown, folder / MANIFEST


REPORTS = "reports"  # runs/reports/: every corpus's report
DEMO_CORPUS = "demo"  # the corpus make demo makes (synthetic) and make clean-demo removes

# Names a corpus or a pool cannot take (check_name; compared in lower case): what the layout
# writes beside their folders. A corpus's folder runs/<corpus>/ lies beside the runs root's
# collected results, reports and SLURM folder; a pool's folders indexes/<corpus>/<pool>/ and
# runs/<corpus>/<pool>/ beside its corpus's stores, tuning records, stage times and retired/.
RESERVED_NAMES = {
    "corpus": frozenset({RESULTS_FILE, RESULTS_MANIFEST, REPORTS, SLURM}),
    "pool": frozenset({EMBEDDINGS, ANALYSED, TUNING, TIMES_FILE, RETIRED, POOLS, JUDGMENTS}),
}


def reports_dir(runs_root: Path) -> Path:
    return runs_root / REPORTS


# a report's files: the report, a section's LaTeX table, a plot, the one-file HTML page
REPORT_SUFFIX, REPORT_TABLE_SUFFIX, REPORT_PLOT_SUFFIX = ".md", ".tex", ".png"
REPORT_PAGE_SUFFIX = ".html"  # `<corpus>.html`: every table, plot and provenance, inline
# the page's style and script (package data of pipeline.report, written into the page)
REPORT_PAGE_STYLE, REPORT_PAGE_SCRIPT = "page.css", "page.js"
# the judging page's template, style and script (package data of pipeline.judging, written
# into the page)
JUDGING_PAGE_TEMPLATE = "page.html"
JUDGING_PAGE_STYLE, JUDGING_PAGE_SCRIPT = REPORT_PAGE_STYLE, REPORT_PAGE_SCRIPT


def report_file(reports: Path, corpus: str, section: str = "",
                suffix: str = REPORT_SUFFIX) -> Path:
    """A report's file in the reports folder (reports_dir): `<corpus>.md`, a section's
    `<corpus>-<section>.tex` (or a plot's `.png`)."""
    return reports / f"{corpus}{f'-{section}' if section else ''}{suffix}"


def is_report_file(name: str, corpus: str) -> bool:
    """Whether `name` is a file name report_file gives for `corpus` (its Markdown file or page,
    or a section's table or plot): what a report manifest may list (make clean-demo removes
    only those of the demo's)."""
    if Path(name).name != name:
        return False
    whole = name in (f"{corpus}{REPORT_SUFFIX}", f"{corpus}{REPORT_PAGE_SUFFIX}")
    return whole or (name.startswith(f"{corpus}-") and name.endswith(
        (REPORT_TABLE_SUFFIX, REPORT_PLOT_SUFFIX)) and len(name) > len(corpus) + 5)


def report_manifest(reports: Path, corpus: str) -> Path:
    """What vouches for a corpus's report (`make report`): `<corpus>.manifest.json` in the
    reports folder, the size and sha256 of each file the report wrote and the settings it was
    made with (SEED, EXCLUDE, TRAINING_SETS); removed first and written last."""
    return reports / f"{corpus}.{MANIFEST}"


def report_corpus(manifest: Path) -> str:
    """The corpus whose report a `report_manifest` vouches for (its inverse)."""
    return manifest.name[: -len(f".{MANIFEST}")]


# ---- the data folders of a data folder DATA (pipeline/roots.py: as make names them) ---------
DATA_FOLDERS = {"corpora": "corpora", "indexes": "indexes", "runs": "runs"}  # as Roots names them


def raw_dir(corpora_root: Path, corpus: str, source: str) -> Path:
    """Where a corpus's raw release is read from unless RAW says otherwise:
    corpora/<corpus>/<source> (s2orc or s2ag)."""
    return corpora_root / corpus / source


def released_shard(name: str) -> str:
    """The local name of a released S2AG file, from the last part of its link's path: letters,
    digits and `._-` kept (any other character becomes `_`), `.gz` / `.json.gz` / `.jsonl.gz`
    or no suffix at all becoming `.jsonl.gz`, so every reader takes it for a gzipped shard."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    for suffix in (".jsonl.gz", ".json.gz", ".gz"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return f"{stem.lstrip('.') or 'file'}.jsonl.gz"


def stage_times_path(runs_root: Path, corpus: str) -> Path:
    """The log of a corpus's stage times (the report's stage-times table)."""
    return runs_root / corpus / TIMES_FILE


def coverage_path(store: Path, pool: str) -> Path:
    """The marker that an embedding store holds every paper of `pool`."""
    return store / POOLS / f"{pool}{JSON_SUFFIX}"


QUERY_VECTORS = "queries"  # an embedding store's encoded query texts: queries/<key>.npy


def query_vectors_path(store: Path, key: str) -> Path:
    """Query texts encoded beside an embedding store, under a digest of what was encoded."""
    return store / QUERY_VECTORS / array_file(key)


def imported_queries_path(store: Path) -> Path:
    """The query vectors imported with a store's papers (make import-vectors, rows marked
    `query`): `queries/imported.parquet` (query id as a string, vector)."""
    return store / QUERY_VECTORS / "imported.parquet"


def query_vectors_record(vectors: Path) -> Path:
    """The record (checksum) beside encoded query vectors: `<key>.json`."""
    return vectors.with_suffix(JSON_SUFFIX)


# ---- files read from outside: raw shards, released collections, the package's data ----------
SHARD_SUFFIXES = (".jsonl.gz", ".jsonl")  # a raw release's shards (S2ORC, S2AG)
GZIP_SUFFIX = ".gz"  # a compressed shard
SYNTHETIC_SHARD = "metadata_{}.jsonl.gz"  # the synthetic generator's shards, S2ORC's naming
MAX_SYNTHETIC_SHARDS = 256  # the generator writes every shard at once, one open file each
# make download (S2AG): what it wrote and from which release, beside the dataset folders; a
# file's partial bytes while it downloads (hidden: no reader takes it for a shard); the diff
# files of one release step while they are applied; a diff's update records as a shard
DOWNLOAD_MANIFEST = "download.json"
# The shapes of the Datasets API's values that become paths under a download's raw folder
# (checked before any is used: a server's answer never names a path outside it)
S2_RELEASE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)  # a release id: its date
S2_DATASET = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.ASCII)  # papers, paper-ids, ...
MAX_SHARD_NAME = 200  # characters of a downloaded file's name (room for .<name>.part)
DOWNLOAD_PARTIAL = ".{}.part"
DOWNLOAD_DIFFS = ".diffs"
DIFF_SHARD = "update-{}-{:04d}.jsonl.gz"  # release date, the update file's index in its step
DIFF_KEYS = "keys.npy"  # a step's keys, beside its files, memory-mapped by the workers
SYNTHETIC_WORDS = "data/synthetic_words.json"  # the synthetic generator's words (package data)
# the percentile bootstrap's simulated coverage by queries x mean (package data, written by
# benchmarks/bootstrap_level.py; read by evaluation/significance.py)
BOOTSTRAP_LEVEL_GRID = "data/bootstrap_level.json"
# The checkout's table of make variables, written from pipeline/cli/variables.py
VARIABLES_DOC = "docs/variables.md"
API_DOC = "docs/api.md"  # its table of the Python API's arguments is generated too
EVALUATION_DOC = "docs/evaluation.md"  # each report table's method in full (its notes link here)
# the simulation the bootstrap intervals' stated level comes from (named in their notes)
BOOTSTRAP_LEVEL_RESULTS = "benchmarks/results/bootstrap_level.md"
PUBLISHED_CSV = "published.csv"  # the papers' published numbers (package data of pipeline.report)
HF_CONFIG = "config.json"  # a Hugging Face model's config: its presence in the hub cache
ST_CONFIG = "config_sentence_transformers.json"  # sentence-transformers' own configuration
ST_MODULES = "modules.json"  # a sentence-transformers folder's list of modules
IMPACT_DOCS = "docs.jsonl"  # the impact index's input: a JSON vector per candidate
ST_MODULE_CONFIG = "sentence_bert_config.json"  # a sentence-transformers Transformer module's
STANFORD_METADATA = "artifact.metadata"  # a Stanford ColBERT checkpoint's settings
ADAPTER_CONFIG = "adapter_config.json"  # an `adapters` adapter's config, likewise
MODEL_DOCUMENTATION = ("README*", "LICENSE*", "*.md")  # a model folder's files no loader reads
BEIR_CORPUS, BEIR_QUERIES = "corpus.jsonl", "queries.jsonl"  # a BEIR collection's files
BEIR_QRELS = "qrels"  # a BEIR collection's folder of judgments: qrels/<split>.tsv
BEIR_SPLITS = {"test": "test", "validation": "dev"}  # a pool's split -> BEIR's (and MTEB's)


def beir_qrels_file(split: str) -> str:
    """A pool split's judgments in a BEIR folder: `qrels/test.tsv`, `qrels/dev.tsv`."""
    return f"{BEIR_QRELS}/{BEIR_SPLITS[split]}.tsv"

BEIR_DATASHEET = "datasheet.json"  # what make export-beir says of the pool it wrote
BEIR_QRELS_HEADER = "query-id\tcorpus-id\tscore"  # the first line of its qrels/<split>.tsv
# the official MDCR release, per split (`test`, `val`): the benchmark and its papers' texts
MDCR_BENCHMARK, MDCR_DATA = "mdcr_{}.json", "mdcr_{}_data.jsonl"
# the CSFCube release: judgments per facet, papers (with their sentences), queries, folds
CSFCUBE_ANNOTATIONS = "test-pid2anns-csfcube-{}.json"
CSFCUBE_PAPERS = "abstracts-csfcube-preds.jsonl"
CSFCUBE_QUERIES = "queries-release.csv"
CSFCUBE_SPLITS = "evaluation_splits.json"


@dataclass(frozen=True)
class Place:
    """Where one corpus's data lives: its folder (`<corpora>/<corpus>`) and the roots of what
    is derived from it (`<indexes>/<corpus>`, `<runs>/<corpus>`). Every stage function takes
    one, so the three roots travel together (`pipeline.Data.place` makes one)."""

    corpus_dir: Path
    index_root: Path
    runs_root: Path

    @property
    def corpus(self) -> str:
        return self.corpus_dir.name

    @property
    def index_dir(self) -> Path:
        """The corpus's indexes: embedding and analysed-text stores, Lucene indexes, tuning."""
        return self.index_root / self.corpus

    @property
    def runs_dir(self) -> Path:
        """The corpus's runs and evaluations."""
        return self.runs_root / self.corpus

    @property
    def derived(self) -> tuple[Path, Path]:
        """The folders of what is derived from the corpus (replaced with it): its indexes and
        its runs."""
        return self.index_dir, self.runs_dir

    @property
    def roots(self) -> Roots:
        """The roots as the input records label files (pipeline/core/inputs.py)."""
        return Roots.of(self.corpus_dir, self.index_root, self.runs_root)

    def sibling(self, corpus: str) -> Place:
        """Another corpus under the same roots (an MDCR benchmark built from this one)."""
        return Place(self.corpus_dir.parent / corpus, self.index_root, self.runs_root)


# ---- the inverse: what a manifest's path says it describes (verify) -------------------------
ARTIFACT_KINDS = ("corpus", "pool", "store", "analysed", "index", "tuning", "run", "results",
                  "report", "raw", "download", "judging")


def artifact_kind(path: Path, corpora: Path, runs: Path | None,
                  raw_sources: Collection[str]) -> str | None:
    """Which artifact (ARTIFACT_KINDS) the manifest at `path` describes, from where the layout
    puts it: a corpus's, a pool's, an embedding or analysed-text store's, a Lucene index's, a
    tuning record, a run's or an evaluation's, the collected results', a report's, a raw release's
    (`raw_sources`: the readers' folder names), a download's, a judging sample's, judgments' or
    judging page's (`judging`); None for any other file."""
    if runs is not None and is_judging_manifest(path, runs):
        return "judging"
    grandparent = path.parts[-3] if len(path.parts) >= 3 else None
    if path.name == MANIFEST:
        if path.parent.parent == corpora:
            return "corpus"
        if path.parent.parent.name == POOLS:
            return "pool"
        if grandparent == EMBEDDINGS:
            return "store"
        if grandparent == ANALYSED:
            return "analysed"
        if path.parent.name == BM25_INDEX:
            return "index"
        if path.parent.name in raw_sources:
            return "raw"
    if (path.name == DOWNLOAD_MANIFEST and path.parent.name in raw_sources
            and path.parent.parent.parent == corpora):
        return "download"  # make download's record of corpora/<corpus>/<source>
    if path.parent.name == TUNING:
        return "tuning"
    if (runs is not None and path.parent.parent.parent == runs
            and path.name.endswith((f".{MANIFEST}", f".{RUN_EVALUATION}"))):
        return "run"
    if runs is not None and path == runs / RESULTS_MANIFEST:
        return "results"
    if (runs is not None and path.parent == reports_dir(runs)
            and path.name.endswith(f".{MANIFEST}")):
        return "report"
    return None


def is_judging_manifest(path: Path, runs: Path) -> bool:
    """Whether `path` is the manifest of a pool's sample or judgments (either layout:
    judging_folder) or of a corpus's judging page."""
    if not (path.name.endswith(f".{MANIFEST}") and path.is_relative_to(runs)):
        return False
    parts = path.relative_to(runs).parts
    if len(parts) == 3:
        return parts[1] == JUDGMENTS and path.name == f"{JUDGING_PAGE}.{MANIFEST}"
    return (len(parts) in (4, 5) and parts[2] == JUDGMENTS
            and (len(parts) == 4 or parts[3].startswith(SAMPLING_PREFIX)))


def manifest_globs() -> tuple[str, ...]:
    """Patterns (rglob) of every manifest artifact_kind knows, under any data root."""
    return (MANIFEST, f"*.{MANIFEST}", f"*.{RUN_EVALUATION}", f"{TUNING}/*{JSON_SUFFIX}",
            DOWNLOAD_MANIFEST)

