"""Every make variable, declared once (VARIABLES): its check, default, help and the commands
that take it (the stages' command-line options), and the Python API's keyword of its name;
`make help`, docs/variables.md and docs/api.md's table of the arguments derive from it, so an
option is its declaration here plus the code that uses it (docs/extending.md; BM25_K1 took
four files by hand: benchmarks/results/option_bm25_k1.md). An API argument that no variable
names is declared on its own parameter (core/annotations.py: Check, Help). Standard library
only (as checks.py is): make check runs it before the environment exists."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from pipeline import layout
from pipeline.core.errors import InputError, OptionError
from pipeline.core.secrets import shown_url
from pipeline.encoding.families import kind_for
from pipeline.encoding.identity import FOLDER_KINDS
from pipeline.external.irds import dataset_id
from pipeline.glossary import (
    BACKEND,
    BACKENDS,
    BM25_ENGINE,
    BM25_ENGINES,
    CITATION_MODES,
    FOS_SOURCES,
    RERANK_DEPTH,
    SHARED_PAIRS,
    SPARSE_ENGINE,
    SPARSE_ENGINES,
    VARIANTS,
)
from pipeline.models import (
    API_BATCH,
    API_CONCURRENCY,
    API_DEFAULTS,
    API_KEY,
    API_LIMITS,
    API_URL,
    FUSION_PREFIX,
    HF_FILE_PREFIX,
    HF_PREFIX,
    PRECISIONS,
    REGISTRY,
    RERANK_API_KIND,
    RERANK_PREFIX,
    RERANK_URL,
    RERANKERS,
    SERVED_URLS,
    SIMILARITIES,
    ST_KIND,
    ServedModel,
    api_key,
    chosen_model,
    endpoint_url,
    fused_name,
    get_model,
    only_reranks,
    request_setting,
    rerank_parts,
    reranked_name,
    reranks_only,
)
from pipeline.options.checks import (
    choice,
    corpus_name,
    count,
    dataset_list,
    depth,
    device,
    field_names,
    file_count,
    first_stage,
    flag,
    given_path,
    gpus_per_task,
    input_path,
    metric_list,
    model_name,
    non_negative,
    parallel_downloads,
    pool_name,
    prompt_text,
    query_count,
    repeat_count,
    safe_path,
    sample_count,
    shard_count,
    shard_index,
    sizes,
    synthetic_size,
    training_sets,
    worker_count,
    xdist_workers,
)
from pipeline.readers import SOURCES
from pipeline.roots import roots_of
from pipeline.slurm import check_executor, check_partition, check_time

# The commands whose options reach a search or an encoder: each such option says whether it
# changes a run (Variable.changes_run); MODEL_ID: through the model's identity, its store's
RUN_STAGES = ("index", "embed", "search")
MODEL_ID = "model"
DEFAULT_MODEL = "minilm"  # MODEL's, and the commands' --model


@dataclass(frozen=True)
class Variable:
    """One option: make's variable `name`; the API's keyword is its name in lower case and the
    stages' option that keyword as a flag (K: k, --k; SLURM_TIME: slurm_time, --slurm-time),
    with one check and one default for all three (docs/extending.md)."""

    name: str
    # the default as the API takes it (K: 500), its check's reading of make's text (`text`);
    # or of the values before it (SOURCE); checked where a door takes it, once
    default: str | int | Callable[[dict[str, str]], str]
    check: Callable[[str], object] | None  # None: a rule checks it with others (RULES)
    help: str
    group: str
    shown: str = ""  # the default in words, for the docs
    optional: bool = False  # an empty value is no value (not checked)
    one_word: bool = False  # one value (a path, a name): a space is refused
    stages: tuple[str, ...] = ()  # the commands of `python -m pipeline` that take it
    # an argument's type is its function's annotation's; this, where none says it (a
    # **keyword's: search's options), None too where `optional`
    type: Any = str
    repeats: bool = False  # the command line takes it again for each value (--pool a --pool b)
    switch: bool = False  # 0/1 on make's command line, a bare option on the stages'
    required: tuple[str, ...] = ()  # the stages that need it given
    no_default: tuple[str, ...] = ()  # the stages that take no default (pool --size)
    # whether a value changes a run's results, said by each option reaching a search or an
    # encoder: True, part of the run's identity (run_options); MODEL_ID, through the model's
    # store; False, the runs are byte-identical whatever its value
    changes_run: bool | str | None = None
    # False: an argument of the API alone, declared on its parameter (arguments.own_options)
    variable: bool = True
    functions: tuple[str, ...] = ()  # the API functions it is for (empty: every other)
    # its check runs with RULES, once the goals are known, not as it is read (MODEL: make
    # import-run's and import-vectors' name, or a run imported already, is no model to load)
    with_goals: bool = False
    # the form its check takes where it is given (a function or a command -> the check's
    # `form`): MODEL's one rule for a model to load, a run's, a run imported, vectors'
    forms: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        number = getattr(self.check, "__name__", "") in ("int", "float")
        if number and isinstance(self.default, str) and self.default:
            raise ValueError(f"option {self.name}: its default is a number as the API takes "
                             f"it ({self.default}, not {self.default!r})")
        if self.changes_run not in (True, False, MODEL_ID) and (
                self.changes_run is not None or self.reaches_run):
            raise ValueError(f"option {self.name} reaches a search or an encoder: declare "
                             f"whether it changes a run's results (changes_run=True, False "
                             f"or MODEL_ID)")

    @property
    def reaches_run(self) -> bool:
        """Whether the option reaches a search or an encoder: a stage of RUN_STAGES takes it,
        or it is one of the model's (the encoder it names, loads or calls)."""
        return bool(set(self.stages) & set(RUN_STAGES)) or self.group == "models"

    def text(self, values: Mapping[str, str] | None = None) -> str:
        """The default as make's command line writes it ('' none); one derived from the values
        before it, from `values` (CORPUS's for SOURCE)."""
        return self.default(dict(values or {})) if callable(self.default) else str(self.default)

    @property
    def keyword(self) -> str:
        """The API's keyword, and the attribute the command line's parser gives the option's
        value: the name in lower case (bm25_engine)."""
        return self.name.lower()

    @property
    def option(self) -> str:
        """The stages' command-line option this variable sets (--bm25-engine)."""
        return flag_of(self.keyword)

    def check_for(self, where: str) -> Callable[[str], object] | None:
        """The check of a value given to the function or command `where`: its `forms`' form of
        the one check, else the check itself."""
        if where in self.forms and self.check is not None:
            return partial(self.check, form=self.forms[where])
        return self.check


