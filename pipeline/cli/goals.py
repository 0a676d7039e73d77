"""The Makefile's targets, each declared once (TARGETS): its line in `make help`, what it needs
before anything runs (check_goals), and its stages.
`make pool SIZE=20k` runs `python -m pipeline goal pool`, which builds the command of each stage
from the checked make variables (variables.py: read, derived), prints it as make prints a recipe
and runs it as `python -m pipeline <stage> ...` would, in this process.

A target's stages: by default its command of the same name with --corpus (where the command
takes it) and its declared options (pipeline/options/declared.py); a function where a target
differs. The chain is declared here too (Target.after: eval after search after corpus) and runs
in the goal's one process, in order (`chain`); make only starts it. Standard library only at
import time (`make help` runs before the environment exists).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import layout
from pipeline.cli.registry import (
    COMMANDS,
    check_writes,
    declared_argv,
    eval_argv,
    of_make,
    opt,
    search_argv,
    stage_args,
)
from pipeline.cli.variables import WHERE, check_command_line
from pipeline.core.errors import InputError
from pipeline.options.declared import BY_NAME, GROUPS, VARIABLES
from pipeline.roots import data_roots

log = logging.getLogger(__name__)

Commands = list[list[str]]
Stages = Callable[[argparse.Namespace, dict[str, str]], Commands]


def given(v: argparse.Namespace, name: str) -> bool:
    """Whether the variable was given (make's command line or the environment), not defaulted."""
    return name in v.GIVEN.split()


def corpus(v: argparse.Namespace) -> list[str]:
    return ["--corpus", v.CORPUS]


def own_command(name: str, v: argparse.Namespace, *first: str) -> list[str]:
    """The command `name` with --corpus where it takes one, `first`, its declared options."""
    return [name, *(corpus(v) if COMMANDS[name].corpus else []), *first,
            *declared_argv(name, of_make(v))]


def slurm_args(v: argparse.Namespace, stage: str) -> list[str]:
    """The SLURM command `stage`'s declared options, and each job's THREADS CPUs per task."""
    return [*declared_argv(stage, of_make(v)), "--cpus-per-task", str(v.THREADS)]


def in_eval_job(v: argparse.Namespace, name: str) -> bool:
    """Whether the target `name` is here only as a prerequisite of make eval EXECUTOR=slurm:
    then it does nothing here, the job after the embed array searches and scores (eval)."""
    goals = v.GOALS.split()
    return v.EXECUTOR == "slurm" and "eval" in goals and name not in goals


def corpus_stages(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Ingest and prefilter; the demo's synthetic corpus first (DEMO_PAPERS and DEMO_SEED only
    when given, so that a command that does not name them uses the corpus as it is). A corpus
    written whole (a benchmark, an imported collection: WRITTEN_WHOLE) has nothing to do."""
    if d["WRITTEN_WHOLE"] or in_eval_job(v, "corpus"):
        return []
    synth = (["--synth", *([str(v.DEMO_PAPERS)] if given(v, "DEMO_PAPERS") else []),
              *(["--synth-seed", str(v.DEMO_SEED)] if given(v, "DEMO_SEED") else [])]
             if v.CORPUS == "demo" else [])
    return [[*own_command("corpus", v, "--raw", d["RAW_DIR"], "--source", v.SOURCE,
                          "--workers", str(v.THREADS)), *synth]]


def embed(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Here (the SHARDS one after another), or as a SLURM job array (EXECUTOR=slurm)."""
    if v.EXECUTOR == "slurm":
        return [["submit-embed", *corpus(v), "--model", d["MODEL_FILE"],
                 *slurm_args(v, "submit-embed")]]
    return [own_command("embed", v, "--model", d["MODEL_FILE"])]


def search_command(v: argparse.Namespace, d: dict[str, str]) -> list[str]:
    """One process searches every pool whose run is not current, its pools repaired first."""
    return ["search", *search_argv(v.CORPUS, d["MODEL_FILE"], of_make(v))]


def eval_command(v: argparse.Namespace, d: dict[str, str]) -> list[str]:
    """One process scores every run whose evaluation is not current."""
    return ["eval", *eval_argv(v.CORPUS, d["MODEL_NAME"], of_make(v))]


def search(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [] if in_eval_job(v, "search") else [search_command(v, d)]


def evaluate(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Score the runs (make has run search first). EXECUTOR=slurm: every embed shard in,
    search and score here; else a job after the embed array does (after-embed), running the
    same two stages: search, then eval."""
    if v.EXECUTOR != "slurm":
        return [eval_command(v, d)]
    python = [sys.executable, "-m", "pipeline", *roots(d)]
    stages = " && ".join(shlex.join(python + stage)
                         for stage in (search_command(v, d), eval_command(v, d)))
    return [["after-embed", *corpus(v), "--model", d["MODEL_NAME"], *slurm_args(v, "after-embed"),
             "--", "/bin/sh", "-c", stages]]


def of_model(name: str) -> Stages:  # the command `name` on the runs of the model MODEL names
    return lambda v, d: [own_command(name, v, "--model", d["MODEL_NAME"])]


def demo(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Every stage of the demo corpus in one process, in make's order; DEMO_PAPERS and
    DEMO_SEED as for corpus: only when given; DEMO_REPEATS draws of each pool size."""
    return [["demo", *opt("--papers", v.DEMO_PAPERS if given(v, "DEMO_PAPERS") else None),
             *opt("--synth-seed", v.DEMO_SEED if given(v, "DEMO_SEED") else None),
             "--source", v.SOURCE, "--workers", str(v.THREADS), *opt("--raw", v.RAW),
             *opt("--queries", v.QUERIES), "--repeats", str(v.DEMO_REPEATS),
             *declared_argv("demo", of_make(v))]]


def clean_demo(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Remove the demo's corpus, indexes, runs and report files (pipeline/ingest/demo.py); no
    stage to run. make -n: say what it would remove."""
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
    """A target of the Makefile, as `make help` shows it: `make <name> <usage>`, then `help`
    (and the lines of `more` below it). needs: the variables the goal cannot run without, each
    with what to give (formatted with the variables' values, e.g. {SPLIT}); the check refuses
    the goal without them, before anything runs. A variable with a default (CORPUS) is needed
    as given on make's command line or in the environment (GIVEN), never its default. pools:
    the goal works on CORPUS's pools, so one must exist. local: the goal runs every stage on
    this machine (EXECUTOR=slurm is for make embed and make eval). stages: the commands of a
    goal (None: its own command, own_command); goal False: a target make runs itself (setup,
    test, ...), no goal. after: the targets whose stages run first, in this process (make's
    prerequisites were: eval: search: corpus)."""

    name: str
    usage: str
    help: str
    more: tuple[str, ...] = ()
    needs: dict[str, str] = field(default_factory=dict)
    pools: bool = False
    local: bool = False
    stages: Stages | None = None
    goal: bool = True
    after: tuple[str, ...] = ()

    def commands(self, v: argparse.Namespace, d: dict[str, str]) -> Commands:
        """The commands of this goal's stages."""
        return self.stages(v, d) if self.stages else [own_command(self.name, v)]


NEW_CORPUS = "<name of a new corpus> (the corpus it writes)"
ON_CORPUS = ("corpus",)  # the targets on CORPUS's pools: its corpus stage first
SAMPLED = "<the models whose top ranks are sampled: one, or several separated by commas> " \
    "(e.g. MODELS=bm25,minilm)"
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
      needs={"CORPUS": "<the corpus to download into, e.g. s2ag>"},
      stages=lambda v, d: [own_command("download", v, *opt("--raw", v.RAW))]),
    T("corpus", "[RAW=dir]", "ingest and prefilter CORPUS (the demo's: generate it first)",
      stages=corpus_stages),
    T("pool", "[FIELD=f] SIZE=20k", "build a dataset-level (or field-level) pool",
      ("(EXCLUDE=ids.txt: the models' training papers never drawn as queries)",),
      after=ON_CORPUS),
    T("pools-paper", "", "the paper's grid: test and validation pools", after=ON_CORPUS),
    T("pools", "", "rebuild the stale, damaged or half-written pools", after=ON_CORPUS,
      stages=lambda v, d: [["pool", *corpus(v), "--repair"]]),
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
      after=ON_CORPUS, stages=lambda v, d: [
          [*own_command("index", v, "--model", d["MODEL_FILE"]), "--repair-pools"]]),
    T("search", "MODEL=..", "only index and search: the runs, unscored", pools=True,
      stages=search, after=ON_CORPUS),
    T("embed", "[EXECUTOR=slurm SHARDS=16 SLURM_TIME=4:00:00]", "embed the pools' papers",
      ("(EXECUTOR=slurm: a SLURM job array, SLURM_TIME per job)",), stages=embed,
      after=("pools",)),
    T("fuse", "MODELS=bm25,minilm [METHOD=rrf]", "fuse the models' runs (ranx), evaluate",
      needs={"MODELS": "a,b (e.g. MODELS=bm25,minilm)"}, local=True, after=ON_CORPUS,
      stages=lambda v, d: [
          own_command("fuse", v, "--models", v.MODELS, "--method", v.METHOD)]),
    T("mdcr", "[MDCR_MODELS=bm25,minilm]", "an MDCR-style benchmark (corpus CORPUS-mdcr)",
      after=ON_CORPUS, stages=lambda v, d: [own_command(
          "mdcr", v, "--models", v.MDCR_MODELS, "--out", v.MDCR, "--search")]),
    T("mdcr-jaccard", "MODELS=a,b,c", "overlap of models' top negatives (choose MDCR_MODELS)",
      needs={"MODELS": "a,b,.. (e.g. MODELS=bm25,minilm,random)"}, after=ON_CORPUS,
      stages=lambda v, d: [
          own_command("mdcr-jaccard", v, "--models", v.MODELS, "--search")]),
    T("import-mdcr", "SRC=dir CORPUS=mdcr", "the official MDCR files as a corpus",
      needs={"CORPUS": NEW_CORPUS, "SRC": "<folder holding mdcr_{SPLIT}.json>"}),
    T("export-mdcr", "OUT=dir CORPUS=..", "a benchmark corpus in the official layout",
      needs={"OUT": "<folder>"}),
    T("mdcr-scores", "MODEL=.. OUT=f.json", "the official scores file of a model's runs",
      needs={"OUT": "<scores file>"}, stages=of_model("mdcr-scores"), after=("eval",)),
    T("export-beir", "CORPUS=.. POOL=.. OUT=dir", "a pool as a BEIR folder", needs={
      "CORPUS": "<the corpus of the pool>", "POOL": "<the pool>", "OUT": "<folder>"}),
    T("export-mteb", "MODEL=.. OUT=dir", "a model's scores per pool as MTEB results (JSON)",
      needs={"OUT": "<folder>"}, stages=of_model("export-mteb"), after=("eval",)),
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
      needs={"MODELS": SAMPLED, "JUDGE": "api:<model>, file:<labels.tsv> or standin:<seed>"},
      local=True,
      stages=lambda v, d: [own_command("judge", v, "--models", v.MODELS)]),
    T("judge-page", "MODELS=bm25,minilm [SAMPLE=20]", "the judging page of the samples, for a "
      "person", needs={"MODELS": SAMPLED}, local=True,
      stages=lambda v, d: [own_command("judge-page", v, "--models", v.MODELS)]),
    T("judge-agreement", "CORPUS=csfcube JUDGE=..", "an assessor's agreement with CSFCube's "
      "experts", needs={"CORPUS": "<the CSFCube corpus>",
                        "JUDGE": "api:<model>, file:<labels.tsv> or standin:<seed>"},
      local=True),
    T("report", "", "tables and plots under runs/reports/",
      stages=lambda v, d: [own_command("report", v, "--times")]),
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
# The targets `python -m pipeline goal <name>` runs (the others are make's own recipes)
GOALS = {t.name: t for t in TARGETS if t.goal}
HELP_WIDTH = 30  # the column the descriptions start at


def check_goals(args: argparse.Namespace) -> None:
    """What make's goals need, before anything runs: their variables (Target.needs), a pool of
    CORPUS (Target.pools), this machine (Target.local); InputError otherwise. First, every
    variable on make's command line must be a known one (check_command_line)."""
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
            corpora = data_roots(args.DATA or ".", corpora=args.CORPORA_DIR)["corpora"]
            corpus_dir = corpora / args.CORPUS
            if not layout.pool_names(corpus_dir):
                where = "".join(f" {n}={getattr(args, n)}" for n in WHERE
                                if n in given and getattr(args, n))
                raise InputError(f"no pools for CORPUS={args.CORPUS} under "
                                 f"{layout.pools_dir(corpus_dir)}: build one first, e.g. make "
                                 f"pool CORPUS={args.CORPUS} SIZE=10k{where}")


def help_text() -> str:
    """`make help`: each target's usage and its one line (from TARGETS), then the variables
    of each group with their defaults (from the declarations, VARIABLES)."""
    lines = []
    for target in TARGETS:
        usage = " ".join(filter(None, (f"make {target.name}", target.usage)))
        lines.append(f"{usage:{HELP_WIDTH}} {target.help}" if len(usage) < HELP_WIDTH
                     else f"{usage}  {target.help}")
        lines += [" " * (HELP_WIDTH + 1) + line for line in target.more]
    lines.append("\nThe variables and their defaults (none shown: empty or derived; each "
                 "explained in docs/variables.md):")
    for group, title in GROUPS.items():
        given = [v.name if callable(v.default) or not v.default else
                 f"{v.name}={shlex.quote(v.default)}" for v in VARIABLES if v.group == group]
        lines += textwrap.wrap(f"{title.split(' (')[0]}: " + "  ".join(given), 100,
                               subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines) + "\n"


def roots(d: dict[str, str]) -> list[str]:
    """The data folders, as absolute paths: the global options of every command."""
    return ["--corpora-root", d["CORPORA_ROOT"], "--index-root", d["INDEX_ROOT"],
            "--runs-root", d["RUNS_ROOT"]]


def shown(argv: list[str]) -> str:
    """A command as make -n prints it: each value single-quoted, the options bare."""
    return " ".join(word if word.startswith("--") else "'" + word.replace("'", "'\\''") + "'"
                    for word in argv)


def chain(goal: str, goals: str = "") -> list[str]:
    """The targets `goal` runs, in order: each target's `after` first (once). Of make's
    `goals` (MAKECMDGOALS), those before `goal` have run theirs: not again."""
    def targets(name: str) -> list[str]:
        return [*(t for first in TARGET_NAMES[name].after for t in targets(first)), name]

    order = list(dict.fromkeys(targets(goal)))
    names = goals.split()
    done = {t for before in names[:names.index(goal)] if before in GOALS
            for t in targets(before)} if goal in names else set()
    return [name for name in order if name not in done]


def run_goal(args: argparse.Namespace, variables: argparse.Namespace) -> None:
    """Run the chain of the make target `args.goal` (`chain`), each stage's command printed
    first as make prints a recipe (with make -n, DRY_RUN: printed only), in this process.
    args: the `goal` command's, which take the data roots (so that an error's repair names
    them)."""
    from pipeline.cli.variables import derived

    if args.goal not in GOALS:
        raise InputError(f"no make target {args.goal!r} runs in `python -m pipeline goal` "
                         f"(pipeline/cli/goals.py GOALS: {', '.join(GOALS)})")
    for name in chain(args.goal, variables.GOALS):
        values = derived(variables)  # after the stages before it (a corpus written whole)
        args.corpora_root, args.index_root, args.runs_root = (
            values["CORPORA_ROOT"], values["INDEX_ROOT"], values["RUNS_ROOT"])
        for stage in GOALS[name].commands(variables, values):
            print(f"{shown([sys.executable])} -m pipeline {shown(roots(values))} {stage[0]} "
                  f"{shown(stage[1:])}", flush=True)
            if variables.DRY_RUN:
                continue
            command = stage_args(args, *stage)
            check_writes(command)
            command.func(command)
