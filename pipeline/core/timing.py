"""Stage timing: a summary line per stage and a log the demo prints at the end."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TIMES_FILE = "stage-times.jsonl"


@contextmanager
def timed(stage: str, log_dir: Path | None = None, **labels: object) -> Iterator[dict]:
    """Time a stage; the caller may add counts to the yielded dict for the summary line."""
    info: dict = {}
    start = time.perf_counter()
    yield info
    seconds = time.perf_counter() - start
    details = " ".join(f"{k}={v}" for k, v in {**labels, **info}.items())
    print(f"[{stage}] done in {seconds:.1f}s {details}".rstrip(), file=sys.stderr)
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        record = {"stage": stage, "seconds": round(seconds, 3), "pid": os.getpid(), **labels,
                  **info}
        with (log_dir / TIMES_FILE).open("a") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
