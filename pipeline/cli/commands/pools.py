"""The pool commands: a grid of pools (or their repair), the paper's grid, a pool retired, and
a training list as CorpusIDs, each the API function of its stage (command_of)."""

from __future__ import annotations

from pipeline import api
from pipeline.cli.registry import command_of, flag, like

command_of(api.build_pools, "pool", "build dataset-level or field-level pools",
           # besides the declared ones (SIZE, FIELD, REPEATS, QUERIES, SEED, EXCLUDE)
           like("SPLIT", help="validation: queries disjoint from the test pool's (BM25 tuning)"),
           flag("--repair", "rebuild every pool of the corpus that is stale, damaged or "
                "half-written, from its recorded parameters (make pools)"),
           writes=("corpora", "times"))
command_of(api.build_paper_pools, "pools-paper", "the paper's grid: dataset-level and "
           "field-level pools of the test and the validation split, each split in turn (make "
           "pools-paper)", writes=("corpora", "times"))
command_of(api.retire_pool, "retire-pool", "move a pool, its Lucene index and its runs into "
           "the corpus's retired/ folders: no stage reads them again, no number is lost",
           writes=("corpora", "indexes", "runs", "times"))
command_of(api.training_ids, "training-ids", "a list of training papers named by S2 SHA "
           "(SPECTER's) as CorpusIDs, for EXCLUDE and TRAINING_SETS", writes=())
