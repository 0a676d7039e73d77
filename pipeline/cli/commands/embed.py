"""The embedding commands: the embed stage, its SLURM job array and follow-up job, and
import-vectors (a store filled from vectors computed elsewhere)."""

from __future__ import annotations

import argparse

from pipeline import api
from pipeline.cli.registry import (
    MODEL,
    SLURM,
    arg,
    command,
    command_of,
    place_of,
    pools_of,
)
from pipeline.models import IMPORT_VECTORS, get_model

STORE_OPTIONS = ("batch_size", "dtype", "model_path", "device", "part_size")  # embed's, index's


command_of(api.embed, "embed", "embed the pools' papers missing from the store", MODEL,
           writes=("indexes", "times"), from_args={"program": "program"})


def resources(args: argparse.Namespace):
    """The SLURM resources of each job (its declared options and --cpus-per-task)."""
    from pipeline.slurm import Resources

    return Resources(args.partition, args.gpus_per_task, args.time, args.cpus_per_task)


@command("submit-embed", "write <runs-root>/slurm/embed-<corpus>-<model>.sbatch, a SLURM job "
         "array of one embed shard per task, and submit it; prints the job id", MODEL, SLURM,
         writes=("runs",))
def cmd_submit_embed(args: argparse.Namespace) -> None:
    from pipeline.slurm import submit_embed

    options = {"--" + name.replace("_", "-"): getattr(args, name)
               for name in ("pool", *STORE_OPTIONS)}  # each task's embed options
    print(submit_embed(place_of(args), get_model(args.model).name, args.num_shards,
                       resources(args), options, replace=bool(args.replace)))


@command("after-embed", "run COMMAND here when every embed shard is in, else submit it as a "
         "SLURM job after the embed array (afterok)", MODEL, SLURM,
         arg("command", nargs="+", metavar="COMMAND", help="after --, e.g. -- sh -c 'python "
             "-m pipeline search ... && python -m pipeline eval ...' (make eval "
             "EXECUTOR=slurm's)"),
         writes=("runs",))
def cmd_after_embed(args: argparse.Namespace) -> None:
    from pipeline.slurm import run_here, submit_after_embed

    job_id = submit_after_embed(place_of(args), get_model(args.model), args.num_shards,
                                resources(args), args.command, pools_of(args),
                                model_path=args.model_path)
    if job_id is None:  # every shard is in
        raise SystemExit(run_here(args.command))
    print(job_id)


command_of(api.import_vectors, IMPORT_VECTORS, "fill the store of model vectors:<name> from "
           "vectors computed elsewhere (parquet: corpusid, vector), every row checked "
           "(dimensions, NaN, ids twice: refused; ids of no paper: dropped and counted); eval "
           "then searches it", writes=("indexes", "times"))
