"""The commands of `python -m pipeline`: each reads its options, calls the stage functions and
logs one summary line. Heavy modules are imported inside the command that needs them, so the
Makefile's `check` (standard library only) and a no-op stage start fast."""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.cli.checks import (
    BACKENDS,
    BM25_ENGINES,
    DTYPES,
    OneLineParser,
    checked,
    choice,
    corpus_name,
    device,
    metric_list,
    non_negative,
    positive,
    safe_path,
    sizes,
)
from pipeline.core.errors import InputError
from pipeline.core.repair import PIPELINE_COMMAND, Repair, Where
from pipeline.encoding.models import HF_PREFIX, REGISTRY, fused_name, get_model
from pipeline.fields import resolve_fields
from pipeline.layout import (
    MANIFEST,
    RESULTS_FILE,
    corpus_path,
    derived_dirs,
    parse_size,
    pool_split,
    raw_dir,
    stage_times_path,
    where,
)
from pipeline.readers import SOURCES
from pipeline.slurm import check_partition, check_time
from pipeline.vocabulary import CITATION_MODES, FOS_SOURCES, VARIANTS

log = logging.getLogger(__name__)


# ---- the registry: each command with its help and its options, next to its function --------
@dataclass(frozen=True)
class Command:
    """A sub-command of `python -m pipeline`: main.build_parser adds one per entry of COMMANDS
    (in this order), each with --corpus (unless corpus=False) and the options `arguments` add."""

    name: str
    help: str
    func: Callable[[argparse.Namespace], None]
    arguments: tuple[Callable[[argparse.ArgumentParser], None], ...]
    corpus: bool = True

    def add_to(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.set_defaults(func=self.func, stage=self.name)
        if self.corpus:
            parser.add_argument("--corpus", default="demo", type=corpus_name,
                                help="folder under corpora/")
        for add in self.arguments:
            add(parser)
        return parser


COMMANDS: dict[str, Command] = {}


def command(name: str, help_text: str, *arguments: Callable[[argparse.ArgumentParser], None],
            corpus: bool = True):
    """Register the decorated function as the command `name`, with the options `arguments`
    add (functions of an ArgumentParser)."""
    def register(func):
        COMMANDS[name] = Command(name, help_text, func, arguments, corpus)
        return func
    return register


def stage_args(args: argparse.Namespace, name: str, *argv: str) -> argparse.Namespace:
    """The options of the command `name` given `argv` (every other option its default), with
    the data roots and the manner of `args`: one command running another in this process."""
    parser = COMMANDS[name].add_to(OneLineParser(prog=f"{getattr(args, 'program', '')} {name}"))
    stage = parser.parse_args(list(argv))
    for key in ("corpora_root", "index_root", "runs_root", "program", "verbosity"):
        if hasattr(args, key):
            setattr(stage, key, getattr(args, key))
    return stage


def run_stage(args: argparse.Namespace, name: str, *argv: str) -> None:
    """Run the command `name` in this process, as `python -m pipeline name argv...` would."""
    stage = stage_args(args, name, *argv)
    stage.func(stage)


# The options several commands share.
def pool_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pool", action="append", help="pool name (repeatable; default all)")


def bm25_engine_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bm25-engine", default="arrays", type=choice(BM25_ENGINES),
                   help="arrays (Lucene's analysis and scores in numba) or lucene (Anserini)")


def model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm")


def embed_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-size", type=positive)
    p.add_argument("--dtype", default="float32", type=choice(DTYPES))
    p.add_argument("--model-path", help="load the weights from this local folder")
    p.add_argument("--device", type=device, help="cpu | cuda (default: cuda if available)")
    p.add_argument("--part-size", type=positive,
                   help="papers per store part, the work a kill can lose (default: 4,096 "
                   "for embeddings, 50,000 for BM25's analysed-text store)")


def slurm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--num-shards", type=positive, default=1, help="array tasks (SHARDS)")
    p.add_argument("--partition", type=checked(check_partition))
    p.add_argument("--gpus-per-task", type=non_negative, default=1,
                   help="--gres=gpu:K for each task; 0 asks for none")
    p.add_argument("--time", type=checked(check_time), help="time limit, e.g. 4:00:00")
    p.add_argument("--cpus-per-task", type=positive)


def repair_pools_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repair-pools", action="store_true", help="first rebuild every pool "
                   "that is stale, damaged or half-written (as make pools)")


def threads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=positive, default=2)


def search_args(p: argparse.ArgumentParser) -> None:
    """What a search runs with: make search's settings (search, and the commands that search
    their models first: fuse, mdcr, mdcr-jaccard, demo)."""
    p.add_argument("--backend", default="auto", type=choice(BACKENDS))
    bm25_engine_arg(p)
    p.add_argument("--query-variant", default="full", type=choice(VARIANTS),
                   help="perturbed queries (pipeline/pools/queries.py); the run is "
                   "<model>~<variant>")


def metrics_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", default="auto", type=checked(metric_list),
                   help="auto (each pool's set: large-scale, or mdcr for MDCR-style pools), "
                   "a set (large-scale, mdcr, beir, csfcube) or names: "
                   "'map ndcg@10 recall@30'")


def split_arg(help_text: str | None = None) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("--split", default="test", type=checked(pool_split), help=help_text)
    return add


def replace_arg(what: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("--replace", action="store_true", help=f"replace {what}")
    return add


def ingest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--raw", help="S2ORC folder holding metadata/, or S2AG folder holding "
                   "papers/, abstracts/, citations/ (default corpora/<corpus>/<source>)")
    p.add_argument("--source", default="s2orc", type=choice(SOURCES),
                   help="s2orc (2020 release) or s2ag (Semantic Scholar Datasets)")
    p.add_argument("--fos-source", default="external", type=choice(FOS_SOURCES),
                   help="S2AG: which s2fieldsofstudy labels count (external = MAG-like)")
    p.add_argument("--workers", type=positive, default=1,
                   help="processes reading shards in parallel (the output does not change)")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first bad line instead of quarantining it")


