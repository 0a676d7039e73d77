"""The Makefile's targets, each declared once (TARGETS): its line in `make help`, what it needs
before anything runs (check_goals), its stages and the targets whose stages run first. `make
pool SIZE=20k` runs `python -m pipeline goal pool`: one process that prints each stage's
command as make prints a recipe and runs it in this process (run_goal)."""

from __future__ import annotations

import argparse
import inspect
import logging
import re
import shlex
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import layout
from pipeline.cli.registry import COMMANDS, comma_list, command_named, data_of, run
from pipeline.cli.variables import (
    WHERE,
    as_corpus,
    check_command_line,
    derived,
    model_names,
)
from pipeline.core.errors import InputError
from pipeline.models import fused_name, get_model, rerank_parts, reranked_name
from pipeline.options.declared import BY_NAME, GROUPS, VARIABLES, flag_of
from pipeline.roots import roots_of

log = logging.getLogger(__name__)

Value = Any  # a value as `read` checked it (or a goal's own: a model's name, True)
Option = tuple[str, Value]  # (a keyword of the command's API function, its value)
# Passed on only when given: a command that does not name them uses the demo corpus as it is
WHEN_GIVEN = ("DEMO_PAPERS", "DEMO_SEED")


@dataclass(frozen=True)
class Step:
    """One stage of a goal: a command's API `function` and the keyword arguments it is called
    with, the values `read` checked, in the order its command line gives them (None: as an
    option left out gives it); `rest`, the words after `--`, its `command` (after-embed's).
    run_goal calls the function with them; nothing is written out as text and parsed again,
    and make -n prints the equivalent command line (`argv`)."""

    function: Callable[..., Any]
    kwargs: dict[str, Value]
    rest: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        """The command of `python -m pipeline` that is the function."""
        return command_named(self.function)

    def values(self, program: str) -> dict[str, Value]:
        """What the command runs with: its keywords, `program` (how a repair line names us)
        and `rest` as its `command`."""
        return {**self.kwargs, "program": program, **({"command": list(self.rest)}
                                                      if self.rest else {})}

    def argv(self) -> list[str]:
        """The equivalent command line (make -n prints it): each keyword's flag (its option's
        own where the registration names one, corpus's --synth), a bare one for True and for
        '' (corpus's --synth without a number), none for None and False."""
        named = COMMANDS[self.command].from_args
        words = [self.command]
        for key, value in self.kwargs.items():
            option = flag_of(named.get(key) or key)
            if value is True or value == "":
                words.append(option)
            elif given(value) and str(value).startswith("-"):
                words.append(f"{option}={value}")  # else read as an option of its own
            elif given(value):
                words += [option, str(value)]
        return words + (["--", *self.rest] if self.rest else [])


Stages = Callable[[argparse.Namespace, dict[str, str]], list[Step]]


def given(value: Value) -> bool:
    """Whether an option's value is given: not None, '' or False (0 is a value)."""
    return not (value is None or value is False or (isinstance(value, str) and value == ""))


def valued(v: argparse.Namespace, d: dict[str, str], *pairs: tuple[str, str]) -> list[Option]:
    """Each (keyword, NAME) with NAME's value: the derived `d`'s ('' none), else make's `v`'s;
    DEMO_PAPERS and DEMO_SEED only when given (WHEN_GIVEN)."""
    options: list[Option] = []
    for keyword, name in pairs:
        value = (d[name] or None) if name in d else getattr(v, name)
        if name in WHEN_GIVEN and name not in v.GIVEN.split():
            value = None
        options.append((keyword, value))
    return options


def declared_options(stage: str, v: argparse.Namespace) -> list[Option]:
    """The declared options of the command `stage` with make's values `v` (an optional
    variable not given: None), a switch True where 1."""
    return [(var.keyword, getattr(v, var.name) in ("1", True) if var.switch
             else getattr(v, var.name)) for var in VARIABLES if stage in var.stages]