def flag_of(keyword: str) -> str:
    """The command-line option of an API keyword: `--` and the keyword, '-' for '_'."""
    return "--" + keyword.replace("_", "-")


GROUPS = {
    "data": "Corpus and data folders",
    "pools": "Pools (make pool)",
    "models": "Models",
    "search": "Search",
    "eval": "Evaluation and fusion (make eval, make fuse)",
    "mdcr": "MDCR-style benchmarks and outside collections",
    "judging": "Judging beyond citations (make judge, judge-page, judge-agreement: "
               "docs/judging.md)",
    "cluster": "Where embed runs (make embed, make eval; on a SLURM cluster: docs/cluster.md)",
    "demo": "make demo",
    "paper grid": "The paper's grid (make pools-paper)",
    "tests": "The test suite (make test, make test-fast)",
}
# The make goals that search several models (each with make search's settings)
SEARCHING_SEVERAL = ("fuse", "mdcr", "mdcr-jaccard", "demo")
# The commands that ingest a corpus's raw files
INGESTING = ("ingest", "corpus")
# The commands that may replace what they imported or wrote before (REPLACE=1: --replace)
REPLACING = ("import-run", "import-vectors", "import-beir", "import-irds", "import-csfcube",
             "import-mdcr", "mdcr")
# The commands that read a user's files (SRC)
SOURCES_READ = ("import-vectors", "import-beir", "import-csfcube", "import-mdcr", "training-ids")
# The commands that load a model's weights (MODEL_PATH)
LOADING = ("embed", "index", "search", "submit-embed")
# The commands that submit SLURM jobs: an option of the jobs takes both as its `stages`
SLURM_JOBS = ("submit-embed", "after-embed")
# The commands that sample the models' top ranks (MODELS: one model or more, never fused) and
# those that judge (make demo JUDGE=standin:1 runs judge after its models are scored)
SAMPLING = ("judge", "judge-page")
JUDGING = ("judge", "judge-agreement")
# The commands that read the runs of several models (--models: MODELS, MDCR_MODELS)
MODELS_READ = ("judge", "judge-page", "mdcr", "mdcr-jaccard")
# The commands that fill a model's store (its --batch-size, --dtype, --part-size)
STORING = ("index", "search", "embed", "submit-embed")
# Where a model's name is given, by the form its one check takes there (checks.model_name): the
# commands of `python -m pipeline` and the API's functions that take `model`
MODEL_FORMS_AT = {
    "run": ("index", "search", "embed", "submit-embed", "after-embed", "submit_embed",
            "after_embed"),
    "scored": ("eval", "export-mteb", "mdcr-scores", "evaluate", "mteb_result", "export_mteb",
               "mdcr_scores"),
    "imported": ("import-run", "import_run"),
    "vectors": ("import-vectors", "import_vectors"),
}
MODEL_COMMANDS = ("index", "search", "embed", "submit-embed", "after-embed", "eval",
                  "export-mteb", "mdcr-scores", "import-run", "import-vectors")


def judge_spec(text: str) -> str:
    """JUDGE's form (pipeline/judging/assessor.py checks the rest): api:<model>,
    file:<labels.tsv> or standin:<seed>."""
    kind, colon, value = text.partition(":")
    seed = re.fullmatch(r"[0-9]+", value)  # ASCII digits (core/numbers.py)
    if not colon or kind not in ("api", "file", "standin") or not value.strip() or (
            kind == "standin" and not seed) or (kind == "api" and " " in value):
        raise InputError(f"{text!r}: give api:<model> (with JUDGE_URL), file:<labels.tsv> "
                         "(the judging page's labels) or standin:<seed> (a deterministic "
                         "stand-in)")
    if kind == "file":
        input_path(value)
    return text


def api_setting(variable: str) -> Callable[[str], int]:
    """EMBEDDINGS_BATCH's or EMBEDDINGS_CONCURRENCY's check (models.request_setting), with its
    maximum (API_LIMITS) said as every count's is."""
    check = partial(request_setting, variable)
    check.words = f"1 to {API_LIMITS[variable]:,}"  # type: ignore[attr-defined]
    check.most = lambda: API_LIMITS[variable]  # type: ignore[attr-defined]
    return check


