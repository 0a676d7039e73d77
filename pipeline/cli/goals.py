"""The stages of each make target: `make pool SIZE=20k` runs `python -m pipeline goal pool`,
which builds the command of each stage from the checked make variables (pipeline/cli/variables.py:
read, derived) and runs it as `python -m pipeline <stage> ...` would, in this process (an error
is the goal's: one line, through main).

GOALS holds one function per target, from the variables to the commands (each an argument
list of `python -m pipeline`, after the data roots); a target with no stage to run (a corpus
written whole has nothing to ingest; clean-demo, which removes folders itself) gives none.
make keeps the chain (eval: search: corpus), so each function is one target's own stages.
Standard library only at import time.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from pipeline.cli.registry import (
    check_writes,
    declared_argv,
    eval_argv,
    of_make,
    opt,
    search_argv,
    stage_args,
)
from pipeline.cli.variables import GOALS_ENV

log = logging.getLogger(__name__)

Commands = list[list[str]]
GoalFunction = Callable[[argparse.Namespace, dict[str, str]], Commands]
GOALS: dict[str, GoalFunction] = {}


def goal(name: str) -> Callable[[GoalFunction], GoalFunction]:
    """Register the decorated function as the stages of the make target `name`."""
    def register(func: GoalFunction) -> GoalFunction:
        GOALS[name] = func
        return func
    return register


def given(v: argparse.Namespace, name: str) -> bool:
    """Whether the variable was given (make's command line or the environment), not defaulted."""
    return name in v.GIVEN.split()


def model_args(v: argparse.Namespace, d: dict[str, str]) -> list[str]:
    """The model the stages load (MODEL_FILE) and where its weights are (MODEL_PATH)."""
    return ["--model", d["MODEL_FILE"], *opt("--model-path", v.MODEL_PATH)]


def slurm_args(v: argparse.Namespace) -> list[str]:
    """What each SLURM job asks for (THREADS CPUs per task)."""
    return [*declared_argv("submit-embed", of_make(v)), "--cpus-per-task", str(v.THREADS)]


def corpus(v: argparse.Namespace) -> list[str]:
    return ["--corpus", v.CORPUS]


def in_eval_job(v: argparse.Namespace, name: str) -> bool:
    """Whether the target `name` is here only as a prerequisite of make eval EXECUTOR=slurm:
    then it does nothing here, the job after the embed array searches and scores (eval)."""
    goals = v.GOALS.split()
    return v.EXECUTOR == "slurm" and "eval" in goals and name not in goals


@goal("models")
def models(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["models"]]


@goal("download")
def download(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """The S2AG datasets into the folder make corpus SOURCE=s2ag reads (docs/ingest.md)."""
    return [["download", *corpus(v), *opt("--raw", v.RAW),
             *declared_argv("download", of_make(v))]]


@goal("corpus")
def corpus_goal(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Ingest and prefilter; the demo's synthetic corpus first (DEMO_PAPERS and DEMO_SEED only
    when given, so that a command that does not name them uses the corpus as it is). A corpus
    written whole (a benchmark, an imported collection: WRITTEN_WHOLE) has nothing to do."""
    if d["WRITTEN_WHOLE"] or in_eval_job(v, "corpus"):
        return []
    synth = (["--synth", *([str(v.DEMO_PAPERS)] if given(v, "DEMO_PAPERS") else []),
              *(["--synth-seed", str(v.DEMO_SEED)] if given(v, "DEMO_SEED") else [])]
             if v.CORPUS == "demo" else [])
    return [["corpus", *corpus(v), "--raw", d["RAW_DIR"], "--source", v.SOURCE,
             "--workers", str(v.THREADS), *declared_argv("corpus", of_make(v)), *synth]]


@goal("pool")
def pool(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["pool", *corpus(v), *declared_argv("pool", of_make(v))]]


@goal("pools-paper")
def pools_paper(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["pools-paper", *corpus(v), *declared_argv("pools-paper", of_make(v))]]


@goal("training-ids")
def training_ids(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["training-ids", *declared_argv("training-ids", of_make(v))]]


@goal("pools")
def pools(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Every pool of CORPUS that is stale, damaged or half-written, built again."""
    return [["pool", *corpus(v), "--repair"]]


@goal("retire-pool")
def retire_pool(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["retire-pool", *corpus(v), *declared_argv("retire-pool", of_make(v))]]


@goal("embed")
def embed(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Here (the SHARDS one after another), or as a SLURM job array (EXECUTOR=slurm)."""
    if v.EXECUTOR == "slurm":
        return [["submit-embed", *corpus(v), *model_args(v, d), *slurm_args(v)]]
    return [["embed", *corpus(v), *model_args(v, d), *declared_argv("embed", of_make(v))]]


@goal("index")
def index(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["index", *corpus(v), *model_args(v, d), *declared_argv("index", of_make(v)),
             "--repair-pools"]]


def search_command(v: argparse.Namespace, d: dict[str, str]) -> list[str]:
    """One process searches every pool whose run is not current (--stale-only), its pools
    repaired first."""
    return ["search", *search_argv(v.CORPUS, d["MODEL_FILE"], of_make(v), v.MODEL_PATH)]


def eval_command(v: argparse.Namespace, d: dict[str, str]) -> list[str]:
    """One process scores every run whose evaluation is not current."""
    return ["eval", *eval_argv(v.CORPUS, d["MODEL_NAME"], of_make(v))]


@goal("search")
def search(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [] if in_eval_job(v, "search") else [search_command(v, d)]


@goal("eval")
def evaluate(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Score the runs (make has run search first). EXECUTOR=slurm: every embed shard in,
    search and score here; else a job after the embed array does (after-embed), running the
    same two stages: search, then eval."""
    if v.EXECUTOR != "slurm":
        return [eval_command(v, d)]
    python = [sys.executable, "-m", "pipeline", *roots(d)]
    stages = " && ".join(shlex.join(python + stage)
                         for stage in (search_command(v, d), eval_command(v, d)))
    return [["after-embed", *corpus(v), "--model", d["MODEL_NAME"], *slurm_args(v),
             "--", "/bin/sh", "-c", stages]]


@goal("fuse")
def fuse(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Every component searched and evaluated, then the fused model, in one process."""
    return [["fuse", *corpus(v), "--models", v.MODELS, "--method", v.METHOD,
             *declared_argv("fuse", of_make(v)), *opt("--model-path", v.MODEL_PATH)]]


@goal("mdcr")
def mdcr(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["mdcr", *corpus(v), "--models", v.MDCR_MODELS, "--out", v.MDCR,
             "--search", *declared_argv("mdcr", of_make(v)),
             *opt("--model-path", v.MODEL_PATH)]]


@goal("mdcr-jaccard")
def mdcr_jaccard(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["mdcr-jaccard", *corpus(v), "--models", v.MODELS, "--search",
             *declared_argv("mdcr-jaccard", of_make(v)), *opt("--model-path", v.MODEL_PATH)]]


@goal("import-beir")
def import_beir(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["import-beir", *corpus(v), *declared_argv("import-beir", of_make(v))]]


@goal("import-irds")
def import_irds(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["import-irds", *corpus(v), *declared_argv("import-irds", of_make(v))]]


@goal("import-csfcube")
def import_csfcube(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["import-csfcube", *corpus(v), *declared_argv("import-csfcube", of_make(v))]]


@goal("import-run")
def import_run(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["import-run", *corpus(v), *declared_argv("import-run", of_make(v))]]


@goal("import-vectors")
def import_vectors(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["import-vectors", *corpus(v), *declared_argv("import-vectors", of_make(v))]]


@goal("import-mdcr")
def import_mdcr(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["import-mdcr", *corpus(v), *declared_argv("import-mdcr", of_make(v))]]


@goal("export-mdcr")
def export_mdcr(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["export-mdcr", *corpus(v), *declared_argv("export-mdcr", of_make(v))]]


@goal("mdcr-scores")
def mdcr_scores(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["mdcr-scores", *corpus(v), "--model", d["MODEL_NAME"],
             *declared_argv("mdcr-scores", of_make(v))]]


@goal("report")
def report(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["report", *corpus(v), "--times", *declared_argv("report", of_make(v))]]


@goal("verify")
def verify(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["verify"]]


@goal("sweep")
def sweep(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    return [["sweep"]]


@goal("demo")
def demo(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Every stage of the demo corpus in one process, in make's order; DEMO_PAPERS and
    DEMO_SEED as for corpus: only when given; DEMO_REPEATS draws of each pool size."""
    return [["demo", *opt("--papers", v.DEMO_PAPERS if given(v, "DEMO_PAPERS") else None),
             *opt("--synth-seed", v.DEMO_SEED if given(v, "DEMO_SEED") else None),
             "--source", v.SOURCE, "--workers", str(v.THREADS), *opt("--raw", v.RAW),
             *opt("--queries", v.QUERIES), "--repeats", str(v.DEMO_REPEATS),
             *declared_argv("demo", of_make(v)), *opt("--model-path", v.MODEL_PATH)]]


def demo_paths(d: dict[str, str]) -> list[Path]:
    """What make clean-demo removes, that exists: the demo corpus's folders under the three
    data roots (DEMO_PATHS) and its report's files (demo_report_files); nothing else, however
    alike its name (demo-mdcr.md, demographics.html, a user's demo_notes.txt)."""
    corpus_dir, *derived = (Path(p) for p in d["DEMO_PATHS"].split(","))
    refuse_foreign_demo(corpus_dir)
    folders = [p for p in (corpus_dir, *derived) if p.exists() or p.is_symlink()]
    return folders + demo_report_files(Path(d["RUNS_ROOT"]))


def refuse_foreign_demo(corpus_dir: Path) -> None:
    """Refuse (nothing removed) a corpus folder of the demo's name that make demo did not make:
    the demo's is synthesized, its raw shards vouched for by the generator's manifest."""
    from pipeline.core.errors import InputError
    from pipeline.ingest.synthetic import recorded_config
    from pipeline.layout import raw_dir

    if not corpus_dir.exists():
        return
    try:
        synthetic = recorded_config(raw_dir(corpus_dir.parent, corpus_dir.name, "s2orc"))
    except InputError:
        synthetic = None
    if synthetic is None:
        raise InputError(f"{corpus_dir} holds a corpus make demo did not synthesize (no "
                         "synthetic shards' manifest in its s2orc/): clean-demo removes only the "
                         "demo's own files, and removed nothing; move or remove it yourself")


def demo_report_files(runs_root: Path) -> list[Path]:
    """The demo's report files that exist: those its report manifest lists (each a name the
    layout gives the demo's report: is_report_file), the manifest, and the Markdown file and
    page the layout names for it even without one (a report stopped half-way)."""
    from pipeline.core.errors import InputError
    from pipeline.core.files import read_json
    from pipeline.layout import (
        DEMO_CORPUS,
        REPORT_PAGE_SUFFIX,
        is_report_file,
        report_file,
        report_manifest,
        reports_dir,
    )

    reports = reports_dir(runs_root)
    record = report_manifest(reports, DEMO_CORPUS)
    try:
        listed = read_json(record).get("outputs", {}) if record.exists() else {}
    except InputError:
        listed = {}  # damaged: its files are not known, only the layout's own names
    names = {str(name) for name in listed if is_report_file(str(name), DEMO_CORPUS)}
    names |= {report_file(Path(), DEMO_CORPUS).name,
              report_file(Path(), DEMO_CORPUS, suffix=REPORT_PAGE_SUFFIX).name}
    paths = [reports / name for name in sorted(names)] + [record]
    return [p for p in paths if p.is_file() or p.is_symlink()]


def roots(d: dict[str, str]) -> list[str]:
    """The data folders, as absolute paths: the global options of every command."""
    return ["--corpora-root", d["CORPORA_ROOT"], "--index-root", d["INDEX_ROOT"],
            "--runs-root", d["RUNS_ROOT"]]


def shown(argv: list[str]) -> str:
    """A command as make -n prints it: each value single-quoted, the options bare."""
    return " ".join(word if word.startswith("--") else "'" + word.replace("'", "'\\''") + "'"
                    for word in argv)


def run_goal(args: argparse.Namespace, variables: argparse.Namespace,
             values: dict[str, str]) -> None:
    """Run the stages of the make target `args.goal`, each command printed first as make prints
    a recipe (with make -n, DRY_RUN: printed only). args: the `goal` command's, which take
    the data roots of `values` (so that an error's repair names them)."""
    if args.goal not in GOALS:
        raise ValueError(f"no make target {args.goal!r} in pipeline/cli/goals.py (GOALS: "
                         f"{', '.join(GOALS)}; {GOALS_ENV}={variables.GOALS})")
    args.corpora_root, args.index_root, args.runs_root = (
        values["CORPORA_ROOT"], values["INDEX_ROOT"], values["RUNS_ROOT"])
    for stage in GOALS[args.goal](variables, values):
        # each command as make echoes a recipe, run or not (make -n)
        print(f"{shown([sys.executable])} -m pipeline {shown(roots(values))} {stage[0]} "
              f"{shown(stage[1:])}", flush=True)
        if variables.DRY_RUN:
            continue
        command = stage_args(args, *stage)
        check_writes(command)
        command.func(command)


@goal("clean-demo")
def clean_demo(v: argparse.Namespace, d: dict[str, str]) -> Commands:
    """Remove the demo's corpus, indexes, runs and report files (demo_paths); no stage to
    run. make -n: say what it would remove."""
    paths = demo_paths(d)
    for path in paths:
        if v.DRY_RUN:
            print(f"rm -rf {shown([str(path)])}", flush=True)
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    if not v.DRY_RUN:
        log.info(f"[clean-demo] {len(paths)} of the demo's folders and report files removed")
    return []
