"""The embedding store: sharded Arrow files of paper vectors, one store per (corpus, model).

`indexes/<corpus>/embeddings/<model>/` holds `part-*.arrow` files (columns `corpusid: int64`,
`vector: fixed_size_list<float>[dim]`, rows sorted by corpusid; `corpusid: string` for
collections with string ids) and a manifest listing each part with its checksum. Every pool
of the corpus shares the store: a paper is embedded once per model, and a later pool embeds
only the papers it adds. `--shard i --num-shards n` embeds the missing papers whose
corpusid % n == i (crc32 of a string id), so a SLURM job array splits the work.
A multi-vector store (ASPIRE, `pipeline/encoding/multivector.py`) has one row per sentence: an extra
column `sentence: int16` (0 = the title), rows sorted by (corpusid, sentence).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from pipeline.core.atomic import atomic_path, is_temporary, remove
from pipeline.core.checksums import file_problem, fingerprint
from pipeline.core.current import MISSING, UNREADABLE, stale
from pipeline.core.errors import InputError, OptionError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import record
from pipeline.core.locks import file_lock
from pipeline.core.logs import progress
from pipeline.core.manifests import manifest
from pipeline.core.repair import Repair
from pipeline.corpus.files import TEXT_DIGEST, corpus_file, text_digests
from pipeline.encoding.identity import FOLDER_KINDS, identity_change, model_identity
from pipeline.encoding.objects import known_model
from pipeline.encoding.store import (
    DIGEST,
    DTYPES,
    id_array,
    imported_repair,
    not_stored,
    part_digests,
    part_name,
    repair_store,
    shard_of,
    store_parts,
    store_repair,
    stored_ids,
    vectors_of_texts,
)
from pipeline.encoding.workers import (
    POOLED_KINDS,
    Work,
    check_devices,
    device_label,
    encode_parts,
    release,
    threads_each,
    worker_devices,
)
from pipeline.glossary import split_prompt_tag
from pipeline.layout import (
    MANIFEST,
    PREFILTERED,
    Place,
    coverage_path,
    model_digests_path,
    pool_names,
    query_vectors_path,
    query_vectors_record,
    run_paths,
    store_dir,
    store_dirs,
)
from pipeline.models import (
    API_BATCH,
    API_CONCURRENCY,
    API_DEFAULTS,
    API_URL,
    ENCODERS,
    EncoderKind,
    ModelEntry,
    ServedModel,
    get_model,
)
from pipeline.pools.build import load_pool
from pipeline.pools.queries import own_text

log = logging.getLogger(__name__)


# What a kind outside ENCODERS (an imported store's: pipeline/encoding/vectors.py) is asked:
# no hook of an encoder class
_NO_HOOKS = EncoderKind("")


def encoder_kind(kind: str) -> EncoderKind:
    """The registry entry of `kind`'s encoder (pipeline/models.py, ENCODERS), whose fields say
    which hooks of its class the embed stage asks without importing it."""
    return ENCODERS.get(kind, _NO_HOOKS)


def encoder_class(kind: str):
    """The class that embeds models of `kind` (imported now), checked against its entry."""
    if kind not in ENCODERS:
        raise InputError(f"models of kind {kind!r} are not embedded: no encoder is registered "
                         "for it in pipeline/models.py (ENCODERS)")
    module, _, name = ENCODERS[kind].encoder.partition(":")
    cls = getattr(import_module(module), name)
    _check_hooks(kind, cls)
    return cls


def _check_hooks(kind: str, cls: type) -> None:
    """Refuse an encoder class whose hooks its ENCODERS entry does not say (or says and it
    lacks): they are asked by the entry alone, so an unsaid one would be skipped in silence
    (a served store's endpoint unchecked, a sentence column not in the store's settings)."""
    said, wrong = ENCODERS[kind], []
    if hasattr(cls, "identity_change") != said.own_identity:
        wrong.append(f"own_identity={not said.own_identity}")
    if getattr(cls, "columns", ()) and not said.adds_settings:
        wrong.append("adds_settings=True")
    if wrong:
        raise TypeError(f"the encoder of kind {kind!r} ({said.encoder}) needs "
                        f"{', '.join(wrong)} in its ENCODERS entry (pipeline/models.py)")


class PlainSettings:
    """What the encoder class of a kind without `adds_settings` says of a store's settings:
    nothing beyond the entry (the base Encoder's), known without importing it."""

    columns: tuple[str, ...] = ()

    @classmethod
    def config_for(cls, entry: ModelEntry, columns: list[str]) -> dict:
        return {}


def settings_class(kind: str):
    """The class whose `config_for` and `columns` give a store's settings for `kind`."""
    return encoder_class(kind) if encoder_kind(kind).adds_settings else PlainSettings


def pool_ids(corpus_dir: Path, pool: str) -> np.ndarray:
    """Ids a dense search of the pool needs: candidates and queries (queries that are texts
    of their own, a collection's, are encoded when searched: `encode_texts`; those that name
    the paper they are part of, CSFCube's facet queries, need that paper's vectors too)."""
    queries, candidates, _ = load_pool(corpus_dir, pool)
    if own_text(queries) and "paper" not in queries.columns:
        return np.unique(id_array(candidates["corpusid"].to_numpy()))
    if own_text(queries):
        return np.union1d(id_array(candidates["corpusid"].to_numpy()),
                          id_array(queries["paper"].to_numpy()))
    return np.union1d(id_array(candidates["corpusid"].to_numpy()),
                      id_array(queries["corpusid"].to_numpy()))


def query_cache(store: Path, entry: ModelEntry, texts: pl.DataFrame) -> Path:
    """Where the vectors of query texts are kept beside the store: `queries/<sha>.npy`, keyed
    by the texts, the store's settings and the user's query prompt (a run made from them
    records it among its inputs)."""
    config = read_json(store / MANIFEST)["config"] if (store / MANIFEST).exists() \
        else {"model": entry.describe()}
    if entry.query_prompt is not None or split_prompt_tag(entry.name)[1]:  # QUERY_PROMPT's
        config = {**config, "query_prompt": entry.query_form}  # refused: a tag, no prompt
    key = hashlib.sha256(repr((config, texts.select("title", "abstract").rows())).encode())
    return query_vectors_path(store, key.hexdigest()[:24])


def encode_texts(store: Path, entry: ModelEntry, texts: pl.DataFrame,
                 model_path: str | None = None) -> np.ndarray:
    """Vectors of query texts (corpusid, title, abstract; in that order) that are not the
    papers' stored ones: a collection's queries, perturbed queries, and the query papers of a
    model that encodes queries in their own form (E5's "query: "). Kept beside the store
    (`query_cache`), so a second search encodes nothing; a damaged one is encoded again."""
    cache = query_cache(store, entry, texts)
    record = query_vectors_record(cache)  # its checksum: a damaged cache is encoded again
    if cache.exists() and record.exists():
        try:
            if file_problem(cache, read_json(record)["outputs"][cache.name], deep=False) is None:
                return np.load(cache)
        except (InputError, KeyError):
            pass
        log.warning(f"[embed] {cache} is damaged: the queries are encoded again")
    encoder = encoder_class(entry.kind)(entry, model_path=model_path)
    _check_loaded(store, encoder, model_path)
    # an encoder told queries apart (an MTEB object: the query prompt type) has its own call
    encode = getattr(encoder, "encode_queries", encoder.encode)
    vectors, _ = encode([encoder.format(t, a, query=True) for t, a in
                         texts.select("title", "abstract").iter_rows()])
    cache.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(cache) as tmp, tmp.open("wb") as handle:
        np.save(handle, vectors)
    prompt = {} if entry.query_prompt is None else {"query_prompt": entry.query_prompt}
    write_json(manifest("query-vectors", {"model": entry.name, **prompt}, queries=texts.height,
                        outputs={cache.name: fingerprint(cache)}), record)
    return vectors


def loaded_settings(encoder) -> dict:
    """What a loaded encoder adds to its store's config (Encoder.settings: an st: folder's
    configuration and prompts, last-token pooling's EOS); an object's encoder adds nothing."""
    return getattr(encoder, "settings", dict)()


def _check_loaded(store: Path, encoder, model_path: str | Path | None = None) -> None:
    """Refuse to encode queries with a model whose settings known once loaded (an st:
    folder's configuration and prompts: Encoder.settings) differ from those the store's
    papers were embedded with: the queries would be another model's vectors."""
    if not (store / MANIFEST).exists():
        return
    if change := probe_change(store, encoder):  # another model behind an endpoint
        raise InputError(f"{store} was embedded by another model named {encoder.entry.name} "
                         f"({change}): the queries would be its vectors; give this model "
                         "another name, or embed again with REPLACE=1 (removes that store "
                         "and the runs made from it)",
                         replace_repair(store.parent.parent.name, encoder.entry, model_path))
    made = read_json(store / MANIFEST, store_repair(store)).get("config", {})
    changed = sorted(key for key, value in loaded_settings(encoder).items()
                     if made.get(key) != value)
    if changed:
        raise InputError(f"{store} holds vectors made with other settings ({', '.join(changed)} "
                         "differ from the model's now; see its manifest.json): delete it or "
                         "embed into another --index-root")


def missing_ids(corpus_dir: Path, store: Path, pools: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(needed, missing): sorted ids of the pools' papers, and those not yet in the store.
    Shard i of n embeds the missing ids with id % n == i (embed; slurm.missing_per_shard)."""
    needed = np.unique(np.concatenate([pool_ids(corpus_dir, p) for p in pools]))
    return needed, not_stored(store, needed)


def text_format(entry: ModelEntry) -> str:
    """How a paper becomes the model's input, as words (recorded in the store's config)."""
    joined = {"sep": "{title}{sep_token}{abstract}",
              "sep-nonempty": "{title} {sep_token} {abstract} (the non-empty ones)",
              "space": "{title} {abstract}, stripped"}[entry.join]
    queries = "" if entry.query_prefix is None else f"; queries: {entry.query_prefix}{joined}"
    return f"{entry.text_prefix}{joined}{queries}"


def _store_config(entry: ModelEntry, encoder, dtype: str, columns: list[str] = (),
                  identity: dict | None = None) -> dict:
    """The settings a store's vectors were made with (`columns`: the encoder's optional
    columns the corpus has; `identity`: the model's files, identity.model_identity, where it
    has a folder)."""
    config = {"model": entry.describe(), "max_length": encoder.max_length, "dtype": dtype,
              "dim": encoder.dim,
              "text_format": text_format(entry)}
    added = encoder.config_for(entry, list(columns))  # multi-vector: what a row is
    if added and not encoder_kind(entry.kind).adds_settings:  # check_settings would not ask
        raise TypeError(f"the encoder of kind {entry.kind!r} adds to a store's settings: it "
                        "needs adds_settings=True in its ENCODERS entry (pipeline/models.py)")
    return {**config, **added, **loaded_settings(encoder),
            **({MODEL_IDENTITY: identity} if identity else {})}


MODEL_IDENTITY = "model_identity"  # the store config's key of the model's identity
LEGACY_CONFIG_DIGEST = "st_config"  # what st: stores recorded before: their JSON files only


def identity_of(place: Place, entry: ModelEntry, model_path: str | Path | None) -> dict:
    """The identity of the model `entry` loaded from `model_path` (identity.model_identity),
    each file hashed only when its stat changed since the data folder's stat cache saw it."""
    return model_identity(entry, model_path, cache=model_digests_path(place.index_root))