V = Variable
VARIABLES: tuple[Variable, ...] = (
    # ---- data
    V("CORPUS", "demo", corpus_name, "the corpus every stage works on: its folder under "
      "corpora/, indexes/ and runs/", "data", one_word=True),
    V("DATA", ".", safe_path, "where corpora/, indexes/ and runs/ live (a scratch disk on a "
      "cluster, say); default the checkout", "data", one_word=True),
    V("CORPORA_DIR", "", safe_path, "the corpora folder, where it is not DATA's corpora/",
      "data", shown="DATA/corpora", optional=True, one_word=True),
    V("INDEX_DIR", "", safe_path, "the indexes folder, where it is not DATA's indexes/",
      "data", shown="DATA/indexes", optional=True, one_word=True),
    V("RUNS_DIR", "", safe_path, "the runs folder, where it is not DATA's runs/", "data",
      shown="DATA/runs", optional=True, one_word=True),
    V("SOURCE", lambda v: "s2ag" if v["CORPUS"] == "s2ag" else "s2orc", choice(SOURCES),
      "the reader: the S2ORC 2020 release (s2orc) or the S2AG datasets (s2ag)", "data",
      shown="the one the corpus's manifest records; else s2orc, s2ag when CORPUS=s2ag",
      one_word=True),
    V("RAW", "", safe_path, "the folder of the raw release (S2ORC's metadata/, S2AG's "
      "datasets)", "data", shown="DATA/corpora/CORPUS/SOURCE", optional=True, one_word=True),
    V("FOS_SOURCE", "external", choice(FOS_SOURCES), "S2AG: which field labels count: "
      "external (MAG-like) or s2-fos-model", "data", one_word=True, stages=INGESTING),
    V("RELEASE", "latest", None, "make download: the S2AG release, a date (2026-11-18) or "
      "latest", "data", one_word=True, stages=("download",)),
    V("DATASETS", "papers,abstracts,citations", dataset_list, "make download: the S2AG "
      "datasets, separated by commas", "data", one_word=True, stages=("download",)),
    V("FIRST", "", file_count, "make download: a trial, only the first FIRST files of each "
      "dataset", "data", shown="every file", optional=True, one_word=True,
      stages=("download",)),
    V("UPDATE", "", flag, "1: make download brings an older release to RELEASE with "
      "the API's diffs", "data", one_word=True, switch=True, stages=("download",)),
    V("PARALLEL", 4, parallel_downloads, "make download: files downloaded at once", "data",
      one_word=True, stages=("download",)),
    V("CITATIONS", "inbound", choice(CITATION_MODES), "what the prefilter counts as a "
      "paper's citations: inbound, outbound or either", "data", one_word=True,
      stages=("prefilter", "corpus")),
    V("STRICT", "", flag, "1: stop ingest at the first bad line instead of "
      "quarantining it", "data", one_word=True, switch=True, stages=INGESTING),
    # ---- pools
    V("SIZE", "10k", sizes, "the pool size: 20000, 20k, 2M; several separated by spaces",
      "pools", stages=("pool",), no_default=("pool",),
      functions=("build_pools",)),  # build_pool's: one size (its keyword() below)
    V("FIELD", "", field_names, "a field-level pool: one of the 19 MAG fields, all, or several "
      "separated by spaces, '-' for a name's space (computer-science)", "pools",
      shown="(empty: a dataset-level pool)", optional=True, stages=("pool",)),
    V("REPEATS", 1, repeat_count, "samples per size (the paper: 3)", "pools", stages=("pool",)),
    V("SEED", 0, non_negative, "the pools' seed (in a pool's name unless 0); also the "
      "random model's and make mdcr's", "pools",
      stages=("pool", "pools-paper", "report", "search", "mdcr", "mdcr-jaccard"),
      changes_run=True),
    V("QUERIES", lambda v: "50" if v["CORPUS"] == "demo" else "", query_count,
      "query papers per pool", "pools",
      shown="50 on CORPUS=demo, else the paper's: 3,800 dataset-level, 200 per field",
      optional=True, stages=("pool",)),
    V("EXCLUDE", "", safe_path, "a file of CorpusIDs never used as queries (the paper: "
      "SPECTER's and SciNCL's training papers); they name the pools (-x<tag>)", "pools",
      shown="(empty: no paper left out)", optional=True, one_word=True,
      stages=("pool", "pools-paper", "report")),
    V("POOL", "", pool_name, "the pool make retire-pool retires, make import-run's run ranks "
      "(empty: the whole collection) or make export-beir writes", "pools", optional=True,
      one_word=True, stages=("retire-pool", "import-run", "export-beir"),
      required=("retire-pool", "export-beir")),
    # ---- models
    V("MODEL", DEFAULT_MODEL, model_name, "one model: a registered name (make models), "
      "hf:<org>/<name>, st:<org>/<name>, vectors:<name>, api:<model>, rerank-api:<model> or a "
      "composed model's name; a run's, <model>~<variant> (perturbed queries); eval: also a run "
      "imported under its own name; make import-run: the run's new name; make import-vectors: "
      "the vectors' name", "models",
      stages=MODEL_COMMANDS,
      required=("import-run", "import-vectors", "export-mteb", "mdcr-scores"),
      changes_run=MODEL_ID, with_goals=True,
      forms={where: form for form, places in MODEL_FORMS_AT.items() for where in places}),
    V("POOLING", "", None, "cls, mean or lasttoken, for MODEL=hf:<org>/<name>", "models",
      shown="mean", optional=True, one_word=True, changes_run=MODEL_ID),
    V("PRECISION", "fp32", choice(PRECISIONS), "the encoder's precision: fp32, bf16 or fp16 "
      "(GPU only); other than fp32, its runs are the model <name>+bf16", "models",
      one_word=True, changes_run=True),
    V(API_URL, "", endpoint_url, "MODEL=api:<model>: the URL of the OpenAI-compatible "
      f"embeddings endpoint; its key from the environment's {API_KEY}", "models",
      optional=True, one_word=True, changes_run=MODEL_ID),
    V(RERANK_URL, "", partial(endpoint_url, variable=RERANK_URL,
                              example=SERVED_URLS[RERANK_API_KIND][1]),
      "MODEL=rerank-api:<model>: the URL of the /rerank endpoint (Cohere's protocol, or "
      f"TEI's); its key from the environment's {API_KEY}", "models", optional=True,
      one_word=True, changes_run=MODEL_ID),
    V(API_BATCH, API_DEFAULTS[API_BATCH], api_setting(API_BATCH),
      "MODEL=api:<model>: inputs per request; rerank-api:<model>: documents per request",
      "models", one_word=True, changes_run=False),
    V(API_CONCURRENCY, API_DEFAULTS[API_CONCURRENCY],
      api_setting(API_CONCURRENCY), "MODEL=api:<model> or rerank-api:<model>: requests "
      "sent at once", "models", one_word=True, changes_run=False),
    V("QUERY_PROMPT", "", prompt_text, "a prompt before each query's text (\\n for a line "
      "break), or an st: model's prompt name; its runs are the model <name>+q<tag>",
      "models", shown="(empty: the model's own query form)", optional=True, stages=("search",),
      changes_run=True),
    V("MODEL_PATH", "", given_path, "a local folder of the model's save_pretrained files, "
      "for nodes without hub access", "models", optional=True,
      stages=(*LOADING, "after-embed"),
      changes_run=MODEL_ID),  # after-embed: its identity
    V("DEVICE", "", device, "the encoder's device: cpu, cuda or cuda:<index>; cuda with "
      "several GPUs visible, or a list (cuda:0,cuda:1), embeds on a worker process each",
      "models",
      shown="cuda if available", optional=True, one_word=True,
      stages=("embed", "submit-embed", "index", "search"),
      changes_run=MODEL_ID),  # the store's parts record it; another: other bits
    # ---- search
    V("SIMILARITY", "cosine", choice(SIMILARITIES), "make import-vectors: how a search "
      "compares the vectors: cosine, ip or l2", "models", one_word=True,
      stages=("import-vectors",), changes_run=MODEL_ID),
    V("THREADS", 2, worker_count, "worker processes and threads (ingest, Lucene, search); "
      "with EXECUTOR=slurm each job's CPUs", "search",
      stages=("index", "search"), changes_run=False),
    V("BM25_ENGINE", BM25_ENGINE, choice(BM25_ENGINES), "BM25 on arrays (numba) or lucene "
      "(Anserini): the same runs", "search", one_word=True, stages=("index", "search"),
      changes_run=False),
    V("SPARSE_ENGINE", SPARSE_ENGINE, choice(SPARSE_ENGINES), "learned sparse models "
      "(SPLADE) searched on arrays (scipy) or lucene (Anserini's impact search; needs "
      "SPARSE_QUANTIZE=1): the same runs", "search", one_word=True,
      stages=("index", "search"), changes_run=False),
    V("SPARSE_QUANTIZE", "0", flag, "1: learned sparse weights as pyserini's integer "
      "impacts (weight x 100, rounded) on both sides, as Lucene indexes them", "search",
      one_word=True, stages=("index", "search"), changes_run=True),
    V("RERANK_DEPTH", RERANK_DEPTH, depth, "make rerank: the first stage's candidates per "
      "query the reranker scores (at most that run's K); below it the first stage's order is "
      "kept",
      "search", one_word=True, stages=("index", "search"), changes_run=True, type=int),
    V("BACKEND", BACKEND, choice(BACKENDS), "the dense search backend: auto, faiss-cpu, "
      "faiss-gpu, torch-cuda or torch-cpu", "search", one_word=True, stages=("search",),
      changes_run=True),  # faiss's and torch's sums differ a bit
    V("QUERY_VARIANT", "full", choice(VARIANTS), "perturbed queries: full, title, abstract, "
      "shuffled, deleted30 or typos; runs named after the model and the variant", "search",
      one_word=True, stages=("search",), changes_run=True),
    V("K", 500, depth, "candidates retrieved per query (the paper's: 500)", "search",
      one_word=True, stages=("search",), changes_run=True),
    # ---- eval
    V("PAPER_IDS", "", safe_path, "make training-ids: the folder of S2AG's paper-ids "
      "dataset", "pools", optional=True, one_word=True, stages=("training-ids",),
      required=("training-ids",)),
    V("TRAINING_SETS", "", training_sets, "make report: <model>=<file of its training "
      "papers> pairs, for the leakage table", "eval", shown="(empty: no leakage table)",
      optional=True, stages=("report",)),
    V("METRICS", "auto", metric_list, "what eval scores: auto (each pool's own set), a set "
      "(large-scale, mdcr, beir, csfcube) or metric names ('map ndcg@10 recall@30')", "eval",
      stages=("eval",)),
    V("MODELS", "", None, "make fuse, mdcr-jaccard, judge, judge-page: the models, "
      "separated by commas (an hf: model's pooling: hf:<org>/<name>@cls)", "eval"),
    V("METHOD", "rrf", None, "make fuse: ranx's fusion method (rrf, wsum, sum, mnz, ...)",
      "eval"),
    V("FIRST_STAGE", "bm25", first_stage, "make rerank: the model whose run of each pool the "
      "reranker MODEL scores again (bm25, a dense model, a fused one, a run imported under "
      "its own name)", "eval", one_word=True),
    # ---- mdcr
    V("MDCR", lambda v: f"{v['CORPUS']}-mdcr", corpus_name, "make mdcr: the benchmark corpus "
      "it writes", "mdcr", shown="CORPUS-mdcr", one_word=True),
    V("MDCR_MODELS", "bm25,minilm", None, "make mdcr: the models whose top ranks give the "
      "negatives, separated by commas (the paper's: bm25,specter,scincl)", "mdcr"),
    V("SRC", "", input_path, "the folder or file an import reads (make import-mdcr, "
      "import-beir, import-csfcube, import-vectors); spaces allowed", "mdcr", optional=True,
      stages=SOURCES_READ, required=SOURCES_READ),
    V("OUT", "", safe_path, "the folder or file an export writes (make export-mdcr, "
      "export-beir, export-mteb, mdcr-scores)", "mdcr", optional=True, one_word=True,
      stages=("training-ids", "export-mdcr", "export-beir", "mdcr-scores", "export-mteb"),
      required=("training-ids", "export-mdcr", "export-beir", "mdcr-scores", "export-mteb")),
    V("DATASET", "", dataset_id, "make import-irds: the ir_datasets id (beir/scidocs)",
      "mdcr", optional=True, one_word=True, stages=("import-irds",), required=("import-irds",)),
    V("IR_DATASETS_HOME", "", input_path, "make import-irds: where ir_datasets keeps its "
      "files", "mdcr", shown="~/.ir_datasets", optional=True),
    V("SPLIT", "test", layout.pool_split, "the split imported or exported: test, val (MDCR) "
      "or dev (BEIR)", "mdcr", one_word=True,
      stages=("import-beir", "import-irds", "import-mdcr", "export-mdcr", "mdcr-scores")),
    V("SHARED_PAIRS", "first", choice(SHARED_PAIRS), "make mdcr-scores and report (MDCR "
      "Table 3): the score kept for a pair in two fields' pools (a query listed under two "
      "fields): first (the first field's pool, in pool-name order), max, or refuse (naming "
      "them)", "mdcr", one_word=True, stages=("mdcr-scores", "report")),
    V("REPLACE", "", flag, "1: an import, make mdcr or a search may replace what was "
      "written before under the same name (docs/errors.md)", "mdcr", one_word=True,
      switch=True,
      stages=tuple(dict.fromkeys((*REPLACING, "embed", "index", "search", "submit-embed"))),
      changes_run=False),
    V("JUDGED", "", flag, "1: make import-beir and import-irds also write the "
      "judged-only pool judged-<n>-r0", "mdcr", one_word=True, switch=True,
      stages=("import-beir", "import-irds")),
    V("RUN", "", input_path, "make import-run: the TREC run file, imported as the run MODEL "
      "of POOL; spaces allowed", "eval", optional=True, stages=("import-run",),
      required=("import-run",)),
    V("DROP_UNKNOWN", "", flag, "1: make import-run drops (and counts) the lines "
      "naming a query or paper POOL lacks", "eval", one_word=True, switch=True,
      stages=("import-run",)),
    # ---- judging (pipeline/judging; docs/judging.md)
    V("JUDGE", "", judge_spec, "who judges the sampled pairs: api:<model> (at JUDGE_URL), "
      "file:<labels.tsv> or standin:<seed>", "judging", shown="(empty: none)", optional=True,
      stages=JUDGING, required=("judge", "judge-agreement")),
    V("JUDGE_URL", "", partial(endpoint_url, variable="JUDGE_URL",
                                            example="http://127.0.0.1:8000"),
      "JUDGE=api:<model>: the OpenAI-compatible chat endpoint; its key from the "
      f"environment's {API_KEY}", "judging", optional=True, one_word=True, stages=JUDGING),
    V("SAMPLE", 20, sample_count, "make judge, judge-page: unjudged pairs drawn per query",
      "judging", one_word=True, stages=SAMPLING),
    V("SAMPLE_SEED", 0, non_negative, "the judging sample's seed", "judging",
      one_word=True, stages=SAMPLING),
    V("JUDGE_DEPTH", 100, depth, "the ranks of each of MODELS whose unjudged candidates "
      "are sampled", "judging", one_word=True, stages=SAMPLING),
    V("JUDGE_CONCURRENCY", 4, count(1, API_LIMITS[API_CONCURRENCY],
                                      f"requests at once, as {API_CONCURRENCY}"),
      "JUDGE=api:<model>: requests sent at once",
      "judging", one_word=True, stages=JUDGING),
    # ---- cluster
    V("EXECUTOR", "local", check_executor, "where embed runs: local (this machine) or slurm "
      "(an sbatch job array)", "cluster", one_word=True),
    V("SHARDS", 1, shard_count, "shards of the embed stage (array tasks with slurm)",
      "cluster", stages=("embed", *SLURM_JOBS), changes_run=False),
    V("SHARD", "", shard_index, "make embed: only this shard of SHARDS", "cluster",
      shown="each in turn", optional=True, one_word=True, stages=("embed",), changes_run=False),
    V("PARTITION", "", check_partition, "#SBATCH --partition: one name, or several separated "
      "by commas", "cluster", shown="the cluster's default", optional=True, one_word=True,
      stages=SLURM_JOBS),
    V("GPUS_PER_TASK", 1, gpus_per_task, "#SBATCH --gres=gpu:K of each task; 0 asks for "
      "none", "cluster", stages=SLURM_JOBS),
    V("SLURM_TIME", "", check_time, "#SBATCH --time of each job: 90 (minutes), 4:00:00, "
      "1-12:00:00", "cluster", shown="the cluster's default",
      optional=True, one_word=True, stages=SLURM_JOBS),
    # ---- demo
    V("DEMO_PAPERS", "120k", synthetic_size, "papers of the synthetic demo corpus (given: the "
      "corpus is made again with it)", "demo"),
    V("DEMO_SIZES", "2k 5k 10k", sizes, "the demo's dataset-level pool sizes", "demo"),
    V("DEMO_MODELS", "bm25 minilm random", None, "the models make demo evaluates, separated "
      "by commas or spaces", "demo"),
    V("DEMO_SEED", 0, non_negative, "the synthetic demo corpus's seed (given: the corpus "
      "is made again with it)", "demo"),
    V("DEMO_FIELDS", "medicine biology computer-science", field_names, "the fields of the demo's "
      "field-level pools (empty: none)", "demo"),
    V("DEMO_FIELD_SIZE", "1k", sizes, "the size of the demo's field-level pools", "demo"),
    V("DEMO_FIELD_QUERIES", 25, query_count, "queries per demo field-level pool", "demo"),
    V("DEMO_REPEATS", 3, repeat_count, "pool draws per demo pool size", "demo"),
    # ---- paper grid
    V("PAPER_SIZES", "200k 500k 1M 2M", sizes, "dataset-level pool sizes (MDCR section 3)",
      "paper grid", stages=("pools-paper",)),
    V("PAPER_QUERIES", 3800, query_count, "queries per dataset-level pool", "paper grid",
      stages=("pools-paper",)),
    V("PAPER_FIELD_SIZE", "100k", sizes, "the size of the field-level pools (all 19 fields)",
      "paper grid", stages=("pools-paper",)),
    V("PAPER_FIELD_QUERIES", 200, query_count, "queries per field-level pool", "paper grid",
      stages=("pools-paper",)),
    V("PAPER_REPEATS", 3, repeat_count, "samples per size", "paper grid",
      stages=("pools-paper",)),
    # ---- tests
    V("TEST_WORKERS", 2, xdist_workers, "test processes (pytest-xdist), each up to 1.3 "
      "GiB; pytest's own options go in PYTEST_ADDOPTS", "tests",
      one_word=True),
)
del V
BY_NAME = {v.name: v for v in VARIABLES}


