"""Late-interaction models (ColBERT) as retrievers: MaxSim over token vectors, exact over the pool
or as a reranker of a first stage's top LATE_DEPTH (PyLate's rerank).

Candidates are the store's token vectors (pipeline/encoding/late.py), a row per kept token;
query papers, a collection's queries and perturbed ones are encoded now in the query form
(marker, [MASK] expansion to query_length), cached beside the store (query_vectors.py).
A candidate's score is MaxSim: the sum over the query's vectors of the best dot product with
any of the candidate's (pylate.scores.colbert_scores).

- exact (LATE_FIRST empty): every candidate of the pool, streamed from the store in chunks of
  bounded memory (dense/exact.py maxsim_stream, reduce "sum"), on the GPU where one is seen;
- rerank (LATE_FIRST=<model>): the top LATE_DEPTH of that model's run of the same pool, each
  scored by MaxSim and ordered by it, as pylate.rank.rerank orders them; the run holds those
  candidates only (what lies below LATE_DEPTH is cut), and records the first stage's run among
  its inputs, so it is stale when the first stage changes.

Both options are in the run's identity (declared changes_run). The index stage prints the
store's size and what the pool adds to it at most, and refuses in one line, before embedding,
where the disk lacks that space.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.errors import InputError, OptionError
from pipeline.core.files import read_json
from pipeline.encoding.embed import embed
from pipeline.encoding.query_vectors import encode_texts, query_cache
from pipeline.encoding.store import id_array, load_sentence_vectors, not_stored, store_parts
from pipeline.glossary import BACKEND
from pipeline.layout import MANIFEST, PREFILTERED, Place, run_paths, store_dir
from pipeline.models import ModelEntry
from pipeline.pools.queries import query_texts
from pipeline.retrieval.base import Query, Retriever
from pipeline.retrieval.dense.retriever import maxsim_hits, store_files

log = logging.getLogger(__name__)

LATE_DEPTH = 100  # the first stage's candidates a rerank scores per query (LATE_DEPTH)
# bytes a stored token takes besides its vector: its paper's id (int64) and position (int16)
ROW_BYTES = 8 + 2


def token_bytes(dim: int, dtype: str = "float32") -> int:
    """Bytes a stored token vector takes in the store (its Arrow row)."""
    return dim * (2 if dtype == "float16" else 4) + ROW_BYTES


def store_bytes(store: Path) -> int:
    """The size of a store's parts on disk."""
    if not (store / MANIFEST).exists():
        return 0
    return sum((store / part["file"]).stat().st_size for part in store_parts(store))


def check_space(place: Place, pool: str, entry: ModelEntry, model_path: str | None) -> dict:
    """The store's size and the most the pool's missing papers add to it (document_length
    tokens each, in float32), printed; refused in one line where the disk holding the store
    has less free space than that."""
    from pipeline.encoding.coverage import pool_ids
    from pipeline.encoding.identity import weights_folder
    from pipeline.encoding.late import LateSettings, projection_dim

    store = store_dir(place.index_root, place.corpus, entry.name)
    folder, _ = weights_folder(entry, model_path)
    if folder is None:  # a hub model not downloaded yet: its loader fetches and checks it
        return {}
    settings = LateSettings.of_folder(Path(folder))
    ids = pool_ids(place.corpus_dir, pool)
    missing = len(not_stored(store, ids)) if (store / MANIFEST).exists() else len(ids)
    adds = missing * settings.document_length * token_bytes(projection_dim(Path(folder),
                                                                           settings))
    existing = store.parent
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    size = store_bytes(store)
    log.info(f"[late] store {store}: {size / 1e9:.3f} GB; pool {pool} adds at most "
             f"{adds / 1e9:.3f} GB ({missing} papers x {settings.document_length} tokens); "
             f"{free / 1e9:.1f} GB free")
    if adds > free:
        raise InputError(f"MODEL {entry.name}: pool {pool}'s token vectors take up to "
                         f"{adds / 1e9:.1f} GB and {existing} has {free / 1e9:.1f} GB free: "
                         "free space there or give another --index-root")
    return {"store_bytes": size, "adds_at_most_bytes": adds}