def prefilter_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--citations", default="inbound", type=choice(CITATION_MODES))
    p.add_argument("--min-citations", type=non_negative, default=3)


def _search_argv(args: argparse.Namespace, model: str, query_variant: str | None = None
                 ) -> list[str]:
    """The options of `make search` for `model`, from a command that has search_args,
    threads_arg and --model-path: index first, keep current runs, repair stale pools."""
    argv = ["--corpus", args.corpus, "--model", model, "--threads", str(args.threads),
            "--bm25-engine", args.bm25_engine, "--backend", args.backend, "--index",
            "--stale-only", "--query-variant", query_variant or args.query_variant,
            "--repair-pools"]
    return argv + (["--model-path", args.model_path] if args.model_path else [])


def _search_and_eval(args: argparse.Namespace, model: str) -> None:
    """What `make eval MODEL=model` does after the corpus stage: search every pool whose run
    is not current (with its index), then score every run whose evaluation is not."""
    from pipeline.layout import run_name

    run_stage(args, "search", *_search_argv(args, model))
    run_stage(args, "eval", "--corpus", args.corpus, "--model",
              run_name(model, args.query_variant), "--stale-only", "--metrics", args.metrics,
              "--collect")


def place(args: argparse.Namespace) -> Where:
    """Where this command's data lies, as a repair command names it (DATA=..., or each root;
    nothing for the checkout's own data folder)."""
    return where(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root),
                 getattr(args, "program", PIPELINE_COMMAND))


def error_line(exc: InputError, args: argparse.Namespace, from_make: bool = False) -> str:
    """The one line of an InputError: its message (in make's words when make ran us: the
    command's options as the variables that set them) and its repair as the command to type
    for the data this command was given: the one place a repair is shown to a user."""
    from pipeline.cli.variables import in_make_words

    message = in_make_words(exc.message) if from_make else exc.message
    return message + (f"; repair: {exc.repair.command(place(args))}" if exc.repair else "")


def _dirs(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    return corpus_path(Path(args.corpora_root), args.corpus), Path(args.index_root), Path(
        args.runs_root)


def _log_dir(args: argparse.Namespace) -> Path:
    return stage_times_path(Path(args.runs_root), args.corpus)


def _pools(args: argparse.Namespace) -> list[str]:
    from pipeline.layout import pool_names

    corpus_dir = _dirs(args)[0]
    pools = args.pool or pool_names(corpus_dir)
    if not pools:
        raise InputError(f"no pools under {corpus_dir}/pools: build one",
                         Repair("pool", corpus_dir.name))
    return pools


def _check_arguments(p: argparse.ArgumentParser) -> None:
    from pipeline.cli.variables import add_options  # the make variables, declared once

    add_options(p)


@command("check", "validate make variables (exit 2 if bad)", _check_arguments,
         corpus=False)  # options are named after the make variables, so errors name them
def cmd_check(args: argparse.Namespace) -> None:
    """Validate make variables (argparse types did most of it), then print the names and paths
    make uses (pipeline/cli/variables.py); writes nothing."""
    if args.MODEL is not None:
        names = args.MODEL.split()
        if len(names) > 1:
            raise InputError(f"MODEL={args.MODEL!r} names {len(names)} models: run one model at "
                             f"a time (make eval MODEL={names[0]}), or use DEMO_MODELS or "
                             "MODELS (make fuse) for several")
        if not names:
            raise InputError("MODEL is empty: give one model name (make models lists them)")
        if names[0] != args.MODEL:
            raise InputError(f"MODEL={args.MODEL!r} holds a space or a line break: give one "
                             "model name without spaces")
    # variables holding one value: make would split one holding a space (or a line break) into
    # several words, and target names with it ("mixed implicit and normal rules")
    from pipeline.cli.variables import VARIABLES, check_goals, derived, make_line

    for var in (v for v in VARIABLES if v.one_word):
        for name in filter(None, (var.name, var.alias)):
            value = getattr(args, name, None)
            if isinstance(value, str) and re.search(r"\s", value):
                raise InputError(f"{name}={value!r} holds a space or a line break: give one "
                                 "value without spaces")
    for name in f"{args.MODEL or ''} {args.DEMO_MODELS or ''}".split():
        if name.startswith(HF_PREFIX):  # validates the id and the pooling
            get_model(f"{name}@{args.POOLING or 'mean'}")
            continue
        entry = get_model(name)
        if entry.name != name:
            raise InputError(f"MODEL {name!r}: write it as registered, {entry.name!r}")
    if args.POOLING and not (args.MODEL or "").startswith(HF_PREFIX):
        raise InputError(f"POOLING={args.POOLING} is for MODEL=hf:<id>; a registered model "
                         "has its own pooling (make models)")
    if args.MODELS:  # make fuse
        fused_name(args.METHOD or "rrf", args.MODELS.replace(",", " ").split())
    for name in (args.MDCR_MODELS or "").replace(",", " ").split():  # make mdcr
        if name not in REGISTRY and not name.startswith(("hf--", "fuse--")):
            raise InputError(f"MDCR_MODELS: {name!r} is not a registered model (make models "
                             "lists them); give the models whose runs give the negatives")
    for fields in (args.FIELD, args.DEMO_FIELDS):
        if fields:
            resolve_fields(fields)
    if args.EXECUTOR == "slurm" and not shutil.which("sbatch"):
        raise InputError("EXECUTOR=slurm needs `sbatch`, which is not on PATH: run make on a "
                         "SLURM login node, or use EXECUTOR=local")
    if args.MODEL_PATH and not Path(args.MODEL_PATH).is_dir():
        raise InputError(f"MODEL_PATH {args.MODEL_PATH} is not a folder: give the folder "
                         "written by save_pretrained")
    check_goals(args)  # what make's goals need: their variables, a pool, this machine
    # stdout, for make: the names and paths it uses, on one line (not a log message)
    sys.stdout.write(make_line(derived(args)))


def _variables_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--write", action="store_true", help="write the generated files that differ "
                   "from the declaration (pipeline/cli/variables.py)")