def default(name: str) -> object:
    """`name`'s declared default (K: 500): the API's keyword defaults, checked where a call
    takes them (options/arguments.py: validated), not here."""
    return BY_NAME[name].default


def worded(exc: OptionError, door: str) -> str:
    """A refusal naming declared options in `door`'s words: make's variable (NAME=value), the
    stage's option (--name value) or the API's keyword (name='value')."""
    def named(name: str) -> str:
        var = BY_NAME.get(name)
        if door == "make" or var is None:
            return name
        return var.option if door == "command" else var.keyword

    return exc.worded(named, {"make": "{}={}", "command": "{} {}", "api": "{}={!r}"}[door].format)


def kind_run_options(entry: Any, given: Mapping[str, object]) -> dict[str, object]:
    """`run_options` of `entry`'s retriever, its options taken from `given` or defaulted."""
    from pipeline.retrieval.registry import retriever

    kind = retriever(entry.kind)
    return run_options(kind.options({name: given.get(name) for name in kind.OPTIONS}))


def run_options(options: Mapping[str, object]) -> dict[str, object]:
    """A run's identity among a retriever's options, by make variable: those declared
    changes_run=True, and any no declaration names (retrieval.search.run_identity). A
    retrieval.runs.RunOptions: with the default of each declared one (identity_default), which
    a run recorded before the option existed is read at (runs.unrecorded_at_default)."""
    from pipeline.retrieval.runs import RunOptions

    declared = {var.keyword: var for var in VARIABLES}
    values, defaults = {}, {}
    for name, value in sorted(options.items()):
        if (var := declared.get(name)) is None:
            values[name.upper()] = value  # no declaration: no default, a missing key differs
        elif var.changes_run is True:
            values[var.name] = value
            if not callable(var.default):  # one derived from other values: none to read at
                defaults[var.name] = identity_default(var)
    return RunOptions(values, defaults)