def changed_identity(place: Place, store: Path, entry: ModelEntry,
                     model_path: str | Path | None) -> str | None:
    """What differs between the model identity the store recorded and the model's now (in
    words), None when they agree or either is unknown: a store from before identities were
    recorded (adopted at its next embed: `_adopt_identity`), a hub model not in the cache."""
    path = store / MANIFEST
    if not path.exists() or not entry.embedded:
        return None
    config = read_json(path, store_repair(store)).get("config", {})
    if encoder_kind(entry.kind).own_identity:  # a served model: its endpoint's URL (served.py)
        return encoder_class(entry.kind).identity_change(config, entry)
    made = config.get(MODEL_IDENTITY)
    if not made:
        return None
    return identity_change(made, identity_of(place, entry, model_path))


def recorded_model_change(store: Path, index_root: Path) -> str | None:
    """What changed in the model a store was embedded by, since, as its manifest alone tells:
    its model identity now, from the MODEL_PATH the manifest records, else the model's package
    or hub cache (the stat cache, nothing loaded). None when nothing did, or it cannot be said
    (no identity recorded, a model of the user's, a folder gone: said in the log). What verify
    calls STALE and what collect and the report leave out."""
    try:
        info = read_json(store / MANIFEST)
        made = info.get("config", {}).get(MODEL_IDENTITY)
        if not made or not known_model(store.name):
            return None
        now = model_identity(get_model(store.name), info.get(MODEL_PATH_KEY),
                             cache=model_digests_path(index_root), save=False)
    except (InputError, OSError) as exc:
        log.info(f"[check] {store}: its model cannot be checked now ({exc}); not a problem")
        return None
    return identity_change(made, now)