@command("variables", "the make variables: print their table, or write "
         "pipeline/cli/variables.mk and docs/variables.md again (make variables)",
         _variables_arguments, corpus=False)
def cmd_variables(args: argparse.Namespace) -> None:
    from pipeline.cli.variables import markdown, write

    if not args.write:
        sys.stdout.write(markdown())
        return
    for path in write():
        log.info(f"[variables] wrote {path}")


@command("targets", "the Makefile's targets, one line each (make help)", corpus=False)
def cmd_targets(args: argparse.Namespace) -> None:
    from pipeline.cli.variables import help_text

    sys.stdout.write(help_text())


@command("models", "list the model registry", corpus=False)
def cmd_models(args: argparse.Namespace) -> None:
    for entry in REGISTRY.values():
        print(f"{entry.name:14} {entry.kind:12} {entry.hf_id or '-':52} {entry.similarity}")


@command("warm", "compile the numba kernels once (make setup runs it)", corpus=False)
def cmd_warm(args: argparse.Namespace) -> None:
    """Compile the numba kernels of BM25 and of the metrics into numba's cache (make setup)."""
    from pipeline.evaluation import metrics
    from pipeline.retrieval.bm25 import arrays as bm25_arrays

    bm25_arrays.warm_up()
    metrics.warm_up()


def _synth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--papers", default="120k", type=sizes)
    p.add_argument("--shards", type=positive, default=4)
    p.add_argument("--repair", action="store_true", help="write damaged or missing shards "
                   "again, with the settings the corpus's s2orc/manifest.json records")
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--workers", type=positive, default=2, help="processes rendering text")


