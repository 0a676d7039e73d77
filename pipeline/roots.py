"""The data roots as make and the command line name them: make's DATA, CORPORA_DIR, INDEX_DIR
and RUNS_DIR, the stages' --corpora-root, --index-root and --runs-root, and back from the roots
to the words a repair command types (`where`). The folders' own names are pipeline/layout.py's
(DATA_FOLDERS). Standard library only (the Makefile's input check runs it before the
environment exists)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pipeline.core.repair import PIPELINE_COMMAND, Where
from pipeline.layout import DATA_FOLDERS, check_path

# A root given on its own (make's CORPORA_DIR, INDEX_DIR, RUNS_DIR; the stages' options)
ROOT_VARIABLES = {"corpora": "CORPORA_DIR", "indexes": "INDEX_DIR", "runs": "RUNS_DIR"}
ROOT_OPTIONS = {"corpora": "--corpora-root", "indexes": "--index-root", "runs": "--runs-root"}
CHECKOUT = Path(__file__).resolve().parents[1]  # make's DATA default: the Makefile's folder


def data_roots(data: str | Path, **roots: str | Path | None) -> dict[str, Path]:
    """The three roots of a data folder DATA, absolute (the stages' --corpora-root,
    --index-root and --runs-root), keyed corpora, indexes, runs; a root given in `roots`
    (corpora=, indexes=, runs=: make's CORPORA_DIR, INDEX_DIR, RUNS_DIR) replaces DATA's.
    Each checked as a path (layout.check_path)."""
    for path in (data, *filter(None, roots.values())):
        check_path(path)  # type: ignore[arg-type]
    root = Path(os.path.abspath(data))
    return {kind: Path(os.path.abspath(roots[kind])) if roots.get(kind) else root / folder
            for kind, folder in DATA_FOLDERS.items()}


def roots_of(values: Any) -> dict[str, Path]:
    """The data roots make's variables name (`values`' DATA, CORPORA_DIR, INDEX_DIR,
    RUNS_DIR)."""
    return data_roots(values.DATA or ".",
                      **{kind: getattr(values, name) for kind, name in ROOT_VARIABLES.items()})


def where(corpora: Path | None, indexes: Path | None = None, runs: Path | None = None,
          program: str = PIPELINE_COMMAND) -> Where:
    """How a command names these data roots (the inverse of `data_roots`): no variable for the
    checkout's own data folder (make's default), DATA=<folder> when the roots are one folder's
    corpora/, indexes/ and runs/, else each root (CORPORA_DIR=...); and the pipeline's root
    options, for a repair that is a pipeline command (`program`: how it is called)."""
    given = {"corpora": corpora, "indexes": indexes, "runs": runs}
    absolute = {kind: Path(os.path.abspath(path)) for kind, path in given.items()
                if path is not None}
    options = tuple((ROOT_OPTIONS[kind], str(path)) for kind, path in absolute.items())
    parents = {path.parent for path in absolute.values()}
    if len(parents) == 1 and all(path.name == DATA_FOLDERS[kind]
                                 for kind, path in absolute.items()):
        data = parents.pop()
        checkout = (CHECKOUT / "Makefile").is_file() and data.resolve() == CHECKOUT
        variables = () if checkout else (("DATA", str(data)),)
    else:
        variables = tuple((ROOT_VARIABLES[kind], str(path)) for kind, path in absolute.items())
    return Where(variables, options, program)