def stage(name: str, v: argparse.Namespace, first: Sequence[Option] = (),
          then: Sequence[Option] = ()) -> Step:
    """The command `name`: its corpus where it takes one, every usable pool (pool None) where
    its function needs a pool that make names none of, the keywords `first`, its declared
    options (pipeline/options/declared.py) but those `first` or `then` give (the goal's own
    value: MODEL's resolved name), the keywords `then`."""
    corpus = [("corpus", v.CORPUS)] if COMMANDS[name].corpus else []
    own = {key for key, _ in (*first, *then)}
    options = [*first, *(option for option in declared_options(name, v) if option[0] not in own),
               *then]
    pool = inspect.signature(COMMANDS[name].api).parameters.get("pool")  # type: ignore[arg-type]
    every = [("pool", None)] if pool is not None and pool.default is pool.empty and not any(
        key == "pool" for key, _ in options) else []
    return step(name, [*corpus, *every, *options])


def step(name: str, options: Sequence[Option]) -> Step:
    """The command `name`'s function with the keywords `options` (each once)."""
    kwargs = dict(options)
    if len(kwargs) < len(options):
        raise ValueError(f"command {name}: a keyword given twice in {options}")
    return Step(COMMANDS[name].api, kwargs)  # type: ignore[arg-type]


def search(v: argparse.Namespace, model: str) -> Step:
    """make search's stage for `model`: its pools repaired and indexed first, current runs
    kept."""
    return stage("search", v, [("model", model)],
                 [("index", True), ("stale_only", True), ("repair_pools", True)])


def score(v: argparse.Namespace, run: str) -> Step:
    """make eval's stage for the runs `run`: those not scored from the current pool and run
    scored, then runs/results.parquet gathered."""
    return stage("eval", v, [("model", run), ("stale_only", True)], [("collect", True)])


def in_eval_job(v: argparse.Namespace, name: str) -> bool:
    """Whether target `name` is only a prerequisite of make eval EXECUTOR=slurm, whose job
    after the embed array searches and scores: then it does nothing here."""
    goals = v.GOALS.split()
    return v.EXECUTOR == "slurm" and "eval" in goals and name not in goals


def corpus_stages(v: argparse.Namespace, d: dict[str, str]) -> list[Step]:
    """Ingest and prefilter, the demo's synthetic corpus first; nothing for a corpus written
    whole (a benchmark, an imported collection)."""
    if d["WRITTEN_WHOLE"] or in_eval_job(v, "corpus"):
        return []
    synth = valued(v, d, ("synthetic", "DEMO_PAPERS"), ("seed", "DEMO_SEED"))
    if v.CORPUS == "demo" and not given(synth[0][1]):
        synth[0] = ("synthetic", "")  # the corpus as it was made
    return [stage("corpus", v, valued(v, d, ("raw", "RAW_DIR"), ("source", "SOURCE"),
                                      ("threads", "THREADS")),
                  synth if v.CORPUS == "demo" else ())]


def embed(v: argparse.Namespace, d: dict[str, str]) -> list[Step]:
    """Here (the SHARDS one after another), or as a SLURM job array (EXECUTOR=slurm)."""
    if v.EXECUTOR == "slurm":
        return [stage("submit-embed", v, valued(v, d, ("model", "MODEL_FILE")),
                      valued(v, d, ("cpus_per_task", "THREADS")))]
    return [stage("embed", v, valued(v, d, ("model", "MODEL_FILE")))]


def search_and_eval(v: argparse.Namespace, model: str) -> list[Step]:
    """What `make eval MODEL=model` does after the corpus stage (make fuse and make demo for
    each of their models): search, then score, what is not current."""
    return [search(v, model), score(v, layout.run_name(model, v.QUERY_VARIANT or "full"))]


