"""make download: the S2AG datasets from the Semantic Scholar Datasets API into the raw folder
`make corpus SOURCE=s2ag` reads (docs/ingest.md, "From nothing to make corpus with S2AG")."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.registry import comma_list, command, where_of
from pipeline.core.repair import Repair
from pipeline.layout import raw_dir
from pipeline.options.checks import given_path, non_negative

log = logging.getLogger(__name__)


def _download_args(p: argparse.ArgumentParser) -> None:
    """Besides the declared ones (RELEASE, DATASETS, FIRST, UPDATE, PARALLEL)."""
    p.add_argument("--raw", type=given_path, help="the folder it writes papers/, abstracts/, "
                   "citations/ and download.json into (default corpora/<corpus>/s2ag)")
    p.add_argument("--retries", type=non_negative, default=8,
                   help="retries without progress before a file (or API call) is an error")
    p.add_argument("--backoff", type=float, default=2.0,
                   help="seconds of the first pause between tries (doubling each time)")


@command("download", "the S2AG datasets from the Semantic Scholar Datasets API (key: "
         "S2_API_KEY) into corpora/<corpus>/s2ag (make download)", _download_args,
         writes=("corpora",))
def cmd_download(args: argparse.Namespace) -> None:
    from pipeline.ingest.download import download
    from pipeline.ingest.s2client import Settings

    settings = Settings.from_environment(parallel=args.parallel, retries=args.retries,
                                         backoff=args.backoff)
    raw = Path(args.raw) if args.raw else raw_dir(Path(args.corpora_root), args.corpus, "s2ag")
    summary = download(raw, settings, release=args.release, datasets=comma_list(args.datasets),
                       first=args.first, update=args.update)
    given = (("RAW", str(raw)),) if args.raw else ()
    following = Repair("corpus", args.corpus, variables=(("SOURCE", "s2ag"), *given))
    log.info("release %s in %s; next: %s", summary["release"], raw,
             following.command(where_of(args)))
