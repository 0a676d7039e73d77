"""A store current against the corpus's texts and this version's settings: read only when
checked against the corpus's prefiltered.parquet (`check_current`) and made with the settings
and model it would record now (`check_settings`); rows of texts changed since they were
embedded removed (`reconcile`)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import fingerprint
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.core.inputs import record
from pipeline.corpus.files import corpus_file, text_digests
from pipeline.encoding.encoder_kinds import settings_class
from pipeline.encoding.store import id_array, imported_repair, part_digests, part_name, store_repair
from pipeline.encoding.store_identity import changed_identity, identity_refusal
from pipeline.encoding.writer import write_manifest
from pipeline.layout import MANIFEST, PREFILTERED, Place
from pipeline.models import ModelEntry

log = logging.getLogger(__name__)


def text_format(entry: ModelEntry) -> str:
    """How a paper becomes the model's input, as words (recorded in the store's config)."""
    joined = {"sep": "{title}{sep_token}{abstract}",
              "sep-nonempty": "{title} {sep_token} {abstract} (the non-empty ones)",
              "space": "{title} {abstract}, stripped"}[entry.join]
    queries = "" if entry.query_prefix is None else f"; queries: {entry.query_prefix}{joined}"
    return f"{entry.text_prefix}{joined}{queries}"


def store_inputs(place: Place) -> dict[str, str]:
    """What a store's rows are checked against, as every artifact records what it read: the
    corpus's prefiltered.parquet. A store recording another is stale (verify lists it) until
    `embed` compares every stored paper's text digest with the current text (`reconcile`)."""
    return record(place.roots, [corpus_file(place.corpus_dir, PREFILTERED)])


# What a stale imported store (pipeline/encoding/vectors.py) needs: importing, never embedding
STALE_IMPORT = "from a file computed on the corpus's current texts"


def check_current(place: Place, store: Path, entry: ModelEntry,
                  model_path: str | Path | None = None) -> None:
    """Refuse to read a store not checked against the corpus's current texts (made from
    another prefiltered.parquet, or before stores kept text digests): some of its rows may be
    of texts the papers no longer have. `make embed` checks it (`reconcile`). A store made
    with other settings, or by another model (`model_path`: where it is loaded from), is
    refused too (`check_settings`)."""
    path = store / MANIFEST
    if not path.exists():
        return
    made = read_json(path, store_repair(store))
    imported = made.get("config", {}).get("imported")
    repair = store_repair(store) if imported is None else imported_repair(store, STALE_IMPORT)
    if made.get("inputs") != store_inputs(place):
        raise InputError(f"{store} holds vectors not checked against the current "
                         f"{PREFILTERED} of {place.corpus} (made from another, or before "
                         "stores kept text digests): some papers' texts may have changed",
                         repair)
    if entry.embedded:  # an imported store's settings are its own (pipeline/encoding/vectors.py)
        check_settings(place, store, entry, model_path)


def check_settings(place: Place, store: Path, entry: ModelEntry,
                   model_path: str | Path | None = None) -> None:
    """Refuse a store whose settings that this version fixes without loading the model (the
    entry, the input format, a multi-vector store's splitter and pooling) differ from what it
    would record now: its rows are not what this version makes (e.g. sentences split by an
    older splitter), or whose model identity differs from the model's loaded from
    `model_path` (its files' digest, known from the stat cache: `changed_identity`). The
    embed stage and every search apply it."""
    encoder = settings_class(entry.kind)
    expected = {"model": entry.describe(), "text_format": text_format(entry),
                **encoder.config_for(entry, optional_columns(place.corpus_dir, encoder))}
    if change := changed_identity(place, store, entry, model_path):  # first: it names it
        raise identity_refusal(place, store, entry, change, model_path)
    stored = read_json(store / MANIFEST, store_repair(store)).get("config", {})
    changed = sorted(key for key, value in expected.items() if stored.get(key) != value)
    if "model" in changed:  # which of the entry's fields: a fingerprint names another object
        made = stored.get("model") or {}
        changed.remove("model")
        changed += sorted(f"model {key}" for key in {*expected["model"], *made}
                          if expected["model"].get(key) != made.get(key))
    if changed == ["model fingerprint"]:  # an object's identity (objects.py): another object
        raise InputError(f"{store} was embedded by another object named {entry.name} (model "
                         f"fingerprint {str(stored['model'].get('fingerprint'))[:12]} -> "
                         f"{str(expected['model'].get('fingerprint'))[:12]}): its vectors are not "
                         "this object's; give this object another name (name=...)")
    if changed:
        raise InputError(f"{store} holds vectors made with other settings ({', '.join(changed)}"
                         " differ from this version's: see its manifest.json): delete that "
                         "folder (or embed into another --index-root), then embed again")