def probe_change(store: Path, encoder) -> str | None:
    """What differs between the model that embedded a store and the loaded one as only its
    answers tell (a served model's probe vectors: served.py), in words; None for a new store
    or an encoder that has nothing to compare."""
    check = getattr(encoder, "probe_change", None)
    if check is None or not (store / MANIFEST).exists():
        return None
    return check(read_json(store / MANIFEST, store_repair(store)).get("config", {}))


def model_variables(entry: ModelEntry,
                    model_path: str | Path | None) -> tuple[tuple[str, str], ...]:
    """The make variables, beyond MODEL, that load `entry` as this run did, for a repair's
    command to run as printed: MODEL_PATH where given; a served model's EMBEDDINGS_URL (as
    recorded: models.endpoint_url refuses one holding a secret) and its request settings
    given otherwise than their defaults (never the key: OPENAI_API_KEY stays in the
    environment); a query prompt's QUERY_PROMPT (a line break written \\n, as make takes it)."""
    found = [] if model_path is None else [("MODEL_PATH", str(model_path))]
    if isinstance(entry, ServedModel) and entry.endpoint:
        sizes = {API_BATCH: entry.batch_size, API_CONCURRENCY: entry.concurrency}
        found += [(API_URL, entry.endpoint), *((name, str(size)) for name, size in sizes.items()
                                              if size != API_DEFAULTS[name])]
    if entry.query_prompt:
        found.append(("QUERY_PROMPT", entry.query_prompt.replace("\n", "\\n")))
    return tuple(found)


def replace_repair(corpus: str, entry: ModelEntry,
                   model_path: str | Path | None) -> Repair:
    """`make eval ... REPLACE=1` for `entry` loaded as this run did (`model_variables`)."""
    return Repair("eval", corpus, entry.name, (*model_variables(entry, model_path),
                                               ("REPLACE", "1")))


def identity_refusal(place: Place, store: Path, entry: ModelEntry, change: str,
                     model_path: str | Path | None, how: str = "embed again with REPLACE=1",
                     repair: Repair | None = None) -> InputError:
    """The one line refusing a store embedded from another model under the same name; `how`
    and `repair` say the repair in the caller's words (default make's: `make eval ...
    REPLACE=1` with the variables the model needs, `replace_repair`; the Python API's
    replace=True, a SLURM array's EXECUTOR=slurm)."""
    return InputError(
        f"{store} was embedded by another model named {entry.name} ({change}): its vectors "
        f"are not this model's; give this model another name, or {how} "
        "(removes that store and the runs made from it)",
        repair or replace_repair(place.corpus, entry, model_path))


def check_identity(place: Place, entry: ModelEntry, model_path: str | Path | None = None,
                   replace: bool = False, **words: Any) -> dict[str, int]:
    """Refuse the model's store when it was embedded by another model (another identity,
    under the same name), before any run made from it is kept as current; with `replace`
    (REPLACE=1) remove that store and the runs made from it instead, so that they are made
    again. What was removed. `words`: the refusal's `how` and `repair` (identity_refusal)."""
    store = store_dir(place.index_root, place.corpus, entry.name)
    change = changed_identity(place, store, entry, model_path)
    if change is None:
        return {}
    if not replace:
        raise identity_refusal(place, store, entry, change, model_path, **words)
    with file_lock(store):
        return _replace_store(place, store, entry, change)