class LateInteraction(Retriever):
    #: the torch device of MaxSim (auto, torch-cpu, torch-cuda), a local copy of the weights,
    #: and the rerank mode: a first stage (a model of the pool) and its depth
    OPTIONS = {"backend": BACKEND, "model_path": None, "late_first": None,
               "late_depth": LATE_DEPTH}

    def check(self, options: dict) -> None:
        from pipeline.retrieval.dense.exact import maxsim_device

        maxsim_device(options["backend"])  # a Faiss backend, or a GPU that is not there

    def index(self, place: Place, pool: str, entry: ModelEntry, threads: int = 2,
              options: dict | None = None, part_size: int | None = None) -> dict:
        """The pool's papers embedded (token vectors), after the disk's space is checked."""
        model_path = self.options(options or {})["model_path"]
        space = check_space(place, pool, entry, model_path)
        info = embed(place, entry, pools=[pool], model_path=model_path,
                     **({"part_size": part_size} if part_size else {}))
        store = store_dir(place.index_root, place.corpus, entry.name)
        return {**info, **space, "store_bytes": store_bytes(store)}

    def hits(self, query: Query) -> tuple[pl.DataFrame, dict]:
        """MaxSim, exact over the pool or over the first stage's top LATE_DEPTH."""
        place, entry, options = query.place, query.entry, query.options
        query.read(store_files(place, entry, options["model_path"]))
        store = store_dir(place.index_root, place.corpus, entry.name)
        texts = query.texts
        if texts is None:
            texts = query_texts(place.corpus_dir, query.queries)
            query.read([place.corpus_dir / PREFILTERED])
        from pipeline.encoding.late import TokenVectors

        array = encode_texts(store, entry, texts, options["model_path"])
        query.read([query_cache(store, entry, texts)])
        vectors = TokenVectors.from_array(array, texts.height)
        query_ids = texts["corpusid"].to_numpy()
        if not options["late_first"]:
            hits, details = maxsim_hits(store, query_ids, query.candidates["corpusid"].to_numpy(),
                                        query.depth, "ip", options["backend"],
                                        query_vectors=vectors, reduce="sum")
            return hits, {**details, "mode": "exact MaxSim over every candidate"}
        return self._rerank(query, store, query_ids, vectors)

    def _rerank(self, query: Query, store: Path, query_ids: np.ndarray,
                vectors: tuple[np.ndarray, np.ndarray]) -> tuple[pl.DataFrame, dict]:
        """The first stage's top LATE_DEPTH per query (its run's order), scored by MaxSim."""
        from pipeline.retrieval.dense.exact import maxsim_device
        from pipeline.retrieval.runs import load_run

        place, options = query.place, query.options
        first, depth = options["late_first"], int(options["late_depth"])
        run = load_run(place, query.pool, first)  # refuses a missing or stale run in one line
        paths = run_paths(place.runs_root, place.corpus, query.pool, first)
        query.read([paths.parquet])
        first_k = int(read_json(paths.manifest).get("parameters", {}).get("k", 0))
        if depth > first_k:
            raise OptionError("{LATE_DEPTH=} is above the first stage's K: " + first +
                              f"'s run of pool {query.pool} holds {first_k} per query; give "
                              f"one of at most {first_k}, or search {first} with a larger K",
                              {"LATE_DEPTH": depth})
        top = (run.sort(["query", "rank"]) if "rank" in run.columns else run)
        top = top.filter(pl.int_range(pl.len()).over("query") < depth)
        docs = id_array(top["doc"].unique().sort().to_numpy())
        doc_vectors, doc_offsets = load_sentence_vectors(store, docs)
        scores = maxsim_pairs(vectors, doc_vectors, doc_offsets, query_ids, docs, top,
                              maxsim_device(options["backend"]))
        hits = top.select("query", "doc").with_columns(score=pl.Series(scores, dtype=pl.Float64))
        hits = hits.filter(pl.col("query").is_in(pl.Series(query_ids).implode()))
        return hits, {"mode": f"rerank: MaxSim over {first}'s top {depth} (below it: cut)",
                      "first_stage": first, "late_depth": depth, "similarity": "ip",
                      "run_score": "MaxSim", "reranked_candidates": len(docs)}


def maxsim_pairs(queries: tuple[np.ndarray, np.ndarray], docs: np.ndarray,
                 doc_offsets: np.ndarray, query_ids: np.ndarray, doc_ids: np.ndarray,
                 pairs: pl.DataFrame, device: str = "cpu") -> np.ndarray:
    """MaxSim of each (query, doc) row of `pairs`, float32 sums as PyLate's colbert_scores: a
    query's vectors against each of its candidates' (query_ids and doc_ids sorted index the
    vectors). Memory: one query's candidates at a time."""
    import torch

    vectors, offsets = queries
    q_at = {q: i for i, q in enumerate(query_ids.tolist())}
    d_at = np.searchsorted(doc_ids, id_array(pairs["doc"].to_numpy()))
    out = np.zeros(pairs.height, dtype=np.float32)
    rows = pairs.with_row_index("row").group_by("query", maintain_order=True).agg("row")
    for query_id, members in rows.iter_rows():
        if query_id not in q_at:
            continue
        i = q_at[query_id]
        q = torch.from_numpy(vectors[offsets[i] : offsets[i + 1]]).to(device)
        members = np.asarray(members)
        take = d_at[members]
        lengths = doc_offsets[take + 1] - doc_offsets[take]
        rows_at = np.concatenate([np.arange(doc_offsets[t], doc_offsets[t + 1]) for t in take])
        x = torch.from_numpy(docs[rows_at]).to(device)
        paper = torch.repeat_interleave(torch.arange(len(take)),
                                        torch.from_numpy(lengths)).to(device)
        sims = q @ x.T
        best = torch.full((len(q), len(take)), float("-inf"), device=device)
        best.scatter_reduce_(1, paper[None, :].expand_as(sims), sims, "amax")
        out[members] = best.sum(0).cpu().numpy()
    return out


RETRIEVER = LateInteraction()