@command("synth", "generate a synthetic corpus in S2ORC format", _synth_arguments)
def cmd_synth(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest.synthetic import SyntheticConfig, generate

    out_dir = raw_dir(Path(args.corpora_root), args.corpus, "s2orc")  # the generator writes S2ORC
    if args.repair:  # the recorded settings: damaged or missing shards written again
        from pipeline.core.files import read_json

        try:
            recorded = read_json(out_dir / MANIFEST).get("parameters", {})
        except InputError as exc:  # the settings are lost with it: the demo's are make's
            raise InputError(f"{exc.message}: the generator's settings are lost; write the "
                             "shards again with those it was made with (synth --papers N "
                             "--shards K --seed S)",
                             Repair("corpus", "demo") if args.corpus == "demo" else None
                             ) from None
        cfg = SyntheticConfig(**recorded)
    else:
        cfg = SyntheticConfig(n_papers=parse_size(args.papers), n_shards=args.shards,
                              seed=args.seed)
    with timed("synth", _log_dir(args), papers=cfg.n_papers) as info:
        out = generate(out_dir, cfg, workers=args.workers)
        info.update(out["counts"])


@command("ingest", "S2ORC / S2AG shards -> papers.parquet + citations.parquet", ingest_args)
def cmd_ingest(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest import ingest

    corpus_dir = _dirs(args)[0]
    raw = Path(args.raw) if args.raw else corpus_dir / args.source
    with timed("ingest", _log_dir(args)) as info:
        info.update(ingest(raw, corpus_dir, strict=args.strict, workers=args.workers,
                           source=args.source, fos_source=args.fos_source)["counts"])


@command("prefilter", "MDCR §3 prefilter with drop counts", prefilter_args)
def cmd_prefilter(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest import prefilter

    with timed("prefilter", _log_dir(args)) as info:
        info.update(prefilter(_dirs(args)[0], args.citations, args.min_citations)["counts"])


def _synth_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--synth", type=sizes, help="first generate a synthetic corpus of this many "
                   "papers in corpora/<corpus>/s2orc (the demo)")
    p.add_argument("--synth-seed", type=non_negative, default=0)


@command("corpus", "synth (with --synth), ingest and prefilter in one process, each only "
         "when its outputs are not current (make corpus)", ingest_args, prefilter_args,
         _synth_option)
def cmd_corpus(args: argparse.Namespace) -> None:
    """The corpus stages in one process (make corpus): the demo's synthetic shards (--synth),
    ingest, prefilter. Each decides by content whether it has work to do."""
    if args.synth:
        cmd_synth(argparse.Namespace(**vars(args), papers=args.synth, shards=4,
                                     seed=args.synth_seed, repair=False))
    cmd_ingest(args)
    cmd_prefilter(args)


def _repair_pools(args: argparse.Namespace) -> None:
    """Every pool of the corpus that is stale, damaged or half-written, built again from its
    recorded parameters (a no-op for current ones, and for a benchmark's or collection's)."""
    from pipeline.core.timing import timed
    from pipeline.pools.build import pool_folders, rebuild_pool

    corpus_dir = _dirs(args)[0]
    for name in pool_folders(corpus_dir):
        with timed("pool", _log_dir(args), pool=name):
            rebuild_pool(corpus_dir, name)


def _pool_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=sizes, help="e.g. 20000, 20k, 2M; several: '10k 20k'")
    p.add_argument("--field", help="a MAG field for a field-level pool, or 'all' (19 pools)")
    p.add_argument("--repeats", type=positive, default=1, help="samples per size (paper: 3)")
    p.add_argument("--queries", type=positive, help="default 3800 dataset-level, 200 per field")
    p.add_argument("--query-year", type=non_negative, default=2019)
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--exclude", help="file of CorpusIDs never used as queries")
    p.add_argument("--split", default="test", type=checked(pool_split),
                   help="validation: queries disjoint from the test pool's (BM25 tuning)")
    p.add_argument("--rebuild", action="append", metavar="POOL",
                   help="rebuild an existing pool from its recorded parameters (if stale)")
    p.add_argument("--repair", action="store_true",
                   help="rebuild every pool of the corpus that is stale, damaged or "
                   "half-written, from its recorded parameters (make pools)")


@command("pool", "build dataset-level or field-level pools", _pool_arguments)
def cmd_pool(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.pools.build import NoQueriesError, PoolSpec, build_pool, rebuild_pool

    if args.repair:
        return _repair_pools(args)
    if args.rebuild:
        for name in args.rebuild:
            with timed("pool", _log_dir(args), pool=name):
                rebuild_pool(_dirs(args)[0], name)
        return
    if not args.size:
        raise InputError("pool: give --size (e.g. 20k) or --rebuild <pool>")
    fields = resolve_fields(args.field) if args.field else [None]
    sizes = [parse_size(text) for text in args.size.split()]
    exhausted: set[tuple[str | None, int]] = set()
    for field, size, repeat in itertools.product(fields, sizes, range(args.repeats)):
        if (field, size) in exhausted:  # MDCR §3: one sample where the field-cited set is small
            log.info(f"[pool] {field}: field-cited set < {size}, so no repeat {repeat}")
            continue
        spec = PoolSpec(size=size, field=field, repeat=repeat, n_queries=args.queries,
                        query_year=args.query_year, max_year=args.query_year, seed=args.seed,
                        exclude=args.exclude, split=args.split)
        try:
            with timed("pool", _log_dir(args), pool=spec.name) as info:
                counts = build_pool(_dirs(args)[0], spec)["counts"]
                info.update(queries=counts["queries"], candidates=counts["candidates"])
        except NoQueriesError as exc:
            if len(fields) == 1:
                raise
            log.info(f"[pool] skipped: {exc}")  # FIELD=all on a small corpus
            exhausted.add((field, size))
            continue
        if counts["exhausted"]:
            exhausted.add((field, size))


def _paper_arguments(p: argparse.ArgumentParser) -> None:
    from pipeline.cli.variables import BY_NAME  # the defaults are the make variables'

    def default(name: str) -> str:
        return BY_NAME[name].default

    p.add_argument("--sizes", type=sizes, default=default("PAPER_SIZES"),
                   help="dataset-level pool sizes (PAPER_SIZES)")
    p.add_argument("--queries", type=positive, default=int(default("PAPER_QUERIES")),
                   help="queries per dataset-level pool (PAPER_QUERIES)")
    p.add_argument("--field-size", type=sizes, default=default("PAPER_FIELD_SIZE"),
                   help="the size of the field-level pools, all 19 fields (PAPER_FIELD_SIZE)")
    p.add_argument("--field-queries", type=positive,
                   default=int(default("PAPER_FIELD_QUERIES")),
                   help="queries per field-level pool (PAPER_FIELD_QUERIES)")
    p.add_argument("--repeats", type=positive, default=int(default("PAPER_REPEATS")),
                   help="samples per size (PAPER_REPEATS)")
    p.add_argument("--seed", type=non_negative, default=0)


PAPER_SPLITS = ("test", "validation")


@command("pools-paper", "the paper's grid: dataset-level and field-level pools of the test "
         "and the validation split, each split in turn (make pools-paper)", _paper_arguments)
def cmd_pools_paper(args: argparse.Namespace) -> None:
    common = ("--corpus", args.corpus, "--repeats", str(args.repeats), "--seed",
              str(args.seed))
    for split in PAPER_SPLITS:
        run_stage(args, "pool", *common, "--split", split, "--size", args.sizes,
                  "--queries", str(args.queries))
        run_stage(args, "pool", *common, "--split", split, "--field", "all",
                  "--size", args.field_size, "--queries", str(args.field_queries))


def _embed_options(args: argparse.Namespace) -> dict:
    """The store options of embed and index; a part size only where given (each store has
    its own default)."""
    options = {"batch_size": args.batch_size, "dtype": args.dtype,
               "model_path": args.model_path, "device": args.device}
    return {**options, **({"part_size": args.part_size} if args.part_size else {})}


def _embed_shard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=non_negative,
                   help="embed only this shard (default: every shard in turn)")
    p.add_argument("--num-shards", type=positive, default=1)


@command("embed", "embed the pools' papers missing from the store", model_arg, pool_arg,
         embed_args, _embed_shard_arguments)
def cmd_embed(args: argparse.Namespace) -> None:
    """One shard, or (no --shard) every shard in turn: what a job array's tasks do."""
    from pipeline.core.timing import timed
    from pipeline.encoding.embed import embed

    if args.device:  # refused up front, even when every paper is already stored
        from pipeline.encoding.encoders import check_device

        check_device(args.device)
    corpus_dir, index_root, _ = _dirs(args)
    shards = range(args.num_shards) if args.shard is None else [args.shard]
    for shard in shards:
        with timed("embed", _log_dir(args), model=args.model, shard=shard) as info:
            out = embed(corpus_dir, index_root, get_model(args.model), _pools(args), shard,
                        args.num_shards, **_embed_options(args))
            info.update({k: out[k] for k in ("embedded", "papers_per_s") if k in out})


def _resources(args: argparse.Namespace):
    from pipeline.slurm import Resources

    return Resources(args.partition, args.gpus_per_task, args.time, args.cpus_per_task)


@command("submit-embed", "write <runs-root>/slurm/embed-<corpus>-<model>.sbatch, a SLURM job "
         "array of one embed shard per task, and submit it; prints the job id", model_arg,
         pool_arg, embed_args, slurm_args)
def cmd_submit_embed(args: argparse.Namespace) -> None:
    from pipeline.layout import slurm_dir
    from pipeline.slurm import submit_embed

    entry = get_model(args.model)
    options = {"--pool": args.pool, "--model-path": args.model_path, "--dtype": args.dtype,
               "--batch-size": args.batch_size, "--device": args.device,
               "--part-size": args.part_size}
    roots = (Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    job_id = submit_embed(roots, args.corpus, entry.name, args.num_shards, _resources(args),
                          options)
    log.info(f"[slurm] submitted embed array {job_id} ({args.num_shards} tasks); script and "
             f"logs in {slurm_dir(Path(args.runs_root))}")
    print(job_id)


def _after_embed_command(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs="+", metavar="COMMAND",
                   help="after --, e.g. -- make eval EXECUTOR=local ...")


@command("after-embed", "run COMMAND here when every embed shard is in, else submit it as a "
         "SLURM job after the embed array (afterok)", model_arg, pool_arg, slurm_args,
         _after_embed_command)
def cmd_after_embed(args: argparse.Namespace) -> None:
    from pipeline.slurm import run_here, submit_after_embed

    corpus_dir, index_root, runs_root = _dirs(args)
    entry = get_model(args.model)
    job_id = submit_after_embed(corpus_dir, index_root, runs_root, entry, args.num_shards,
                                _resources(args), args.command, args.pool)
    if job_id is None:
        log.info(f"[slurm] every embed shard of {entry.name} is in: running the command here")
        raise SystemExit(run_here(args.command))
    log.info(f"[slurm] submitted job {job_id}: runs {' '.join(args.command[:4])} ... after the "
             "embed array succeeds")
    print(job_id)


def _index_pools(args: argparse.Namespace, entry, pools: list[str]) -> None:
    """Build what `entry` searches for each pool; an encoder is loaded once for all of them."""
    if args.device:
        from pipeline.encoding.encoders import check_device

        check_device(args.device)  # a GPU asked for and absent: refused even with no work
    from pipeline.core.timing import timed
    from pipeline.encoding.embed import embed
    from pipeline.retrieval.search import index

    corpus_dir, index_root, _ = _dirs(args)
    if entry.embedded:
        with timed("index", _log_dir(args), model=entry.name, pools=len(pools)):
            embed(corpus_dir, index_root, entry, pools, **_embed_options(args))
        return
    for pool in pools:
        with timed("index", _log_dir(args), model=entry.name, pool=pool):
            index(corpus_dir, index_root, pool, entry, args.threads, part_size=args.part_size,
                  **_retriever_options(args))


def _retriever_options(args: argparse.Namespace) -> dict:
    """Every retriever kind's options as the command line gives them (each kind takes its own:
    Retriever.OPTIONS)."""
    return {name: getattr(args, name, None) for name in ("bm25_engine", "backend", "model_path")}


@command("index", "build what a model searches (embeddings, BM25's analysed-text store, a "
         "Lucene index)", repair_pools_arg, model_arg, threads_arg, bm25_engine_arg, pool_arg,
         embed_args)
def cmd_index(args: argparse.Namespace) -> None:
    if args.repair_pools:
        _repair_pools(args)
    _index_pools(args, get_model(args.model), _pools(args))


def _search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=positive, default=500)
    threads_arg(p)
    p.add_argument("--seed", type=non_negative, default=0, help="seed of the random model")
    p.add_argument("--backend", default="auto", type=choice(BACKENDS))
    p.add_argument("--stale-only", action="store_true",
                   help="keep runs that are intact and made from their pool's current files")
    p.add_argument("--index", action="store_true", help="index the pools it searches first")
    repair_pools_arg(p)
    p.add_argument("--query-variant", default="full", type=choice(VARIANTS),
                   help="perturbed queries (pipeline/pools/queries.py); the run is "
                   "<model>~<variant>")
    bm25_engine_arg(p)


@command("search", "retrieve the top k per query, write TREC + parquet runs (several pools in "
         "one process)", model_arg, _search_arguments, pool_arg, embed_args)
def cmd_search(args: argparse.Namespace) -> None:
    """Search pools one after another in this process: one JVM (BM25) or one model and device
    set-up for all of them. With --stale-only, pools whose run is current are kept as they
    are; with --index, what they search is built first (what `make search` does)."""
    from pipeline.core.timing import timed
    from pipeline.layout import run_name
    from pipeline.retrieval.registry import retriever
    from pipeline.retrieval.runs import run_is_current
    from pipeline.retrieval.search import search

    corpus_dir, index_root, runs_root = _dirs(args)
    entry = get_model(args.model)
    name = run_name(entry.name, args.query_variant)
    kind = retriever(entry.kind)
    kind.check(kind.options(_retriever_options(args)))  # a GPU backend absent: before any work
    if args.repair_pools:
        _repair_pools(args)
    pools = _pools(args)
    # a Lucene index is checked for every pool first (a no-op when intact): a damaged one is
    # built again (verify's repair for it), and the runs made from the old one are then stale
    lucene = entry.kind == "bm25" and args.bm25_engine == "lucene"
    if args.index and lucene:
        _index_pools(args, entry, pools)
    if args.stale_only:
        kept = [p for p in pools
                if run_is_current(corpus_dir, index_root, runs_root, p, name, args.k)]
        pools = [p for p in pools if p not in kept]
        log.info(f"[search] {name}: {len(kept)} current runs kept, {len(pools)} to search")
    if args.index and pools and not lucene:
        _index_pools(args, entry, pools)
    for pool in pools:
        with timed("search", _log_dir(args), model=name, pool=pool) as info:
            out = search(corpus_dir, index_root, runs_root, pool, entry, args.k, args.threads,
                         args.seed, args.query_variant, **_retriever_options(args))
            info.update(queries_per_s=out["queries_per_s"])


def _eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm", help="a model, or <model>~<variant> for the "
                   "runs of perturbed queries")
    metrics_arg(p)
    p.add_argument("--stale-only", action="store_true",
                   help="keep evaluations made from the current pool and run")
    p.add_argument("--collect", action="store_true",
                   help="then gather every evaluation into runs/results.parquet (as collect)")


