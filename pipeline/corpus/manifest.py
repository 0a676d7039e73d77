"""A corpus's manifest (`<corpus>/manifest.json`) and what it says of the corpus.

It holds one section per corpus stage (ingest, prefilter), or, for a corpus written whole by one
command, one section naming it: `benchmark` (make mdcr, make import-mdcr) or `collection` (make
import-beir, make import-csfcube). From it follow the corpus's kind and the command that
rebuilds its files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.core.atomic import is_temporary
from pipeline.core.checksums import CHECKSUMS
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.locks import file_lock, is_lock
from pipeline.core.repair import PIPELINE, Placeholder, Repair
from pipeline.layout import (
    CITATIONS,
    DOWNLOAD_MANIFEST,
    MANIFEST,
    PAPERS,
    PREFILTERED,
    QUARANTINE,
    S2_DATASET,
    S2_RELEASE,
)


def update_corpus_manifest(corpus_dir: Path, section: str, data: dict | None) -> None:
    """Record one stage's manifest under its own key in `<corpus>/manifest.json` (None removes
    it: a stage does so before it starts replacing its files, so a kill leaves no manifest
    vouching for half-replaced files)."""
    path = corpus_dir / MANIFEST
    with file_lock(corpus_dir / MANIFEST):
        try:
            current = read_json(path) if path.exists() else {}
        except InputError:  # damaged: what it vouched for is made again, section by section
            current = {}
        if data is None:
            if section not in current:
                return
            del current[section]
        else:
            current[section] = data
        write_json(current, path)


def corpus_section(corpus_dir: Path, section: str) -> dict:
    """One stage's section of the corpus manifest ({} when absent, or when the manifest is
    damaged: the stage that asks then makes its files again)."""
    path = corpus_dir / MANIFEST
    try:
        return read_json(path).get(section, {}) if path.exists() else {}
    except InputError:
        return {}


def recorded_source(corpus_dir: Path) -> str | None:
    """The source (reader) the corpus's ingest section records it was read with, or None
    where none is recorded (a new corpus, one written whole, a damaged manifest): what a
    command that does not name SOURCE reads the corpus's raw folder with."""
    source = corpus_section(corpus_dir, "ingest").get("parameters", {}).get("source")
    return source if isinstance(source, str) else None