def _replace_store(place: Place, store: Path, entry: ModelEntry, change: str) -> dict[str, int]:
    """REPLACE=1 on a store of another model: remove the runs that searched it (their
    evaluations with them; what search wrote, never an imported run) and the store, which
    embed wrote, so that both are made again with the model as it is now."""
    label = place.roots.label(store) + "/"
    removed = 0
    for manifest_path in sorted(place.runs_dir.glob(f"*/*.{MANIFEST}")):
        try:
            info = read_json(manifest_path)
        except InputError:
            continue
        if info.get("stage") == "search" and any(
                str(name).startswith(label) for name in info.get("inputs", {})):
            stem = manifest_path.name.removesuffix(f".{MANIFEST}")
            paths = run_paths(place.runs_root, place.corpus, manifest_path.parent.name, stem)
            for path in (paths.manifest, *paths):  # the manifest that vouches first
                path.unlink(missing_ok=True)
            removed += 1
    remove(store)
    log.info(f"[embed] REPLACE=1: {store} was embedded by another model named {entry.name} "
             f"({change}): removed with the {removed} runs made from it, to be made again")
    return {"replaced_store": 1, "runs_removed": removed}


def _adopt_identity(place: Place, store: Path, entry: ModelEntry,
                    model_path: str | Path | None) -> None:
    """A store made before stores recorded their model's identity takes the model's identity
    now, once, with a line saying so (its vectors are trusted to be this model's: REPLACE=1
    embeds them again); its former digest of the JSON files alone is dropped."""
    info = read_json(store / MANIFEST, store_repair(store))
    config = info.get("config", {})
    if MODEL_IDENTITY in config or config.get("imported") is not None:
        return
    identity = identity_of(place, entry, model_path)
    if not identity:
        return
    config = {k: v for k, v in config.items() if k != LEGACY_CONFIG_DIGEST}
    write_json({**info, "config": {**config, MODEL_IDENTITY: identity}}, store / MANIFEST)
    log.info(f"[embed] {store} recorded no model identity (made before they were): it takes "
             f"the model's now, weights digest {identity['sha256'][:8]}... (if its vectors "
             "were made from other weights, embed again with REPLACE=1)")


def _check_config(store: Path, config: dict) -> None:
    """Refuse to add vectors to a store made with another config (a new store takes any)."""
    problem = stale(store / MANIFEST, config, key="config")
    if problem is None or problem.check == MISSING:
        return
    if problem.check == UNREADABLE:
        raise InputError(problem.reason, store_repair(store))
    raise InputError(f"{store} holds vectors made with other settings ({problem.reason}; see "
                     "its manifest.json): delete it or embed into another --index-root")


def _write_part(store: Path, ids: np.ndarray, vectors: np.ndarray, dtype: str,
                digests: np.ndarray | None) -> dict:
    """One part: the papers `ids` (sorted, distinct), their vectors and text digests (each
    row keeps the digest of the text it was made from)."""
    columns, counts = {}, {}
    papers = ids
    if not isinstance(vectors, np.ndarray):  # multivector.SentenceVectors: a row per sentence
        ids, columns, vectors, counts = vectors.part(ids)
    order = np.argsort(ids, kind="stable")  # stable: a paper's sentences stay in order
    ids, vectors = ids[order], vectors[order]
    name = part_name(ids)
    stored = _as_stored(vectors, dtype, ids)
    flat = pa.array(stored.ravel())
    table = pa.table({
        "corpusid": pa.array(ids, type=pa.int64() if ids.dtype.kind in "iu" else pa.string()),
        **{column: pa.array(values[order]) for column, values in columns.items()},
        "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
        **({} if digests is None else
           {DIGEST: pa.array(digests[np.searchsorted(papers, ids)], type=pa.uint64())}),
    })
    with atomic_path(store / name) as tmp, ipc.new_file(str(tmp), table.schema) as writer:
        writer.write_table(table)
    return {"file": name, "rows": len(ids), **fingerprint(store / name),
            "min_id": ids[0].item() if ids.dtype.kind in "iu" else ids[0],
            "max_id": ids[-1].item() if ids.dtype.kind in "iu" else ids[-1], **counts}


def _as_stored(vectors: np.ndarray, dtype: str, ids: np.ndarray) -> np.ndarray:
    """The vectors in the store's dtype, each finite there: a value beyond float16's 65504 (or
    float32's 3.4e38) would be stored as infinite and its paper would drop out of every search
    unseen, so the part is refused instead, naming a paper."""
    kind = np.float16 if dtype == "float16" else np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        stored = vectors.astype(kind, copy=False)
    bad = ~np.isfinite(stored).all(axis=1)
    if bad.any():
        raise InputError(f"{int(bad.sum())} of {len(stored)} vectors are NaN or infinite as "
                         f"{dtype}, the store's type (beyond ±{float(np.finfo(kind).max):.6g}; "
                         f"e.g. paper {ids[int(np.argmax(bad))]}): nothing of them was stored; "
                         "embed with --dtype float32 or fix the model")
    return stored


