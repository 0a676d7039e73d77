"""The run store: a run's files (TREC text and parquet, in trec_eval's order, without self
hits), its manifest, and the checks that a run is complete, intact and current."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import fingerprints
from pipeline.core.current import INPUTS, MISSING, stale
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, read_parquet, write_parquet
from pipeline.core.manifests import manifest
from pipeline.core.repair import Placeholder, Repair
from pipeline.core.secrets import shown_url
from pipeline.encoding.objects import known_model, object_repair
from pipeline.encoding.store_identity import recorded_model_change
from pipeline.encoding.writer import model_path_of
from pipeline.layout import (
    EMBEDDINGS,
    IMPORT_RUN,
    VARIANT_SEP,
    Place,
    model_digests_path,
    run_paths,
    runs_dir,
    store_dir,
)
from pipeline.models import API_FILE_PREFIX, API_URL, RERANK_URL
from pipeline.pools.build import validation_pools

log = logging.getLogger(__name__)

TOP_K = 500
ENDPOINT = "endpoint"  # a served model's run's details: the URL it was searched at (no secret)
ROW_GROUP = 1 << 20  # rows per parquet row group: pyarrow's write_table default (RunWriter)


# scores are rounded as written, so the TREC file and the parquet agree; halves away from zero,
# as Anserini writes its run files (Java's "%.6f"), so both BM25 engines write the same bytes
SCORE_DECIMALS, SCORE_ROUNDING = 6, "half_away_from_zero"
# a reranked run's details: the reranker's weights identity and the MODEL_PATH it was read from
RERANKER_IDENTITY, RERANKER_PATH = "reranker_identity", "reranker_path"


def run_repair(corpus: str, run: str, runs_root: Path | None = None, pool: str | None = None
               ) -> Repair:
    """The command that searches (and scores) a run of a corpus again: `<model>~<variant>`
    runs are made with QUERY_VARIANT, `<model>+q<tag>` runs with the QUERY_PROMPT their
    manifest records, every run with the values of the options that changed it that its
    manifest records (run_parameters' `options`), a served model's with the EMBEDDINGS_URL
    it was searched at (ENDPOINT; `<its endpoint's URL>` for a run that records none), a
    reranked run's with its reranker's MODEL_PATH (RERANKER_PATH) where it had one, or the
    RERANK_URL of a served reranker. A
    run of a model make cannot search (a
    name no model has) is an imported run, which make eval scores, or (its manifest in
    `pool` does not say it was imported) a pipeline.Encoder's or a ModelEntry's of the
    user's, made again only in Python with that model (object_repair)."""
    model, _, variant = run.partition(VARIANT_SEP)
    info = _recorded(runs_root, corpus, pool, run) if runs_root and pool else {}
    if not known_model(model) and runs_root is not None and pool is not None and \
            info.get("stage") != IMPORT_RUN:
        return object_repair(corpus, model, pool, variant or "full")
    variables = (("QUERY_VARIANT", variant),) if variant else ()
    details = info.get("details")  # a QUERY_PROMPT's run: searched again with its prompt
    prompt = details.get("query_prompt") if isinstance(details, dict) else None
    if isinstance(prompt, str):
        variables += (("QUERY_PROMPT", prompt.replace("\n", "\\n")),)  # as make holds it
    if model.startswith(API_FILE_PREFIX):  # a served model's: searched at its endpoint again
        url = details.get(ENDPOINT) if isinstance(details, dict) else None
        variables += ((API_URL, shown_url(url) if isinstance(url, str)
                       else Placeholder("its endpoint's URL")),)
    if isinstance(details, dict) and isinstance(details.get(RERANKER_PATH), str):
        variables += (("MODEL_PATH", details[RERANKER_PATH]),)  # a reranker's own folder
    reranker = details.get(RERANKER_IDENTITY) if isinstance(details, dict) else None
    if isinstance(reranker, dict) and isinstance(reranker.get("endpoint"), str):
        variables += ((RERANK_URL, shown_url(reranker["endpoint"])),)  # a served reranker's
    options = info.get("parameters", {}).get("options")  # the options that made it, as made
    if isinstance(options, dict):  # None: an option not given, left out as it was
        variables += tuple((name, str(value)) for name, value in options.items()
                           if value is not None)
    return Repair("eval", corpus, model, variables=variables)


def _recorded(runs_root: Path, corpus: str, pool: str, run: str) -> dict:
    """A run's manifest; {} when it is missing or cannot be read."""
    manifest = run_paths(runs_root, corpus, pool, run).manifest
    try:
        info = read_json(manifest) if manifest.exists() else {}
    except InputError:
        return {}
    return info if isinstance(info, dict) else {}


def recorded_run_repair(runs_root: Path, corpus: str, pool: str, model: str,
                        index_root: Path | None = None) -> Repair:
    """The command that makes this run again, from what its manifest records: an imported run
    (`make import-run`, pipeline/retrieval/imported.py) is imported again from its source
    file; every other run is searched again (run_repair). A run whose manifest is lost or
    damaged and whose name no model has is a pipeline.Encoder's where its store is
    (`index_root`), else an imported run (imported again, over it, REPLACE=1, from the file
    that only the user can name) or a run of a ModelEntry of the user's: the note says so."""
    info = _recorded(runs_root, corpus, pool, model)
    name, _, variant = model.partition(VARIANT_SEP)
    if not info and not known_model(name):
        if index_root is not None and store_dir(index_root, corpus, name).is_dir():
            return object_repair(corpus, name, pool, variant or "full")
        return Repair(IMPORT_RUN, corpus, model, variables=(
            ("POOL", pool), ("RUN", Placeholder("the TREC run file it was imported from")),
            ("REPLACE", "1")), note="if it was imported; a run searched in Python with a "
                      "ModelEntry of yours: pipeline.search again with it")
    if info.get("stage") != IMPORT_RUN:
        return run_repair(corpus, model, runs_root, pool)
    source = info.get("details", {}).get("source_path")
    if not isinstance(source, str):
        return Repair("", note="import the run again with pipeline.import_run (it was "
                      "imported from a DataFrame)")
    whole = bool(info.get("parameters", {}).get("collection"))  # a whole collection's run
    return Repair(IMPORT_RUN, corpus, model,
                  variables=(*(() if whole else (("POOL", pool),)), ("RUN", source)))


class RunOptions(dict):
    """A run's options that change its results, by make variable
    (pipeline.options.declared.run_options), with `defaults`: the default of each declared
    one, as the identity holds it. A run recorded before an option existed lacks its key,
    which `identity_problem` reads at this default. The manifest records the plain dict."""

    def __init__(self, values: Mapping[str, object] | None = None,
                 defaults: Mapping[str, object] | None = None) -> None:
        super().__init__(values or {})
        self.defaults = dict(defaults or {})


def run_parameters(pool: str, model: str, k: int = TOP_K, seed: int | None = None, *,
                   variant: str = "full", prompt: str | None = None, precision: str = "fp32",
                   options: Mapping[str, object] | None = None) -> dict:
    """A run's identity, as its manifest records it and `run_problem` wants it: its pool, its
    name, its depth, the seed where it changes the run (the random model's order, a perturbed
    query's words: `search.run_seed`; None where it does not), the query variant, the query
    prompt (QUERY_PROMPT's text, None: the model's own), the precision, and the values of the
    declared options that change a run (`options`, by make variable:
    pipeline.options.declared.run_options). The model's weights or endpoint are not here: the
    run records its store's files among its inputs."""
    return {"pool": pool, "model": model, "k": k, **({} if seed is None else {"seed": seed}),
            "variant": variant, "prompt": prompt, "precision": precision,
            "options": RunOptions(dict(sorted((options or {}).items())),
                                  getattr(options, "defaults", None))}


def searched_pools(runs_root: Path, corpus: str, model: str) -> list[str]:
    """The pools of `corpus` where `model` has a run that the search stage made (not an
    imported one; an unreadable manifest is neither: verify names it), sorted."""
    folder = runs_dir(runs_root, corpus, "pool").parent  # the corpus's run folders
    found: list[str] = []
    if not folder.is_dir():
        return found
    for pool in sorted(p.name for p in folder.iterdir() if p.is_dir()):
        manifest = run_paths(runs_root, corpus, pool, model).manifest
        try:
            stage = read_json(manifest).get("stage") if manifest.is_file() else None
        except InputError:
            continue
        if stage is not None and stage != IMPORT_RUN:
            found.append(pool)
    return found


def run_problem(place: Place, pool: str, model: str, k: int = TOP_K, seed: int | None = None,
                defaults: dict[str, float] | None = None, **identity: Any) -> str | None:
    """Why `search` would write this run again (None when it is current): `identity_problem`
    of `run_parameters` of these arguments and `identity` (its keywords: the variant, the
    prompt, the precision, the options that change runs)."""
    return identity_problem(place, pool, run_parameters(pool, model, k, seed, **identity),
                            defaults)


def identity_problem(place: Place, pool: str, parameters: dict,
                     defaults: dict[str, float] | None = None) -> str | None:
    """Why `search` would write the run of this identity again (None when it is current): no
    complete run, a damaged file, another identity (`parameters`, as `run_parameters` makes
    them: k, the seed where it changes the run, the variant, the prompt, the precision, an
    option that changes runs; one the run's record lacks reads as its default:
    `unrecorded_at_default`), BM25 defaults other than the model's (`defaults`, where no
    validation pool tuned them), or an input that changed since (the pool's files, the texts,
    embedding parts or index it read, component runs, validation pools)."""
    paths = run_paths(place.runs_root, place.corpus, pool, parameters["model"])
    parameters = unrecorded_at_default(paths.manifest, parameters)
    problem = stale(paths.manifest, parameters, files=paths.trec.parent,
                    own=lambda info: _own_problem(place, pool, info, defaults),
                    roots=place.roots)
    return problem.reason if problem else None


def unrecorded_at_default(manifest: Path, parameters: dict) -> dict:
    """`parameters` (run_parameters) to compare with the run that `manifest` records: a
    declared option its recorded `options` lack (the run was made before the option existed)
    reads as the option's default (RunOptions.defaults), so a wanted value at that default is
    left out of the comparison. Another value stays a difference, and so does a key with no
    declared default (a retriever's undeclared option): the run is searched again. The rule
    keeps runs current when an option is added; new runs record every key."""
    options = parameters.get("options")
    defaults = getattr(options, "defaults", None)
    if not defaults or not manifest.is_file():
        return parameters
    try:
        info = read_json(manifest)
    except InputError:
        return parameters  # unreadable: `stale` says so
    made = info.get("parameters") if isinstance(info, dict) else None
    recorded = made.get("options") if isinstance(made, dict) else None
    if not isinstance(recorded, dict):
        return parameters
    kept = {name: value for name, value in options.items()
            if name in recorded or name not in defaults or value != defaults[name]}
    return {**parameters, "options": kept}


def _own_problem(place: Place, pool: str, info: dict,
                 defaults: dict[str, float] | None = None) -> str | None:
    """What its own details say is wrong with a run beyond its inputs: BM25's tuning
    (_tuning_problem), a reranker changed since (_reranker_problem)."""
    return _tuning_problem(place, pool, info, defaults) or _reranker_problem(place, info)


def _reranker_problem(place: Place, info: dict) -> str | None:
    """What changed in the reranker a reranked run was scored by (retrieval/rerank.py), as its
    weights' identity now says (the stat cache, nothing loaded); None when nothing did or it
    cannot be said (its folder gone: said in the log)."""
    from pipeline.encoding.families import routed
    from pipeline.encoding.identity import identity_change, model_identity
    from pipeline.models import get_model

    details = info.get("details", {})
    made = details.get(RERANKER_IDENTITY)
    if not made:
        return None
    path = details.get(RERANKER_PATH)
    try:
        entry = routed(get_model(details["reranker"]), path)
        now = model_identity(entry, path, cache=model_digests_path(place.index_root),
                             save=False)
    except (InputError, OSError, KeyError) as exc:
        log.info(f"[check] a reranked run's reranker cannot be checked now ({exc})")
        return None
    change = identity_change(made, now)
    return None if change is None else \
        f"its reranker {details['reranker']} changed since it was scored ({change})"


def _tuning_problem(place: Place, pool: str, info: dict,
                    defaults: dict[str, float] | None = None) -> str | None:
    """What is wrong with a BM25 run's k1 and b (None for any other run): tuned on other
    validation pools than its pool has now, or on a grid that scored nothing; untuned, other
    defaults than the model's (`defaults`, when given)."""
    details = info.get("details", {})
    if "k1" in details and details.get("tuned_on") != validation_pools(place.corpus_dir, pool):
        return "its pool's validation pools changed since (BM25 is tuned on them)"
    if details.get("tuned_on") and details.get("validation_map") == 0:
        # tuning once looked a collection's query texts up among the papers and took the
        # first pair of a grid that scored nothing; it is an error now
        return "its BM25 k1 and b were chosen on a grid that scored MAP 0 everywhere"
    made = {name: details.get(name) for name in ("k1", "b")}
    if "k1" in details and not details.get("tuned_on") and defaults and made != {
            name: defaults.get(name) for name in made}:
        return (f"made with BM25 k1 {made['k1']} and b {made['b']}, the model's are k1 "
                f"{defaults.get('k1')} and b {defaults.get('b')}")
    return None


def model_problem(info: dict, index_root: Path, corpus: str, store: Path | None = None
                  ) -> tuple[str, Repair] | None:
    """Why an artifact whose manifest is `info` is stale because a model changed since it was
    embedded (`store_identity.recorded_model_change`: weights swapped, another checkpoint behind
    MODEL_PATH), and the repair: embed again with REPLACE=1 (which removes the store and the
    runs searched from it). For a store (`store`, its folder) its own model; for a run, the
    model of each store it searched (its recorded inputs); None when none changed."""
    stores = [store] if store is not None else sorted(
        {store_dir(index_root, corpus, label.split("/")[3]) for label in info.get("inputs", {})
         if label.startswith(f"indexes/@/{EMBEDDINGS}/")})
    for searched in stores:
        if change := recorded_model_change(searched, index_root):
            source = model_path_of(searched)
            what = "its model" if store is not None else f"the model of {searched}"
            return (f"{what} changed since it was embedded ({change})",
                    Repair("eval", corpus, searched.name, (
                        *((("MODEL_PATH", source),) if source else ()), ("REPLACE", "1"))))
    return None


def recorded_run_problem(place: Place, pool: str, model: str) -> tuple[str, Repair] | None:
    """Why the run of `model` in `pool`, as its manifest records it, is not current, and the
    command that makes it current: what verify calls STALE or CORRUPT of a run (a file that
    differs from its manifest, an input changed since, BM25 tuned on other validation pools,
    the model of a store it searched changed since); None when it is current. A reader of
    runs made earlier (collect, the report) asks this, not `run_problem`, which asks whether a
    run is the one the user asks for now."""
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    problem = stale(paths.manifest, None, files=paths.trec.parent,
                    own=lambda info: _own_problem(place, pool, info), roots=place.roots)
    if problem is not None:
        return problem.reason, recorded_run_repair(place.runs_root, place.corpus, pool, model,
                                                   place.index_root)
    return model_problem(read_json(paths.manifest), place.index_root, place.corpus)


def run_is_current(place: Place, pool: str, model: str, k: int = TOP_K, seed: int | None = None,
                   defaults: dict[str, float] | None = None, **identity: Any) -> bool:
    """True when `search` would write this run again from the same inputs (`run_problem`)."""
    return run_problem(place, pool, model, k, seed, defaults, **identity) is None


def run_shas(runs_root: Path, corpus: str, pool: str, models: list[str]) -> dict[str, str]:
    """`<model>.parquet` -> sha256 of each model's run of the pool, as its manifest records
    (None for a model without a complete run)."""
    shas = {}
    for model in models:
        paths = run_paths(runs_root, corpus, pool, model)
        outputs = (read_json(paths.manifest).get("outputs", {})
                   if paths.manifest.exists() else {})
        shas[paths.parquet.name] = outputs.get(paths.parquet.name, {}).get("sha256")
    return shas


def own_lists(candidates: pl.DataFrame) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """An MDCR-style pool's candidates name their query, and each query ranks its own list:
    (its (query, doc) pairs, the union of the lists to search). Other pools: (None, the
    candidates)."""
    if "query" not in candidates.columns:
        return None, candidates
    return (candidates.select("query", doc="corpusid").unique(),
            candidates.select("corpusid").unique().sort("corpusid"))


def keep_own_lists(hits: pl.DataFrame, pairs: pl.DataFrame, k: int = TOP_K
                   ) -> tuple[pl.DataFrame, int, int]:
    """Each query's hits within its own list, every pair of the list present: (the hits, the
    pairs no query term matched, scored 0; the depth that keeps every list whole)."""
    hits = pairs.join(hits, on=["query", "doc"], how="left")
    unmatched = hits["score"].null_count()
    depth = max(k, pairs.group_by("query").len()["len"].max() or 0)
    return hits.with_columns(pl.col("score").fill_null(0.0)), unmatched, depth


def finalize_run(hits: pl.DataFrame, k: int = TOP_K) -> tuple[pl.DataFrame, int]:
    """Drop self hits, keep the top k per query, round scores, order as trec_eval does.

    Among documents tied at the k-th score, those kept are the lowest ids as strings, as
    Anserini keeps them on an index written in id order (the Lucene engine's; on an index in
    another order Lucene keeps those it indexed first). The kept list is then written in
    trec_eval's order (score descending, then id descending as a string), so trec_eval and
    ranx rank it as written. Scores are rounded to 6 decimals, halves away from zero.
    Returns (run with columns query, doc, rank, score) and the number of self hits dropped.
    """
    not_self = hits.filter(pl.col("query") != pl.col("doc")).with_columns(
        key=pl.col("doc").cast(pl.String))
    kept = (
        not_self.sort(["query", "score", "key"], descending=[False, True, False])
        .filter(pl.int_range(pl.len()).over("query") < k)
        .with_columns(pl.col("score").round(SCORE_DECIMALS, mode=SCORE_ROUNDING))
    )
    return trec_eval_order(kept).select("query", "doc", "rank", "score"), \
        hits.height - not_self.height


def trec_eval_order(run: pl.DataFrame) -> pl.DataFrame:
    """`run` (query, doc, score, ...) in the order trec_eval ranks it, whatever order its rows
    come in: by query, then score descending, ties by the doc id descending as a string; with
    `rank` 1, 2, ... per query (Int32). Scores are compared in single precision, as the
    trec_eval inside pytrec_eval (which ir_measures, BEIR and the MDCR script score with) holds
    them: two scores that differ only beyond float32 are a tie there, and so here (rows keep
    their scores as given)."""
    return (run.sort([pl.col("query"), pl.col("score").cast(pl.Float32),
                      pl.col("doc").cast(pl.String)],
                     descending=[False, True, True])
            .with_columns(rank=pl.int_range(1, pl.len() + 1).over("query").cast(pl.Int32)))


def trec_text(run: pl.DataFrame, tag: str, decimals: int | None = SCORE_DECIMALS) -> str:
    """The run's lines as TREC text (qid Q0 docid rank score tag), each ended by a newline.
    Scores are written with `decimals` places (the pipeline rounds its own scores so), or with
    None as the shortest text that reads back as the same float (an imported run's scores,
    kept as given)."""
    shown = (repr if decimals is None else lambda s: f"{s:.{decimals}f}")
    lines = run.select(pl.format("{} Q0 {} {} {} " + tag, "query", "doc", "rank",
                                 pl.col("score").map_elements(
                                     shown, return_dtype=pl.String))).to_series()
    return lines.str.join("\n").item() + "\n" if len(lines) else ""


def write_run(run: pl.DataFrame, paths: dict[str, Path], tag: str,
              decimals: int | None = SCORE_DECIMALS) -> None:
    """The run as TREC text and as parquet (trec_text), both atomic; the run's manifest is
    removed first (and written last by the caller), so a run killed between the two files is
    never taken for complete."""
    paths.manifest.unlink(missing_ok=True)
    with atomic_path(paths.trec) as tmp:
        tmp.write_text(trec_text(run, tag, decimals))
    write_parquet(run.to_arrow(), paths.parquet)


class RunWriter:
    """A run written a block at a time (`write`; blocks of whole queries, in trec_eval's
    order), for runs larger than memory (make import-run): the bytes write_run writes for the
    whole run (parquet row groups of ROW_GROUP rows, as pyarrow's write_table cuts them). The
    files replace the run's only when the `with` block ends without error, its manifest
    removed just before (the caller writes it last)."""

    def __init__(self, paths, tag: str, decimals: int | None = SCORE_DECIMALS) -> None:
        self.paths, self.tag, self.decimals = paths, tag, decimals
        self._pending: list = []  # pyarrow tables not yet in a row group
        self._rows, self._parquet = 0, None

    def __enter__(self) -> RunWriter:
        import contextlib

        self._stack = contextlib.ExitStack().__enter__()
        self._trec = self._stack.enter_context(atomic_path(self.paths.trec))
        self._tmp = self._stack.enter_context(atomic_path(self.paths.parquet))
        self._text = self._stack.enter_context(self._trec.open("w", encoding="utf-8"))
        return self

    def write(self, run: pl.DataFrame) -> None:
        if not run.height:
            return
        self._text.write(trec_text(run, self.tag, self.decimals))
        self._pending.append(run.to_arrow())
        self._rows += run.height
        while self._rows >= ROW_GROUP:
            self._flush(ROW_GROUP)

    def _flush(self, rows: int) -> None:
        """Write the first `rows` pending rows as one row group (one chunk per column, as a
        whole run's table is)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.concat_tables(self._pending)
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self._tmp, table.schema, compression="zstd")
        self._parquet.write_table(table.slice(0, rows).combine_chunks(), row_group_size=rows)
        self._pending = [table.slice(rows)] if rows < table.num_rows else []
        self._rows -= rows

    def __exit__(self, kind, value, traceback) -> bool:
        if kind is None:
            if self._rows:
                self._flush(self._rows)
            if self._parquet is None:
                raise InputError(f"{self.paths.parquet}: a run of no line is not written")
            self._parquet.close()
            self.paths.manifest.unlink(missing_ok=True)
        elif self._parquet is not None:
            self._parquet.close()
        return self._stack.__exit__(kind, value, traceback)


@dataclass(frozen=True)
class RunCut:
    """Where a run cut its lists, as its manifest records it (docs/retrieval.md, "Depth"):
    `depth`, the most candidates a query may keep (the K it was searched or fused with; an
    imported run's longest list; None when not recorded); `shortest`, an imported run's
    shortest list (None for a searched run, whose lists are cut at `depth`); `complete`, the
    run cut nothing: each query it answers ranks every candidate it may rank (its pool's, or
    its own list on an MDCR-style or CSFCube pool; its own paper never), so it compares with
    any depth at or above its pool's size."""

    depth: int | None
    shortest: int | None = None
    complete: bool = False


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def run_cut(info: dict) -> RunCut:
    """A run's cut (RunCut) from its manifest `info`. A searched (or fused) run is complete
    where it kept each query's own list whole (an MDCR-style pool: `pairs_unmatched_scored_0`
    counted) or its K reaches the pool's candidates; an imported run where its import found
    every answered query's list whole (`details.complete`; an import recorded before that
    was counted is not complete: `make import-run` again counts it)."""
    parameters, details = info.get("parameters", {}), info.get("details", {})
    counts = info.get("counts", {})
    if info.get("stage") == IMPORT_RUN:  # recorded before shortest was: as long as depth
        depth = _count(details.get("depth"))
        shortest = _count(details.get("shortest", depth))
        return RunCut(depth, shortest, details.get("complete") is True)
    k, candidates = _count(parameters.get("k")), _count(counts.get("candidates"))
    whole = "pairs_unmatched_scored_0" in counts or (
        k is not None and candidates is not None and k >= candidates)
    return RunCut(k, None, whole)


def run_manifest(parameters: dict, details: dict, paths: dict[str, Path], seconds: float,
                 counts: dict, inputs: dict[str, str]) -> dict:
    """A searched run's manifest: `parameters` as `run_parameters` makes them."""
    folder = paths.trec.parent
    return manifest("search", parameters, details=details,
                    inputs=inputs,
                    outputs=fingerprints(folder, [paths.trec.name, paths.parquet.name]),
                    counts=counts, seconds=round(seconds, 2),
                    queries_per_s=round(counts["queries"] / max(seconds, 1e-9), 2))


def load_run(place: Place, pool: str, model: str) -> pl.DataFrame:
    """A complete, intact run made from its inputs as they are now (else a one-line error
    naming the command that searches it again)."""
    paths = run_paths(place.runs_root, place.corpus, pool, model)
    repair = recorded_run_repair(place.runs_root, place.corpus, pool, model,
                                 place.index_root)
    problem = stale(paths.manifest, None, files=paths.trec.parent, roots=place.roots)
    if problem is not None:
        raise InputError({MISSING: f"no complete run {paths.parquet}: search it first",
                          INPUTS: f"run {paths.parquet} is stale: {problem.reason}"}.get(
                              problem.check, problem.reason), repair)
    return read_parquet(paths.parquet)
