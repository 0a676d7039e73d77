"""`python -m pipeline <stage>`: a thin command line over the stage functions.

Only the standard library and the stdlib-only modules (fields, naming, models) are imported at
the top, so `python3 -m pipeline check ...` validates make variables before the environment
exists; each stage imports its module when it runs. Bad input exits with status 2 and one line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pipeline.core.artifacts import atomic_path
from pipeline.core.errors import InputError, ToolError
from pipeline.encoding.models import HF_PREFIX, REGISTRY, fused_name, get_model
from pipeline.fields import resolve_fields
from pipeline.layout import (
    CITATION_MODES,
    FOS_SOURCES,
    SOURCES,
    SPLITS,
    VARIANTS,
    parse_metrics,
    parse_size,
)
from pipeline.slurm import check_executor, check_partition, check_time

DTYPES = ("float32", "float16")
BACKENDS = ("auto", "faiss-cpu", "faiss-gpu", "torch-cuda", "torch-cpu")
BM25_ENGINES = ("lucene", "arrays")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_PATH = re.compile(r"^[A-Za-z0-9._/+,:@=~-]+$")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad option is one line (`error: ...`) and exit status 2, not usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if self.prog.endswith(" check"):  # options named after make variables: name the variable
            print(f"error: {message.removeprefix('argument --')}", file=sys.stderr)
        else:
            print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def _int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number ({what})") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is too small: {what}")
        return value
    parse.__name__ = "int"
    return parse


positive = _int_at_least(1, "use 1 or more")
non_negative = _int_at_least(0, "use 0 or more")


def _choice(options: tuple[str, ...]):
    def parse(text: str) -> str:
        if text not in options:
            shown = ", ".join(o or "(empty)" for o in options)
            raise argparse.ArgumentTypeError(f"{text!r}: use one of {shown}")
        return text
    parse.__name__ = "value"
    return parse


def corpus_name(text: str) -> str:
    if not _NAME.match(text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a corpus name is letters, digits, '.', '_' or '-' (a folder name)")
    return text


def safe_path(text: str) -> str:
    """Paths the Makefile uses as targets: no spaces, quotes or shell characters."""
    if not _PATH.match(text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: use a path of letters, digits and ._/+,:@=~- only (no spaces, quotes "
            "or shell characters)")
    return text


def sizes(text: str) -> str:
    if not text.split():
        raise argparse.ArgumentTypeError("SIZE is empty: give one or more sizes, e.g. 20k or "
                                         "'200k 500k'")
    try:
        for size in text.split():
            parse_size(size)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _checked(check):
    """An argparse type from a validator that raises InputError."""
    def parse(text: str) -> str:
        try:
            return check(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = "value"
    return parse


def metric_list(text: str) -> str:
    if text != "auto":  # auto: each pool's own set (large-scale; mdcr for MDCR-style pools)
        parse_metrics(text)
    return text


def device(text: str) -> str:
    if not re.match(r"^(cpu|cuda(:\d+)?)$", text):
        raise argparse.ArgumentTypeError(f"{text!r}: use cpu, cuda or cuda:<index>")
    return text


def _dirs(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    corpus_dir = Path(args.corpora_root) / args.corpus
    return corpus_dir, Path(args.index_root), Path(args.runs_root)


def _log_dir(args: argparse.Namespace) -> Path:
    return Path(args.runs_root) / args.corpus


def _pools(args: argparse.Namespace) -> list[str]:
    from pipeline.pools.build import list_pools

    corpus_dir = _dirs(args)[0]
    pools = args.pool or list_pools(corpus_dir)
    if not pools:
        raise InputError(f"no pools under {corpus_dir}/pools: build one with `make pool`")
    return pools


def cmd_check(args: argparse.Namespace) -> None:
    """Validate make variables (argparse types did most of it); writes nothing."""
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
    for var in ("CORPUS", "POOLING", "MDCR", "QUERY_VARIANT", "BM25_ENGINE", "BACKEND",
                "CITATIONS", "SOURCE", "FOS_SOURCE", "SPLIT", "STRICT", "REPLACE", "EXECUTOR",
                "PARTITION", "SLURM_TIME", "TIME", "DATA", "RAW", "SRC", "OUT", "MODEL_PATH"):
        value = getattr(args, var, None)
        if isinstance(value, str) and re.search(r"\s", value):
            raise InputError(f"{var}={value!r} holds a space or a line break: give one value "
                             "without spaces")
    for name in f"{args.MODEL or ''} {args.DEMO_MODELS}".split():
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


def cmd_models(args: argparse.Namespace) -> None:
    for entry in REGISTRY.values():
        print(f"{entry.name:14} {entry.kind:12} {entry.hf_id or '-':52} {entry.similarity}")


def cmd_warm(args: argparse.Namespace) -> None:
    """Compile the numba kernels of BM25 and of the metrics into numba's cache (make setup)."""
    from pipeline.evaluation import metrics
    from pipeline.retrieval import bm25_arrays

    bm25_arrays.warm_up()
    metrics.warm_up()


