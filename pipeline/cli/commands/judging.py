"""The judging commands (docs/judging.md): judge each pool's sample of the unjudged
candidates the models rank high, write its judging page, measure an assessor's agreement with
CSFCube's experts."""

from __future__ import annotations

import argparse
import logging
import os

from pipeline.cli.registry import arg, command, place_of

log = logging.getLogger(__name__)
MODELS = arg("--models", required=True, help="the models whose top ranks are sampled, "
             "separated by commas (MODELS=bm25,minilm)")


def _assessor(args: argparse.Namespace):
    """The assessor --judge names, --judge-url (JUDGE_URL) given or the environment's."""
    from pipeline.judging.assessor import assessor

    given = {"JUDGE_URL": args.judge_url} if args.judge_url else {}
    return assessor(args.judge, {**os.environ, **given})


def _sampling(args: argparse.Namespace):
    """The sample the models' top ranks give (--sample, --sample-seed, --judge-depth)."""
    from pipeline.judging.stage import sampling

    return sampling(args.models, args.sample, args.sample_seed, args.judge_depth)


@command("judge", "draw each pool's sample of the unjudged candidates the models rank high, "
         "judge it (JUDGE) and write the pool's judgments", MODELS, writes=("runs", "times"))
def cmd_judge(args: argparse.Namespace) -> None:
    from pipeline.judging.stage import judge_corpus

    counts = judge_corpus(place_of(args), _sampling(args), _assessor(args),
                          concurrency=args.judge_concurrency)
    for row in counts.iter_rows(named=True):
        log.info(f"[judge] {row['pool']}: {row['graded']} of {row['drawn']} drawn pairs graded "
                 f"({row['asked']} asked now, {row['ungraded']} ungraded, {row['unjudged']} "
                 "unjudged)")


@command("judge-page", "write the judging page of each pool's sample, for a person to grade "
         "(read back by JUDGE=file:<labels.tsv>)", MODELS, writes=("runs",))
def cmd_judge_page(args: argparse.Namespace) -> None:
    from pipeline.judging.stage import judging_page

    print(judging_page(place_of(args), _sampling(args)))


@command("judge-agreement", "judge CSFCube's expert-judged pairs (JUDGE) and write the "
         "assessor's agreement with the experts", writes=("runs",))
def cmd_judge_agreement(args: argparse.Namespace) -> None:
    from pipeline.judging.agreement import judge_agreement, to_markdown

    judge = _assessor(args)
    place = place_of(args)
    result = judge_agreement(place.runs_root, place.corpus_dir, judge,
                             concurrency=args.judge_concurrency)
    print(to_markdown(result, judge.name, judge.stand_in, args.corpus))
