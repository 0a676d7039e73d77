"""The S2AG reader (Semantic Scholar Datasets: papers, abstracts, citations). In progress."""

from __future__ import annotations

from pathlib import Path

from pipeline.errors import InputError
from pipeline.ingest.shards import ShardResult


def stage(raw_dir: Path, work: Path, strict: bool, workers: int, fos_source: str
          ) -> tuple[list[Path], int, list[ShardResult]]:
    raise InputError("the S2AG reader is not ready yet")