def cmd_synth(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest.synthetic import SyntheticConfig, generate

    out_dir = _dirs(args)[0] / "s2orc"
    if args.repair:  # the recorded settings: damaged or missing shards written again
        from pipeline.core.artifacts import read_json

        recorded = read_json(out_dir / "manifest.json", "make demo, or synth with its "
                             "settings").get("parameters", {})
        cfg = SyntheticConfig(**recorded)
    else:
        cfg = SyntheticConfig(n_papers=parse_size(args.papers), n_shards=args.shards,
                              seed=args.seed)
    with timed("synth", _log_dir(args), papers=cfg.n_papers) as info:
        out = generate(out_dir, cfg, workers=args.workers)
        info.update(out["counts"])


def cmd_ingest(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest import ingest

    corpus_dir = _dirs(args)[0]
    raw = Path(args.raw) if args.raw else corpus_dir / args.source
    with timed("ingest", _log_dir(args)) as info:
        info.update(ingest(raw, corpus_dir, strict=args.strict, workers=args.workers,
                           source=args.source, fos_source=args.fos_source)["counts"])


def cmd_prefilter(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest import prefilter

    with timed("prefilter", _log_dir(args)) as info:
        info.update(prefilter(_dirs(args)[0], args.citations, args.min_citations)["counts"])


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
            print(f"[pool] {field}: field-cited set < {size}, so no repeat {repeat}",
                  file=sys.stderr)
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
            print(f"[pool] skipped: {exc}", file=sys.stderr)  # FIELD=all on a small corpus
            exhausted.add((field, size))
            continue
        if counts["exhausted"]:
            exhausted.add((field, size))


def _embed_options(args: argparse.Namespace) -> dict:
    return {"batch_size": args.batch_size, "dtype": args.dtype, "model_path": args.model_path,
            "device": args.device, "part_size": args.part_size}


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


def cmd_submit_embed(args: argparse.Namespace) -> None:
    from pipeline.slurm import slurm_dir, submit_embed

    entry = get_model(args.model)
    options = {"--pool": args.pool, "--model-path": args.model_path, "--dtype": args.dtype,
               "--batch-size": args.batch_size, "--device": args.device,
               "--part-size": args.part_size}
    roots = (Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    job_id = submit_embed(roots, args.corpus, entry.name, args.num_shards, _resources(args),
                          options)
    print(f"[slurm] submitted embed array {job_id} ({args.num_shards} tasks); script and logs "
          f"in {slurm_dir(Path(args.runs_root))}", file=sys.stderr)
    print(job_id)


def cmd_after_embed(args: argparse.Namespace) -> None:
    from pipeline.slurm import submit_after_embed

    corpus_dir, index_root, runs_root = _dirs(args)
    entry = get_model(args.model)
    job_id = submit_after_embed(corpus_dir, index_root, runs_root, entry, args.num_shards,
                                _resources(args), args.command, args.pool)
    if job_id is None:
        print(f"[slurm] every embed shard of {entry.name} is in: running the command here",
              file=sys.stderr)
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS",
                                                                 "MAKELEVEL")}
        raise SystemExit(subprocess.run(args.command, env=env).returncode)
    print(f"[slurm] submitted job {job_id}: runs {' '.join(args.command[:4])} ... after the "
          "embed array succeeds", file=sys.stderr)
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
            index(corpus_dir, index_root, pool, entry, args.threads, args.bm25_engine)


def cmd_index(args: argparse.Namespace) -> None:
    if args.repair_pools:
        _repair_pools(args)
    _index_pools(args, get_model(args.model), _pools(args))


def cmd_search(args: argparse.Namespace) -> None:
    """Search pools one after another in this process: one JVM (BM25) or one model and device
    set-up for all of them. With --stale-only, pools whose run is current are kept as they
    are; with --index, what they search is built first (what `make search` does)."""
    from pipeline.core.timing import timed
    from pipeline.layout import run_name
    from pipeline.retrieval.runs import run_is_current
    from pipeline.retrieval.search import search

    corpus_dir, index_root, runs_root = _dirs(args)
    entry = get_model(args.model)
    name = run_name(entry.name, args.query_variant)
    if args.repair_pools:
        _repair_pools(args)
    pools = _pools(args)
    if args.stale_only:
        kept = [p for p in pools
                if run_is_current(corpus_dir, index_root, runs_root, p, name, args.k)]
        pools = [p for p in pools if p not in kept]
        print(f"[search] {name}: {len(kept)} current runs kept, {len(pools)} to search",
              file=sys.stderr)
    if args.index and pools:
        _index_pools(args, entry, pools)
    for pool in pools:
        with timed("search", _log_dir(args), model=name, pool=pool) as info:
            out = search(corpus_dir, index_root, runs_root, pool, entry, args.k, args.threads,
                         args.seed, args.backend, args.bm25_engine, args.query_variant,
                         args.model_path)
            info.update(queries_per_s=out["queries_per_s"])


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
        print(f"[eval] {name}: {len(kept)} current evaluations kept, {len(pools)} to "
              "score", file=sys.stderr)
    for pool in pools:
        with timed("eval", _log_dir(args), model=name, pool=pool) as info:
            out = eval_run(corpus_dir, index_root, runs_root, pool, name, metrics[pool])
            info.update({k: round(v, 4) for k, v in out["means"].items() if v is not None})
    if args.collect:
        cmd_collect(args)


def _comma_list(text: str) -> list[str]:
    return [m for m in text.replace(",", " ").split() if m]


def cmd_mdcr(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.mdcr.build import build_mdcr

    corpus_dir, index_root, runs_root = _dirs(args)
    out = Path(args.corpora_root) / args.out
    if out == corpus_dir:
        raise InputError(f"MDCR={args.out} names the source corpus itself: give the benchmark "
                         "another corpus name (default <corpus>-mdcr)")
    with timed("mdcr", _log_dir(args), out=args.out) as info:
        built = build_mdcr(corpus_dir, index_root, runs_root, out, _comma_list(args.models),
                           args.seed, args.positives, args.per_type, args.top,
                           replace=args.replace)
        info.update(built["benchmark"]["counts"])
    counts = built["benchmark"]["counts"]
    print(f"[mdcr] {out}: {counts['fields']} fields, {counts['queries']} queries, "
          f"{counts['pairs']} query-candidate pairs; by type {counts['by_type']} "
          f"({built['installed']}); evaluate with make eval CORPUS={args.out} MODEL=...",
          file=sys.stderr)


def cmd_mdcr_jaccard(args: argparse.Namespace) -> None:
    from pipeline.mdcr.build import negative_jaccard
    from pipeline.report.tables import markdown_table

    corpus_dir, index_root, runs_root = _dirs(args)
    table = negative_jaccard(corpus_dir, index_root, runs_root, _comma_list(args.models),
                             args.seed, args.depth)
    text = (f"Average Jaccard index between the {args.depth} highest-ranked negatives of two "
            f"models ({args.corpus}, field-level test pools; MDCR §4: pick the models whose "
            "negatives overlap least)\n\n" + markdown_table(
                ["model a", "model b", "Jaccard", "fields", "queries"],
                [[a, b, f"{j:.3f}", str(f), str(q)] for a, b, j, f, q in table.iter_rows()]))
    with atomic_path(runs_root / "reports" / f"{args.corpus}-mdcr-jaccard.md") as tmp:
        tmp.write_text(text)
    print(text)


def cmd_export_mdcr(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import check_out, export_benchmark

    check_out(Path(args.out), folder=True)  # before reading anything
    info = export_benchmark(_dirs(args)[0], Path(args.out), args.split)
    print(f"[export-mdcr] {args.out}/mdcr_{args.split}.json and _data.jsonl: {info['fields']} "
          f"fields, {info['queries']} queries, {info['papers']} papers", file=sys.stderr)
    if info["ignored_by_official_evaluator"]:
        print(f"[export-mdcr] note: types the official evaluator does not read (it knows "
              f"bm25, specter, scincl, graph, most_cited, random): "
              f"{info['ignored_by_official_evaluator']}", file=sys.stderr)


def cmd_import_mdcr(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import import_benchmark

    info = import_benchmark(Path(args.src), _dirs(args)[0], args.split, args.replace,
                            _derived(args))
    counts = info["benchmark"]["counts"]
    print(f"[import-mdcr] corpus {args.corpus} ({info['installed']}): {counts['fields']} "
          f"fields, {counts['queries']} queries, {counts['papers']} papers, {counts['pairs']} "
          f"pairs; {info['duplicate_paper_records_dropped']} duplicate paper records dropped",
          file=sys.stderr)


def _derived(args: argparse.Namespace, corpus: str | None = None) -> tuple[Path, Path]:
    """What a corpus's indexes and runs are: removed with it when a command replaces it."""
    corpus = corpus or args.corpus
    return Path(args.index_root) / corpus, Path(args.runs_root) / corpus


def cmd_import_beir(args: argparse.Namespace) -> None:
    from pipeline.external.beir import import_beir

    info = import_beir(Path(args.src), _dirs(args)[0], args.split, args.replace,
                       _derived(args))["collection"]
    counts = info["counts"]
    # the judgments add up: read = kept + naming an unknown document or query + repeated
    print(f"[import-beir] corpus {args.corpus} ({info['installed']}), pool {info['pools'][0]}: "
          f"{counts['candidates']} documents, {counts['queries']} queries, {counts['qrels']} "
          f"judgments kept of {counts['qrels_read']} read; dropped: "
          f"{counts['duplicate_documents_dropped']} duplicate documents, "
          f"{counts['qrels_dropped_unknown_document_or_query']} judgments naming an unknown "
          f"document or query, {counts['qrels_duplicate_pairs_dropped']} repeated judgments "
          f"(same pair, same grade); {counts['queries_without_qrels_left_out']} queries without "
          "judgments in this split left out", file=sys.stderr)


def cmd_mdcr_scores(args: argparse.Namespace) -> None:
    import polars as pl

    from pipeline.mdcr.benchmark import read_benchmark
    from pipeline.mdcr.official import SPLITS, check_out, scores_file
    from pipeline.pools.build import list_pools, pool_manifest
    from pipeline.retrieval.runs import load_run

    check_out(Path(args.out), folder=False)  # before reading the runs
    corpus_dir, index_root, runs_root = _dirs(args)
    split = SPLITS[args.split]
    table, _ = read_benchmark(corpus_dir, split)
    runs = pl.concat([load_run(corpus_dir, index_root, runs_root, p, args.model)
                      .select(pl.col("query", "doc").cast(pl.String), "score")
                      for p in list_pools(corpus_dir)
                      if pool_manifest(corpus_dir, p).get("split") == split])
    n = scores_file(runs, table, Path(args.out))
    print(f"[mdcr-scores] {args.out}: {n} query-candidate scores of {args.model}",
          file=sys.stderr)


def cmd_mdcr_evaluate(args: argparse.Namespace) -> None:
    """Per field, then the average: the metrics in one fixed order (OFFICIAL_METRICS's)."""
    from pipeline.mdcr.official import OFFICIAL_METRICS, evaluate_files

    fields, averages = evaluate_files(Path(args.benchmark), Path(args.scores))
    for row in fields.iter_rows(named=True):
        print("\t".join([row["field"], *(f"{m}: {row[m]}" for m in OFFICIAL_METRICS
                                          if m in row)]))
    print("\nAVG\t" + "\t".join(f"{m}: {averages[m]}" for m in OFFICIAL_METRICS
                                 if m in averages))


def cmd_collect(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results

    results = collect_results(Path(args.corpora_root), Path(args.index_root),
                              Path(args.runs_root))
    print(f"[collect] {results.height} rows in {args.runs_root}/results.parquet", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results
    from pipeline.report.build import report, stage_times

    collect_results(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    print(report(Path(args.runs_root), args.corpus, args.seed))
    print(f"Written to {args.runs_root}/reports/ ({args.corpus}.md, .tex, .png)")
    if args.times:
        print("\n## Stage times (seconds, this corpus)\n\n" +
              stage_times(Path(args.runs_root), args.corpus))


def cmd_verify(args: argparse.Namespace) -> None:
    from pipeline.core.inputs import Roots
    from pipeline.verify import verify

    data = Roots(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    if verify(data, [Path(p) for p in args.path] or None, deep=not args.quick):
        raise SystemExit(1)


def cmd_sweep(args: argparse.Namespace) -> None:
    """Remove the temporaries of stopped processes under the data roots (verify's DEBRIS)."""
    from pipeline.core.artifacts import sweep

    removed = 0
    for root in (args.corpora_root, args.index_root, args.runs_root):
        folders = {p.parent for p in Path(root).rglob(".*.tmp")} if Path(root).exists() else ()
        removed += sum(sweep(folder) for folder in folders)
    print(f"[sweep] {removed} temporaries of stopped processes removed", file=sys.stderr)


def cmd_manifest(args: argparse.Namespace) -> None:
    from pipeline.core.artifacts import read_json

    path = _dirs(args)[0] / "manifest.json"
    print(json.dumps(read_json(path), indent=2) if path.exists() else "{}")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m pipeline",
        description="MDCR-style large-scale evaluation of scientific document encoders: "
                    "one command per stage (the Makefile chains them).")
    parser.add_argument("--corpora-root", default="corpora", type=safe_path)
    parser.add_argument("--index-root", default="indexes", type=safe_path)
    parser.add_argument("--runs-root", default="runs", type=safe_path)
    sub = parser.add_subparsers(dest="command", required=True)

    def stage(name: str, func, help_text: str, corpus: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func, stage=name)
        if corpus:
            p.add_argument("--corpus", default="demo", type=corpus_name,
                           help="folder under corpora/")
        return p

    p = stage("check", cmd_check, "validate make variables (exit 2 if bad)",
              False)  # options are named after the make variables, so errors name them
    p.add_argument("--MODEL", help="one model name (registered, hf:<id> or fuse--...)")
    p.add_argument("--POOLING", help="cls or mean, for MODEL=hf:<id>")
    p.add_argument("--FIELD")
    p.add_argument("--SIZE", type=sizes, help="one size or several separated by spaces")
    p.add_argument("--CORPUS", type=corpus_name)
    p.add_argument("--REPEATS", type=positive)
    p.add_argument("--SEED", type=non_negative)
    p.add_argument("--THREADS", type=positive)
    p.add_argument("--QUERIES", type=positive)
    p.add_argument("--CITATIONS", type=_choice(CITATION_MODES))
    p.add_argument("--BM25_ENGINE", type=_choice(BM25_ENGINES))
    p.add_argument("--BACKEND", type=_choice(BACKENDS))
    p.add_argument("--METRICS", type=_checked(metric_list))
    p.add_argument("--MODELS", help="models to fuse, separated by commas")
    p.add_argument("--METHOD", help="a ranx fusion method (rrf, wsum, sum, mnz, ...)")
    p.add_argument("--MDCR", type=corpus_name)
    p.add_argument("--MDCR_MODELS", help="models separated by commas")
    p.add_argument("--SRC", type=safe_path)
    p.add_argument("--OUT", type=safe_path)
    p.add_argument("--SPLIT", type=_choice(("test", "val", "dev")))
    p.add_argument("--QUERY_VARIANT", type=_choice(VARIANTS))
    p.add_argument("--DEMO_PAPERS", type=sizes)
    p.add_argument("--DEMO_SIZES", type=sizes)
    p.add_argument("--DEMO_MODELS", default="")
    p.add_argument("--DEMO_SEED", type=non_negative)
    p.add_argument("--DEMO_FIELDS")
    p.add_argument("--DEMO_FIELD_SIZE", type=sizes)
    p.add_argument("--DEMO_FIELD_QUERIES", type=positive)
    p.add_argument("--STRICT", type=_choice(("", "0", "1")))
    p.add_argument("--REPLACE", type=_choice(("", "0", "1")),
                   help="1: an import or make mdcr may replace a corpus of its kind")
    p.add_argument("--SOURCE", type=_choice(SOURCES))
    p.add_argument("--FOS_SOURCE", type=_choice(FOS_SOURCES))
    p.add_argument("--PAPER_SIZES", type=sizes)
    p.add_argument("--PAPER_FIELD_SIZE", type=sizes)
    p.add_argument("--PAPER_QUERIES", type=positive)
    p.add_argument("--PAPER_FIELD_QUERIES", type=positive)
    p.add_argument("--PAPER_REPEATS", type=positive)
    p.add_argument("--DATA", type=safe_path)
    p.add_argument("--RAW", type=safe_path)
    p.add_argument("--MODEL_PATH", type=safe_path)
    p.add_argument("--EXECUTOR", type=_checked(check_executor))
    p.add_argument("--SHARDS", type=positive)
    p.add_argument("--PARTITION", type=_checked(check_partition))
    p.add_argument("--GPUS_PER_TASK", type=non_negative)
    p.add_argument("--SLURM_TIME", type=_checked(check_time))
    p.add_argument("--TIME", type=_checked(check_time),
                   help="SLURM_TIME given as TIME= on make's command line")
    stage("models", cmd_models, "list the model registry", False)
    stage("warm", cmd_warm, "compile the numba kernels once (make setup runs it)", False)

    p = stage("synth", cmd_synth, "generate a synthetic corpus in S2ORC format")
    p.add_argument("--papers", default="120k", type=sizes)
    p.add_argument("--shards", type=positive, default=4)
    p.add_argument("--repair", action="store_true", help="write damaged or missing shards "
                   "again, with the settings the corpus's s2orc/manifest.json records")
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--workers", type=positive, default=2, help="processes rendering text")

    def ingest_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--raw", help="S2ORC folder holding metadata/, or S2AG folder holding "
                       "papers/, abstracts/, citations/ (default corpora/<corpus>/<source>)")
        p.add_argument("--source", default="s2orc", type=_choice(SOURCES),
                       help="s2orc (2020 release) or s2ag (Semantic Scholar Datasets)")
        p.add_argument("--fos-source", default="external", type=_choice(FOS_SOURCES),
                       help="S2AG: which s2fieldsofstudy labels count (external = MAG-like)")
        p.add_argument("--workers", type=positive, default=1,
                       help="processes reading shards in parallel (the output does not change)")
        p.add_argument("--strict", action="store_true",
                       help="stop at the first bad line instead of quarantining it")

    def prefilter_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--citations", default="inbound", type=_choice(CITATION_MODES))
        p.add_argument("--min-citations", type=non_negative, default=3)

    p = stage("ingest", cmd_ingest, "S2ORC / S2AG shards -> papers.parquet + citations.parquet")
    ingest_args(p)

    p = stage("prefilter", cmd_prefilter, "MDCR §3 prefilter with drop counts")
    prefilter_args(p)

    p = stage("corpus", cmd_corpus, "synth (with --synth), ingest and prefilter in one process, "
              "each only when its outputs are not current (make corpus)")
    ingest_args(p)
    prefilter_args(p)
    p.add_argument("--synth", type=sizes, help="first generate a synthetic corpus of this many "
                   "papers in corpora/<corpus>/s2orc (the demo)")
    p.add_argument("--synth-seed", type=non_negative, default=0)

    p = stage("pool", cmd_pool, "build dataset-level or field-level pools")
    p.add_argument("--size", type=sizes, help="e.g. 20000, 20k, 2M; several: '10k 20k'")
    p.add_argument("--field", help="a MAG field for a field-level pool, or 'all' (19 pools)")
    p.add_argument("--repeats", type=positive, default=1, help="samples per size (paper: 3)")
    p.add_argument("--queries", type=positive, help="default 3800 dataset-level, 200 per field")
    p.add_argument("--query-year", type=non_negative, default=2019)
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--exclude", help="file of CorpusIDs never used as queries")
    p.add_argument("--split", default="test", type=_choice(SPLITS),
                   help="validation: queries disjoint from the test pool's (BM25 tuning)")
    p.add_argument("--rebuild", action="append", metavar="POOL",
                   help="rebuild an existing pool from its recorded parameters (if stale)")
    p.add_argument("--repair", action="store_true",
                   help="rebuild every pool of the corpus that is stale, damaged or "
                   "half-written, from its recorded parameters (make pools)")

    def pool_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--pool", action="append", help="pool name (repeatable; default all)")

    def bm25_engine_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bm25-engine", default="arrays", type=_choice(BM25_ENGINES),
                       help="arrays (Lucene's analysis and scores in numba) or lucene (Anserini)")

    def embed_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--batch-size", type=positive)
        p.add_argument("--dtype", default="float32", type=_choice(DTYPES))
        p.add_argument("--model-path", help="load the weights from this local folder")
        p.add_argument("--device", type=device, help="cpu | cuda (default: cuda if available)")
        p.add_argument("--part-size", type=positive, default=4096,
                       help="papers per store part: the work a kill can lose")

    p = stage("embed", cmd_embed, "embed the pools' papers missing from the store")
    p.add_argument("--model", default="minilm")
    pool_arg(p)
    embed_args(p)
    p.add_argument("--shard", type=non_negative,
                   help="embed only this shard (default: every shard in turn)")
    p.add_argument("--num-shards", type=positive, default=1)

    def slurm_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--num-shards", type=positive, default=1, help="array tasks (SHARDS)")
        p.add_argument("--partition", type=_checked(check_partition))
        p.add_argument("--gpus-per-task", type=non_negative, default=1,
                       help="--gres=gpu:K for each task; 0 asks for none")
        p.add_argument("--time", type=_checked(check_time), help="time limit, e.g. 4:00:00")
        p.add_argument("--cpus-per-task", type=positive)

    p = stage("submit-embed", cmd_submit_embed, "write <runs-root>/slurm/embed-<corpus>-"
              "<model>.sbatch, a SLURM job array of one embed shard per task, and submit it; "
              "prints the job id")
    p.add_argument("--model", default="minilm")
    pool_arg(p)
    embed_args(p)
    slurm_args(p)

    p = stage("after-embed", cmd_after_embed, "run COMMAND here when every embed shard is "
              "in, else submit it as a SLURM job after the embed array (afterok)")
    p.add_argument("--model", default="minilm")
    pool_arg(p)
    slurm_args(p)
    p.add_argument("command", nargs="+", metavar="COMMAND",
                   help="after --, e.g. -- make eval EXECUTOR=local ...")

    def repair_pools_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--repair-pools", action="store_true", help="first rebuild every pool "
                       "that is stale, damaged or half-written (as make pools)")

    p = stage("index", cmd_index, "build what a model searches (Lucene index / embeddings)")
    repair_pools_arg(p)
    p.add_argument("--model", default="minilm")
    p.add_argument("--threads", type=positive, default=2)
    bm25_engine_arg(p)
    pool_arg(p)
    embed_args(p)

    p = stage("search", cmd_search, "retrieve the top k per query, write TREC + parquet "
              "runs (several pools in one process)")
    p.add_argument("--model", default="minilm")
    p.add_argument("--k", type=positive, default=500)
    p.add_argument("--threads", type=positive, default=2)
    p.add_argument("--seed", type=non_negative, default=0, help="seed of the random model")
    p.add_argument("--backend", default="auto", type=_choice(BACKENDS))
    p.add_argument("--stale-only", action="store_true",
                   help="keep runs that are intact and made from their pool's current files")
    p.add_argument("--index", action="store_true", help="index the pools it searches first")
    repair_pools_arg(p)
    p.add_argument("--query-variant", default="full", type=_choice(VARIANTS),
                   help="perturbed queries (pipeline/pools/queries.py); the run is <model>~<variant>")
    bm25_engine_arg(p)
    pool_arg(p)
    embed_args(p)

    p = stage("eval", cmd_eval, "score runs with ranx's kernels, per query (default MAP, "
              "NDCG, R@30)")
    p.add_argument("--model", default="minilm", help="a model, or <model>~<variant> for the "
                   "runs of perturbed queries")
    p.add_argument("--metrics", default="auto", type=_checked(metric_list),
                   help="auto (each pool's set: large-scale, or mdcr for MDCR-style pools), "
                   "a set (large-scale, mdcr, beir) or names: 'map ndcg@10 recall@30'")
    p.add_argument("--stale-only", action="store_true",
                   help="keep evaluations made from the current pool and run")
    p.add_argument("--collect", action="store_true",
                   help="then gather every evaluation into runs/results.parquet (as collect)")
    pool_arg(p)

    p = stage("mdcr", cmd_mdcr, "build an MDCR-style benchmark (MDCR §4) from the corpus's "
              "field-level test pools and the models' runs, as the corpus --out")
    p.add_argument("--models", required=True, help="models whose top-ranked papers give the "
                   "model-based negatives, separated by commas (paper: bm25,specter,scincl)")
    p.add_argument("--out", required=True, type=corpus_name, help="the benchmark's corpus name")
    p.add_argument("--seed", type=non_negative, default=0, help="pools of this seed; sampling")
    p.add_argument("--positives", type=positive, default=5)
    p.add_argument("--per-type", type=positive, default=10, help="negatives of each type")
    p.add_argument("--top", type=positive, default=200,
                   help="model-based negatives from the top N; most cited: the field's top N")
    p.add_argument("--replace", action="store_true",
                   help="replace the corpus --out if it is an MDCR-style benchmark already")
    p = stage("mdcr-jaccard", cmd_mdcr_jaccard, "average Jaccard index between models' "
              "highest-ranked negatives on the field-level pools (picks MDCR_MODELS)")
    p.add_argument("--models", required=True, help="two or more models, separated by commas")
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--depth", type=positive, default=10, help="negatives compared per query")
    p = stage("export-mdcr", cmd_export_mdcr, "write a benchmark corpus in the official "
              "layout: mdcr_<split>.json and mdcr_<split>_data.jsonl")
    p.add_argument("--out", required=True, type=safe_path, help="folder to write into")
    p.add_argument("--split", default="test", choices=("test", "val"))
    p = stage("import-mdcr", cmd_import_mdcr, "read the official mdcr_<split>.json and "
              "mdcr_<split>_data.jsonl into a benchmark corpus")
    p.add_argument("--src", required=True, type=safe_path, help="folder holding the files")
    p.add_argument("--split", default="test", choices=("test", "val"))
    p.add_argument("--replace", action="store_true",
                   help="replace the corpus if it is an imported benchmark already")
    p = stage("import-beir", cmd_import_beir, "read a test collection in BEIR's layout "
              "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv) into a corpus and one pool")
    p.add_argument("--src", required=True, type=safe_path, help="the collection's folder")
    p.add_argument("--split", default="test", choices=("test", "dev", "val"),
                   help="qrels/test.tsv, or qrels/dev.tsv (a validation pool: BM25 tunes on it)")
    p.add_argument("--replace", action="store_true",
                   help="replace the corpus if it is an imported collection already")
    p = stage("mdcr-scores", cmd_mdcr_scores, "write the official scores file "
              "{\"<query>_<candidate>\": score} of a model's runs on a benchmark corpus")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True, type=safe_path)
    p.add_argument("--split", default="test", choices=("test", "val"))
    p = stage("mdcr-evaluate", cmd_mdcr_evaluate, "the official evaluator's numbers for a "
              "scores file against an mdcr_<split>.json (per field, x100, macro average)", False)
    p.add_argument("--benchmark", required=True, help="mdcr_test.json or mdcr_val.json")
    p.add_argument("--scores", required=True, help='{"<query>_<candidate>": score} JSON')
    stage("collect", cmd_collect, "gather evaluated runs into runs/results.parquet", False)
    p = stage("report", cmd_report, "tables (md, tex) and the MAP-vs-pool-size plot")
    p.add_argument("--times", action="store_true", help="also print per-stage times")
    p.add_argument("--seed", type=non_negative, default=0, help="report the pools of this seed")
    p = stage("verify", cmd_verify, "check checksums and completeness of every artifact; "
              "exit 1 when something is corrupt, partial or stale", False)
    p.add_argument("path", nargs="*", help="folders to check (default: corpora, indexes, runs)")
    p.add_argument("--quick", action="store_true", help="sizes only, no checksums")
    stage("sweep", cmd_sweep, "remove temporaries left by stopped processes", False)
    stage("manifest", cmd_manifest, "print the corpus manifest (ingest, prefilter counts)")
    return parser


# The data roots each command writes into (besides runs/<corpus>/, where stages log their
# times): checked before any work, so a read-only folder is one line, not a traceback later.
WRITES = {"synth": ("corpora",), "ingest": ("corpora",), "prefilter": ("corpora",),
          "corpus": ("corpora",),
          "pool": ("corpora",), "embed": ("index",), "index": ("index",),
          "search": ("index", "runs"), "eval": ("runs",), "collect": ("runs",),
          "report": ("runs",), "mdcr": ("corpora", "runs"), "mdcr-jaccard": ("runs",),
          "import-mdcr": ("corpora",), "import-beir": ("corpora",), "sweep": ()}


def check_roots(args: argparse.Namespace) -> None:
    from pipeline.core.artifacts import check_writable

    roots = {"corpora": args.corpora_root, "index": args.index_root, "runs": args.runs_root}
    for kind in WRITES.get(args.stage, ()):
        check_writable(Path(roots[kind]))
    if args.stage in WRITES and getattr(args, "corpus", None):
        check_writable(Path(args.runs_root) / args.corpus)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_roots(args)
        args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
