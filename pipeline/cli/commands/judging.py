"""The judging commands (docs/judging.md), each the API function of its stage (command_of):
judge each pool's sample of the unjudged candidates the models rank high, write its judging
page, measure an assessor's agreement with CSFCube's experts."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pipeline import api
from pipeline.cli.registry import command_of

log = logging.getLogger(__name__)


def judged(counts, data: object, values: Mapping[str, Any]) -> None:
    """A line per pool: the pairs drawn, graded, asked now, ungraded and unjudged."""
    for row in counts.iter_rows(named=True):
        log.info(f"[judge] {row['pool']}: {row['graded']} of {row['drawn']} drawn pairs graded "
                 f"({row['asked']} asked now, {row['ungraded']} ungraded, {row['unjudged']} "
                 "unjudged)")


def agreement(result, data: object, values: Mapping[str, Any]) -> None:
    """The agreement as the markdown file the stage wrote shows it."""
    from pipeline.judging.agreement import to_markdown

    judge = api._assessor(values["judge"], values.get("judge_url"))
    print(to_markdown(result, judge.name, judge.stand_in, values["corpus"]))


command_of(api.judge, "judge", "draw each pool's sample of the unjudged candidates the models "
           "rank high, judge it (JUDGE) and write the pool's judgments",
           writes=("runs", "times"), show=judged)
command_of(api.judge_page, "judge-page", "write the judging page of each pool's sample, for a "
           "person to grade (read back by JUDGE=file:<labels.tsv>)", writes=("runs",),
           show=lambda page, data, values: print(page))
command_of(api.judge_agreement, "judge-agreement", "judge CSFCube's expert-judged pairs (JUDGE) "
           "and write the assessor's agreement with the experts", writes=("runs",),
           show=agreement)