@command("eval", "score runs with ranx's kernels, per query (default MAP, NDCG, R@30)",
         _eval_arguments, pool_arg)
def cmd_eval(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.evaluation.evaluate import eval_is_current, eval_run, pool_metrics
    from pipeline.layout import run_name, split_run_name

    corpus_dir, index_root, runs_root = _dirs(args)
    model, variant = split_run_name(args.model)
    name = run_name(get_model(model).name, variant)
    pools = _pools(args)
    metrics = {p: pool_metrics(corpus_dir, p, args.metrics) for p in pools}
    if args.stale_only:
        kept = [p for p in pools
                if eval_is_current(corpus_dir, index_root, runs_root, p, name, metrics[p])]
        pools = [p for p in pools if p not in kept]
        log.info(f"[eval] {name}: {len(kept)} current evaluations kept, {len(pools)} to "
                 "score")
    for pool in pools:
        with timed("eval", _log_dir(args), model=name, pool=pool) as info:
            out = eval_run(corpus_dir, index_root, runs_root, pool, name, metrics[pool])
            info.update({k: round(v, 4) for k, v in out["means"].items() if v is not None})
    if args.collect:
        cmd_collect(args)


def _comma_list(text: str) -> list[str]:
    return [m for m in text.replace(",", " ").split() if m]


def _search_first(args: argparse.Namespace, models: list[str]) -> None:
    """--search: each model's runs that are not current made first (make search MODEL=..)."""
    if args.search:
        for model in models:
            run_stage(args, "search", *_search_argv(args, get_model(model).name))


def _fuse_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help="the models fused, separated by commas "
                   "(an hf: model's pooling as hf:<org>/<name>@cls)")
    p.add_argument("--method", default="rrf", help="ranx's fusion method (rrf, wsum, ...)")
    threads_arg(p)
    search_args(p)
    metrics_arg(p)
    p.add_argument("--model-path", help="load the weights from this local folder")