def identity_default(var: Variable) -> object:
    """`var`'s default as a run's identity holds it: as its check reads it (`default`); None
    for an empty one (the option not given: the API's None, the retriever's default)."""
    return var.default if var.text() else None


# ---- the rules relating several values, applied in order after each value's own check to the
# values read (MODEL as the stages load it; None for an imported run): cli/commands/house.py
def model_is_one_name(v: Any) -> None:
    if v.MODEL is None:
        return
    names = v.MODEL.split()
    if len(names) > 1:
        raise InputError(f"MODEL={v.MODEL!r} names {len(names)} models: run one model at "
                         f"a time (make eval MODEL={shlex.quote(names[0])}), or use "
                         "DEMO_MODELS or MODELS (make fuse) for several")
    if not names:
        raise InputError("MODEL is empty: give one model name (make models lists them)")
    if names[0] != v.MODEL:
        raise InputError(f"MODEL={v.MODEL!r} holds a space or a line break: give one "
                         "model name without spaces")


def values_are_one_word(v: Any) -> None:
    for var in (var for var in VARIABLES if var.one_word):
        value = getattr(v, var.name, None)
        if isinstance(value, str) and re.search(r"\s", value):
            shown = shown_url(value) if var.name.endswith("_URL") else value  # no secret
            raise InputError(f"{var.name}={shown!r} holds a space or a line break: give one "
                             "value without spaces")


