"""The facts of the machine a benchmark ran on, detected (not written in): CPU model and cores,
memory, GPUs (nvidia-smi, or torch when it can see one), Python."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
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