@command("fuse", "search and score each model of --models, then their fusion (make fuse): "
         "each only where its run or evaluation is not current, in this process",
         _fuse_arguments)
def cmd_fuse(args: argparse.Namespace) -> None:
    """What `make eval MODEL=..` does after the corpus stage, for every component and then for
    the fused model, whose runs are made from the components' (pipeline/retrieval/fusion.py)."""
    parts = _comma_list(args.models)
    fused = fused_name(args.method, parts)
    for model in [get_model(m).name for m in parts] + [fused]:
        _search_and_eval(args, model)


def _mdcr_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help="models whose top-ranked papers give the "
                   "model-based negatives, separated by commas (paper: bm25,specter,scincl)")
    p.add_argument("--out", required=True, type=corpus_name, help="the benchmark's corpus name")
    p.add_argument("--seed", type=non_negative, default=0, help="pools of this seed; sampling")
    p.add_argument("--positives", type=positive, default=5)
    p.add_argument("--per-type", type=positive, default=10, help="negatives of each type")
    p.add_argument("--top", type=positive, default=200,
                   help="model-based negatives from the top N; most cited: the field's top N")
    replace_arg("the corpus --out if it is an MDCR-style benchmark already")(p)


def _first_search_arguments(p: argparse.ArgumentParser) -> None:
    """--search: the models' runs made first (as make search does for each), with the search
    settings."""
    p.add_argument("--search", action="store_true", help="first search every pool with each "
                   "model whose run is not current (make search MODEL=..; make mdcr does)")
    threads_arg(p)
    search_args(p)
    p.add_argument("--model-path", help="load the weights from this local folder")


@command("mdcr", "build an MDCR-style benchmark (MDCR §4) from the corpus's field-level test "
         "pools and the models' runs, as the corpus --out", _mdcr_arguments,
         _first_search_arguments)
def cmd_mdcr(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.mdcr.build import build_mdcr

    corpus_dir, index_root, runs_root = _dirs(args)
    out = Path(args.corpora_root) / args.out
    if out == corpus_dir:
        raise InputError(f"MDCR={args.out} names the source corpus itself: give the benchmark "
                         "another corpus name (default <corpus>-mdcr)")
    _search_first(args, _comma_list(args.models))
    with timed("mdcr", _log_dir(args), out=args.out) as info:
        built = build_mdcr(corpus_dir, index_root, runs_root, out, _comma_list(args.models),
                           args.seed, args.positives, args.per_type, args.top,
                           replace=args.replace)
        info.update(built["benchmark"]["counts"])
    counts = built["benchmark"]["counts"]
    log.info(f"[mdcr] {out}: {counts['fields']} fields, {counts['queries']} queries, "
             f"{counts['pairs']} query-candidate pairs; by type {counts['by_type']} "
             f"({built['installed']}); evaluate with "
             f"{Repair('eval', args.out, '<model>').command(place(args))}")


def _jaccard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help="two or more models, separated by commas")
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--depth", type=positive, default=10, help="negatives compared per query")


@command("mdcr-jaccard", "average Jaccard index between models' highest-ranked negatives on "
         "the field-level pools (picks MDCR_MODELS)", _jaccard_arguments,
         _first_search_arguments)
def cmd_mdcr_jaccard(args: argparse.Namespace) -> None:
    from pipeline.mdcr.build import negative_jaccard
    from pipeline.report.build import jaccard_report

    _search_first(args, _comma_list(args.models))
    corpus_dir, index_root, runs_root = _dirs(args)
    table = negative_jaccard(corpus_dir, index_root, runs_root, _comma_list(args.models),
                             args.seed, args.depth)
    print(jaccard_report(table, runs_root, args.corpus, args.depth))


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, type=safe_path, help="folder to write into")


@command("export-mdcr", "write a benchmark corpus in the official layout: mdcr_<split>.json "
         "and mdcr_<split>_data.jsonl", _export_arguments, split_arg())