def models_are_registered(v: Any) -> None:
    """MODEL by its declared check (once: read leaves it to this rule), and DEMO_MODELS
    (commas or spaces between) by the same resolution, each written as registered; an hf:
    model's POOLING too."""
    if v.MODEL:
        BY_NAME["MODEL"].check(v.MODEL)  # type: ignore[misc]
    for variable in ("MODEL", "DEMO_MODELS"):
        for name in (getattr(v, variable) or "").replace(",", " ").split():
            try:
                if variable == "DEMO_MODELS":
                    model_name(name)
                if name.startswith(HF_PREFIX):  # the id with its pooling (no @ of its own)
                    get_model(f"{name}@{v.POOLING or 'mean'}")
            except InputError as exc:
                if variable == "MODEL":
                    raise
                raise InputError(f"{variable}: {exc}") from None


def served_model_has_endpoint(v: Any) -> None:
    """A served MODEL (api:<model>, rerank-api:<model>, or a run a served reranker reranks)
    needs its kind's URL variable (models.SERVED_URLS: EMBEDDINGS_URL, RERANK_URL), and a key
    a request's header can carry."""
    try:
        entry = get_model(v.MODEL or DEFAULT_MODEL)
        if entry.name.startswith(RERANK_PREFIX):
            entry = get_model(rerank_parts(entry.name)[0])
    except InputError:  # no model (an imported run's name): model_name's to say
        return
    if not isinstance(entry, ServedModel):
        return
    variable, example = SERVED_URLS[entry.kind]
    if not getattr(v, variable):
        raise InputError(f"MODEL={v.MODEL} is served: give {variable}, its endpoint's URL "
                         f"(e.g. {example})")
    api_key()


