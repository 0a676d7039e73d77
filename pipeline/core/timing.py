"""Stage timing: a summary line per stage and a log the demo prints at the end."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)


@contextmanager
def timed(stage: str, log_path: Path | None = None, **labels: object) -> Iterator[dict]:
    """Time a stage; the caller may add counts to the yielded dict for the summary line. With
    `log_path` (layout.stage_times_path), a JSON line per stage is appended there."""
    info: dict = {}
    start = time.perf_counter()
    yield info
    seconds = time.perf_counter() - start
    details = " ".join(f"{k}={v}" for k, v in {**labels, **info}.items())
    log.info(f"[{stage}] done in {seconds:.1f}s {details}".rstrip())
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        record = {"stage": stage, "seconds": round(seconds, 3), "pid": os.getpid(), **labels,
                  **info}
        with log_path.open("a") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