def fuse(v: argparse.Namespace, d: dict[str, str]) -> list[Step]:
    """Each model of MODELS searched and scored, then their fusion, made from their runs."""
    parts = comma_list(v.MODELS)
    models = [get_model(name).name for name in parts] + [fused_name(v.METHOD, parts)]
    return [step for model in models for step in search_and_eval(v, model)]


def rerank(v: argparse.Namespace, d: dict[str, str]) -> list[Step]:
    """FIRST_STAGE searched (an imported run: nothing to search) and scored, MODEL_PATH being
    the reranker's, not its; then its runs reranked by MODEL (the model
    rerank--MODEL--FIRST_STAGE), scored."""
    reranked = reranked_name(v.MODEL, v.FIRST_STAGE)
    alone = argparse.Namespace(**{**vars(v), "MODEL_PATH": ""})
    return [*search_and_eval(alone, rerank_parts(reranked)[1]), *search_and_eval(v, reranked)]


def search_first(models: str, name: str, *first: tuple[str, str]) -> Stages:
    """The stages of a goal that reads the runs of `models` (make's variable): each model's
    search, then the command `name` with the options `first`."""
    return lambda v, d: [*(search(v, get_model(model).name)
                           for model in comma_list(getattr(v, models))),
                         stage(name, v, valued(v, d, *first))]


def demo(v: argparse.Namespace, d: dict[str, str]) -> list[Step]:
    """The demo's stages on the synthetic corpus, in make's order: the corpus, its pools, each
    encoder of DEMO_MODELS embedded, each model searched and scored, with JUDGE a judged sample
    of their top ranks, the report with this run's stage times (its log started afresh)."""
    v = as_corpus(v, layout.DEMO_CORPUS)
    d = derived(v)
    if not v.DRY_RUN:
        layout.stage_times_path(Path(d["RUNS_ROOT"]), v.CORPUS).unlink(missing_ok=True)
    pool = [("corpus", v.CORPUS),
            *valued(v, d, ("repeats", "DEMO_REPEATS"), ("seed", "SEED"))]
    steps = [*corpus_stages(v, d),
             step("pool", [*pool, *valued(v, d, ("size", "DEMO_SIZES"), ("queries", "QUERIES"))])]
    if v.DEMO_FIELDS.split():
        steps.append(step("pool", [*pool, *valued(v, d, ("field", "DEMO_FIELDS"),
                                                  ("size", "DEMO_FIELD_SIZE"),
                                                  ("queries", "DEMO_FIELD_QUERIES"))]))
    steps.append(step("pool", [("corpus", v.CORPUS), ("repair", True)]))  # make pools
    models = [get_model(name) for name in comma_list(v.DEMO_MODELS)]
    steps += [stage("embed", v, (), [("model", e.name)]) for e in models if e.embedded]
    for entry in models:
        steps += search_and_eval(v, entry.name)
    if v.JUDGE:  # the judged sample of the runs' top ranks (make judge)
        runs = [layout.run_name(entry.name, v.QUERY_VARIANT) for entry in models]
        steps.append(stage("judge", v, (), [("models", ",".join(runs))]))
    return [*steps, stage("report", v, [("times", True)])]


def evaluate(v: argparse.Namespace, d: dict[str, str]) -> list[Step]:
    """Score every run whose evaluation is not current; EXECUTOR=slurm: a job after the embed
    array does, searching first (its command line: the job runs later, elsewhere)."""
    scores = score(v, d["MODEL_NAME"])
    if v.EXECUTOR != "slurm":
        return [scores]
    python = [sys.executable, "-m", "pipeline", *roots(d)]
    job = " && ".join(shlex.join(python + step.argv())
                      for step in (search(v, d["MODEL_FILE"]), scores))
    after = stage("after-embed", v, valued(v, d, ("model", "MODEL_NAME")),
                  valued(v, d, ("cpus_per_task", "THREADS")))
    return [Step(after.function, after.kwargs, ("/bin/sh", "-c", job))]