def query_prompt_has_an_encoder(v: Any) -> None:
    """QUERY_PROMPT goes with one MODEL that encodes text, not with a goal's several."""
    if not v.QUERY_PROMPT:
        return
    several = [goal for goal in (getattr(v, "GOALS", "") or "").split()
               if goal in SEARCHING_SEVERAL]
    if several or v.MODELS:
        raise InputError(f"QUERY_PROMPT goes with one MODEL (make search, make eval), not "
                         f"with make {(several or ['fuse'])[0]}: fuse the runs it made by "
                         "their name, MODELS=bm25,<model>+q<tag>")
    chosen_model(v.MODEL or DEFAULT_MODEL, v.POOLING, query_prompt=v.QUERY_PROMPT)


def pooling_is_for_hf(v: Any) -> None:
    if v.POOLING and not (v.MODEL or "").startswith(HF_PREFIX):
        raise InputError(f"POOLING={v.POOLING} is for MODEL=hf:<id>; a registered model "
                         "has its own pooling (make models)")


def models_fuse(v: Any) -> None:
    """MODELS fused by METHOD (fused_name checks both), unless every goal only samples them."""
    goals = (getattr(v, "GOALS", "") or "").split()
    if v.MODELS and not (goals and set(goals) <= set(SAMPLING)):
        fused_name(v.METHOD or "rrf", v.MODELS.replace(",", " ").split())


def mdcr_models_are_known(v: Any) -> None:
    """MDCR_MODELS registered, and make mdcr's benchmark not its source (before its searches)."""
    if v.MDCR == v.CORPUS and "mdcr" in (getattr(v, "GOALS", "") or "").split():
        raise InputError(f"MDCR={v.MDCR} names the source corpus itself: give the benchmark "
                         "another corpus name (default <corpus>-mdcr)")
    for name in (v.MDCR_MODELS or "").replace(",", " ").split():
        if name not in REGISTRY and not name.startswith((HF_FILE_PREFIX, FUSION_PREFIX)):
            raise InputError(f"MDCR_MODELS: {name!r} is not a registered model (make models "
                             "lists them); give the models whose runs give the negatives")


