"""The scoring commands: eval, collect and report, each the API function of its stage
(command_of)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline import api
from pipeline.cli.registry import command_of, flag

command_of(api.evaluate, "eval", "score runs with ranx's kernels, per query (default MAP, "
           "NDCG, R@30)",
           writes=("runs", "times"),  # saved, as a Python call saves by default; no frame shown
           from_args={"means": "", "save": "", "program": "program"})
command_of(api.collect, "collect", "gather evaluated runs into runs/results.parquet",
           writes=("runs",))


def printed(report, data, values: Mapping[str, Any]) -> None:
    """The report written (Report.save) and its Markdown printed, with the stage times."""
    from pipeline.report.build import stage_times

    corpus = values["corpus"]
    report.save()
    print(report.markdown)
    print(f"Written to {data.runs}/reports/ ({corpus}.md, .html, .tex, .png)")
    if values.get("times"):
        print("\n## Stage times (seconds, this corpus)\n\n" +
              stage_times(Path(data.runs), corpus))


command_of(api.build_report, "report", "tables (md, tex), plots and the HTML page",
           flag("--times", "also print per-stage times"), writes=("runs", "times"),
           show=printed, from_args={"collect": ""})  # collected first, as build_report does
