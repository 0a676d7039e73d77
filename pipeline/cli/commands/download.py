"""make download: the S2AG datasets from the Semantic Scholar Datasets API into the raw folder
`make corpus SOURCE=s2ag` reads (docs/ingest.md, "From nothing to make corpus with S2AG"): the
API function `download` as its command (command_of)."""

from __future__ import annotations

from pipeline import api
from pipeline.cli.registry import arg, command_of
from pipeline.options.checks import given_path

command_of(api.download, "download", "the S2AG datasets from the Semantic Scholar Datasets API "
           "(key: S2_API_KEY) into corpora/<corpus>/s2ag (make download)",
           arg("--raw", type=given_path, help="the folder it writes papers/, abstracts/, "
               "citations/ and download.json into (default corpora/<corpus>/s2ag)"),
           writes=("corpora",))
