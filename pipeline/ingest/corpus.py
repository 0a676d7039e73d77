"""What every ingest reader produces (docs/architecture.md) and the corpus manifest.

`papers.parquet`: corpusid, title, abstract, year, fields, n_inbound, n_outbound.
`citations.parquet`: citing, cited, dangling (the cited id is not a paper of the corpus: kept,
so that `n_inbound` stays what the source says, docs/ingest.md).
`<corpus>/manifest.json` holds one section per corpus stage (ingest, prefilter), or, for a
corpus written whole by one command, one section naming it: `benchmark` (make mdcr, make
import-mdcr) or `collection` (make import-beir).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa

from pipeline.core.artifacts import file_lock, file_problem, read_json, write_json
from pipeline.core.errors import InputError
from pipeline.core.repair import PIPELINE, Repair
from pipeline.layout import (
    CITATIONS,
    MANIFEST,
    PAPERS,
    PREFILTERED,
    QUARANTINE,
    pool_dir,
    pools_dir,
)

PAPERS_SCHEMA = pa.schema([
    ("corpusid", pa.int64()),
    ("title", pa.string()),
    ("abstract", pa.string()),
    ("year", pa.int32()),
    ("fields", pa.list_(pa.string())),
    ("n_inbound", pa.int32()),
    ("n_outbound", pa.int32()),
])
CITATIONS_SCHEMA = pa.schema([("citing", pa.int64()), ("cited", pa.int64()),
                              ("dangling", pa.bool_())])
# Every reader fills these; `lines_read = papers + quarantined + duplicate_records` (+ the
# lines of the other S2AG datasets, counted apart).
INGEST_COUNTS = ("lines_read", "blank_lines", "papers", "quarantined", "duplicate_records",
                 "edges", "bad_cited_id", "duplicate_edges", "dangling_edges")
ROW_GROUP = 65_536  # rows per parquet row group: readers downstream stream group by group


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


def row_groups(path: Path, columns: list[str] | None = None) -> Iterator[pa.Table]:
    """A parquet file one row group at a time: what bounds memory when streaming (pyarrow's
    iter_batches buffers many row groups when a batch spans them)."""
    import pyarrow.parquet as pq  # imports pandas too: only where parquet is streamed

    handle = pq.ParquetFile(path)
    for i in range(handle.num_row_groups):
        yield handle.read_row_group(i, columns=columns)


class GroupedWriter:
    """A ParquetWriter that gathers small tables into row groups of about ROW_GROUP rows."""

    def __init__(self, path: Path, schema: pa.Schema, rows: int = ROW_GROUP):
        import pyarrow.parquet as pq

        self.writer = pq.ParquetWriter(path, schema, compression="zstd")
        self.schema, self.rows = schema, rows
        self.pending: list[pa.Table] = []
        self.count = 0

    def write(self, table: pa.Table) -> None:
        self.pending.append(table.cast(self.schema))
        self.count += table.num_rows
        if sum(t.num_rows for t in self.pending) >= self.rows:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            table = pa.concat_tables(self.pending).combine_chunks()  # bytes must not depend on
            self.writer.write_table(table, row_group_size=self.rows)  # how rows were batched
            self.pending = []

    def __enter__(self) -> GroupedWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.flush()
        self.writer.close()


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


def raw_repair(raw_dir: Path) -> Repair:
    """The command that writes raw shards again: ours only when we generated them (the
    synthetic corpus); S2ORC or S2AG downloads are fetched again by the user."""
    if not (raw_dir / MANIFEST).exists():
        return Repair("", note="download it again (a damaged or incomplete download)")
    corpus = raw_dir.parent.name
    return (Repair("corpus", corpus) if corpus == "demo"
            else Repair("synth", corpus, variables=(("--repair", ""),), program=PIPELINE))


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
                return Repair("mdcr", params.get("source_corpus", "<source corpus>"),
                              variables=(("MDCR", name), ("REPLACE", "1")))
            split = (("SPLIT", params["split"]),) if "split" in params else ()  # CSFCube: none
            return Repair(stage, name, variables=(("SRC", params.get("source", "<folder>")),
                                                  *split, ("REPLACE", "1")))
    return Repair("corpus", name)


def corpus_file(corpus_dir: Path, name: str) -> Path:
    """`<corpus>/<name>`, checked against the manifest section that vouches for it (sha256,
    hashed again only when the file's stat changed): a damaged or half-written corpus file is
    refused with the command that rebuilds it, never read."""
    path = corpus_dir / name
    sections = corpus_sections(corpus_dir)
    recorded = next((sections[s]["outputs"][name] for s in VOUCHED_BY[name]
                     if name in sections.get(s, {}).get("outputs", {})), None)
    if recorded is None:
        why = "is missing" if not path.exists() else "is vouched for by no manifest section"
        raise InputError(f"{path} {why} (a corpus stage stopped half-way or never ran)",
                         corpus_repair(corpus_dir, sections))
    problem = file_problem(path, recorded, deep=False)
    if problem:
        raise InputError(f"{path}: {problem}", corpus_repair(corpus_dir, sections))
    return path


RAW_FOLDERS = ("s2orc", "s2ag", "metadata", "papers", "abstracts", "citations")


def corpus_kind(corpus_dir: Path) -> str:
    """What a corpus folder holds: `absent` (no folder, or nothing but hidden bookkeeping),
    `ingested` (papers ingested here, or raw inputs), `benchmark` or `collection` (written whole
    by one command), or `other` (files no stage of ours vouches for)."""
    if not corpus_dir.is_dir():
        return "absent"
    entries = [p for p in corpus_dir.iterdir() if not p.name.startswith(".")]
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


def claim_corpus(corpus_dir: Path, command: str) -> str:
    """Refuse, before any work, to write a whole corpus (a benchmark, an imported collection)
    into a folder holding an ingested corpus, raw inputs or unknown files: never replaced, by
    any option. Returns the folder's kind (`absent`, `benchmark` or `collection`)."""
    kind = corpus_kind(corpus_dir)
    if kind in ("ingested", "other"):
        what = ("an ingested corpus (and maybe its raw inputs)" if kind == "ingested"
                else "files of its own")
        raise InputError(f"{corpus_dir} holds {what}: {command} writes a whole corpus and "
                         "would replace it; give a new corpus name (CORPUS=... or MDCR=...)")
    return kind


def _pool_shas(corpus_dir: Path, on_disk: bool = False) -> dict[str, dict | None]:
    """pool -> {file: sha256} as each pool's manifest records it (None for a damaged manifest),
    or (`on_disk`) as the files now hold it (None for a missing file)."""
    from pipeline.core.artifacts import file_sha256

    found: dict[str, dict | None] = {}
    for path in sorted(pools_dir(corpus_dir).glob(f"*/{MANIFEST}")):
        try:
            recorded = read_json(path).get("outputs", {})
        except InputError:  # damaged: put back, never taken for other contents
            found[path.parent.name] = {} if on_disk else None
            continue
        found[path.parent.name] = {
            n: ((file_sha256(path.parent / n) if (path.parent / n).is_file() else None)
                if on_disk else f.get("sha256")) for n, f in recorded.items()}
    return found


def _link_refusal(corpus_dir: Path) -> str:
    return (f"{corpus_dir} is a symbolic link (to {os.readlink(corpus_dir)}): an import writes "
            "the corpus as a new folder and will not replace your link; put the data folder on "
            "that disk instead (DATA=<folder holding corpora/>), or remove the link")


def install_corpus(built: Path, corpus_dir: Path, derived: list[Path], replace: bool,
                   section: str) -> str:
    """Put a corpus written whole in `built` (a temporary folder beside `corpus_dir`) in place.

    - no corpus there: `built` becomes it ("new");
    - the same papers and pools: nothing changes ("unchanged"), but a pool whose files no
      longer hold what its manifest records (damaged), or a damaged prefiltered.parquet, is
      put back from `built` ("repaired"), so that what was made from it stays current;
    - the same papers, and pools that are new to it (another split of a collection): those
      pools are added ("added");
    - anything else differs: refused, unless `replace`, when the old corpus and what was
      derived from it (`derived`: its indexes and runs, written by us) are removed ("replaced").
    """
    from pipeline.core.artifacts import atomic_dir, file_sha256, remove

    link = corpus_dir.is_symlink()
    if corpus_kind(corpus_dir) == "absent":
        if link:  # a user's link (to a scratch disk): never replaced by a local folder
            raise InputError(_link_refusal(corpus_dir))
        remove(corpus_dir)
        os.replace(built, corpus_dir)
        return "new"
    old_papers = corpus_dir / PREFILTERED
    # the papers its manifest vouches for (the file itself may be damaged since)
    recorded = corpus_sections(corpus_dir).get(section, {}).get("outputs", {}).get(
        PREFILTERED, {}).get("sha256")
    papers_now = file_sha256(old_papers) if old_papers.is_file() else None
    same_papers = (recorded or papers_now) == file_sha256(built / PREFILTERED)
    damaged_papers = same_papers and papers_now != recorded
    old_pools, new_pools = _pool_shas(corpus_dir), _pool_shas(built)
    clashes = [p for p in new_pools if old_pools.get(p) not in (None, new_pools[p])]
    if same_papers and not clashes:
        added = [p for p in new_pools if p not in old_pools]
        on_disk = _pool_shas(corpus_dir, on_disk=True)
        damaged = [p for p in new_pools if p in old_pools and on_disk[p] != old_pools[p]]
        for name in [*added, *damaged]:
            with atomic_dir(pool_dir(corpus_dir, name)) as tmp:
                remove(tmp)
                os.replace(pool_dir(built, name), tmp)
        if damaged_papers:  # the same bytes as recorded, put back in one rename
            os.replace(built / PREFILTERED, old_papers)
        if added:
            sections = corpus_sections(corpus_dir)
            merged = read_json(built / MANIFEST)[section]
            merged["pools"] = sorted({*sections.get(section, {}).get("pools", []),
                                      *merged.get("pools", [])})
            write_json({**sections, section: merged}, corpus_dir / MANIFEST)
        return "added" if added else "repaired" if damaged or damaged_papers else "unchanged"
    if link:
        raise InputError(_link_refusal(corpus_dir))
    if not replace:
        what = "other papers" if not same_papers else f"other contents of {clashes[0]}"
        raise InputError(f"{corpus_dir} already holds a corpus with {what}: add REPLACE=1 "
                         "(--replace) to replace it and remove its indexes and runs, or give "
                         "a new corpus name")
    with atomic_dir(corpus_dir) as tmp:
        remove(tmp)
        os.replace(built, tmp)
    for folder in derived:
        remove(folder)
    return "replaced"


def paper_texts(corpus_dir: Path, ids: pl.Series) -> pl.DataFrame:
    """corpusid, title, abstract of the papers `ids`, from the checked prefiltered.parquet."""
    return (pl.scan_parquet(corpus_file(corpus_dir, PREFILTERED))
            .filter(pl.col("corpusid").is_in(ids.implode()))
            .select("corpusid", "title", "abstract").collect())
