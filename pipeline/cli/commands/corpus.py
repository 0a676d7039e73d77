"""The corpus commands: synthetic shards, ingest, prefilter, and all three in one process."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli.registry import (
    INGEST,
    PREFILTER,
    arg,
    command,
    flag,
    given,
    like,
    place_of,
    times_log,
)
from pipeline.layout import parse_size, raw_dir
from pipeline.options.checks import non_negative, sizes, synth_shard_count

MADE = "as the corpus was made; {} for a new one"  # a synthetic setting not given


@command("synth", "generate a synthetic corpus in S2ORC format",
         arg("--papers", type=sizes, help=f"papers (default: {MADE.format('120k')})"),
         arg("--shards", type=synth_shard_count,
             help=f"shards (default: {MADE.format(4)}; at most 256)"),
         flag("--repair", "write damaged or missing shards again, with the settings the "
              "corpus's s2orc/manifest.json records"),
         arg("--seed", type=non_negative, help=f"seed (default: {MADE.format(0)})"),
         like("THREADS", "--workers", help="processes rendering text"),
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


@command("ingest", "S2ORC / S2AG shards -> papers.parquet + citations.parquet", *INGEST,
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


@command("prefilter", "MDCR §3 prefilter with drop counts", PREFILTER,
         writes=("corpora", "times"))
def cmd_prefilter(args: argparse.Namespace) -> None:
    from pipeline.core.timing import timed
    from pipeline.ingest import prefilter

    with timed("prefilter", times_log(args)) as info:
        prefiltered = prefilter(place_of(args).corpus_dir, args.citations,
                                **given(args, "min_citations"))
        info.update(prefiltered["counts"])


@command("corpus", "synth (with --synth), ingest and prefilter in one process, each only "
         "when its outputs are not current (make corpus)", *INGEST, PREFILTER,
         arg("--synth", nargs="?", const="", type=lambda text: text and sizes(text),
             help="first generate a synthetic corpus in corpora/<corpus>/s2orc (the demo) of "
             f"this many papers; without a number: {MADE.format('120k')}"),
         arg("--synth-seed", type=non_negative, help=f"its seed (default: {MADE.format(0)})"),
         writes=("corpora", "times"))
def cmd_corpus(args: argparse.Namespace) -> None:
    """Each stage decides by content whether it has work to do."""
    if args.synth is not None:
        _synth(args, papers=args.synth, seed=args.synth_seed)
    cmd_ingest(args)
    cmd_prefilter(args)
