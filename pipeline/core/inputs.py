"""What an artifact was made from, and whether it still is: the one staleness rule.

Every artifact made from other artifacts (a pool from `prefiltered.parquet`; a run from its
pool's files, the paper texts, the embedding parts or the Lucene index it read, its component
runs; an evaluation from everything its run was made from and the run itself) records in its
manifest's `inputs` the sha256 of each file it read, keyed by a label: the file's path under
its data root, prefixed by the root's kind, with `@` for the artifact's own corpus
(`corpora/@/prefiltered.parquet`, `indexes/@/embeddings/minilm/part-0123.arrow`,
`runs/@/all-2k-r0/bm25.parquet`). Labels hold no absolute path and no corpus name, so moving
or copying the data folder, or a corpus under another name, keeps artifacts current.

An artifact is stale when one of those files is gone or its bytes differ from the recorded
sha256 (hashed only when its size, mtime or inode changed: `artifacts.file_sha256`). Stages
redo stale artifacts (`--stale-only`), refuse stale inputs, `collect` leaves stale evaluations
out and `verify` reports them; all of them ask `changed`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.checksums import file_sha256

KINDS = ("corpora", "indexes", "runs")
SAME = "@"  # in a label, the corpus of the artifact that records it


@dataclass(frozen=True)
class Roots:
    """The three data roots (`--corpora-root`, `--index-root`, `--runs-root`) and the corpus
    whose artifacts are recorded or checked."""

    corpora: Path
    indexes: Path | None = None
    runs: Path | None = None
    corpus: str | None = None

    @classmethod
    def of(cls, corpus_dir: Path, index_root: Path | None = None,
           runs_root: Path | None = None) -> Roots:
        return cls(corpus_dir.parent, index_root, runs_root, corpus_dir.name)

    def label(self, path: Path) -> str:
        """`<kind>/<path under that root>` of a file under one of the roots, `@` for this
        corpus (paths compared as written, made absolute: a corpus folder that is a symlink
        stays under its root)."""
        absolute = Path(os.path.abspath(path))
        for kind in KINDS:
            root = getattr(self, kind)
            if root is not None and absolute.is_relative_to(os.path.abspath(root)):
                corpus, *rest = absolute.relative_to(os.path.abspath(root)).parts
                corpus = SAME if corpus == self.corpus else corpus
                return "/".join((kind, corpus, *rest))
        raise ValueError(f"{path} is under none of the data roots {self}")

    def path(self, label: str) -> Path | None:
        kind, _, rest = label.partition("/")
        root = getattr(self, kind) if kind in KINDS else None
        corpus, _, rest = rest.partition("/")
        if root is None or not rest or (corpus == SAME and self.corpus is None):
            return None
        return root / (self.corpus if corpus == SAME else corpus) / rest


def corpus_label(name: str) -> str:
    """The label of a file of the artifact's own corpus (for a corpus written elsewhere
    before it is moved into place)."""
    return f"corpora/{SAME}/{name}"


def record(roots: Roots, paths: list[Path]) -> dict[str, str]:
    """label -> sha256 of each file read (the caller has checked them against their manifests
    before reading)."""
    return {roots.label(p): file_sha256(p) for p in paths}


def changed(roots: Roots, inputs: dict[str, str]) -> list[str]:
    """Why an artifact with these recorded `inputs` is stale: one reason per input file that
    is gone or whose bytes changed ([] when it is current). Inputs recorded without labels (an
    older pipeline's manifest) make it stale too."""
    reasons = []
    for label, sha in sorted(inputs.items()):
        path = roots.path(label)
        if path is None:
            return [f"made by an older pipeline (input {label!r} has no data-root label)"]
        if not path.is_file():
            reasons.append(f"its input {label} is gone")
        elif file_sha256(path) != sha:
            reasons.append(f"its input {label} changed since")
    return reasons
