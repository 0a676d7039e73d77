"""`python -m pipeline verify`: is every artifact whole, and made from its current inputs?

Reads every manifest under the given roots (corpora/, indexes/, runs/) and reports, one line
each, what is
- CORRUPT: a file whose size or sha256 differs from its manifest, or an unreadable manifest;
- PARTIAL: files without the manifest that is written last (a stage stopped half-way);
- STALE:   an artifact made from an input that has changed since (a prefiltered corpus from
           an older ingest, a pool from an older prefiltered.parquet, a run or an evaluation
           from an older pool);
- DEBRIS:  a temporary left by a killed process (removed by the next write in its folder).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline.artifacts import (
    MANIFEST,
    file_problem,
    is_stale_temporary,
    is_temporary,
    read_json,
)
from pipeline.errors import InputError
from pipeline.pools import input_sha, made_from

MANIFEST_NAMES = (MANIFEST, "*.manifest.json", "*.eval.json")


def _outputs(info: dict) -> dict[str, dict]:
    """name -> fingerprint of everything a manifest vouches for (corpus manifests hold one
    section per stage; embedding stores list parts)."""
    found = dict(info.get("outputs", {}))
    for section in info.values():
        if isinstance(section, dict) and "stage" in section:
            found.update(section.get("outputs", {}))
    for part in info.get("parts", []):
        found[part["file"]] = part
    return found


def _stale(path: Path, info: dict, corpora_root: Path) -> str | None:
    """Why the artifact described by `path` was made from inputs that changed, if it was."""
    inputs = info.get("inputs", {})
    if "prefilter" in info and "ingest" in info:  # a corpus manifest
        papers = info["ingest"].get("outputs", {}).get("papers.parquet", {}).get("sha256")
        if info["prefilter"].get("inputs", {}).get("papers.parquet") != papers:
            return "prefiltered.parquet was made from an older papers.parquet (rerun prefilter)"
    if info.get("stage") == "pool":
        corpus_dir = path.parent.parent.parent
        if (corpus_dir / "prefiltered.parquet").exists() and \
                inputs.get("prefiltered.parquet") != input_sha(corpus_dir):
            return "built from an older prefiltered.parquet (make eval rebuilds it)"
    if info.get("stage") in ("search", "eval"):
        pool_dir = corpora_root / path.parent.parent.name / "pools" / path.parent.name
        if not (pool_dir / MANIFEST).exists():
            return f"its pool {pool_dir} no longer exists"
        if not made_from(inputs, read_json(pool_dir / MANIFEST)):
            return "made from an older version of its pool (rerun make eval)"
    return None


def check_manifest(path: Path, corpora_root: Path, deep: bool) -> list[str]:
    """Problems of the artifact that the manifest at `path` describes."""
    try:
        info = read_json(path)
    except InputError as exc:
        return [f"CORRUPT {path}: {exc}"]
    problems = []
    for name, expected in _outputs(info).items():
        problem = file_problem(path.parent / name, expected, deep)
        if problem:
            kind = "PARTIAL" if problem == "missing" else "CORRUPT"
            problems.append(f"{kind} {path.parent / name}: {problem}")
    stale = _stale(path, info, corpora_root)
    if stale:
        problems.append(f"STALE {path.parent if path.name == MANIFEST else path}: {stale}")
    return problems


def _partial(root: Path) -> list[str]:
    """Artifacts whose files exist but whose manifest (written last) does not."""
    problems = []
    for corpus_dir in sorted(p.parent for p in root.glob("*/papers.parquet")):
        try:
            path = corpus_dir / MANIFEST
            sections = read_json(path) if path.exists() else {}
        except InputError:
            continue  # corrupt: check_manifest reports it
        for name, stage in (("papers.parquet", "ingest"), ("prefiltered.parquet", "prefilter")):
            if (corpus_dir / name).exists() and stage not in sections:
                problems.append(f"PARTIAL {corpus_dir / name}: no {stage} section in "
                                f"{corpus_dir / MANIFEST} (the {stage} stage stopped "
                                "half-way; run it again)")
    for pool_dir in root.glob("*/pools/*/"):
        if pool_dir.is_dir() and not (pool_dir / MANIFEST).exists():
            problems.append(f"PARTIAL {pool_dir}: no manifest.json (the pool stage stopped "
                            "half-way; rerun make pool)")
    for run in root.glob("*/*/*.parquet"):
        name = run.name.removesuffix(".parquet")
        if "." in name or run.parent.parent.name == "pools":
            continue  # <model>.metrics.parquet: the eval manifest's; a pool's files (root: a
            # corpus folder) are the pool manifest's
        if not run.with_name(f"{name}.manifest.json").exists():
            problems.append(f"PARTIAL {run}: no {name}.manifest.json (search stopped "
                            "half-way; rerun make eval)")
    for index in root.glob("*/*/bm25/"):
        if not (index / MANIFEST).exists():
            problems.append(f"PARTIAL {index}: no manifest.json (rerun the index stage)")
    return problems


def verify(roots: list[Path], corpora_root: Path, deep: bool = True) -> list[str]:
    """Print one line per problem under `roots` and a summary; return the problems."""
    problems: list[str] = []
    checked = 0
    for root in roots:
        if not root.exists():
            continue
        for pattern in MANIFEST_NAMES:
            for path in sorted(root.rglob(pattern)):
                if any(is_temporary(parent) for parent in path.parents):
                    continue
                checked += 1
                problems += check_manifest(path, corpora_root, deep)
        problems += _partial(root)
        problems += [f"DEBRIS {p}: temporary of a stopped process (removed by the next run "
                     "writing there)" for p in sorted(root.rglob(".*.tmp"))
                     if is_stale_temporary(p)]
    for line in problems:
        print(line)
    print(f"[verify] {checked} manifests checked{' with checksums' if deep else ''}: "
          f"{len(problems) or 'no'} problems", file=sys.stderr)
    return problems