def mark_covered(corpus_dir: Path, store: Path, pools: list[str]) -> list[str]:
    """Write `pools/<pool>.json` for each pool whose papers are all stored; return them."""
    have = stored_ids(store)
    covered = []
    for pool in pools:
        needed = pool_ids(corpus_dir, pool)
        if np.isin(needed, have).all():
            marker = coverage_path(store, pool)
            record = {"pool": pool, "papers": len(needed),
                      "parts": [p["file"] for p in store_parts(store)]}
            if not marker.exists() or read_json(marker) != record:  # keep mtime when unchanged
                write_json(record, marker)
            covered.append(pool)
    return covered


def add_part(store: Path, config: dict, ids: np.ndarray, vectors: np.ndarray, device: str,
              *, inputs: dict[str, str] | None = None, digests: np.ndarray | None = None
              ) -> None:
    """Write one part and list it in the store manifest (under the store lock). Without
    `inputs` and `digests` (a store assembled by hand): rows with no text digest, a store that
    a search refuses until `embed` checks it."""
    with file_lock(store):
        _check_config(store, config)
        if (inputs is not None and (store / MANIFEST).exists()
                and read_json(store / MANIFEST).get("inputs") != inputs):
            raise InputError(f"{store}: its corpus's prefiltered.parquet changed while this "
                             "embed ran", store_repair(store))
        part = _write_part(store, ids, vectors, config["dtype"], digests)
        parts = [p for p in store_parts(store) if p["file"] != part["file"]] + [part]
        _write_manifest(store, config, inputs, parts, device)


def _write_manifest(store: Path, config: dict, inputs: dict[str, str] | None, parts: list[dict],
                    device: str) -> None:
    versions = {lib: version(lib) for lib in ("torch", "transformers", "pyarrow")}
    source = model_path_of(store)  # kept: where the model identity is checked from
    write_json(manifest("embed", {"model": config["model"]["name"]}, config=config,
                        **({} if inputs is None else {"inputs": inputs}),
                        text_digest=TEXT_DIGEST, parts=parts,
                        versions=versions, device=device,
                        **({} if source is None else {MODEL_PATH_KEY: source})),
               store / MANIFEST)


MODEL_PATH_KEY = "model_path"  # a store manifest's MODEL_PATH, as given: verify's folder


def model_path_of(store: Path) -> str | None:
    """The MODEL_PATH a store's manifest records (None: none, or no manifest)."""
    try:
        return read_json(store / MANIFEST).get(MODEL_PATH_KEY)
    except InputError:
        return None


def _record_model_path(store: Path, model_path: str | Path | None) -> None:
    """Record in the store's manifest the MODEL_PATH it was last embedded or checked with,
    as given (a symlink stays one), so that `make verify` computes the model's identity from
    the same folder; its vectors are unchanged, its manifest rewritten only when it differs."""
    if not (store / MANIFEST).exists():
        return
    info = read_json(store / MANIFEST, store_repair(store))
    given = None if model_path is None else os.path.abspath(model_path)
    if info.get(MODEL_PATH_KEY) != given and "imported" not in info.get("config", {}):
        info = {k: v for k, v in info.items() if k != MODEL_PATH_KEY}
        write_json({**info, **({} if given is None else {MODEL_PATH_KEY: given})},
                   store / MANIFEST)


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
                **encoder.config_for(entry, _optional_columns(place.corpus_dir, encoder))}
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
    return ["title", "abstract", *_optional_columns(corpus_dir, encoder)]


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
    _write_manifest(store, info["config"], inputs, kept, info.get("device", ""))
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
            **({"papers": len(np.unique(ids))} if "papers" in part else {})}


def _optional_columns(corpus_dir: Path, encoder) -> list[str]:
    """The encoder's optional columns (Encoder.columns) that the prefiltered corpus has."""
    schema = pl.scan_parquet(corpus_file(corpus_dir, PREFILTERED)).collect_schema()
    return [column for column in encoder.columns if column in schema]


def _tokenized(corpus_dir: Path, encoder, chunk: np.ndarray, columns: list[str]
               ) -> tuple[list[list[int]], np.ndarray]:
    """Token ids of the papers `chunk` (sorted ids), read from the prefiltered corpus, with
    the optional `columns` given to the encoder's format by name, and their text digests
    (computed from the very rows encoded)."""
    papers = (pl.scan_parquet(corpus_file(corpus_dir, PREFILTERED))
              .filter(pl.col("corpusid").is_in(pl.Series(chunk).implode()))
              .select("corpusid", "title", "abstract", *columns).sort("corpusid").collect())
    if papers.height != len(chunk):
        raise InputError(f"{len(chunk) - papers.height} pool papers are missing from "
                         f"{corpus_dir}/prefiltered.parquet: rebuild the pools")
    digests = text_digests(papers, ["title", "abstract", *columns])
    return encoder.tokenize([encoder.format(row.pop("title"), row.pop("abstract"), **row)
                             for row in papers.drop("corpusid").iter_rows(named=True)]), digests


# What a store's config records that changes no vector: a store whose config differs from this
# embed's in these only lends its vectors (`_reuse`); everything else (the entry's fields, dtype,
# max_length, text format, the loaded settings, the model's identity) must be equal
NOT_VECTOR = {"model": ("name", "notes")}
# The kinds whose vectors are reused across the stores of a DATA: one vector per paper, made
# by this process's encoder from the config alone (multi-vector rows, served endpoints and
# objects are embedded by each store itself)
REUSED_KINDS = ("dense", "st")


def vector_identity(config: dict) -> dict:
    """A store's config without what changes no vector (NOT_VECTOR): two stores of equal
    identity hold the same vector for the same text."""
    out = dict(config)
    for key, fields in NOT_VECTOR.items():
        if isinstance(out.get(key), dict):
            out[key] = {k: v for k, v in out[key].items() if k not in fields}
    return out