def clean_demo(v: argparse.Namespace, d: dict[str, str]) -> list[Step]:
    """Remove the demo's corpus, indexes, runs and report files; make -n: say which."""
    from pipeline.ingest.demo import demo_files, remove

    paths = demo_files(*(Path(d[root]) for root in ("CORPORA_ROOT", "INDEX_ROOT", "RUNS_ROOT")))
    if v.DRY_RUN:
        for path in paths:
            print(f"rm -rf {shown([str(path)])}", flush=True)
    else:
        remove(paths)
        log.info(f"[clean-demo] {len(paths)} of the demo's folders and report files removed")
    return []


@dataclass(frozen=True)
class Target:
    """A target of the Makefile: `make <name> <usage>`, its `help` line (and `more`); what it
    needs before anything runs (needs: variables given, not defaulted, each with what to give;
    pools: a pool of CORPUS; local: not EXECUTOR=slurm); its stages (its own command with the
    options `first`, (option, NAME), and the bare options `bare`, or `stages`; goal False:
    make's own recipe); `after`: the targets run first."""

    name: str
    usage: str
    help: str
    more: tuple[str, ...] = ()
    needs: dict[str, str] = field(default_factory=dict)
    pools: bool = False
    local: bool = False
    first: tuple[tuple[str, str], ...] = ()
    bare: tuple[str, ...] = ()
    stages: Stages | None = None
    goal: bool = True
    after: tuple[str, ...] = ()

    def steps(self, v: argparse.Namespace, d: dict[str, str]) -> list[Step]:
        return self.stages(v, d) if self.stages else [stage(self.name, v, [
            *valued(v, d, *self.first), *((keyword, True) for keyword in self.bare)])]


NEW_CORPUS = "<name of a new corpus> (the corpus it writes)"
ON_CORPUS = ("corpus",)  # the targets on CORPUS's pools: its corpus stage first
SAMPLED = "<the models whose top ranks are sampled: one, or several separated by commas> " \
    "(e.g. MODELS=bm25,minilm)"