def digest_columns(corpus_dir: Path, encoder) -> list[str]:
    """The fields a stored row is made from: title, abstract, and the encoder's optional
    columns the corpus has (the store's config records how they are joined)."""
    return ["title", "abstract", *optional_columns(corpus_dir, encoder)]


def current_digests(corpus_dir: Path, ids: np.ndarray, columns: list[str]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(ids, text digests) of those of `ids` the prefiltered corpus holds, sorted by id."""
    papers = (pl.scan_parquet(corpus_file(corpus_dir, PREFILTERED))
              .filter(pl.col("corpusid").is_in(pl.Series(ids).implode()))
              .select("corpusid", *columns).sort("corpusid").collect())
    return id_array(papers["corpusid"].to_numpy()), text_digests(papers, columns)


def reconcile(place: Place, store: Path, columns: list[str], inputs: dict[str, str]) -> dict:
    """Under the store's lock, when the corpus's prefiltered.parquet is not the one the
    store was checked against: remove every row whose text digest differs from its paper's
    current text (or that has none: a store from before digests), so that those papers are
    embedded again and their old vectors are never read; then record the file. Papers no
    longer in the corpus keep their rows (checked again when the corpus changes)."""
    path = store / MANIFEST
    counts = {"changed_texts": 0, "rows_without_digest": 0}
    if not path.exists():
        return counts
    info = read_json(path)
    if info.get("inputs") == inputs:
        return counts
    parts, kept, dropped = info["parts"], [], []
    found = [part_digests(store, part) for part in parts]
    wanted = np.unique(np.concatenate([ids for ids, _ in found])) if found else np.empty(0)
    now_ids, now = current_digests(place.corpus_dir, wanted, columns)
    changed_papers: set = set()
    for part, (ids, digests) in zip(parts, found, strict=True):
        at = np.minimum(np.searchsorted(now_ids, ids), max(len(now_ids) - 1, 0))
        present = (now_ids[at] == ids) if len(now_ids) else np.zeros(len(ids), dtype=bool)
        if digests is None:
            stale = np.ones(len(ids), dtype=bool)
            counts["rows_without_digest"] += len(ids)
        else:
            stale = present & (now[at] != digests)
        if not stale.any():
            kept.append(part)
            continue
        changed_papers.update(ids[stale & present].tolist())
        dropped.append(part)
        if not stale.all():
            kept.append(_rewrite_part(store, part, ~stale))
    counts["changed_texts"] = len(changed_papers)
    write_manifest(store, info["config"], inputs, kept, info.get("device", ""))
    for part in dropped:
        if part["file"] not in {p["file"] for p in kept}:
            (store / part["file"]).unlink(missing_ok=True)
    if counts["changed_texts"] or counts["rows_without_digest"]:
        log.info(f"[embed] {store}: {counts['changed_texts']} papers whose text changed since "
                 f"they were embedded, {counts['rows_without_digest']} rows without a text "
                 "digest (an older store): their vectors are removed and embedded again")
    return counts


def _rewrite_part(store: Path, part: dict, keep: np.ndarray) -> dict:
    """The part `part` without the rows not in `keep`, as a new part."""
    table = ipc.open_file(pa.memory_map(str(store / part["file"]))).read_all().filter(
        pa.array(keep))
    ids = id_array(table.column("corpusid").to_numpy())
    name = part_name(ids)
    with atomic_path(store / name) as tmp, ipc.new_file(str(tmp), table.schema) as writer:
        writer.write_table(table)
    return {**part, "file": name, "rows": len(ids), **fingerprint(store / name),
            "min_id": ids[0].item() if ids.dtype.kind in "iu" else ids[0],
            "max_id": ids[-1].item() if ids.dtype.kind in "iu" else ids[-1],
            **({"papers": len(np.unique(ids))} if "papers" in part else {}),
            **({"terms": int(pc.sum(pc.list_value_length(table.column("terms"))).as_py()
                             or 0)} if "terms" in part else {})}  # a sparse part's


def optional_columns(corpus_dir: Path, encoder) -> list[str]:
    """The encoder's optional columns (Encoder.columns) that the prefiltered corpus has."""
    schema = pl.scan_parquet(corpus_file(corpus_dir, PREFILTERED)).collect_schema()
    return [column for column in encoder.columns if column in schema]