def lenders(index_root: Path, store: Path, config: dict) -> list[Path]:
    """The other stores of the index root (the same DATA) whose vectors this store can take:
    the same vector identity; a store being made (a temporary) or whose manifest is unreadable
    lends nothing."""
    identity, found = vector_identity(config), []
    for other in store_dirs(index_root):
        if other == store or is_temporary(other) or is_temporary(other.parent.parent):
            continue
        try:
            made = read_json(other / MANIFEST).get("config") if (other / MANIFEST).exists() \
                else None
        except InputError:
            continue
        if isinstance(made, dict) and vector_identity(made) == identity:
            found.append(other)
    return found


def _reuse(place: Place, store: Path, config: dict, missing: np.ndarray, columns: list[str],
           inputs: dict[str, str], part_size: int) -> tuple[np.ndarray, int]:
    """Copy into `store` the vectors that other stores of the same DATA and vector identity
    hold for the texts the papers `missing` have now (matched by text digest alone, whatever
    the paper's id there: a vector depends only on the text and the model), in parts of at
    most `part_size` papers; a text is embedded once per DATA. Returns (ids still to embed,
    papers copied). Read a part at a time: memory is the digests and one part's vectors."""
    sources = lenders(place.index_root, store, config) if len(missing) else []
    if not sources:
        return missing, 0
    now_ids, now = current_digests(place.corpus_dir, missing, ["title", "abstract", *columns])
    wanted, paper_text = np.unique(now, return_inverse=True)
    by_text = np.argsort(paper_text, kind="stable")  # papers grouped by their text
    starts = np.searchsorted(paper_text[by_text], np.arange(len(wanted)))
    counts = np.diff(np.append(starts, len(by_text)))
    taken = np.zeros(len(wanted), dtype=bool)
    copied = _Copies(store, config, inputs, part_size)
    for source in sources:
        for positions, vectors in vectors_of_texts(source, wanted, taken):
            n = counts[positions]  # every paper of each text takes its vector
            papers = by_text[np.repeat(starts[positions] - np.cumsum(n) + n, n)
                             + np.arange(n.sum())]
            copied.add(now_ids[papers], np.repeat(vectors, n, axis=0), now[papers], source)
    copied.flush()
    have = now_ids[taken[paper_text]]
    return np.setdiff1d(missing, have), len(have)


class _Copies:
    """Vectors copied from other stores (`_reuse`), written as parts of at most `part_size`
    papers, each part's manifest device naming the stores it was copied from."""

    def __init__(self, store: Path, config: dict, inputs: dict[str, str], part_size: int):
        self.store, self.config, self.inputs, self.part_size = store, config, inputs, part_size
        self.held: list[tuple[np.ndarray, np.ndarray, np.ndarray, Path]] = []

    def add(self, ids: np.ndarray, vectors: np.ndarray, digests: np.ndarray,
            source: Path) -> None:
        self.held.append((ids, vectors, digests, source))
        while sum(len(held[0]) for held in self.held) >= self.part_size:
            self.flush(self.part_size)

    def flush(self, size: int | None = None) -> None:
        """Write the first `size` papers held (default: all) as one part."""
        if not self.held:
            return
        sources = sorted({str(held[3]) for held in self.held})
        ids, vectors, digests = (np.concatenate(c) for c in list(zip(*self.held, strict=True))[:3])
        size = len(ids) if size is None else size
        rest = self.held[-1][3]
        self.held = [(ids[size:], vectors[size:], digests[size:], rest)] if len(ids) > size \
            else []
        order = np.argsort(ids[:size], kind="stable")
        add_part(self.store, self.config, ids[:size][order], vectors[:size][order],
                 f"copied from {', '.join(sources)}", inputs=self.inputs,
                 digests=digests[:size][order])