JUDGES = "api:<model>, file:<labels.tsv> or standin:<seed>"
T = Target
TARGETS: tuple[Target, ...] = (
    T("demo", "", "set up, generate the demo corpus, run every stage, report", local=True,
      stages=demo),
    T("test", "", "set up and run the test suite (and ruff)", goal=False),
    T("test-fast", "", "the test suite without the slow tests", goal=False),
    T("lint", "", "ruff and the import contracts (lint-imports)", goal=False),
    T("setup", "", "the virtual environment VENV, with everything installed", goal=False),
    T("setup-gpu", "", "on a GPU node: Faiss GPU in place of faiss-cpu", goal=False),
    T("download", "CORPUS=s2ag [RELEASE=latest FIRST=2]", "the S2AG datasets (key: "
      "S2_API_KEY)", ("(FIRST=2: a trial; UPDATE=1: apply the diffs to a newer release)",),
      needs={"CORPUS": "<the corpus to download into, e.g. s2ag>"}, first=(("raw", "RAW"),)),
    T("corpus", "[RAW=dir]", "ingest and prefilter CORPUS (the demo's: generate it first)",
      stages=corpus_stages),
    T("pool", "[FIELD=f] SIZE=20k", "build a dataset-level (or field-level) pool",
      ("(EXCLUDE=ids.txt: the models' training papers never drawn as queries)",),
      after=ON_CORPUS),
    T("pools-paper", "", "the paper's grid: test and validation pools", after=ON_CORPUS),
    T("pools", "", "rebuild the stale, damaged or half-written pools", after=ON_CORPUS,
      stages=lambda v, d: [step("pool", [("corpus", v.CORPUS), ("repair", True)])]),
    T("retire-pool", "POOL=all-10k-r0", "move a pool, its index and runs into retired/",
      ("(a pool whose EXCLUDE list changed: make verify names it)",),
      needs={"CORPUS": "<the corpus of the pool>", "POOL": "<the pool to retire>"}),
    T("training-ids", "SRC=f PAPER_IDS=dir OUT=f", "S2 SHAs (SPECTER's lists) as CorpusIDs",
      needs={"SRC": "<SPECTER's data.json or train.txt>",
             "PAPER_IDS": "<folder of S2AG's paper-ids shards>", "OUT": "<file to write>"}),
    T("eval", "MODEL=bm25|minilm|..", "index, search and score every pool of CORPUS",
      ("(QUERY_VARIANT=title: the pools with perturbed queries)",), pools=True,
      stages=evaluate, after=("search",)),
    T("index", "MODEL=..", "only index (Lucene / embeddings) every pool of CORPUS", pools=True,
      after=ON_CORPUS,
      stages=lambda v, d: [stage("index", v, valued(v, d, ("model", "MODEL_FILE")),
                                 [("repair_pools", True)])]),
    T("search", "MODEL=..", "only index and search: the runs, unscored", pools=True,
      after=ON_CORPUS,
      stages=lambda v, d: [] if in_eval_job(v, "search") else [search(v, d["MODEL_FILE"])]),
    T("embed", "[EXECUTOR=slurm SHARDS=16 SLURM_TIME=4:00:00]", "embed the pools' papers",
      ("(EXECUTOR=slurm: a SLURM job array, SLURM_TIME per job)",), stages=embed,
      after=("pools",)),
    T("fuse", "MODELS=bm25,minilm [METHOD=rrf]", "fuse the models' runs (ranx), evaluate",
      needs={"MODELS": "a,b (e.g. MODELS=bm25,minilm)"}, local=True, after=ON_CORPUS,
      stages=fuse),
    T("rerank", "MODEL=ms-marco-minilm FIRST_STAGE=bm25 [RERANK_DEPTH=100]",
      "rerank a first stage's top RERANK_DEPTH, evaluate",
      needs={"MODEL": "<a reranker: a cross-encoder or a late-interaction model (make "
                      "models), or st:<org>/<name> of one>"}, local=True, after=ON_CORPUS,
      stages=rerank),
    T("mdcr", "[MDCR_MODELS=bm25,minilm]", "an MDCR-style benchmark (corpus CORPUS-mdcr)",
      after=ON_CORPUS,
      stages=search_first("MDCR_MODELS", "mdcr", ("models", "MDCR_MODELS"), ("out", "MDCR"))),
    T("mdcr-jaccard", "MODELS=a,b,c", "overlap of models' top negatives (choose MDCR_MODELS)",
      needs={"MODELS": "a,b,.. (e.g. MODELS=bm25,minilm,random)"}, after=ON_CORPUS,
      stages=search_first("MODELS", "mdcr-jaccard", ("models", "MODELS"))),
    T("import-mdcr", "SRC=dir CORPUS=mdcr", "the official MDCR files as a corpus",
      needs={"CORPUS": NEW_CORPUS, "SRC": "<folder holding mdcr_{SPLIT}.json>"}),
    T("export-mdcr", "OUT=dir CORPUS=..", "a benchmark corpus in the official layout",
      needs={"OUT": "<folder>"}),
    T("mdcr-scores", "MODEL=.. OUT=f.json", "the official scores file of a model's runs",
      needs={"OUT": "<scores file>"}, first=(("model", "MODEL_NAME"),), after=("eval",)),
    T("export-beir", "CORPUS=.. POOL=.. OUT=dir", "a pool as a BEIR folder", needs={
      "CORPUS": "<the corpus of the pool>", "POOL": "<the pool>", "OUT": "<folder>"}),
    T("export-mteb", "MODEL=.. OUT=dir", "a model's scores per pool as MTEB results (JSON)",
      needs={"OUT": "<folder>"}, first=(("model", "MODEL_NAME"),), after=("eval",)),
    T("import-beir", "SRC=dir CORPUS=scidocs", "a BEIR-layout collection as a corpus",
      needs={"CORPUS": NEW_CORPUS, "SRC": "<folder holding corpus.jsonl>"}),
    T("import-irds", "DATASET=beir/scidocs CORPUS=scidocs", "an ir_datasets collection as a "
      "corpus", needs={"CORPUS": NEW_CORPUS, "DATASET": "<an ir_datasets id>"}),
    T("import-csfcube", "SRC=dir CORPUS=csfcube", "the CSFCube release: a pool per facet",
      ("(mdcr, import-*: REPLACE=1 replaces a corpus of its kind)",),
      needs={"CORPUS": NEW_CORPUS, "SRC": "<the CSFCube release folder>"}),
    T("import-run", "CORPUS=.. POOL=.. RUN=f.trec MODEL=name", "a run made elsewhere, "
      "scored by make eval MODEL=name", ("(no POOL: a run of every pool; DROP_UNKNOWN=1: "
                                         "drop and count lines of unknown ids)",),
      needs={"CORPUS": "<the corpus of the pool>", "RUN": "<the TREC run file>",
             "MODEL": "<a name for the run>"}),
    T("import-vectors", "CORPUS=.. MODEL=name SRC=f.parquet", "vectors made elsewhere, "
      "searched as MODEL=vectors:name", ("(SIMILARITY=cosine|ip|l2: how they are compared)",),
      needs={"CORPUS": "<the corpus of the papers>", "MODEL": "<a name for the vectors>",
             "SRC": "<the parquet file: corpusid, vector>"}),
    T("judge", "MODELS=bm25,minilm JUDGE=api:<model>|file:<labels>|standin:<seed> [SAMPLE=20]",
      "judge a sample of the unjudged papers the models rank high",
      ("(JUDGE=api:<model> with JUDGE_URL; the report counts the judgments: docs/judging.md)",),
      needs={"MODELS": SAMPLED, "JUDGE": JUDGES}, local=True, first=(("models", "MODELS"),)),
    T("judge-page", "MODELS=bm25,minilm [SAMPLE=20]", "the judging page of the samples, for a "
      "person", needs={"MODELS": SAMPLED}, local=True, first=(("models", "MODELS"),)),
    T("judge-agreement", "CORPUS=csfcube JUDGE=..", "an assessor's agreement with CSFCube's "
      "experts", needs={"CORPUS": "<the CSFCube corpus>", "JUDGE": JUDGES}, local=True),
    T("report", "", "tables and plots under runs/reports/", bare=("times",)),
    T("verify", "", "check every artifact: corrupt, partial or stale?",
      ("(each problem with the command that repairs it)",)),
    T("sweep", "", "remove temporaries left by killed processes"),
    T("models", "", "list the model registry"),
    T("clean-demo", "", "remove the demo's corpus, indexes, runs and reports",
      stages=clean_demo),
    T("check", "", "check the variables given (what every target does first)", goal=False),
    T("help", "", "this list (the default goal)", goal=False),
)
del T

