"""make download: the S2AG datasets from the Semantic Scholar Datasets API into the raw folder
`make corpus SOURCE=s2ag` reads (docs/ingest.md, "From nothing to make corpus with S2AG")."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.registry import arg, comma_list, command, given, where_of
from pipeline.core.repair import Repair
from pipeline.layout import raw_dir
from pipeline.options.checks import given_path, non_negative

log = logging.getLogger(__name__)


@command("download", "the S2AG datasets from the Semantic Scholar Datasets API (key: "
         "S2_API_KEY) into corpora/<corpus>/s2ag (make download)",
         arg("--raw", type=given_path, help="the folder it writes papers/, abstracts/, "
             "citations/ and download.json into (default corpora/<corpus>/s2ag)"),
         arg("--retries", type=non_negative, help="retries without progress before a file "
             "(or API call) is an error (default: s2client.Settings')"),
         arg("--backoff", type=float, help="seconds of the first pause between tries "
             "(doubling each time; default: s2client.Settings')"),
         writes=("corpora",))
def cmd_download(args: argparse.Namespace) -> None:
    from pipeline.ingest.download import download
    from pipeline.ingest.s2client import Settings

    settings = Settings.from_environment(**given(args, "parallel", "retries", "backoff"))
    raw = Path(args.raw) if args.raw else raw_dir(Path(args.corpora_root), args.corpus, "s2ag")
    summary = download(raw, settings, release=args.release, datasets=comma_list(args.datasets),
                       first=args.first, update=args.update)
    named = (("RAW", str(raw)),) if args.raw else ()
    following = Repair("corpus", args.corpus, variables=(("SOURCE", "s2ag"), *named))
    log.info("release %s in %s; next: %s", summary["release"], raw,
             following.command(where_of(args)))