def cmd_export_mdcr(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import check_out, export_benchmark

    check_out(Path(args.out), folder=True)  # before reading anything
    info = export_benchmark(_dirs(args)[0], Path(args.out), args.split)
    log.info(f"[export-mdcr] {info['files']}: "
             f"{info['fields']} fields, {info['queries']} queries, {info['papers']} papers")
    if info["ignored_by_official_evaluator"]:
        log.info(f"[export-mdcr] note: types the official evaluator does not read (it knows "
                 f"bm25, specter, scincl, graph, most_cited, random): "
                 f"{info['ignored_by_official_evaluator']}")


def _src_arg(help_text: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("--src", required=True, type=safe_path, help=help_text)
    return add


@command("import-mdcr", "read the official mdcr_<split>.json and mdcr_<split>_data.jsonl into "
         "a benchmark corpus", _src_arg("folder holding the files"), split_arg(),
         replace_arg("the corpus if it is an imported benchmark already"))
def cmd_import_mdcr(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import import_benchmark

    info = import_benchmark(Path(args.src), _dirs(args)[0], args.split, args.replace,
                            _derived(args))
    counts = info["benchmark"]["counts"]
    log.info(f"[import-mdcr] corpus {args.corpus} ({info['installed']}): {counts['fields']} "
             f"fields, {counts['queries']} queries, {counts['papers']} papers, {counts['pairs']} "
             f"pairs; {info['duplicate_paper_records_dropped']} duplicate paper records dropped")


def _derived(args: argparse.Namespace, corpus: str | None = None) -> tuple[Path, Path]:
    """What a corpus's indexes and runs are: removed with it when a command replaces it."""
    corpus = corpus or args.corpus
    return derived_dirs(Path(args.index_root), Path(args.runs_root), corpus)


@command("import-beir", "read a test collection in BEIR's layout (corpus.jsonl, queries.jsonl, "
         "qrels/<split>.tsv) into a corpus and one pool", _src_arg("the collection's folder"),
         split_arg("qrels/test.tsv, or qrels/dev.tsv (a validation pool: BM25 tunes on it)"),
         replace_arg("the corpus if it is an imported collection already"))
def cmd_import_beir(args: argparse.Namespace) -> None:
    from pipeline.external.beir import import_beir

    info = import_beir(Path(args.src), _dirs(args)[0], args.split, args.replace,
                       _derived(args))["collection"]
    counts = info["counts"]
    # each count of what was read adds up: read = kept + each reason (docs/collections.md)
    log.info(f"[import-beir] corpus {args.corpus} ({info['installed']}), pool "
             f"{info['pools'][0]}: {counts['candidates']} documents of "
             f"{counts['documents_read']} read ({counts['duplicate_documents_dropped']} exact "
             f"repeats), {counts['queries']} queries of {counts['queries_read']} read "
             f"({counts['duplicate_queries_dropped']} exact repeats, "
             f"{counts['queries_without_text_left_out']} without text, "
             f"{counts['queries_without_qrels_left_out']} without judgments in this split), "
             f"{counts['qrels']} judgments of {counts['qrels_read']} read "
             f"({counts['qrels_duplicate_pairs_dropped']} repeated, "
             f"{counts['qrels_of_queries_without_text_dropped']} of queries without text, "
             f"{counts['qrels_dropped_unknown_document_or_query']} naming an unknown document "
             f"or query, {counts['qrels_of_the_query_itself_left_out']} of the query itself)")


@command("import-csfcube", "read the CSFCube release (test-pid2anns-csfcube-<facet>.json, "
         "abstracts-csfcube-preds.jsonl, queries-release.csv, evaluation_splits.json) into a "
         "corpus and one pool per facet", _src_arg("the release's folder"),
         replace_arg("the corpus if it is an imported collection already"))
def cmd_import_csfcube(args: argparse.Namespace) -> None:
    from pipeline.external.csfcube import FACETS, import_csfcube

    info = import_csfcube(Path(args.src), _dirs(args)[0], args.replace,
                          _derived(args))["collection"]
    counts = info["counts"]
    per_facet = ", ".join(f"{f} {counts[f'{f}_queries']} queries / {counts[f'{f}_candidates']} "
                          "candidates" for f in FACETS)
    log.info(f"[import-csfcube] corpus {args.corpus} ({info['installed']}), pools "
             f"{', '.join(info['pools'])}: {per_facet}; {counts['papers']} papers "
             f"({counts['papers_in_no_pool_left_out']} records naming no pool's paper left out, "
             f"{counts['paper_records_repeated']} records and {counts['query_rows_repeated']} "
             f"query rows repeated exactly, read once)")


def _scores_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True, type=safe_path)


@command("mdcr-scores", "write the official scores file {\"<query>_<candidate>\": score} of a "
         "model's runs on a benchmark corpus", _scores_arguments, split_arg())
def cmd_mdcr_scores(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import model_scores_file

    n = model_scores_file(*_dirs(args), args.model, args.split, Path(args.out))
    log.info(f"[mdcr-scores] {args.out}: {n} query-candidate scores of {args.model}")


def _mdcr_evaluate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True, help="mdcr_test.json or mdcr_val.json")
    p.add_argument("--scores", required=True, help='{"<query>_<candidate>": score} JSON')


@command("mdcr-evaluate", "the official evaluator's numbers for a scores file against an "
         "mdcr_<split>.json (per field, x100, macro average)", _mdcr_evaluate_arguments,
         corpus=False)
def cmd_mdcr_evaluate(args: argparse.Namespace) -> None:
    """Per field, then the average: the metrics in one fixed order (OFFICIAL_METRICS's)."""
    from pipeline.mdcr.official import OFFICIAL_METRICS, evaluate_files

    fields, averages = evaluate_files(Path(args.benchmark), Path(args.scores))
    for row in fields.iter_rows(named=True):
        print("\t".join([row["field"], *(f"{m}: {row[m]}" for m in OFFICIAL_METRICS
                                          if m in row)]))
    print("\nAVG\t" + "\t".join(f"{m}: {averages[m]}" for m in OFFICIAL_METRICS
                                 if m in averages))


@command("collect", "gather evaluated runs into runs/results.parquet", corpus=False)
def cmd_collect(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results

    results = collect_results(Path(args.corpora_root), Path(args.index_root),
                              Path(args.runs_root))
    log.info(f"[collect] {results.height} rows in {Path(args.runs_root) / RESULTS_FILE}")


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--times", action="store_true", help="also print per-stage times")
    p.add_argument("--seed", type=non_negative, default=0, help="report the pools of this seed")


@command("report", "tables (md, tex) and the MAP-vs-pool-size plot", _report_arguments)
def cmd_report(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results
    from pipeline.report.build import report, stage_times

    collect_results(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    print(report(Path(args.runs_root), args.corpus, args.seed, Path(args.corpora_root)))
    print(f"Written to {args.runs_root}/reports/ ({args.corpus}.md, .tex, .png)")
    if args.times:
        print("\n## Stage times (seconds, this corpus)\n\n" +
              stage_times(Path(args.runs_root), args.corpus))


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    from pipeline.cli.variables import BY_NAME  # the defaults are the make variables'

    def default(name: str) -> str:
        return BY_NAME[name].default

    p.add_argument("--papers", type=sizes, default=default("DEMO_PAPERS"),
                   help="papers of the synthetic corpus (DEMO_PAPERS)")
    p.add_argument("--synth-seed", type=non_negative, default=int(default("DEMO_SEED")),
                   help="the synthetic corpus's seed (DEMO_SEED)")
    p.add_argument("--sizes", type=sizes, default=default("DEMO_SIZES"),
                   help="the dataset-level pool sizes (DEMO_SIZES)")
    p.add_argument("--queries", type=positive, default=50,
                   help="queries per dataset-level pool (QUERIES)")
    p.add_argument("--fields", default=default("DEMO_FIELDS"), help="the fields of the "
                   "field-level pools, separated by spaces (DEMO_FIELDS; empty: none)")
    p.add_argument("--field-size", type=sizes, default=default("DEMO_FIELD_SIZE"),
                   help="the size of the field-level pools (DEMO_FIELD_SIZE)")
    p.add_argument("--field-queries", type=positive,
                   default=int(default("DEMO_FIELD_QUERIES")),
                   help="queries per field-level pool (DEMO_FIELD_QUERIES)")
    p.add_argument("--repeats", type=positive, default=1, help="samples per size (REPEATS)")
    p.add_argument("--seed", type=non_negative, default=0, help="the pools' seed (SEED)")
    p.add_argument("--embed", default="minilm", help="the model embedded first, as a stage "
                   "of its own (its throughput is the demo's embed figure)")
    p.add_argument("--num-shards", type=positive, default=1, help="embed shards (SHARDS)")
    p.add_argument("--models", default=default("DEMO_MODELS"), help="the models searched and "
                   "scored, separated by spaces or commas (DEMO_MODELS)")
    threads_arg(p)
    search_args(p)
    metrics_arg(p)
    p.add_argument("--model-path", help="load the weights from this local folder")


@command("demo", "the whole demo in one process: the synthetic corpus, its pools, the embed "
         "stage, each model searched and scored, the report with the stage times (make demo)",
         ingest_args, prefilter_args, _demo_arguments)
def cmd_demo(args: argparse.Namespace) -> None:
    """The demo's stages in the order make ran them (each deciding by content what is
    current), with the stage-times log started afresh: the report's times are this run's."""
    from pipeline.layout import written_whole

    _log_dir(args).unlink(missing_ok=True)
    corpus = ("--corpus", args.corpus)
    if not written_whole(_dirs(args)[0]):
        run_stage(args, "corpus", *corpus, "--source", args.source, "--fos-source",
                  args.fos_source, "--workers", str(args.workers), "--citations",
                  args.citations, "--min-citations", str(args.min_citations),
                  "--synth", args.papers, "--synth-seed", str(args.synth_seed),
                  *(["--raw", args.raw] if args.raw else []),
                  *(["--strict"] if args.strict else []))
    pools = (*corpus, "--repeats", str(args.repeats), "--seed", str(args.seed))
    run_stage(args, "pool", *pools, "--size", args.sizes, "--queries", str(args.queries))
    if args.fields.split():
        run_stage(args, "pool", *pools, "--field", args.fields, "--size", args.field_size,
                  "--queries", str(args.field_queries))
    run_stage(args, "pool", *corpus, "--repair")  # make pools, before make embed
    run_stage(args, "embed", *corpus, "--model", get_model(args.embed).name,
              "--num-shards", str(args.num_shards),
              *(["--model-path", args.model_path] if args.model_path else []))
    for model in _comma_list(args.models):
        _search_and_eval(args, get_model(model).name)
    run_stage(args, "report", *corpus, "--seed", str(args.seed), "--times")


def _verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="*", help="folders to check (default: corpora, indexes, runs)")
    p.add_argument("--quick", action="store_true", help="sizes only, no checksums")


@command("verify", "check checksums and completeness of every artifact; exit 1 when something "
         "is corrupt, partial or stale", _verify_arguments, corpus=False)
def cmd_verify(args: argparse.Namespace) -> None:
    from pipeline.core.inputs import Roots
    from pipeline.verify import verify

    data = Roots(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    problems = verify(data, [Path(p) for p in args.path] or None, deep=not args.quick,
                      place=place(args))
    for line in problems:
        print(line)
    if problems:
        raise SystemExit(1)


@command("sweep", "remove temporaries left by stopped processes", corpus=False)
def cmd_sweep(args: argparse.Namespace) -> None:
    """Remove the temporaries of stopped processes under the data roots (verify's DEBRIS)."""
    from pipeline.core.atomic import sweep

    removed = 0
    for root in (args.corpora_root, args.index_root, args.runs_root):
        folders = {p.parent for p in Path(root).rglob(".*.tmp")} if Path(root).exists() else ()
        removed += sum(sweep(folder) for folder in folders)
    log.info(f"[sweep] {removed} temporaries of stopped processes removed")


@command("manifest", "print the corpus manifest (ingest, prefilter counts)")
def cmd_manifest(args: argparse.Namespace) -> None:
    from pipeline.core.files import read_json

    path = _dirs(args)[0] / MANIFEST
    print(json.dumps(read_json(path), indent=2) if path.exists() else "{}")
