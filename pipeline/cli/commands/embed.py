"""The embedding commands: the embed stage, its SLURM job array and follow-up job, and
import-vectors (a store filled from vectors computed elsewhere)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline import api
from pipeline.cli.registry import arg, command_of
from pipeline.models import IMPORT_VECTORS

command_of(api.embed, "embed", "embed the pools' papers missing from the store",
           writes=("indexes", "times"), from_args={"program": "program"})
command_of(api.submit_embed, "submit-embed", "write <runs-root>/slurm/embed-<corpus>-<model>"
           ".sbatch, a SLURM job array of one embed shard per task, and submit it; prints the "
           "job id", writes=("runs",), show=lambda job_id, data, values: print(job_id))


def ran_or_submitted(result: str | int, data: object, values: Mapping[str, Any]) -> None:
    """The follow-up job's id; where the command ran here, its exit status as ours."""
    if isinstance(result, int):
        raise SystemExit(result)
    print(result)


command_of(api.after_embed, "after-embed", "run COMMAND here when every embed shard is in, else "
           "submit it as a SLURM job after the embed array (afterok)",
           arg("command", nargs="+", metavar="COMMAND", help="after --, e.g. -- sh -c 'python "
               "-m pipeline search ... && python -m pipeline eval ...' (make eval "
               "EXECUTOR=slurm's)"),
           writes=("runs",), show=ran_or_submitted, from_args={"program": "program"})


command_of(api.import_vectors, IMPORT_VECTORS, "fill the store of model vectors:<name> from "
           "vectors computed elsewhere (parquet: corpusid, vector), every row checked "
           "(dimensions, NaN, ids twice: refused; ids of no paper: dropped and counted); eval "
           "then searches it", writes=("indexes", "times"))
