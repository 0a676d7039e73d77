"""The embedding commands: the embed stage, its SLURM job array and follow-up job, and
import-vectors (a store filled from vectors computed elsewhere)."""

from __future__ import annotations

import argparse

from pipeline.cli.registry import (
    command,
    embed_args,
    model_arg,
    place_of,
    pool_arg,
    pools_of,
    slurm_args,
    times_log,
)
from pipeline.models import IMPORT_VECTORS, get_model
from pipeline.options.checks import non_negative


def embed_options(args: argparse.Namespace) -> dict:
    """The store options of embed and index; a part size only where given (each store has
    its own default)."""
    options = {"batch_size": args.batch_size, "dtype": args.dtype,
               "model_path": args.model_path, "device": args.device,
               "replace": bool(args.replace)}
    return {**options, **({"part_size": args.part_size} if args.part_size else {})}


def _embed_shard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=non_negative,
                   help="embed only this shard (default: every shard in turn)")


@command("embed", "embed the pools' papers missing from the store", model_arg, pool_arg,
         embed_args, _embed_shard_arguments, writes=("indexes", "times"))
def cmd_embed(args: argparse.Namespace) -> None:
    from pipeline.encoding.embed import embed_shards

    shards = range(args.num_shards) if args.shard is None else [args.shard]
    embed_shards(place_of(args), args.model, pools_of(args), shards, args.num_shards,
                 times_log(args), **embed_options(args))


def resources(args: argparse.Namespace):
    from pipeline.slurm import Resources

    return Resources(args.partition, args.gpus_per_task, args.time, args.cpus_per_task)


@command("submit-embed", "write <runs-root>/slurm/embed-<corpus>-<model>.sbatch, a SLURM job "
         "array of one embed shard per task, and submit it; prints the job id", model_arg,
         pool_arg, embed_args, slurm_args, writes=("runs",))
def cmd_submit_embed(args: argparse.Namespace) -> None:
    from pipeline.slurm import submit_embed

    entry = get_model(args.model)
    options = {"--pool": args.pool, "--model-path": args.model_path, "--dtype": args.dtype,
               "--batch-size": args.batch_size, "--device": args.device,
               "--part-size": args.part_size}
    print(submit_embed(place_of(args), entry.name, args.num_shards, resources(args), options,
                       replace=bool(args.replace)))


def _after_embed_command(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs="+", metavar="COMMAND",
                   help="after --, e.g. -- sh -c 'python -m pipeline search ... && "
                   "python -m pipeline eval ...' (make eval EXECUTOR=slurm's)")


@command("after-embed", "run COMMAND here when every embed shard is in, else submit it as a "
         "SLURM job after the embed array (afterok)", model_arg, pool_arg, slurm_args,
         _after_embed_command, writes=("runs",))
def cmd_after_embed(args: argparse.Namespace) -> None:
    from pipeline.slurm import run_here, submit_after_embed

    job_id = submit_after_embed(place_of(args), get_model(args.model), args.num_shards,
                                resources(args), args.command, pools_of(args),
                                model_path=args.model_path)
    if job_id is None:  # every shard is in
        raise SystemExit(run_here(args.command))
    print(job_id)


@command(IMPORT_VECTORS, "fill the store of model vectors:<name> from vectors computed "
         "elsewhere (parquet: corpusid, vector), every row checked (dimensions, NaN, ids "
         "twice: refused; ids of no paper: dropped and counted); eval then searches it",
         writes=("indexes", "times"))
def cmd_import_vectors(args: argparse.Namespace) -> None:
    from pipeline.encoding.vectors import import_vectors

    import_vectors(place_of(args), args.model, args.src, args.similarity, args.replace)
