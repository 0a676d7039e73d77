"""The facts of the machine a benchmark ran on, detected (not written in): CPU model and cores,
memory, GPUs (nvidia-smi, or torch when it can see one), Python."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def gpus() -> str:
    """The GPUs this process can use, by name, or "no GPU"."""
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True)
        names = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        if done.returncode == 0 and names:
            return f"{len(names)} GPU ({', '.join(names)})"
    return "no GPU"


def machine() -> str:
    """One line: cores (CPU model), memory, GPUs, Python."""
    cpuinfo = Path("/proc/cpuinfo")
    cpu = next((line.split(":", 1)[1].strip() for line in
                (cpuinfo.read_text().splitlines() if cpuinfo.exists() else [])
                if line.startswith("model name")), platform.processor() or platform.machine())
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GiB, {gpus()}, "
            f"Python {platform.python_version()}")


def in_parallel(one: Callable, jobs: Sequence[tuple], workers: int) -> tuple[list, dict]:
    """`one(*job)` of each job on `workers` processes, each with one BLAS thread (a
    simulation's processes are its parallelism), in the jobs' order; and how it ran: the
    machine's load before and after, the workers, the seconds."""
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"
    before = [round(v, 2) for v in os.getloadavg()]
    start = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        runs = list(pool.map(one, *zip(*jobs, strict=True)))
    return runs, {"load_before": before, "load_after": [round(v, 2) for v in os.getloadavg()],
                  "workers": workers, "seconds": time.perf_counter() - start}