TARGET_NAMES = {t.name: t for t in TARGETS}
GOALS = {t.name: t for t in TARGETS if t.goal}  # those `python -m pipeline goal` runs
HELP_WIDTH = 30  # the column the descriptions start at


def check_goals(args: argparse.Namespace) -> None:
    """What make's goals need, before anything runs: known variables on make's command line,
    then each goal's needs, this machine (local) and a pool (pools); InputError otherwise."""
    check_command_line(args.COMMAND_LINE or "")
    given = set((args.GIVEN or "").split())
    values = {k: v or "" for k, v in vars(args).items()}
    for target in (TARGET_NAMES[g] for g in (args.GOALS or "").split() if g in TARGET_NAMES):
        goal = target.name
        for name, what in target.needs.items():
            if not values.get(name) or (BY_NAME[name].default != "" and name not in given):
                raise InputError(f"make {goal} needs {name}=" + what.format(**values))
        if target.local and args.EXECUTOR == "slurm":
            raise InputError(f"make {goal} runs its stages on this machine: EXECUTOR=slurm is "
                             f"for make embed and make eval (run them first, then make {goal})")
        corpus_dir = roots_of(args)["corpora"] / args.CORPUS if args.CORPUS else None
        if target.pools and corpus_dir and not layout.pool_names(corpus_dir):
            where = "".join(f" {n}={values[n]}" for n in WHERE if n in given and values[n])
            raise InputError(f"no pools for CORPUS={args.CORPUS} under "
                             f"{layout.pools_dir(corpus_dir)}: build one first, e.g. make "
                             f"pool CORPUS={args.CORPUS} SIZE=10k{where}")


