"""The corpus commands: synthetic shards, ingest, prefilter, and all three in one process."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.registry import command, ingest_args, place_of, prefilter_args, times_log
from pipeline.layout import parse_size, raw_dir
from pipeline.options.checks import non_negative, sizes, synth_shard_count, worker_count
from pipeline.options.declared import BY_NAME

log = logging.getLogger(__name__)


def _synth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--papers", type=sizes, help="papers (default: as the corpus was made; "
                   "120k for a new one)")
    p.add_argument("--shards", type=synth_shard_count, help="shards (default: as the corpus "
                   "was made; 4 for a new one; at most 256)")
    p.add_argument("--repair", action="store_true", help="write damaged or missing shards "
                   "again, with the settings the corpus's s2orc/manifest.json records")
    p.add_argument("--seed", type=non_negative, help="seed (default: as the corpus was made; "
                   "0 for a new one)")
    p.add_argument("--workers", type=worker_count, default=BY_NAME["THREADS"].default,
                   help="processes rendering text")


@command("synth", "generate a synthetic corpus in S2ORC format", _synth_arguments,
         writes=("corpora", "times"))
def cmd_synth(args: argparse.Namespace) -> None:
    _synth(args, papers=args.papers, n_shards=args.shards, seed=args.seed, repair=args.repair)


def _synth(args: argparse.Namespace, papers: str | None, **settings: int | bool | None
           ) -> None:
    """The corpus's synthetic shards, with the settings chosen_config chooses."""
    from pipeline.core.timing import timed
    from pipeline.ingest.synthetic import chosen_config, generate

    out_dir = raw_dir(Path(args.corpora_root), args.corpus, "s2orc")  # the generator writes S2ORC
    cfg = chosen_config(out_dir, n_papers=parse_size(papers) if papers else None, **settings)
    with timed("synth", times_log(args), papers=cfg.n_papers) as info:
        info.update(generate(out_dir, cfg, workers=args.workers)["counts"])


@command("ingest", "S2ORC / S2AG shards -> papers.parquet + citations.parquet", ingest_args,
         writes=("corpora", "times"))
def cmd_ingest(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest import ingest

    corpus_dir = place_of(args).corpus_dir
    raw = Path(args.raw) if args.raw else corpus_dir / args.source
    with timed("ingest", times_log(args)) as info:
        counts = ingest(raw, corpus_dir, strict=args.strict, workers=args.workers,
                        source=args.source, fos_source=args.fos_source)["counts"]
        # the quarantined lines have lines of their own (ingest's), naming their dataset
        info.update({k: v for k, v in counts.items() if not k.endswith("quarantined")})


@command("prefilter", "MDCR §3 prefilter with drop counts", prefilter_args,
         writes=("corpora", "times"))
def cmd_prefilter(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest import prefilter

    with timed("prefilter", times_log(args)) as info:
        prefiltered = prefilter(place_of(args).corpus_dir, args.citations, args.min_citations)
        info.update(prefiltered["counts"])


def _synth_size(text: str) -> str:
    """--synth's value: a size, or nothing (the bare option: the corpus as it was made)."""
    return text and sizes(text)


def _synth_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--synth", nargs="?", const="", type=_synth_size,
                   help="first generate a synthetic corpus in corpora/<corpus>/s2orc (the "
                   "demo) of this many papers; without a number: as the corpus was made "
                   "(120k for a new one)")
    p.add_argument("--synth-seed", type=non_negative,
                   help="its seed (default: as the corpus was made; 0 for a new one)")


@command("corpus", "synth (with --synth), ingest and prefilter in one process, each only "
         "when its outputs are not current (make corpus)", ingest_args, prefilter_args,
         _synth_option, writes=("corpora", "times"))
def cmd_corpus(args: argparse.Namespace) -> None:
    """Each stage decides by content whether it has work to do."""
    if args.synth is not None:
        _synth(args, papers=args.synth, seed=args.synth_seed)
    cmd_ingest(args)
    cmd_prefilter(args)
