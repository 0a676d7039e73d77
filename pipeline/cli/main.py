"""`python -m pipeline <stage>`: a thin command line over the stage functions.

Only the standard library and the stdlib-only modules (layout, fields, encoding.models,
core.logs) are imported at the top, so `python3 -m pipeline check ...` validates make variables
before the environment exists; each stage imports its module when it runs. Bad input exits with
status 2 and one line. Messages go through `logging` (pipeline.core.logs: -q, -v).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
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
from pipeline.cli.commands import (
    cmd_after_embed,
    cmd_check,
    cmd_collect,
    cmd_corpus,
    cmd_embed,
    cmd_eval,
    cmd_export_mdcr,
    cmd_import_beir,
    cmd_import_csfcube,
    cmd_import_mdcr,
    cmd_index,
    cmd_ingest,
    cmd_manifest,
    cmd_mdcr,
    cmd_mdcr_evaluate,
    cmd_mdcr_jaccard,
    cmd_mdcr_scores,
    cmd_models,
    cmd_pool,
    cmd_prefilter,
    cmd_report,
    cmd_search,
    cmd_submit_embed,
    cmd_sweep,
    cmd_synth,
    cmd_variables,
    cmd_verify,
    cmd_warm,
    error_line,
)
from pipeline.core import logs
from pipeline.core.errors import InputError, ToolError
from pipeline.layout import pool_split
from pipeline.readers import SOURCES
from pipeline.slurm import check_partition, check_time
from pipeline.vocabulary import CITATION_MODES, FOS_SOURCES, VARIANTS

log = logging.getLogger(__name__)


CONSOLE_SCRIPT = "mdcr-pipeline"  # pyproject.toml's [project.scripts]


def program(argv0: str | None = None) -> str:
    """How the user called us, for messages: the console script, or python -m pipeline."""
    name = Path(argv0 if argv0 is not None else sys.argv[0]).name
    return CONSOLE_SCRIPT if name == CONSOLE_SCRIPT else "python -m pipeline"


def build_parser(prog: str = "python -m pipeline") -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="MDCR-style large-scale evaluation of scientific document encoders: "
                    "one command per stage (the Makefile chains them).")
    parser.set_defaults(program=prog)  # how a repair command names us (pipeline.core.repair)
    parser.add_argument("--corpora-root", default="corpora", type=safe_path)
    parser.add_argument("--index-root", default="indexes", type=safe_path)
    parser.add_argument("--runs-root", default="runs", type=safe_path)
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                      default=0, help="warnings and errors only (no progress)")
    loud.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1,
                      help="debug messages too")
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
    from pipeline.cli.variables import add_options  # the make variables, declared once

    add_options(p)
    stage("models", cmd_models, "list the model registry", False)
    stage("warm", cmd_warm, "compile the numba kernels once (make setup runs it)", False)
    p = stage("variables", cmd_variables, "the make variables: print their table, or write "
              "pipeline/cli/variables.mk and docs/variables.md again (make variables)", False)
    p.add_argument("--write", action="store_true", help="write the generated files that differ "
                   "from the declaration (pipeline/cli/variables.py)")

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
    p.add_argument("--split", default="test", type=checked(pool_split),
                   help="validation: queries disjoint from the test pool's (BM25 tuning)")
    p.add_argument("--rebuild", action="append", metavar="POOL",
                   help="rebuild an existing pool from its recorded parameters (if stale)")
    p.add_argument("--repair", action="store_true",
                   help="rebuild every pool of the corpus that is stale, damaged or "
                   "half-written, from its recorded parameters (make pools)")

    def pool_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--pool", action="append", help="pool name (repeatable; default all)")

    def bm25_engine_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bm25-engine", default="arrays", type=choice(BM25_ENGINES),
                       help="arrays (Lucene's analysis and scores in numba) or lucene (Anserini)")

    def embed_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--batch-size", type=positive)
        p.add_argument("--dtype", default="float32", type=choice(DTYPES))
        p.add_argument("--model-path", help="load the weights from this local folder")
        p.add_argument("--device", type=device, help="cpu | cuda (default: cuda if available)")
        p.add_argument("--part-size", type=positive,
                       help="papers per store part, the work a kill can lose (default: 4,096 "
                       "for embeddings, 50,000 for BM25's analysed-text store)")

    p = stage("embed", cmd_embed, "embed the pools' papers missing from the store")
    p.add_argument("--model", default="minilm")
    pool_arg(p)
    embed_args(p)
    p.add_argument("--shard", type=non_negative,
                   help="embed only this shard (default: every shard in turn)")
    p.add_argument("--num-shards", type=positive, default=1)

    def slurm_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--num-shards", type=positive, default=1, help="array tasks (SHARDS)")
        p.add_argument("--partition", type=checked(check_partition))
        p.add_argument("--gpus-per-task", type=non_negative, default=1,
                       help="--gres=gpu:K for each task; 0 asks for none")
        p.add_argument("--time", type=checked(check_time), help="time limit, e.g. 4:00:00")
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

    p = stage("index", cmd_index, "build what a model searches (embeddings, BM25's "
              "analysed-text store, a Lucene index)")
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
    p.add_argument("--backend", default="auto", type=choice(BACKENDS))
    p.add_argument("--stale-only", action="store_true",
                   help="keep runs that are intact and made from their pool's current files")
    p.add_argument("--index", action="store_true", help="index the pools it searches first")
    repair_pools_arg(p)
    p.add_argument("--query-variant", default="full", type=choice(VARIANTS),
                   help="perturbed queries (pipeline/pools/queries.py); the run is "
                   "<model>~<variant>")
    bm25_engine_arg(p)
    pool_arg(p)
    embed_args(p)

    p = stage("eval", cmd_eval, "score runs with ranx's kernels, per query (default MAP, "
              "NDCG, R@30)")
    p.add_argument("--model", default="minilm", help="a model, or <model>~<variant> for the "
                   "runs of perturbed queries")
    p.add_argument("--metrics", default="auto", type=checked(metric_list),
                   help="auto (each pool's set: large-scale, or mdcr for MDCR-style pools), "
                   "a set (large-scale, mdcr, beir, csfcube) or names: "
                   "'map ndcg@10 recall@30'")
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
    p.add_argument("--split", default="test", type=checked(pool_split))
    p = stage("import-mdcr", cmd_import_mdcr, "read the official mdcr_<split>.json and "
              "mdcr_<split>_data.jsonl into a benchmark corpus")
    p.add_argument("--src", required=True, type=safe_path, help="folder holding the files")
    p.add_argument("--split", default="test", type=checked(pool_split))
    p.add_argument("--replace", action="store_true",
                   help="replace the corpus if it is an imported benchmark already")
    p = stage("import-beir", cmd_import_beir, "read a test collection in BEIR's layout "
              "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv) into a corpus and one pool")
    p.add_argument("--src", required=True, type=safe_path, help="the collection's folder")
    p.add_argument("--split", default="test", type=checked(pool_split),
                   help="qrels/test.tsv, or qrels/dev.tsv (a validation pool: BM25 tunes on it)")
    p.add_argument("--replace", action="store_true",
                   help="replace the corpus if it is an imported collection already")
    p = stage("import-csfcube", cmd_import_csfcube, "read the CSFCube release "
              "(test-pid2anns-csfcube-<facet>.json, abstracts-csfcube-preds.jsonl, "
              "queries-release.csv, evaluation_splits.json) into a corpus and one pool per facet")
    p.add_argument("--src", required=True, type=safe_path, help="the release's folder")
    p.add_argument("--replace", action="store_true",
                   help="replace the corpus if it is an imported collection already")
    p = stage("mdcr-scores", cmd_mdcr_scores, "write the official scores file "
              "{\"<query>_<candidate>\": score} of a model's runs on a benchmark corpus")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True, type=safe_path)
    p.add_argument("--split", default="test", type=checked(pool_split))
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
          "pool": ("corpora",), "embed": ("indexes",), "index": ("indexes",),
          "search": ("indexes", "runs"), "eval": ("runs",), "collect": ("runs",),
          "report": ("runs",), "mdcr": ("corpora", "runs"), "mdcr-jaccard": ("runs",),
          "import-mdcr": ("corpora",), "import-beir": ("corpora",),
          "import-csfcube": ("corpora",), "sweep": ()}


def check_roots(args: argparse.Namespace) -> None:
    from pipeline.core.atomic import check_writable

    roots = {"corpora": args.corpora_root, "indexes": args.index_root, "runs": args.runs_root}
    for kind in WRITES.get(args.stage, ()):
        check_writable(Path(roots[kind]))
    if args.stage in WRITES and getattr(args, "corpus", None):
        check_writable(Path(args.runs_root) / args.corpus)


def main(argv: list[str] | None = None) -> int:
    """Run one command; an error is one line, in the words of whoever called us: make's
    variables when make ran the command (BACKEND=..., not --backend ...), and a repair as the
    command to type for the data it was given (with DATA=... unless it is the checkout's)."""
    from pipeline.cli.variables import FROM_MAKE, in_make_words

    args = build_parser(program()).parse_args(argv)
    logs.setup(args.verbosity)
    from_make = bool(os.environ.get(FROM_MAKE))
    words = in_make_words if from_make else str
    try:
        check_roots(args)
        args.func(args)
    except InputError as exc:
        print(f"error: {error_line(exc, args, from_make)}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"error: {words(str(exc))}", file=sys.stderr)
        return 1
    return 0