def help_text() -> str:
    """`make help`: each target's usage and line, then each group's variables and defaults."""
    lines = []
    for target in TARGETS:
        usage = " ".join(filter(None, (f"make {target.name}", target.usage)))
        lines.append(f"{usage:{HELP_WIDTH}} {target.help}" if len(usage) < HELP_WIDTH
                     else f"{usage}  {target.help}")
        lines += [" " * (HELP_WIDTH + 1) + line for line in target.more]
    lines.append("\nThe variables and their defaults (none shown: empty or derived; each "
                 "explained in docs/variables.md):")
    for group, title in GROUPS.items():
        given = [v.name if callable(v.default) or not v.text() else
                 f"{v.name}={shlex.quote(v.text())}" for v in VARIABLES if v.group == group]
        lines += textwrap.wrap(f"{title.split(' (')[0]}: " + "  ".join(given), 100,
                               subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines) + "\n"


def roots(d: dict[str, str]) -> list[str]:
    """The data folders, as absolute paths: the global options of every command."""
    return ["--corpora-root", d["CORPORA_ROOT"], "--index-root", d["INDEX_ROOT"],
            "--runs-root", d["RUNS_ROOT"]]


FLAG = re.compile(r"--([A-Za-z0-9][A-Za-z0-9-]*)?")  # an option's name, or `--`, printed bare


def shown(argv: list[str]) -> str:
    """A command as make -n prints it: the options bare, every other word single-quoted (a
    value that starts with '--' too: a shell gives it back as one word)."""
    return " ".join(word if FLAG.fullmatch(word) else "'" + word.replace("'", "'\\''") + "'"
                    for word in argv)


def chain(goal: str, goals: str = "") -> list[str]:
    """The targets `goal` runs, in order, each `after` first (once); those that make's goals
    before it ran already left out."""
    def targets(name: str) -> list[str]:
        return [*(t for first in TARGET_NAMES[name].after for t in targets(first)), name]

    names = goals.split()
    before = names[:names.index(goal)] if goal in names else []
    done = {t for name in before if name in GOALS for t in targets(name)}
    return [name for name in dict.fromkeys(targets(goal)) if name not in done]


def run_goal(args: argparse.Namespace, variables: argparse.Namespace) -> None:
    """Run the chain of the make target `args.goal` in this process, each stage's equivalent
    command printed first as make prints a recipe (make -n, DRY_RUN: printed only), then its
    function called with the values `read` checked."""
    if args.goal not in GOALS:
        raise InputError(f"no make target {args.goal!r} runs in `python -m pipeline goal` "
                         f"(pipeline/cli/goals.py GOALS: {', '.join(GOALS)})")
    models = model_names(variables)
    for name in chain(args.goal, variables.GOALS):
        values = derived(variables, models)  # after the stages before it (a corpus written whole)
        args.corpora_root, args.index_root, args.runs_root = (
            values["CORPORA_ROOT"], values["INDEX_ROOT"], values["RUNS_ROOT"])
        for step in GOALS[name].steps(variables, values):
            command = step.argv()
            print(f"{shown([sys.executable])} -m pipeline {shown(roots(values))} {command[0]} "
                  f"{shown(command[1:])}", flush=True)
            if not variables.DRY_RUN:
                run(step.command, data_of(args), step.values(args.program))