def embed(place: Place, entry: ModelEntry, pools: list[str] | None = None, shard: int = 0,
          num_shards: int = 1, batch_size: int | None = None, dtype: str = "float32",
          model_path: str | None = None, device: str | None = None, part_size: int = 4096,
          token_budget: int | None = None, replace: bool = False) -> dict:
    """Embed the papers of `pools` (default: every pool of the corpus) missing from the store.

    Vectors are written in parts of `part_size` papers (a checkpoint: a kill loses at most one
    part of work) and a rerun embeds only what is missing. Parts are cut from the sorted list
    of missing ids, so a resumed run encodes the same batches as an uninterrupted one. Batches
    hold up to `token_budget` padded tokens (default per device) and `batch_size` papers.
    A store embedded by another model of the same name is refused, or with `replace`
    (REPLACE=1) removed with the runs made from it and embedded again (`check_identity`; a
    served model's endpoint is then asked its probes even when no paper is missing).
    """
    _check_arguments(shard, num_shards, dtype, part_size, batch_size, token_budget)
    pools = _pools(place, pools)
    store = store_dir(place.index_root, place.corpus, entry.name)
    start = time.perf_counter()
    inputs = store_inputs(place)
    checked = _check_store(place, store, entry, inputs, model_path, replace)
    needed, missing = missing_ids(place.corpus_dir, store, pools)
    missing = missing[shard_of(missing, num_shards) == shard]
    info = {"model": entry.name, "pools": pools, "needed": len(needed), "shard": shard,
            "num_shards": num_shards, **checked}
    reused = 0
    # REPLACE=1 asks a served model's endpoint (its probes) even with nothing missing: only
    # its answers tell another model behind the same URL and name
    asked = replace and encoder_kind(entry.kind).own_identity and (store / MANIFEST).exists()
    devices: list[str] = []  # several: a worker process each (workers.py); none: this one
    if len(missing) or asked:
        if entry.kind in POOLED_KINDS:  # a local model: DEVICE=cuda on every visible GPU
            devices = worker_devices(device)
        # the kind's encoder (multi-vector, ASPIRE: one vector per sentence, the same loop);
        # with workers, this process's copy gives the store's settings (on the first device)
        encoder = encoder_class(entry.kind)(entry, model_path=model_path,
                                            device=devices[0] if devices else device)
        if change := probe_change(store, encoder):  # another model behind an endpoint
            if not replace:
                raise identity_refusal(place, store, entry, change, model_path)
            with file_lock(store):
                info.update(_replace_store(place, store, entry, change))
            missing = missing_ids(place.corpus_dir, store, pools)[1]
            missing = missing[shard_of(missing, num_shards) == shard]
    if len(missing):
        # the store's config, which vectors of other stores must match to be reused, and a
        # store made with another refused before anything is added
        columns = _optional_columns(place.corpus_dir, encoder)
        config = _store_config(entry, encoder, dtype, columns,
                               identity_of(place, entry, model_path))
        _check_config(store, config)
        if entry.kind in REUSED_KINDS:
            missing, reused = _reuse(place, store, config, missing, columns, inputs, part_size)
        if len(missing):
            info.update(_encode_missing(place, store, encoder, missing, columns, config, inputs,
                                        part_size=part_size, batch_size=batch_size,
                                        token_budget=token_budget, devices=devices,
                                        model_path=model_path))
    info.update(embedded=len(missing), reused=reused)
    with file_lock(store):
        info["covered_pools"] = mark_covered(place.corpus_dir, store, pools)
        if entry.embedded and entry.kind in FOLDER_KINDS:
            _record_model_path(store, model_path)
    info["seconds"] = round(time.perf_counter() - start, 2)
    rates = "".join(f" {k}={info[k]}" for k in ("papers_per_s", "gpu_busy") if k in info)
    log.info(f"[embed] {entry.name} on {place.corpus}: embedded={len(missing)} reused={reused}"
             f"{rates} ({len(needed)} papers in the pools)")
    return info


def embed_shards(place: Place, model: str, pools: list[str], shards: list[int] | range,
                 num_shards: int, times: Path | None = None, **store: Any) -> None:
    """`embed` each of `shards` in turn (what a job array's tasks do), each timed into `times`.
    A device asked for and absent is refused up front, even when every paper is stored."""
    from pipeline.core.timing import timed

    if store.get("device"):  # torch is imported only where a device is asked for
        check_devices(store["device"])
    for shard in shards:
        with timed("embed", times, model=model, shard=shard) as info:
            out = embed(place, get_model(model), pools, shard, num_shards, **store)
            info.update({k: out[k] for k in ("embedded", "reused", "papers_per_s", "gpu_busy")
                         if k in out})


def _check_arguments(shard: int, num_shards: int, dtype: str, part_size: int,
                     batch_size: int | None, token_budget: int | None) -> None:
    """Refuse embed's arguments before anything is read or written. The command line checks
    most of them first (pipeline/cli: --part-size, --batch-size, --dtype, --num-shards), so
    these lines name the keywords; a shard beyond SHARDS is checked here only, a refusal each
    door words (OptionError)."""
    sizes = {"part_size": part_size, "batch_size": batch_size, "token_budget": token_budget}
    small = [f"{name}={value}" for name, value in sizes.items() if value is not None and value < 1]
    if small:
        raise InputError(f"{', '.join(small)}: give a whole number >= 1")
    if not 0 <= shard < num_shards:
        raise OptionError("{SHARD=} {SHARDS=}: give a shard from 0 to " + str(num_shards - 1),
                          {"SHARD": shard, "SHARDS": num_shards})
    if dtype not in DTYPES:
        raise InputError(f"dtype={dtype!r}: use {' or '.join(map(repr, DTYPES))}")


def _pools(place: Place, pools: list[str] | None) -> list[str]:
    """The pools asked for, else every pool of the corpus; none at all is one line."""
    pools = pools or pool_names(place.corpus_dir)
    if not pools:
        raise InputError(f"no pools under {place.corpus_dir}/pools: build one",
                         Repair("pool", place.corpus))
    return pools


def _check_store(place: Place, store: Path, entry: ModelEntry, inputs: dict[str, str],
                 model_path: str | Path | None = None, replace: bool = False
                 ) -> dict[str, int]:
    """Under the store's lock, before anything is added to it: its damaged and orphan parts
    removed (repair_store), a store of another model removed with its runs where `replace`
    says so (`_replace_store`), the model's identity recorded in a store from before
    identities (`_adopt_identity`), its settings checked against this version's
    (check_settings), the rows of texts changed since they were embedded removed
    (reconcile). Their counts; a store not made yet counts none."""
    repaired = {"damaged_parts": 0, "orphan_parts": 0}
    texts = {"changed_texts": 0, "rows_without_digest": 0}
    if store.exists():
        with file_lock(store):
            repaired = repair_store(store)
            change = changed_identity(place, store, entry, model_path)
            if change and replace:
                return {**repaired, **texts, **_replace_store(place, store, entry, change)}
            if (store / MANIFEST).exists():
                _adopt_identity(place, store, entry, model_path)
                check_settings(place, store, entry, model_path)
            texts = reconcile(place, store,
                              digest_columns(place.corpus_dir, settings_class(entry.kind)),
                              inputs)
    return {**repaired, **texts}


