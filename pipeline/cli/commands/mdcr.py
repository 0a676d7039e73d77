"""The MDCR-style benchmark commands: build, Jaccard of negatives, the official release's
files (export, import, scores file) and its evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline import api
from pipeline.cli.registry import command_of

command_of(api.build_mdcr, "mdcr", "build an MDCR-style benchmark (MDCR §4) from the corpus's "
           "field-level test pools and the models' runs, as the corpus --out",
           writes=("corpora", "runs", "times"), from_args={"program": "program"})


def jaccard_table(table, data, values: Mapping[str, Any]) -> None:
    """The Markdown table mdcr_jaccard wrote under runs/reports/, as written."""
    from pipeline.layout import report_file, reports_dir

    print(report_file(reports_dir(Path(data.runs)), values["corpus"], "mdcr-jaccard")
          .read_text())


command_of(api.mdcr_jaccard, "mdcr-jaccard", "average Jaccard index between models' "
           "highest-ranked negatives on the field-level pools (picks MDCR_MODELS)",
           writes=("runs", "times"), show=jaccard_table)
command_of(api.export_mdcr, "export-mdcr", "write a benchmark corpus in the official layout: "
           "mdcr_<split>.json and mdcr_<split>_data.jsonl", writes=())
command_of(api.import_mdcr, "import-mdcr", "read the official mdcr_<split>.json and "
           "mdcr_<split>_data.jsonl into a benchmark corpus", writes=("corpora", "times"))
command_of(api.mdcr_scores, "mdcr-scores", "write the official scores file {\"<query>_<candidate>"
           "\": score} of a model's runs on a benchmark corpus", writes=())


def official_lines(numbers, data: object, values: Mapping[str, Any]) -> None:
    """The numbers as the official evaluator prints them."""
    from pipeline.mdcr.official import official_table

    print(official_table(*numbers))


command_of(api.mdcr_evaluate, "mdcr-evaluate", "the official evaluator's numbers for a scores "
           "file against an mdcr_<split>.json (per field, x100, macro average)",
           writes=(), show=official_lines)
