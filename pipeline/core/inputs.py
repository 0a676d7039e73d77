"""What an artifact was made from, and whether it still is: the one staleness rule.

Every artifact made from other artifacts (a pool from `prefiltered.parquet`; a run from its
pool's files, the paper texts, the embedding parts or the Lucene index it read, its component
runs; an evaluation from everything its run was made from and the run itself) records in its
manifest's `inputs` the sha256 of each file it read, keyed by a label: the file's path under
its data root, prefixed by the root's kind, with `@` for the artifact's own corpus
(`corpora/@/prefiltered.parquet`, `indexes/@/embeddings/minilm/part-0123.arrow`,
`runs/@/all-2k-r0/bm25.parquet`). Labels hold no absolute path and no corpus name, so moving
or copying the data folder, or a corpus under another name, keeps artifacts current.

A manifest read as an input (a run's, an evaluation's, a pool's: what the report and the
collected results show) is recorded by what it vouches for, not by its bytes
(`input_sha256`): the sha256 of its stage, parameters, outputs (its files' digests) and
counts, so that an artifact made again the same way (at another time, in other seconds, by
another code version, with another work log, from an index whose segments differ) leaves
what read its manifest current. What the artifact was made from is its own manifest's to
check: verify names it STALE when that changed, and an artifact made from one verify names
is named after it (`verify._reports_of_named`).

An artifact is stale when one of those files is gone or its recorded sha256 differs (a file
hashed only when its size, mtime or inode changed: `checksums.file_sha256`). Stages
redo stale artifacts (`--stale-only`), refuse stale inputs, `collect` leaves stale evaluations
out and `verify` reports them; all of them ask `changed`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    def shown(self, label: str) -> str:
        """A label as a message shows it: `@` replaced by this corpus's name
        (`runs/demo/all-2k-r0/bm25.eval.json`). A label names no corpus so that a copied data
        folder stays current; a reader needs the folder it means."""
        kind, _, rest = label.partition("/")
        corpus, sep, tail = rest.partition("/")
        if corpus != SAME or self.corpus is None:
            return label
        return f"{kind}/{self.corpus}{sep}{tail}"

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


# what a manifest vouches for: the rest (created, seconds, versions, details of the work
# done, its own inputs) says how and when it was made, and changes when it is made again the
# same way
VOUCHED = ("stage", "parameters", "outputs", "counts")


def vouched(value: Any) -> Any:
    """What a manifest (or a manifest of sections: a corpus's, one per stage) vouches for:
    each object that has `parameters` or `outputs` cut to VOUCHED; the rest as it is."""
    if not isinstance(value, dict):
        return value
    if "parameters" in value or "outputs" in value:
        return {key: value[key] for key in VOUCHED if key in value}
    return {key: vouched(item) for key, item in value.items() if key != "self_sha256"}


MANIFEST_MOST = 1 << 24  # bytes: a manifest is far smaller; a larger file is hashed as bytes


def _json_object(path: Path) -> Any:
    """A file's JSON object, None when it is not one (its first byte is not '{', it is larger
    than MANIFEST_MOST, or it does not parse: a parquet, Arrow or text file is not read
    further)."""
    try:
        with path.open("rb") as handle:
            if handle.read(1) != b"{" or os.fstat(handle.fileno()).st_size > MANIFEST_MOST:
                return None
            return json.loads(b"{" + handle.read())
    except (OSError, ValueError):
        return None


def input_sha256(path: Path) -> str:
    """The sha256 an input file is recorded by: a manifest's (a JSON object with
    `parameters` or `outputs`, or of such sections) is that of what it vouches for
    (`vouched`, as canonical JSON), any other file's that of its bytes."""
    info = _json_object(path)
    if isinstance(info, dict) and (cut := vouched(info)) != info:
        text = json.dumps(cut, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()
    return file_sha256(path)


def record(roots: Roots, paths: list[Path]) -> dict[str, str]:
    """label -> sha256 of each file read (`input_sha256`; the caller has checked them against
    their manifests before reading)."""
    return {roots.label(p): input_sha256(p) for p in paths}


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
            reasons.append(f"its input {roots.shown(label)} is gone")
        elif input_sha256(path) != sha:
            reasons.append(f"its input {roots.shown(label)} changed since")
    return reasons
