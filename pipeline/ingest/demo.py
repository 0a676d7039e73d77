"""The demo corpus's own files, which `make clean-demo` removes: its folders under the three
data roots and its report's files, nothing else however alike its name (demo-mdcr.md,
demographics.html, a user's demo_notes.txt), and nothing at all when the corpus folder of the
demo's name holds a corpus the demo did not synthesize."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.ingest.synthetic import recorded_config
from pipeline.layout import (
    DEMO_CORPUS,
    REPORT_PAGE_SUFFIX,
    is_report_file,
    raw_dir,
    report_file,
    report_manifest,
    reports_dir,
)


def demo_files(corpora_root: Path, index_root: Path, runs_root: Path) -> list[Path]:
    """What clean-demo removes, that exists: the demo corpus's folders and its report files."""
    corpus_dir = corpora_root / DEMO_CORPUS
    refuse_foreign_demo(corpus_dir)
    folders = [root / DEMO_CORPUS for root in (corpora_root, index_root, runs_root)]
    return [p for p in folders if p.exists() or p.is_symlink()] + report_files(runs_root)


def refuse_foreign_demo(corpus_dir: Path) -> None:
    """A corpus folder of the demo's name is the demo's only when its raw shards are vouched
    for by the generator's manifest; any other is refused (nothing removed)."""
    if not corpus_dir.exists():
        return
    try:
        synthetic = recorded_config(raw_dir(corpus_dir.parent, corpus_dir.name, "s2orc"))
    except InputError:
        synthetic = None
    if synthetic is None:
        raise InputError(f"{corpus_dir} holds a corpus make demo did not synthesize (no "
                         "synthetic shards' manifest in its s2orc/): clean-demo removes only the "
                         "demo's own files, and removed nothing; move or remove it yourself")


def report_files(runs_root: Path) -> list[Path]:
    """The demo's report files that exist: those its report manifest lists (each a name the
    layout gives the demo's report), the manifest, and the Markdown file and page the layout
    names for it even without one (a report stopped half-way)."""
    reports = reports_dir(runs_root)
    record = report_manifest(reports, DEMO_CORPUS)
    try:
        listed = read_json(record).get("outputs", {}) if record.exists() else {}
    except InputError:
        listed = {}  # damaged: its files are not known, only the layout's own names
    names = {str(name) for name in listed if is_report_file(str(name), DEMO_CORPUS)}
    names |= {report_file(Path(), DEMO_CORPUS).name,
              report_file(Path(), DEMO_CORPUS, suffix=REPORT_PAGE_SUFFIX).name}
    paths = [reports / name for name in sorted(names)] + [record]
    return [p for p in paths if p.is_file() or p.is_symlink()]


def remove(paths: list[Path]) -> None:
    """Remove each file or folder (a link as a link, never what it points to)."""
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