def _encode_missing(place: Place, store: Path, encoder, missing: np.ndarray, columns: list[str],
                    config: dict, inputs: dict[str, str], *, part_size: int,
                    batch_size: int | None, token_budget: int | None,
                    devices: list[str] | None = None, model_path: str | None = None) -> dict:
    """Encode the papers `missing` (sorted ids) into parts of `part_size` papers, in this
    process, or with several `devices` on a worker process each (workers.py: the same parts,
    written in the same order); the throughput and the encoder's counts."""
    from pipeline.encoding.encoders import MAX_BATCH, default_budget

    budget = token_budget or default_budget(encoder.device)
    chunks = [missing[lo : lo + part_size] for lo in range(0, len(missing), part_size)]
    devices = list(devices or [])[: len(chunks)]  # a worker per part at most
    label = device_label(devices) if devices else str(encoder.device)
    parts = _Parts(place.corpus_dir, store, encoder, columns, config, inputs, label)
    if len(devices) > 1:
        tokens, seconds, counts, started = _on_workers(parts, devices, chunks, budget,
                                                       batch_size or MAX_BATCH, model_path)
        more = {"devices": devices, "workers_start_s": started}
    else:  # one part: this process's copy encodes it, on the first device, as one worker would
        tokens, seconds = parts.encode(chunks, budget, batch_size or MAX_BATCH)
        counts = dict(getattr(encoder, "counts", {}))  # multi-vector: sentences, truncated
        more = {"devices": [str(encoder.device)]}
    return {"papers_per_s": round(len(missing) / seconds, 2),
            "tokens_per_s": round(tokens / seconds, 1), "device": label, **more,
            "token_budget": budget, "dtype_compute": encoder.compute_dtype, **counts}


def _on_workers(parts: _Parts, devices: list[str], chunks: list[np.ndarray], budget: int,
                max_batch: int, model_path: str | None) -> tuple[int, float, dict, float]:
    """`chunks` encoded by a worker process per device (workers.encode_parts), each part
    written here in order (`_Parts.write`), with a progress line across the workers: the
    tokens, the seconds from the first worker ready to the last part, the encoder's counts
    summed, the seconds the workers took to start."""
    encoder = parts.encoder
    work = Work(type(encoder), encoder.entry, model_path, _tokenized, parts.corpus_dir,
                parts.columns, budget, max_batch, threads_each(len(devices)))
    release(encoder)  # its GPU memory: the workers encode
    with progress(sum(map(len, chunks)), "embed") as bar:
        done = encode_parts(work, devices, chunks,
                            lambda k, vectors, digests: parts.write(chunks[k], vectors, digests),
                            bar)
    return done.tokens, done.seconds, done.counts, done.start_seconds


@dataclass(frozen=True)
class _Parts:
    """The encode -> write pipeline of one embed: each part's papers read and tokenized from
    the prefiltered corpus (`read`), encoded by the model, written to the store with their
    text digests (`write`, add_part)."""

    corpus_dir: Path
    store: Path
    encoder: Any
    columns: list[str]  # the encoder's optional columns the corpus has
    config: dict  # the store's settings (_store_config)
    inputs: dict[str, str]  # what the rows are checked against (store_inputs)
    device: str | None = None  # what the manifest records (workers: their kind), else the encoder's

    def read(self, chunk: np.ndarray) -> tuple[list[list[int]], np.ndarray]:
        return _tokenized(self.corpus_dir, self.encoder, chunk, self.columns)

    def write(self, chunk: np.ndarray, vectors: np.ndarray, digests: np.ndarray) -> None:
        add_part(self.store, self.config, chunk, vectors, self.device or str(self.encoder.device),
                 inputs=self.inputs, digests=digests)

    def encode(self, chunks: list[np.ndarray], budget: int, batch_size: int
               ) -> tuple[int, float]:
        """Encode and write every chunk (one part each), in order, with a progress line:
        reading and tokenizing the next part and writing the last one overlap with the model
        (a thread each, one part in flight each way; a writer's error surfaces at the next
        part). Returns the tokens encoded and the seconds the model took."""
        n_tokens, seconds = 0, 0.0
        with (ThreadPoolExecutor(1) as reader, ThreadPoolExecutor(1) as writer,
              progress(sum(map(len, chunks)), "embed") as bar):
            upcoming = reader.submit(self.read, chunks[0])
            written = None
            for k, chunk in enumerate(chunks):
                ids, digests = upcoming.result()
                if k + 1 < len(chunks):
                    upcoming = reader.submit(self.read, chunks[k + 1])
                t0 = time.perf_counter()
                vectors, tokens = self.encoder.encode_ids(ids, budget, batch_size, bar)
                seconds += time.perf_counter() - t0
                n_tokens += tokens
                if written:
                    written.result()
                written = writer.submit(self.write, chunk, vectors, digests)
            written.result()
        return n_tokens, seconds


def store_options(batch_size: int | None, dtype: str, part_size: int | None,
                  model_path: str | os.PathLike | None, device: str | None, replace: bool) -> dict:
    """The store's options as embed takes them, a part size only where given (each store has its own
    default)."""
    return {"batch_size": batch_size, "dtype": dtype, "model_path": model_path,
            "device": device, **({"part_size": part_size} if part_size else {}),
            "replace": replace}