def written_whole(corpus_dir: Path) -> str:
    """`benchmark` or `collection` for a corpus that one command wrote whole (make mdcr,
    make import-mdcr, make import-beir: it has no raw input to ingest), else ''. A manifest
    that cannot be read says '' (the corpus stage then names what repairs it)."""
    try:
        sections = json.loads((corpus_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return ""
    return next((k for k in ("benchmark", "collection") if isinstance(sections, dict)
                 and k in sections), "")

# The manifest section that vouches for each corpus file, by the kind of corpus.
VOUCHED_BY = {PAPERS: ("ingest",), CITATIONS: ("ingest",),
              QUARANTINE: ("ingest",),
              PREFILTERED: ("prefilter", "benchmark", "collection")}


def corpus_sections(corpus_dir: Path) -> dict:
    path = corpus_dir / MANIFEST
    if not path.exists():
        return {}
    try:
        return read_json(path)
    except InputError as exc:  # damaged: name the command that rebuilds the corpus
        raise InputError(exc.message, corpus_repair(corpus_dir, {})) from None


def what_is_left(raw_dir: Path) -> dict[str, Any]:
    """What a download.json, damaged or not, still says: its release and its datasets (each
    checked for its shape), for a repair command; {} when nothing can be read."""
    try:
        info = json.loads((raw_dir / DOWNLOAD_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(info, dict):
        return {}
    sets = info.get("datasets")
    release = info.get("release")
    return {"release": release if isinstance(release, str) and S2_RELEASE.fullmatch(release)
            else None,
            "datasets": sorted(d for d in sets if S2_DATASET.fullmatch(d))
            if isinstance(sets, dict) else [],
            "updated": isinstance(sets, dict) and any(
                isinstance(e, dict) and e.get("updated_from") for e in sets.values())}


def download_repair(raw_dir: Path) -> Repair:
    """The command that makes a download whole again (verify names it): make download of the
    release and datasets download.json names, which fetches again exactly the files whose
    bytes are wrong and rebuilds a damaged download.json from the shards. A dataset brought
    forward by diffs cannot be fetched file by file: it is downloaded into another folder."""
    left = what_is_left(raw_dir)
    if left.get("updated"):
        return Repair("", note=f"download release {left.get('release') or 'latest'} into "
                               "another folder (another CORPUS): its files were brought "
                               "forward by the API's diffs, so they cannot be fetched again "
                               "one by one")
    variables = tuple((name, value) for name, value in
                      (("RELEASE", left.get("release")),
                       ("DATASETS", ",".join(left.get("datasets", [])))) if value)
    if not left.get("release"):
        return Repair("download", raw_dir.parent.name, variables=variables,
                      note="with RELEASE= the release the folder holds")
    return Repair("download", raw_dir.parent.name, variables=variables)


def raw_repair(raw_dir: Path) -> Repair:
    """The command that writes raw shards again: ours when we generated them (the synthetic
    corpus) or `make download` fetched them (download_repair); other downloads are fetched
    again by the user."""
    if (raw_dir / DOWNLOAD_MANIFEST).exists():
        return download_repair(raw_dir)
    if not (raw_dir / MANIFEST).exists():
        return Repair("", note="download it again (a damaged or incomplete download)")
    corpus = raw_dir.parent.name
    if corpus != "demo":
        return Repair("synth", corpus, variables=(("--repair", ""),), program=PIPELINE)
    try:  # the demo is made again with the settings its generator recorded
        read_json(raw_dir / MANIFEST)
        return Repair("corpus", corpus)
    except InputError:  # which were lost with the record: the user says them again
        return Repair("corpus", corpus, variables=(
            ("DEMO_PAPERS", Placeholder("papers it was made with")),
            ("DEMO_SEED", Placeholder("its seed"))))


def corpus_repair(corpus_dir: Path, sections: dict | None = None) -> Repair:
    """The command that rebuilds a corpus's files: `make corpus` for an ingested corpus, the
    command that wrote it whole (with REPLACE=1) for a benchmark or an imported collection."""
    try:
        sections = corpus_sections(corpus_dir) if sections is None else sections
    except InputError:
        sections = {}
    name = corpus_dir.name
    for kind in ("benchmark", "collection"):
        if kind in sections:
            stage, params = sections[kind].get("stage"), sections[kind].get("parameters", {})
            if stage == "mdcr":
                return Repair("mdcr", params.get("source_corpus", Placeholder("source corpus")),
                              variables=(("MDCR", name), ("REPLACE", "1")))
            split = (("SPLIT", params["split"]),) if "split" in params else ()  # CSFCube: none
            source = (("DATASET", params["dataset"]) if "dataset" in params  # import-irds
                      else ("SRC", params.get("source", Placeholder("folder"))))
            return Repair(stage, name, variables=(source, *split, ("REPLACE", "1")))
    return Repair("corpus", name)


RAW_FOLDERS = ("s2orc", "s2ag", "metadata", "papers", "abstracts", "citations")


def corpus_kind(corpus_dir: Path) -> str:
    """What a corpus folder holds: `absent` (no folder, or nothing but our bookkeeping: locks,
    the checksum cache, temporaries), `ingested` (papers ingested here, or raw inputs),
    `benchmark` or `collection` (written whole by one command), or `other` (files no stage of
    ours vouches for, a hidden file of a user's too: never removed by an import)."""
    if not corpus_dir.is_dir():
        return "absent"
    entries = [p for p in corpus_dir.iterdir() if not (
        is_lock(p) or is_temporary(p) or p.name.startswith(CHECKSUMS))]
    if not entries:
        return "absent"
    try:
        sections = corpus_sections(corpus_dir)
    except InputError:
        sections = {}
    names = {p.name for p in entries}
    if {"ingest", "prefilter"} & set(sections) or names & {PAPERS, *RAW_FOLDERS}:
        return "ingested"
    for kind in ("benchmark", "collection"):
        if kind in sections:
            return kind
    return "other"