def judge_has_endpoint(v: Any) -> None:
    """JUDGE=api:<model> needs JUDGE_URL, and a key a request's header can carry."""
    if (getattr(v, "JUDGE", "") or "").startswith("api:"):
        if not v.JUDGE_URL:
            raise InputError(f"JUDGE={v.JUDGE} is a served model: give JUDGE_URL, its chat "
                             "endpoint (e.g. http://127.0.0.1:8000)")
        api_key()


def slurm_is_here(v: Any) -> None:
    if v.EXECUTOR == "slurm" and not shutil.which("sbatch"):
        raise InputError("EXECUTOR=slurm needs `sbatch`, which is not on PATH: run make on a "
                         "SLURM login node, or use EXECUTOR=local")


def model_path_is_a_folder(v: Any) -> None:
    if v.MODEL_PATH and not Path(v.MODEL_PATH).is_dir():
        raise InputError(f"MODEL_PATH {v.MODEL_PATH} is not a folder: give the folder "
                         "written by save_pretrained")


def model_folder_is_of_its_family(v: Any) -> None:
    """MODEL_PATH's folder of a family MODEL's door runs (encoding/families.py: the loaders'
    rule, applied here before any stage), so that a wrong one is refused before anything is
    written (the corpus stage included)."""
    if v.MODEL and v.MODEL_PATH:
        entry = chosen_model(v.MODEL, v.POOLING)
        if entry.kind in FOLDER_KINDS:
            kind_for(entry, v.MODEL_PATH)


def rerank_has_a_reranker(v: Any) -> None:
    """make rerank: MODEL reranks (models.reranked_name; an st: model's MODEL_PATH folder of a
    family a reranking kind runs) and FIRST_STAGE searches, before the corpus stage. MODEL
    left at its default: the goal's own `needs` names it."""
    if "rerank" not in (getattr(v, "GOALS", "") or "").split() or \
            "MODEL" not in (getattr(v, "GIVEN", "") or "").split():
        return
    reranked_name(v.MODEL, v.FIRST_STAGE)
    first_stage_has_a_run(v)
    entry = get_model(v.MODEL)
    if v.MODEL_PATH and entry.kind == ST_KIND and \
            (kind := kind_for(entry, v.MODEL_PATH)) not in RERANKERS:
        raise InputError(f"MODEL {v.MODEL}: its folder {v.MODEL_PATH} is a {kind} model's, "
                         "which reranks nothing: give a CrossEncoder or a PyLate folder")


def first_stage_has_a_run(v: Any) -> None:
    """A FIRST_STAGE that no model has is a run imported into a pool of CORPUS under that name
    (make import-run), refused in one line where none was, before the corpus stage."""
    from pipeline.retrieval.imported import imported_pools

    try:
        get_model(v.FIRST_STAGE)
    except InputError:
        if not imported_pools(roots_of(v)["runs"], v.CORPUS, v.FIRST_STAGE):
            raise InputError(f"FIRST_STAGE={v.FIRST_STAGE}: no model has this name, and no run "
                             f"of corpus {v.CORPUS} was imported under it: give a model "
                             f"(make models), or import the run first (make import-run "
                             f"MODEL={shlex.quote(v.FIRST_STAGE)} RUN=<file>)") from None


# the goals that search MODEL itself: a model that only reranks is refused by them
MODEL_SEARCHES = ("eval", "search", "index", "embed")


def model_ranks_a_pool(v: Any) -> None:
    """A cross-encoder given to a goal that searches MODEL (its MODEL_PATH folder's family, for
    st:) is refused naming make rerank, before the corpus stage (as search refuses it)."""
    goals = (getattr(v, "GOALS", "") or "").split()
    if not v.MODEL or not set(goals) & set(MODEL_SEARCHES):
        return
    entry = chosen_model(v.MODEL, v.POOLING)
    kind = kind_for(entry, v.MODEL_PATH) if v.MODEL_PATH and entry.kind in FOLDER_KINDS \
        else entry.kind
    if only_reranks(kind):
        raise reranks_only(v.MODEL, replace(entry, kind=kind))


RULES: tuple[Callable[[Any], None], ...] = (
    model_is_one_name, values_are_one_word, models_are_registered, served_model_has_endpoint,
    query_prompt_has_an_encoder, pooling_is_for_hf,
    models_fuse, mdcr_models_are_known, slurm_is_here, model_path_is_a_folder,
    model_folder_is_of_its_family, model_ranks_a_pool, rerank_has_a_reranker,
    judge_has_endpoint)


# ---- the Python API's arguments: the variable an argument is checked as (its type: its
# annotation's; an argument no variable names: its own Check, on its parameter), applied by
# pipeline/options/arguments.py
def declaration(function: str, name: str) -> Variable | None:
    """The make variable that argument `name` of public function `function` is checked as:
    the one of its keyword for `function` (its `functions`, where it names some); None: none."""
    return next((v for v in VARIABLES if name == v.keyword
                 and (not v.functions or function in v.functions)), None)


def command_keywords(function: str) -> list[str]:
    """The keywords of the declared options of `function`'s command (search's: its stages name
    it), which its **keywords take (arguments.known_options)."""
    return [v.keyword for v in VARIABLES if function in v.stages]
