"""Whether an artifact is current: the one rule that every artifact kind asks (a run, an
evaluation, a Lucene index, a store of BM25 terms, a store of vectors).

An artifact is current when its manifest (written last, so a stage that stopped half-way
leaves none) is there and readable, records the parameters wanted now, its files match the
fingerprints it records, and it was made from the inputs wanted now: those the caller names
(`inputs`: label -> sha256, as `inputs.record` makes them) or, where a kind knows what it read
only once it has made it (a run, an evaluation), the inputs it recorded, still with the same
bytes (`inputs.changed`). `stale` names the first reason it is not, and which check gave it;
each kind keeps only what is its own: which parameters and inputs it wants, its own checks of
what its manifest records, and whether it refuses a stale artifact (naming the command that
repairs it) or makes it again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from pipeline.core.checksums import file_problem
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.core.inputs import Roots, changed

# Which check an artifact failed, in the order they are made
MISSING = "missing"  # no manifest: never made, or its stage stopped before writing it
UNREADABLE = "unreadable"  # a manifest that is not JSON or differs from its own checksum
PARAMETERS = "parameters"  # made with other parameters
DAMAGED = "damaged"  # a file that differs from the fingerprint its manifest records
OWN = "own"  # what the artifact's kind checks of its manifest besides (`own`)
INPUTS = "inputs"  # made from other inputs, or from inputs that changed since


class Stale(NamedTuple):
    """Why an artifact is not current: the check it failed (MISSING, UNREADABLE, PARAMETERS,
    DAMAGED, OWN or INPUTS) and a one-line reason naming what differs."""

    check: str
    reason: str


def stale(manifest: Path, parameters: dict[str, Any] | None, *, key: str = "parameters",
          files: Path | None = None, own: Callable[[dict[str, Any]], str | None] | None = None,
          inputs: dict[str, str] | None = None, roots: Roots | None = None) -> Stale | None:
    """Why the artifact whose manifest is `manifest` is not current (None when it is).

    Its manifest's `key` must equal `parameters` (None: any, for a reader that takes the
    artifact as it was made); with `files` (the folder its `outputs` lie in) each output must
    match its fingerprint; `own` returns what the artifact's kind finds wrong with the
    manifest, or None; its recorded inputs must equal `inputs`, and with `roots` each input
    it recorded must still have the bytes it had.
    """
    if not manifest.exists():
        return Stale(MISSING, f"no {manifest} (never made, or its stage stopped half-way)")
    try:
        info = read_json(manifest)
    except InputError as exc:
        return Stale(UNREADABLE, exc.message)
    if parameters is not None and (made := info.get(key)) != parameters:
        return Stale(PARAMETERS, f"made with other {key} ({_differ(made, parameters)})")
    if files is not None:
        if "outputs" not in info:
            return Stale(DAMAGED, f"{manifest} records none of its files")
        for name, expected in info["outputs"].items():
            if problem := file_problem(files / name, expected, deep=False):
                return Stale(DAMAGED, f"{files / name}: {problem}")
    if own is not None and (reason := own(info)):
        return Stale(OWN, reason)
    if inputs is not None and (reason := _other_inputs(info.get("inputs"), inputs)):
        return Stale(INPUTS, reason)
    if roots is not None and (reasons := changed(roots, info.get("inputs", {}))):
        return Stale(INPUTS, reasons[0])
    return None


def _differ(made: Any, wanted: dict[str, Any]) -> str:
    """Which of the wanted parameters the manifest records otherwise; of a parameter that
    holds several (a run's `options`), which of them (`options: BM25_K1`)."""
    if not isinstance(made, dict):
        return "none recorded"
    names = []
    for name in sorted(name for name in {*made, *wanted} if made.get(name) != wanted.get(name)):
        old, new = made.get(name), wanted.get(name)
        inner = sorted(key for key in {*old, *new} if old.get(key) != new.get(key)) \
            if isinstance(old, dict) and isinstance(new, dict) else []
        names.append(f"{name}: {', '.join(inner)}" if inner else name)
    return "; ".join(names) if any(":" in n for n in names) else ", ".join(names)


def _other_inputs(made: Any, wanted: dict[str, str]) -> str | None:
    """Which input the artifact was made from otherwise than wanted (None: the same)."""
    if not isinstance(made, dict):
        return "made before artifacts recorded their inputs"
    for label in sorted({*made, *wanted}):
        if label not in made:
            return f"made without its input {label}"
        if label not in wanted:
            return f"made from {label}, which is no input of it now"
        if made[label] != wanted[label]:
            return f"made from another {label}"
    return None
