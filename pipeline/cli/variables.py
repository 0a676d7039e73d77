"""The make variables, declared once: their defaults, their checks and docs/variables.md
all come from VARIABLES.

make defines none of them: it passes those given on its command line to its recipes'
environment (as it does by itself), and `python -m pipeline check` and `goal` read them from
there (`read`: the environment, else the default), check every value, then build the stages'
commands (pipeline/cli/goals.py) with the names and paths of `derived`: make never composes a
model's, a pool's or a data folder's name itself. `python -m pipeline variables --write` writes
docs/variables.md again; tests/cli/test_variables.py fails when the committed one differs.

Standard library only, like the rest of the check (the Makefile runs it with the system Python
before the environment exists). The validators live in pipeline.cli.checks, where the stages'
options use them too; main imports this module only when it builds its parser.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import layout
from pipeline.cli.checks import (
    BACKENDS,
    BM25_ENGINES,
    OneLineParser,
    checked,
    choice,
    corpus_name,
    dataset_list,
    input_path,
    metric_list,
    non_negative,
    parallel_downloads,
    pool_name,
    positive,
    safe_path,
    shard_count,
    sizes,
    training_sets,
    worker_count,
    xdist_workers,
)
from pipeline.core.errors import InputError
from pipeline.corpus.manifest import written_whole
from pipeline.external.irds import dataset_id
from pipeline.glossary import CITATION_MODES, FOS_SOURCES, VARIANTS
from pipeline.models import (
    HF_PREFIX,
    IMPORT_VECTORS,
    PRECISIONS,
    SIMILARITIES,
    VECTORS_PREFIX,
    get_model,
    with_precision,
)
from pipeline.readers import SOURCES
from pipeline.roots import ROOT_OPTIONS, ROOT_VARIABLES, data_roots
from pipeline.slurm import check_executor, check_partition, check_time

ROOT = Path(__file__).resolve().parents[2]
DOCS = Path(layout.VARIABLES_DOC)


@dataclass(frozen=True)
class Variable:
    """A user variable of the Makefile.

    default: the value when neither make's command line nor the environment gives one; a
    function of the values before it (SOURCE, MDCR, QUERIES follow CORPUS), which `shown` then
    says in words for the docs. check: the argparse type the value is checked with (None: the
    check checks it with the others it depends on, house.checked_variables). optional: an
    empty value is no value (the check skips it). one_word: one value, never several words (a
    path, a name).
    alias: a second name the check accepts (TIME for SLURM_TIME, on make's command line)."""

    name: str
    default: str | Callable[[dict[str, str]], str]
    check: Callable[[str], object] | None
    help: str
    group: str
    shown: str = ""
    optional: bool = False
    one_word: bool = False
    alias: str = ""


GROUPS = {
    "data": "Corpus and data folders",
    "pools": "Pools (make pool)",
    "models": "Models",
    "search": "Search",
    "eval": "Evaluation and fusion (make eval, make fuse)",
    "mdcr": "MDCR-style benchmarks and outside collections",
    "cluster": "Where embed runs (make embed, make eval; on a SLURM cluster: docs/cluster.md)",
    "demo": "make demo",
    "paper grid": "The paper's grid (make pools-paper)",
    "tests": "The test suite (make test, make test-fast)",
}
FLAG = ("", "0", "1")
V = Variable
VARIABLES: tuple[Variable, ...] = (
    # ---- data
    V("CORPUS", "demo", corpus_name, "the corpus every stage works on: its folder under "
      "corpora/, indexes/ and runs/", "data", one_word=True),
    V("DATA", ".", safe_path, "where corpora/, indexes/ and runs/ live (a scratch disk on a "
      "cluster, say); default the checkout", "data", one_word=True),
    V("CORPORA_DIR", "", safe_path, "the corpora folder, where it is not DATA's corpora/ "
      "(the stages' --corpora-root)", "data", shown="DATA/corpora", optional=True,
      one_word=True),
    V("INDEX_DIR", "", safe_path, "the indexes folder, where it is not DATA's indexes/ (the "
      "stages' --index-root)", "data", shown="DATA/indexes", optional=True, one_word=True),
    V("RUNS_DIR", "", safe_path, "the runs folder, where it is not DATA's runs/ (the stages' "
      "--runs-root)", "data", shown="DATA/runs", optional=True, one_word=True),
    V("SOURCE", lambda v: "s2ag" if v["CORPUS"] == "s2ag" else "s2orc", choice(SOURCES),
      "the reader: the S2ORC 2020 release (s2orc) or the S2AG datasets (s2ag: papers/, abstracts/, "
      "citations/)", "data", shown="s2orc; s2ag when CORPUS=s2ag", one_word=True),
    V("RAW", "", safe_path, "the folder of the raw release: S2ORC's metadata/, or S2AG's "
      "papers/, abstracts/ and citations/", "data",
      shown="the corpus's SOURCE folder under DATA (corpora/CORPUS/SOURCE)", optional=True,
      one_word=True),
    V("FOS_SOURCE", "external", choice(FOS_SOURCES), "S2AG: which field labels count: "
      "external (MAG-like) or s2-fos-model", "data", one_word=True),
    V("RELEASE", "latest", None, "make download: the S2AG release, a date (2026-11-18) or "
      "latest (recorded as its date)", "data", one_word=True),
    V("DATASETS", "papers,abstracts,citations", dataset_list, "make download: the S2AG "
      "datasets, separated by commas", "data", one_word=True),
    V("FIRST", "", positive, "make download: a trial, only the first FIRST files of each "
      "dataset (empty: every file)", "data", shown="every file", optional=True,
      one_word=True),
    V("UPDATE", "", choice(FLAG), "1: make download brings a folder holding an older release "
      "to RELEASE with the API's diffs (then make corpus ingests again)", "data",
      one_word=True),
    V("PARALLEL", "4", parallel_downloads, "make download: files downloaded at once (at most "
      "32)", "data", one_word=True),
    V("CITATIONS", "inbound", choice(CITATION_MODES), "what the prefilter counts as a "
      "paper's citations: inbound, outbound or either", "data", one_word=True),
    V("STRICT", "", choice(FLAG), "1: stop ingest at the first bad line instead of "
      "quarantining it", "data", one_word=True),
    # ---- pools
    V("SIZE", "10k", sizes, "the pool size: 20000, 20k, 2M; several separated by spaces",
      "pools"),
    V("FIELD", "", None, "a field-level pool: one of the 19 MAG fields (case insensitive), "
      "all, or several separated by spaces with '-' for a name's own space (medicine "
      "computer-science)", "pools", shown="(empty: a dataset-level pool)", optional=True),
    V("REPEATS", "1", positive, "samples per size (the paper: 3)", "pools"),
    V("SEED", "0", non_negative, "the pools' seed, part of a pool's name unless 0 (two seeds "
      "never overwrite each other); also the random model's and make mdcr's", "pools"),
    V("QUERIES", lambda v: "50" if v["CORPUS"] == "demo" else "", positive, "query papers per pool",
      "pools", shown="50 on CORPUS=demo, else the paper's: 3,800 dataset-level, 200 per field",
      optional=True),
    V("EXCLUDE", "", safe_path, "papers never used as queries (the paper: SPECTER's and "
      "SciNCL's training papers): a file of CorpusIDs, one per line or a JSON list; its ids "
      "name the pools (-x<tag>), and make report shows the pools of this list",
      "pools", shown="(empty: no paper left out)", optional=True, one_word=True),
    V("POOL", "", pool_name, "make retire-pool: the pool to retire, e.g. one whose "
      "EXCLUDE list changed (make verify names them); make import-run: the pool the run "
      "ranks", "pools", optional=True,
      one_word=True),
    # ---- models
    V("MODEL", "minilm", None, "one model: a registered name (make models lists them), "
      "hf:<org>/<name> (any Hugging Face encoder, with POOLING), vectors:<name> (make "
      "import-vectors), or a fused model's name; make import-vectors: the name of the vectors",
      "models"),
    V("POOLING", "", None, "cls or mean, for MODEL=hf:<org>/<name>", "models",
      shown="mean", optional=True, one_word=True),
    V("PRECISION", "fp32", choice(PRECISIONS), "the encoder's floating-point precision: fp32 "
      "(the authors' references), bf16 or fp16 (GPU only) for speed; a run in another "
      "precision is the model <name>+bf16, never mixed with fp32 runs", "models",
      one_word=True),
    V("MODEL_PATH", "", safe_path, "a local folder with the model's save_pretrained files, "
      "for nodes without hub access", "models", optional=True, one_word=True),
    # ---- search
    V("SIMILARITY", "cosine", choice(SIMILARITIES), "make import-vectors: how a search "
      "compares the imported vectors: cosine, ip (inner product) or l2 (recorded in their "
      "store)", "models", one_word=True),
    V("THREADS", "2", worker_count, "ingest's and the synthetic corpus's worker processes, "
      "Lucene and search threads, at most 4 per CPU core of this machine (a stage never starts "
      "more than it has work for); with EXECUTOR=slurm also each job's CPUs (--cpus-per-task)",
      "search"),
    V("BM25_ENGINE", "arrays", choice(BM25_ENGINES), "BM25 on arrays (Lucene's analysis and "
      "scores in numba, faster for whole-abstract queries) or on lucene (Anserini): the same "
      "runs, so a change redoes none", "search", one_word=True),
    V("BACKEND", "auto", choice(BACKENDS), "the dense search backend: auto, faiss-cpu, "
      "faiss-gpu, torch-cuda, torch-cpu (a forced one that cannot run is an error; the run "
      "manifest says which ran)", "search", one_word=True),
    V("QUERY_VARIANT", "full", choice(VARIANTS), "the same pools searched with perturbed "
      "queries: full, title, abstract, shuffled, deleted30, typos (pipeline/pools/queries.py); "
      "their runs are named after the model and the variant, beside the others", "search",
      one_word=True),
    # ---- eval
    V("PAPER_IDS", "", safe_path, "make training-ids: the folder of S2AG's paper-ids "
      "dataset (SHA -> CorpusID)", "pools", optional=True, one_word=True),
    V("TRAINING_SETS", "", training_sets, "make report: each model's training "
      "papers, <model>=<file> separated by spaces (files as for EXCLUDE): the share of every "
      "pool's queries and positives in them (leakage)", "eval",
      shown="(empty: no leakage table)", optional=True),
    V("METRICS", "auto", checked(metric_list), "what eval scores: auto (each pool's own set: "
      "large-scale pools MAP, NDCG, R@30; MDCR-style pools MAP, NDCG, R@5), a set "
      "(large-scale, mdcr, beir: nDCG@10, R@100; csfcube: NDCG%20, MAP of grades >= 2) or "
      "ranx names, e.g. 'map ndcg@10 recall@30'",
      "eval"),
    V("MODELS", "", None, "make fuse, make mdcr-jaccard: the models, separated by commas "
      "(MODELS=bm25,minilm; an hf: model's pooling as hf:<org>/<name>@cls)", "eval"),
    V("METHOD", "rrf", None, "make fuse: ranx's fusion method (rrf, wsum, sum, mnz, ...)",
      "eval"),
    # ---- mdcr
    V("MDCR", lambda v: f"{v['CORPUS']}-mdcr", corpus_name, "make mdcr: the benchmark corpus "
      "it writes", "mdcr", shown="CORPUS-mdcr", one_word=True),
    V("MDCR_MODELS", "bm25,minilm", None, "make mdcr: the models whose top-ranked papers give "
      "the model-based negatives, separated by commas (the paper's: bm25,specter,scincl; "
      "make mdcr-jaccard MODELS=.. helps choose)", "mdcr"),
    V("SRC", "", input_path, "make import-mdcr, make import-beir, make import-csfcube: the "
      "folder of files to import (import-csfcube: the CSFCube release); make import-vectors: "
      "the parquet file of the vectors (columns corpusid, vector); spaces allowed",
      "mdcr", optional=True),
    V("OUT", "", safe_path, "make export-mdcr: the folder it writes; make mdcr-scores: the "
      "scores file", "mdcr", optional=True, one_word=True),
    V("DATASET", "", checked(dataset_id), "make import-irds: the ir_datasets id of the "
      "collection to import (beir/scidocs, nfcorpus/test, ...: https://ir-datasets.com)",
      "mdcr", optional=True, one_word=True),
    V("SPLIT", "test", checked(layout.pool_split), "the split imported or exported: "
      "test, val (MDCR) or dev (BEIR)", "mdcr", one_word=True),
    V("REPLACE", "", choice(FLAG), "1: make mdcr, import-mdcr, import-beir and import-csfcube "
      "may replace an "
      "existing corpus of the same kind (without it they refuse to write into a corpus that "
      "holds anything); make import-run may replace a run imported under MODEL from another "
      "file, make import-vectors the vectors imported under MODEL from another file or with "
      "another SIMILARITY", "mdcr", one_word=True),
    V("RUN", "", input_path, "make import-run: the TREC run file made elsewhere (qid Q0 docid "
      "rank score tag per line), imported as the run MODEL of POOL; spaces allowed", "eval",
      optional=True),
    V("DROP_UNKNOWN", "", choice(FLAG), "1: make import-run drops (and counts) the lines "
      "naming a query or paper POOL does not have, instead of refusing the run", "eval",
      one_word=True),
    # ---- cluster
    V("EXECUTOR", "local", checked(check_executor), "where embed runs: local (this machine; "
      "the SHARDS one after another in one process) or slurm (an sbatch job array under "
      "runs/slurm/, one shard per task; make eval then waits for it)", "cluster",
      one_word=True),
    V("SHARDS", "1", shard_count, "shards of the embed stage: array tasks with slurm, one after "
      "another with local; at most 1,000 (SLURM's default MaxArraySize)", "cluster"),
    V("PARTITION", "", checked(check_partition), "#SBATCH --partition: one name, or several "
      "separated by commas", "cluster", shown="the cluster's default", optional=True,
      one_word=True),
    V("GPUS_PER_TASK", "1", non_negative, "#SBATCH --gres=gpu:K of each task (and of the eval "
      "job); 0 asks for none", "cluster"),
    V("SLURM_TIME", "", checked(check_time), "#SBATCH --time of each job, e.g. 90 (minutes), "
      "4:00:00, 1-12:00:00; TIME=.. on make's command line is an alias (a TIME in the "
      "environment, GNU time's format, is never read)", "cluster",
      shown="the cluster's default", optional=True, one_word=True, alias="TIME"),
    # ---- demo
    V("DEMO_PAPERS", "120k", sizes, "papers of the synthetic demo corpus, for a new one or "
      "when given (then the corpus is made again with it); not given, a command uses the "
      "corpus as it is", "demo"),
    V("DEMO_SIZES", "2k 5k 10k", sizes, "the demo's dataset-level pool sizes", "demo"),
    V("DEMO_MODELS", "bm25 minilm random", None, "the models make demo evaluates, separated "
      "by spaces", "demo"),
    V("DEMO_SEED", "0", non_negative, "the synthetic demo corpus's seed, as DEMO_PAPERS: "
      "given, the corpus is made again with it", "demo"),
    V("DEMO_FIELDS", "medicine biology computer-science", None, "a small Table 2: the fields "
      "of the demo's field-level pools (names with '-' for spaces; empty: none)", "demo"),
    V("DEMO_FIELD_SIZE", "1k", sizes, "the size of the demo's field-level pools", "demo"),
    V("DEMO_FIELD_QUERIES", "25", positive, "queries per demo field-level pool", "demo"),
    V("DEMO_REPEATS", "3", positive, "pool draws per demo pool size (REPEATS for make demo): "
      "three, so that its report splits the variance between queries and pool draws", "demo"),
    # ---- paper grid
    V("PAPER_SIZES", "200k 500k 1M 2M", sizes, "dataset-level pool sizes (MDCR section 3)",
      "paper grid"),
    V("PAPER_QUERIES", "3800", positive, "queries per dataset-level pool", "paper grid"),
    V("PAPER_FIELD_SIZE", "100k", sizes, "the size of the field-level pools (all 19 fields)",
      "paper grid"),
    V("PAPER_FIELD_QUERIES", "200", positive, "queries per field-level pool", "paper grid"),
    V("PAPER_REPEATS", "3", positive, "samples per size", "paper grid"),
    # ---- tests
    V("TEST_WORKERS", "2", xdist_workers, "test processes (pytest-xdist), 1 to 4 per CPU core; "
      "each builds the session's fixture corpora itself, up to 1.3 GiB resident each as "
      "measured; pytest's own options go in PYTEST_ADDOPTS", "tests", one_word=True),
)
del V
BY_NAME = {v.name: v for v in VARIABLES}

# The names and paths the goals' commands use (pipeline/cli/goals.py), from the checked values:
# never composed by make.
DERIVED = {
    "CORPORA_ROOT": "CORPORA_DIR, or DATA's corpora/ folder (absolute): --corpora-root",
    "INDEX_ROOT": "INDEX_DIR, or DATA's indexes/ folder (absolute): --index-root",
    "RUNS_ROOT": "RUNS_DIR, or DATA's runs/ folder (absolute): --runs-root",
    "RAW_DIR": "RAW, or the corpus's default raw folder",
    "WRITTEN_WHOLE": "benchmark or collection when CORPUS was written whole by one command "
                     "(make mdcr, the imports: nothing to ingest), else empty",
    "MODEL_NAME": "the name MODEL's runs are written under (with QUERY_VARIANT)",
    "MODEL_FILE": "MODEL's file-safe name (the stages' --model)",
    "DEMO_PATHS": "the demo corpus's folders under the three data roots (make clean-demo; "
                  "commas), whose report files its report manifest lists",
}


# ---- the targets: what `make help` prints, and what each goal needs --------------------------
@dataclass(frozen=True)
class Target:
    """A target of the Makefile, as `make help` shows it: `make <name> <usage>`, then `help`
    (and the lines of `more` below it). needs: the variables the goal cannot run without, each
    with what to give (formatted with the variables' values, e.g. {SPLIT}); the check refuses
    the goal without them, before anything runs. A variable with a default (CORPUS) is needed
    as given on make's command line or in the environment (GIVEN), never its default. pools:
    the goal works on CORPUS's pools, so one must exist. local: the goal runs every stage on
    this machine (EXECUTOR=slurm is for make embed and make eval)."""

    name: str
    usage: str
    help: str
    more: tuple[str, ...] = ()
    needs: dict[str, str] = field(default_factory=dict)
    pools: bool = False
    local: bool = False


NEW_CORPUS = "<name of a new corpus> (the corpus it writes)"
T = Target
TARGETS: tuple[Target, ...] = (
    T("demo", "", "set up, generate the demo corpus, run every stage, report", local=True),
    T("test", "", "set up and run the test suite (and ruff)"),
    T("test-fast", "", "the test suite without the slow tests"),
    T("lint", "", "ruff and the import contracts (lint-imports)"),
    T("setup", "", "the virtual environment VENV, with everything installed"),
    T("setup-gpu", "", "on a GPU node: Faiss GPU in place of faiss-cpu"),
    T("download", "CORPUS=s2ag [RELEASE=latest FIRST=2]", "the S2AG datasets (key: "
      "S2_API_KEY)", ("(FIRST=2: a trial; UPDATE=1: apply the diffs to a newer release)",),
      needs={"CORPUS": "<the corpus to download into, e.g. s2ag>"}),
    T("corpus", "[RAW=dir]", "ingest and prefilter CORPUS (the demo's: generate it first)"),
    T("pool", "[FIELD=f] SIZE=20k", "build a dataset-level (or field-level) pool",
      ("(EXCLUDE=ids.txt: the models' training papers never drawn as queries)",)),
    T("pools-paper", "", "the paper's grid: test and validation pools"),
    T("pools", "", "rebuild the stale, damaged or half-written pools"),
    T("retire-pool", "POOL=all-10k-r0", "move a pool, its index and runs into retired/",
      ("(a pool whose EXCLUDE list changed: make verify names it)",),
      needs={"CORPUS": "<the corpus of the pool>", "POOL": "<the pool to retire>"}),
    T("training-ids", "SRC=f PAPER_IDS=dir OUT=f", "S2 SHAs (SPECTER's lists) as CorpusIDs",
      needs={"SRC": "<SPECTER's data.json or train.txt>",
             "PAPER_IDS": "<folder of S2AG's paper-ids shards>", "OUT": "<file to write>"}),
    T("eval", "MODEL=bm25|minilm|..", "index, search and score every pool of CORPUS",
      ("(QUERY_VARIANT=title: the pools with perturbed queries)",), pools=True),
    T("index", "MODEL=..", "only index (Lucene / embeddings) every pool of CORPUS", pools=True),
    T("search", "MODEL=..", "only index and search: the runs, unscored", pools=True),
    T("embed", "[EXECUTOR=slurm SHARDS=16 SLURM_TIME=4:00:00]", "embed the pools' papers",
      ("(EXECUTOR=slurm: a SLURM job array, SLURM_TIME per job)",)),
    T("fuse", "MODELS=bm25,minilm [METHOD=rrf]", "fuse the models' runs (ranx), evaluate",
      needs={"MODELS": "a,b (e.g. MODELS=bm25,minilm)"}, local=True),
    T("mdcr", "[MDCR_MODELS=bm25,minilm]", "an MDCR-style benchmark (corpus CORPUS-mdcr)"),
    T("mdcr-jaccard", "MODELS=a,b,c", "overlap of models' top negatives (choose MDCR_MODELS)",
      needs={"MODELS": "a,b,.. (e.g. MODELS=bm25,minilm,random)"}),
    T("import-mdcr", "SRC=dir CORPUS=mdcr", "the official MDCR files as a corpus",
      needs={"CORPUS": NEW_CORPUS, "SRC": "<folder holding mdcr_{SPLIT}.json>"}),
    T("export-mdcr", "OUT=dir CORPUS=..", "a benchmark corpus in the official layout",
      needs={"OUT": "<folder>"}),
    T("mdcr-scores", "MODEL=.. OUT=f.json", "the official scores file of a model's runs",
      needs={"OUT": "<scores file>"}),
    T("import-beir", "SRC=dir CORPUS=scidocs", "a BEIR-layout collection as a corpus",
      needs={"CORPUS": NEW_CORPUS, "SRC": "<folder holding corpus.jsonl>"}),
    T("import-irds", "DATASET=beir/scidocs CORPUS=scidocs", "an ir_datasets collection as a "
      "corpus", needs={"CORPUS": NEW_CORPUS, "DATASET": "<an ir_datasets id>"}),
    T("import-csfcube", "SRC=dir CORPUS=csfcube", "the CSFCube release: a pool per facet",
      ("(mdcr, import-*: REPLACE=1 replaces a corpus of its kind)",),
      needs={"CORPUS": NEW_CORPUS, "SRC": "<the CSFCube release folder>"}),
    T("import-run", "CORPUS=.. POOL=.. RUN=f.trec MODEL=name", "a run made elsewhere, "
      "scored by make eval MODEL=name", ("(DROP_UNKNOWN=1: drop and count lines of unknown "
                                         "ids)",),
      needs={"CORPUS": "<the corpus of the pool>", "POOL": "<the pool the run ranks>",
             "RUN": "<the TREC run file>", "MODEL": "<a name for the run>"}),
    T("import-vectors", "CORPUS=.. MODEL=name SRC=f.parquet", "vectors made elsewhere, "
      "searched as MODEL=vectors:name", ("(SIMILARITY=cosine|ip|l2: how they are compared)",),
      needs={"CORPUS": "<the corpus of the papers>", "MODEL": "<a name for the vectors>",
             "SRC": "<the parquet file: corpusid, vector>"}),
    T("report", "", "tables and plots under runs/reports/"),
    T("verify", "", "check every artifact: corrupt, partial or stale?",
      ("(each problem with the command that repairs it)",)),
    T("sweep", "", "remove temporaries left by killed processes"),
    T("models", "", "list the model registry"),
    T("clean-demo", "", "remove the demo's corpus, indexes, runs and reports"),
    T("check", "", "check the variables given (what every target does first)"),
    T("help", "", "this list (the default goal)"),
)
del T
TARGET_NAMES = {t.name: t for t in TARGETS}
HELP_WIDTH = 30  # the column the descriptions start at


def help_text() -> str:
    """`make help`: each target's usage and its one line (from TARGETS)."""
    lines = []
    for target in TARGETS:
        usage = " ".join(filter(None, (f"make {target.name}", target.usage)))
        lines.append(f"{usage:{HELP_WIDTH}} {target.help}" if len(usage) < HELP_WIDTH
                     else f"{usage}  {target.help}")
        lines += [" " * (HELP_WIDTH + 1) + line for line in target.more]
    lines.append("The variables (CORPUS, MODEL, SIZE, ...): docs/variables.md, or "
                 "python3 -m pipeline variables")
    return "\n".join(lines) + "\n"


# The data folders' variables: a command the check suggests names those given (they locate
# the data it acts on).
WHERE = ("DATA", "CORPORA_DIR", "INDEX_DIR", "RUNS_DIR")


# The Makefile's own interpreter and environment: settable on make's command line or in the
# environment, plain paths only (make runs them, single-quoted).
TOOL_VARS = ("PYTHON", "VENV", "PY", "STAMP")
TOOL_PATH = re.compile(r"[A-Za-z0-9._/+-]+")
# What make's command line may set besides VARIABLES (and their aliases): TOOL_VARS and make's
# own variables.
MAKE_OWN = frozenset({*TOOL_VARS, "SHELL", ".SHELLFLAGS", "MAKE", "MAKEFLAGS", "MFLAGS",
                      "MAKEFILES", "MAKEOVERRIDES", "GNUMAKEFLAGS", "MAKESHELL"})
# make's goals (MAKECMDGOALS), which the Makefile exports under this name: what they need is
# checked (TARGETS), and some names depend on them (model_spec, run_without_model).
GOALS_ENV = "MDCR_MAKE_GOALS"
# make's command line as the Makefile's check gets it: $(shell) does not see it, so the Makefile
# passes MAKEOVERRIDES (`CORPUS=c MODEL=a\\ b`: a backslash escapes the next character), with
# each line break as the byte 0x1e ($(shell) would drop it).
OVERRIDES_ENV, LINE_BREAK = "MDCR_MAKE_OVERRIDES", "\x1e"
ALIAS = {v.alias: v.name for v in VARIABLES if v.alias}


def command_line(makeflags: str) -> list[str]:
    """The names of the variables given on make's command line, in MAKEFLAGS as make passes
    it to a recipe (`ks -j2 -- CORPUS=c MODEL=a\\ b`: the assignments after ` -- `, a space
    in a value escaped); never the environment's."""
    match = re.search(r"(?:^| )-- (.*)", makeflags, re.S)
    words = re.split(r"(?<!\\) ", match.group(1)) if match else []
    names = (re.match(r"([^\s:+?!=]+)\s*[:+?!]*=", word) for word in words)
    return [name.group(1) for name in names if name]


def overrides(text: str) -> dict[str, str]:
    """The assignments of make's MAKEOVERRIDES (`A=x B=y\\ z`), name -> value, in their order:
    words split at unescaped spaces, a backslash taking the next character as it is."""
    words, word, escaped = [], [], False
    for char in text.replace(LINE_BREAK, "\n"):
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == " ":
            words.append("".join(word))
            word = []
        else:
            word.append(char)
    words.append("".join(word))
    found = (re.fullmatch(r"([^\s:+?!=]+)\s*[:+?!]*=(.*)", w, re.S) for w in words if w)
    return {m.group(1): m.group(2) for m in found if m}


def dry_run(makeflags: str) -> bool:
    """Whether make runs with -n (or -t, -q): its one-letter flags are MAKEFLAGS's first word.
    The goals then print their commands and run none (the Makefile runs them with `+`)."""
    first = makeflags.split(" ", 1)[0]
    return not first.startswith("-") and "=" not in first and bool(set(first) & set("ntq"))


def refuse_unsafe(environ: Mapping[str, str], names: list[str]) -> None:
    """A value holding '$' or a line break, or a tool variable (PYTHON, VENV, ...) that is no
    plain path, is refused: make would run a '$' as make code (the Makefile refuses it on its
    command line itself, before passing it on), and a value is one line."""
    for name in names:
        value = environ[name]
        if "$" in value:
            raise InputError(f"{name} holds a '$', which make would run as code: give a plain "
                             "value")
        if "\n" in value or "\r" in value:
            raise InputError(f"{name} holds a line break: give the value on one line")
    for name in (n for n in TOOL_VARS if n in names):
        if not TOOL_PATH.fullmatch(environ[name]):
            raise InputError(f"{name} must be one executable or path of letters, digits and "
                             "._/+- (no spaces or shell characters), e.g. PYTHON=python3.11 or "
                             "VENV=.venv")


def default_value(var: Variable, values: dict[str, str]) -> str:
    """The default of `var`, given the values of the variables declared before it."""
    return var.default(values) if callable(var.default) else var.default


def read(environ: Mapping[str, str]) -> argparse.Namespace:
    """The variables as make's recipes get them: each from `environ` (make's command line,
    which make exports, or the environment), else its default, checked by its argparse type
    (one line naming the variable, exit status 2); SLURM_TIME from TIME when TIME came on make's
    command line (a TIME of the environment is GNU time's). With GOALS (make's goals), GIVEN
    (the variables given) and COMMAND_LINE (every variable on make's command line, known or
    not), as check_goals reads them, and DRY_RUN (make -n)."""
    if OVERRIDES_ENV in environ:  # the Makefile's check: its command line from MAKEOVERRIDES
        line = overrides(environ[OVERRIDES_ENV])
        environ, names = {**environ, **line}, list(line)
    else:  # a recipe's: make exported its command line, and names it in MAKEFLAGS
        names = command_line(environ.get("MAKEFLAGS", ""))
    given = [v.name for v in VARIABLES if v.name in environ]
    aliased = [a for a, name in ALIAS.items() if a in names and name not in names]
    refuse_unsafe(environ, [*given, *aliased, *(n for n in TOOL_VARS if n in environ)])
    values: dict[str, str] = {}
    for var in VARIABLES:
        values[var.name] = environ[var.name] if var.name in given else default_value(var, values)
    argv = [f"--{name}={value}" for name, value in values.items()]
    argv += [f"--{alias}={environ[alias]}" for alias in aliased]
    parser = OneLineParser(prog="python -m pipeline check")
    add_options(parser)
    args = parser.parse_args(argv)
    for alias in aliased:
        setattr(args, ALIAS[alias], getattr(args, alias))
    args.GOALS = environ.get(GOALS_ENV, "")
    args.GIVEN = " ".join(given)
    args.COMMAND_LINE = " ".join(names)
    args.DRY_RUN = dry_run(environ.get("MAKEFLAGS", ""))
    return args


def check_command_line(names: str) -> None:
    """Every variable given on make's command line (COMMAND_LINE, never the environment's,
    which holds PATH and the like) is one make knows: a misspelt one (MODLE=bm25) would
    otherwise be ignored, and the default run instead. InputError with the nearest name."""
    known = sorted({*BY_NAME, *(v.alias for v in VARIABLES if v.alias), *MAKE_OWN})
    for name in sorted(set(names.split())):
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            raise InputError(f"unknown variable {name} on make's command line"
                             + (f": did you mean {near[0]}?" if near else "")
                             + " (the variables: docs/variables.md, or python3 -m pipeline "
                             "variables)")


def check_goals(args: argparse.Namespace) -> None:
    """What make's goals (GOALS) need, before anything runs: their variables (Target.needs),
    a pool of CORPUS (Target.pools), this machine (Target.local); InputError otherwise. First,
    every variable on make's command line must be a known one (check_command_line)."""
    check_command_line(args.COMMAND_LINE or "")
    given = set((args.GIVEN or "").split())
    for goal in (args.GOALS or "").split():
        target = TARGET_NAMES.get(goal)
        if target is None:
            continue  # make itself says that it has no such target
        for name, what in target.needs.items():
            value = getattr(args, name, None)
            if not value or (BY_NAME[name].default and name not in given):
                raise InputError(f"make {goal} needs {name}="
                                 + what.format(**{k: v or "" for k, v in vars(args).items()}))
        if target.local and args.EXECUTOR == "slurm":
            raise InputError(f"make {goal} runs its stages on this machine: EXECUTOR=slurm is "
                             f"for make embed and make eval (run them first, then make {goal})")
        if target.pools and args.CORPUS:
            corpus_dir = _roots(args)["corpora"] / args.CORPUS
            if not layout.pool_names(corpus_dir):
                where = "".join(f" {n}={getattr(args, n)}" for n in WHERE
                                if n in given and getattr(args, n))
                raise InputError(f"no pools for CORPUS={args.CORPUS} under "
                                 f"{layout.pools_dir(corpus_dir)}: build one first, e.g. make "
                                 f"pool CORPUS={args.CORPUS} SIZE=10k{where}")


def _roots(args: argparse.Namespace) -> dict[str, Path]:
    return data_roots(args.DATA or ".", corpora=args.CORPORA_DIR,
                      indexes=args.INDEX_DIR, runs=args.RUNS_DIR)


def add_options(parser: argparse.ArgumentParser) -> None:
    """`--NAME` for every variable (and --TIME, SLURM_TIME's alias), checked by its type: how
    `read` checks the values (so an error names the variable)."""
    for var in VARIABLES:
        kind = _optional(var.check) if var.optional else var.check
        for name in filter(None, (var.name, var.alias)):
            parser.add_argument(f"--{name}", type=kind, help=var.help, metavar="VALUE")


def _optional(check: Callable[[str], object] | None) -> Callable[[str], object]:
    """An empty value is no value (None); any other goes to `check`."""
    def parse(text: str) -> object:
        return None if text == "" else (check(text) if check else text)
    parse.__name__ = getattr(check, "__name__", "value")
    return parse


# The Makefile sets this in the environment of every command it runs (PIPE), so that their
# errors name make's variables, which is what the user typed.
FROM_MAKE = "MDCR_PIPELINE_FROM_MAKE"
# Options the Makefile fills from a variable of another name (the rest: --<name in lowercase>)
OPTION_VARIABLES = {"--num-shards": "SHARDS", "--time": "SLURM_TIME", "--cpus-per-task": "THREADS",
                    "--workers": "THREADS",
                    **{option: ROOT_VARIABLES[kind]
                       for kind, option in ROOT_OPTIONS.items()}}


def in_make_words(message: str) -> str:
    """An error message of a command make ran, with its options written as the make
    variables that set them: `--backend faiss-gpu` -> `BACKEND=faiss-gpu`."""
    names = {f"--{v.name.lower().replace('_', '-')}": v.name for v in VARIABLES}
    names.update(OPTION_VARIABLES)

    def rewrite(match: re.Match) -> str:
        name = names.get(match.group(1))
        if name is None:
            return match.group(0)
        return f"{name}={match.group(2)}" if match.group(2) else name

    return re.sub(r"(--[a-z0-9][a-z0-9-]*)(?:[ =]([^\s:;,()]+))?", rewrite, message)


def run_without_model(args: argparse.Namespace) -> bool:
    """Whether MODEL names a run with no model behind it: the run make import-run writes (its
    goal), or one imported into a pool of CORPUS already (make eval scores it, never searches
    with it). Such a name is no registered model's (check_model_name)."""
    from pipeline.retrieval.imported import imported_pools

    if not args.MODEL or not args.CORPUS:
        return False
    if layout.IMPORT_RUN in (args.GOALS or "").split():
        return True
    return bool(imported_pools(_roots(args)["runs"], args.CORPUS, args.MODEL))


def model_spec(args: argparse.Namespace) -> str:
    """MODEL as the stages take it: with make import-vectors among the goals, MODEL is the
    name of the vectors it imports, so the model is `vectors:<MODEL>` (the stages after it in
    the same make then search those vectors)."""
    if args.MODEL and IMPORT_VECTORS in (args.GOALS or "").split():
        return VECTORS_PREFIX + args.MODEL.removeprefix(VECTORS_PREFIX)
    return args.MODEL or ""


def derived(args: argparse.Namespace) -> dict[str, str]:
    """The names and paths make reads from the check's line (every key of DERIVED), from the
    checked values; a variable not given yields empty values."""
    roots = _roots(args)
    corpus = args.CORPUS
    corpus_dir = roots["corpora"] / corpus if corpus else None
    values = {"CORPORA_ROOT": roots["corpora"], "INDEX_ROOT": roots["indexes"],
              "RUNS_ROOT": roots["runs"]}
    values["RAW_DIR"] = args.RAW or (
        layout.raw_dir(roots["corpora"], corpus, args.SOURCE) if corpus and args.SOURCE else "")
    values["WRITTEN_WHOLE"] = written_whole(corpus_dir) if corpus_dir else ""
    model = ""
    if args.MODEL and run_without_model(args):
        model = args.MODEL  # an imported run's name: checked by check_model_name
    elif args.MODEL:
        spec = model_spec(args)
        if spec.startswith(HF_PREFIX):
            spec = f"{spec}@{args.POOLING or 'mean'}"
        entry = get_model(spec)
        model = with_precision(entry, args.PRECISION or "fp32").name
    values["MODEL_FILE"] = model
    values["MODEL_NAME"] = layout.run_name(model, args.QUERY_VARIANT or "full") if model else ""
    values["DEMO_PATHS"] = ",".join(str(roots[kind] / layout.DEMO_CORPUS)
                                    for kind in ("corpora", "indexes", "runs"))
    assert values.keys() == DERIVED.keys()
    return {name: str(value) for name, value in values.items()}


# ---- the generated files ---------------------------------------------------------------------
GENERATED_BY = ("Generated from pipeline/cli/variables.py by `python -m pipeline variables "
                "--write`: do not edit.")


def md_text(text: str) -> str:
    """Text as a Markdown table cell shows it (`<org>` is not an HTML tag)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _shown(var: Variable) -> str:
    if var.shown:
        return md_text(var.shown)
    return f"`{var.default}`" if var.default else "(empty)"


def markdown() -> str:
    """docs/variables.md: a table per group (variable, default, meaning)."""
    lines = ["# Make variables", "", f"<!-- {GENERATED_BY} -->", "",
             "Every variable is set on make's command line (`make eval MODEL=bm25`) or in the "
             "environment; make defines none of them and passes them on in its recipes' "
             "environment, where `python -m pipeline` reads them. Each one is checked before "
             "anything runs (`make check`, which every target does first, even before make "
             "setup builds the environment): a bad value stops make with one line and exit "
             "status 2, and no value ever reaches a shell (a value holding `$` is refused: make "
             "would run it as make code; so is one holding a line break). The interpreter and "
             "environment (`PYTHON`, `VENV`, `PY`, `STAMP`) are the Makefile's own: plain "
             "paths; the versions make setup installs are constraints.txt's."]
    for group, title in GROUPS.items():
        lines += ["", f"## {title}", "", "| variable | default | meaning |", "|---|---|---|"]
        lines += [f"| `{v.name}` | {_shown(v)} | {md_text(v.help)} |"
                  for v in VARIABLES if v.group == group]
    return "\n".join(lines) + "\n"


def generated() -> dict[Path, str]:
    """Each generated file (relative to the checkout) and the text it must hold."""
    return {DOCS: markdown()}


def stale(root: Path = ROOT) -> list[Path]:
    """The generated files that differ from what the declaration gives."""
    return [path for path, text in generated().items()
            if not (root / path).exists() or (root / path).read_text() != text]


def write(root: Path = ROOT) -> list[Path]:
    """Write the stale generated files; returns them."""
    written = stale(root)
    for path in written:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        tmp = root / path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(generated()[path])
        os.replace(tmp, root / path)
    return written
