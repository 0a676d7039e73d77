"""The embed stage: the papers of the pools missing from the embedding store, embedded.

`indexes/<corpus>/embeddings/<model>/` holds `part-*.arrow` files (columns `corpusid: int64`,
`vector: fixed_size_list<float>[dim]`, rows sorted by corpusid; `corpusid: string` for
collections with string ids) and a manifest listing each part with its checksum. Every pool
of the corpus shares the store: a paper is embedded once per model, and a later pool embeds
only the papers it adds. `--shard i --shards n` embeds the missing papers whose
corpusid % n == i (crc32 of a string id), so a SLURM job array splits the work.
A multi-vector store (ASPIRE, `pipeline/encoding/multivector.py`) has one row per sentence: an extra
column `sentence: int16` (0 = the title), rows sorted by (corpusid, sentence).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.errors import InputError, OptionError
from pipeline.core.locks import file_lock
from pipeline.core.logs import progress
from pipeline.core.repair import Repair
from pipeline.corpus.files import corpus_file, text_digests
from pipeline.encoding.coverage import mark_covered, missing_ids
from pipeline.encoding.encoder_kinds import (
    encoder_class,
    encoder_kind,
    loaded_settings,
    settings_class,
)
from pipeline.encoding.families import routed
from pipeline.encoding.identity import FOLDER_KINDS
from pipeline.encoding.reuse import REUSED_KINDS, reuse
from pipeline.encoding.store import DTYPES, repair_store, shard_of
from pipeline.encoding.store_identity import (
    MODEL_IDENTITY,
    adopt_identity,
    changed_identity,
    identity_of,
    identity_refusal,
    probe_change,
    replace_store,
)
from pipeline.encoding.store_texts import (
    check_settings,
    digest_columns,
    optional_columns,
    reconcile,
    store_inputs,
    text_format,
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
from pipeline.encoding.writer import add_part, check_config, record_model_path
from pipeline.layout import MANIFEST, PREFILTERED, Place, pool_names, store_dir
from pipeline.models import ModelEntry, get_model

log = logging.getLogger(__name__)


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
                info.update(replace_store(place, store, entry, change))
            missing = missing_ids(place.corpus_dir, store, pools)[1]
            missing = missing[shard_of(missing, num_shards) == shard]
    if len(missing):
        # the store's config, which vectors of other stores must match to be reused, and a
        # store made with another refused before anything is added
        columns = optional_columns(place.corpus_dir, encoder)
        config = _store_config(entry, encoder, dtype, columns,
                               identity_of(place, entry, model_path))
        check_config(store, config)
        if entry.kind in REUSED_KINDS:
            missing, reused = reuse(place, store, config, missing, columns, inputs, part_size)
        if len(missing):
            info.update(_encode_missing(place, store, encoder, missing, columns, config, inputs,
                                        part_size=part_size, batch_size=batch_size,
                                        token_budget=token_budget, devices=devices,
                                        model_path=model_path))
    info.update(embedded=len(missing), reused=reused)
    with file_lock(store):
        info["covered_pools"] = mark_covered(place.corpus_dir, store, pools)
        if entry.embedded and entry.kind in FOLDER_KINDS:
            record_model_path(store, model_path)
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
            out = embed(place, routed(get_model(model), store.get("model_path")), pools,
                        shard, num_shards, **store)
            info.update({k: out[k] for k in ("embedded", "reused", "papers_per_s", "gpu_busy")
                         if k in out})


def _check_arguments(shard: int, num_shards: int, dtype: str, part_size: int,
                     batch_size: int | None, token_budget: int | None) -> None:
    """Refuse embed's arguments before anything is read or written. The command line checks
    most of them first (pipeline/cli: --part-size, --batch-size, --dtype, --shards), so
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
    says so (`replace_store`), the model's identity recorded in a store from before
    identities (`adopt_identity`), its settings checked against this version's
    (check_settings), the rows of texts changed since they were embedded removed
    (reconcile). Their counts; a store not made yet counts none."""
    repaired = {"damaged_parts": 0, "orphan_parts": 0}
    texts = {"changed_texts": 0, "rows_without_digest": 0}
    if store.exists():
        with file_lock(store):
            repaired = repair_store(store)
            change = changed_identity(place, store, entry, model_path)
            if change and replace:
                return {**repaired, **texts, **replace_store(place, store, entry, change)}
            if (store / MANIFEST).exists():
                adopt_identity(place, store, entry, model_path)
                check_settings(place, store, entry, model_path)
            texts = reconcile(place, store,
                              digest_columns(place.corpus_dir, settings_class(entry.kind)),
                              inputs)
    return {**repaired, **texts}


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
    with progress(sum(map(len, chunks)), "embed", laps=True) as bar:
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
              progress(sum(map(len, chunks)), "embed", laps=True) as bar):
            upcoming = reader.submit(self.read, chunks[0])
            written = None
            for k, chunk in enumerate(chunks):
                ids, digests = upcoming.result()
                if k + 1 < len(chunks):
                    upcoming = reader.submit(self.read, chunks[k + 1])
                t0 = time.perf_counter()
                vectors, tokens = self.encoder.encode_ids(ids, budget, batch_size, bar)
                bar.lap()  # a whole part: the ETA's pace (its longest papers came first)
                seconds += time.perf_counter() - t0
                n_tokens += tokens
                if written:
                    written.result()
                written = writer.submit(self.write, chunk, vectors, digests)
            written.result()
        return n_tokens, seconds


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


def store_options(batch_size: int | None, dtype: str, part_size: int | None,
                  model_path: str | os.PathLike | None, device: str | None, replace: bool) -> dict:
    """The store's options as embed takes them, a part size only where given (each store has its own
    default)."""
    return {"batch_size": batch_size, "dtype": dtype, "model_path": model_path,
            "device": device, **({"part_size": part_size} if part_size else {}),
            "replace": replace}
