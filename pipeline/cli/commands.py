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
from pathlib import Path

from pipeline.core.errors import InputError
from pipeline.core.repair import PIPELINE_COMMAND, Repair, Where
from pipeline.encoding.models import HF_PREFIX, REGISTRY, fused_name, get_model
from pipeline.fields import resolve_fields
from pipeline.layout import (
    MANIFEST,
    corpus_path,
    derived_dirs,
    parse_size,
    raw_dir,
    stage_times_path,
    where,
)

log = logging.getLogger(__name__)


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
    from pipeline.cli.variables import VARIABLES, derived, make_line

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
    # stdout, for make: the names and paths it uses, on one line (not a log message)
    sys.stdout.write(make_line(derived(args)))


def cmd_variables(args: argparse.Namespace) -> None:
    from pipeline.cli.variables import markdown, write

    if not args.write:
        sys.stdout.write(markdown())
        return
    for path in write():
        log.info(f"[variables] wrote {path}")


def cmd_models(args: argparse.Namespace) -> None:
    for entry in REGISTRY.values():
        print(f"{entry.name:14} {entry.kind:12} {entry.hf_id or '-':52} {entry.similarity}")


def cmd_warm(args: argparse.Namespace) -> None:
    """Compile the numba kernels of BM25 and of the metrics into numba's cache (make setup)."""
    from pipeline.evaluation import metrics
    from pipeline.retrieval.bm25 import arrays as bm25_arrays

    bm25_arrays.warm_up()
    metrics.warm_up()


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


def _embed_options(args: argparse.Namespace) -> dict:
    """The store options of embed and index; a part size only where given (each store has
    its own default)."""
    options = {"batch_size": args.batch_size, "dtype": args.dtype,
               "model_path": args.model_path, "device": args.device}
    return {**options, **({"part_size": args.part_size} if args.part_size else {})}


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
    log.info(f"[mdcr] {out}: {counts['fields']} fields, {counts['queries']} queries, "
             f"{counts['pairs']} query-candidate pairs; by type {counts['by_type']} "
             f"({built['installed']}); evaluate with "
             f"{Repair('eval', args.out, '<model>').command(place(args))}")


def cmd_mdcr_jaccard(args: argparse.Namespace) -> None:
    from pipeline.mdcr.build import negative_jaccard
    from pipeline.report.build import jaccard_report

    corpus_dir, index_root, runs_root = _dirs(args)
    table = negative_jaccard(corpus_dir, index_root, runs_root, _comma_list(args.models),
                             args.seed, args.depth)
    print(jaccard_report(table, runs_root, args.corpus, args.depth))


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


def cmd_mdcr_scores(args: argparse.Namespace) -> None:
    from pipeline.mdcr.official import model_scores_file

    n = model_scores_file(*_dirs(args), args.model, args.split, Path(args.out))
    log.info(f"[mdcr-scores] {args.out}: {n} query-candidate scores of {args.model}")


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
    log.info(f"[collect] {results.height} rows in {args.runs_root}/results.parquet")


def cmd_report(args: argparse.Namespace) -> None:
    from pipeline.evaluation.evaluate import collect_results
    from pipeline.report.build import report, stage_times

    collect_results(Path(args.corpora_root), Path(args.index_root), Path(args.runs_root))
    print(report(Path(args.runs_root), args.corpus, args.seed, Path(args.corpora_root)))
    print(f"Written to {args.runs_root}/reports/ ({args.corpus}.md, .tex, .png)")
    if args.times:
        print("\n## Stage times (seconds, this corpus)\n\n" +
              stage_times(Path(args.runs_root), args.corpus))


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


def cmd_sweep(args: argparse.Namespace) -> None:
    """Remove the temporaries of stopped processes under the data roots (verify's DEBRIS)."""
    from pipeline.core.atomic import sweep

    removed = 0
    for root in (args.corpora_root, args.index_root, args.runs_root):
        folders = {p.parent for p in Path(root).rglob(".*.tmp")} if Path(root).exists() else ()
        removed += sum(sweep(folder) for folder in folders)
    log.info(f"[sweep] {removed} temporaries of stopped processes removed")


def cmd_manifest(args: argparse.Namespace) -> None:
    from pipeline.core.files import read_json

    path = _dirs(args)[0] / MANIFEST
    print(json.dumps(read_json(path), indent=2) if path.exists() else "{}")
