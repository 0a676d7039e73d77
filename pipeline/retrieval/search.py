"""Index a pool and retrieve the top 500 for its queries with any registered model.

`index` builds what a model searches, `search_pool` asks the model's retriever (registry.py: BM25,
dense and multi-vector encoders, fusion, random) for hits and writes the run through the run
store (runs.py): `runs/<corpus>/<pool>/<model>.trec` and `.parquet` in trec_eval's order
(score descending, then docid descending as a string), without each query paper in its own
results (MDCR §3: queries never retrieve themselves). In an MDCR-style pool (MDCR §4) each
query ranks its own candidate list, all of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.core.errors import InputError
from pipeline.core.files import write_json
from pipeline.core.inputs import record
from pipeline.core.locks import file_lock
from pipeline.core.timing import timed
from pipeline.encoding.families import routed
from pipeline.layout import PREFILTERED, Place, check_name, run_name, run_paths
from pipeline.models import (
    ModelEntry,
    ServedModel,
    get_model,
    reranks_only,
    with_query_prompt,
)
from pipeline.pools.build import load_pool, pool_files
from pipeline.pools.queries import SEEDED_VARIANTS, own_text, query_texts
from pipeline.retrieval.base import Query
from pipeline.retrieval.imported import imported_pools
from pipeline.retrieval.registry import retriever
from pipeline.retrieval.runs import (
    ENDPOINT,
    TOP_K,
    finalize_run,
    identity_problem,
    keep_own_lists,
    own_lists,
    run_manifest,
    run_parameters,
    write_run,
)

log = logging.getLogger(__name__)


def index(place: Place, pool: str, entry: ModelEntry, threads: int = 2, *,
          part_size: int | None = None, **options) -> dict:
    """Build what `entry` needs to search `pool` (a no-op when it is already there). `options`
    are the retriever's own (BM25: `bm25_engine`; encoders: `backend`, `model_path`); those of
    other kinds are not passed on."""
    load_pool(place.corpus_dir, pool)  # refuses a damaged or stale pool before any work
    kind = retriever(entry.kind)
    stage = {"part_size": part_size} if part_size else {}
    return kind.index(place, pool, entry, threads, kind.options(options),
                      **stage)


def check_not_imported(place: Place, model: str) -> None:
    """Refuse to search `model` where a run of that name was imported into a pool of the
    corpus (make import-run): the search would replace it, or make the name two models on two
    pools (eval scores an imported name as a run, on its own pools only)."""
    if pools := imported_pools(place.runs_root, place.corpus, model):
        raise InputError(f"{model} is a run imported into pool {', '.join(pools)} of corpus "
                         f"{place.corpus} (make import-run): give the model you search a name "
                         "of its own")


def run_seed(entry: ModelEntry, variant: str, seed: int) -> int | None:
    """The seed as a run's parameter: where it changes the run (the random model's order, the
    words a perturbed query keeps), `seed`; None where the run is the same whatever the seed.
    A run of another seed is another run: searched again, in its place (the same name)."""
    return seed if retriever(entry.kind).seeded or variant in SEEDED_VARIANTS else None


def run_identity(entry: ModelEntry, pool: str, k: int = TOP_K, seed: int = 0,
                 variant: str = "full", run_options: Mapping[str, object] | None = None
                 ) -> dict:
    """A run's identity (runs.run_parameters), the one rule of make, the command line and the
    API: its pool, its name, k, the seed where it changes the run, the variant, the query
    prompt and precision of `entry` (QUERY_PROMPT, PRECISION: their runs keep their names,
    their values are here too), and `run_options`, the declared options that change a run
    (pipeline.options.declared.run_options). Recorded by `search_pool`, compared by
    `current_run`."""
    return run_parameters(pool, run_name(entry.name, variant), k,
                          run_seed(entry, variant, seed), variant=variant,
                          prompt=entry.query_prompt, precision=entry.precision,
                          options=run_options)


def current_run(place: Place, pool: str, entry: ModelEntry, k: int = TOP_K, seed: int = 0,
                variant: str = "full", run_options: Mapping[str, object] | None = None
                ) -> bool:
    """Whether `search_pool` with these arguments would make the run that is there (the rule
    of `make search` and `pipeline.search`, which then keep it): its whole identity is
    compared (run_identity, runs.run_problem)."""
    return identity_problem(place, pool, run_identity(entry, pool, k, seed, variant,
                                                      run_options),
                            entry.params or None) is None


def search_pool(place: Place, pool: str, entry: ModelEntry, k: int = TOP_K, threads: int = 2,
                seed: int = 0, variant: str = "full",
                run_options: Mapping[str, object] | None = None, **options) -> dict:
    """Retrieve the top k candidates of `pool` for each of its queries; write the run.
    A pool whose candidates name their query (MDCR-style, `pipeline/mdcr/`) has each query rank
    its own list, whole: the engines score the union of the lists, each query keeps its own.
    BM25 runs on Lucene (Anserini) or on the arrays engine (`bm25_arrays`: Lucene's analysis
    and scores, the same lists). `variant` perturbs the queries
    (`pipeline/pools/queries.py`); its run is
    named `<model>~<variant>`. `options` are the retriever's own (BM25: `bm25_engine`;
    encoders: `backend`, `model_path`); those of other kinds are not passed on. The manifest
    records the run's identity (run_identity, with `run_options`)."""
    start = time.perf_counter()
    name = run_name(entry.name, variant)
    kind = retriever(entry.kind)
    check_not_imported(place, entry.name)  # an imported run is never replaced by a search
    if variant != "full" and not kind.searches_variants:
        raise InputError(f"QUERY_VARIANT={variant} is not available for {entry.kind} models "
                         f"({entry.name}) yet: use bm25, random or a dense encoder")
    options = kind.options(options)
    kind.check(options)  # before any work
    queries, candidates, _ = load_pool(place.corpus_dir, pool)
    pairs, candidates = own_lists(candidates)  # MDCR-style: each query ranks its own list
    depth = k if pairs is None else candidates.height  # a query's list: all it may rank
    texts = (query_texts(place.corpus_dir, queries, variant, seed)
             if variant != "full" or own_text(queries) else None)  # not the papers' own text
    if texts is not None and not kind.searches(queries):
        raise InputError(f"pool {pool}: its queries are texts, not papers of the corpus; "
                         f"{entry.name} ({entry.kind}) searches papers' stored vectors only")
    roots = place.roots
    inputs: dict[str, str] = {}
    read = pool_files(place.corpus_dir, pool)  # every file the run is made from, recorded first
    if texts is not None and not own_text(queries):
        read.append(place.corpus_dir / PREFILTERED)
    inputs.update(record(roots, read))
    hits, found = kind.hits(Query(
        place, pool, entry, queries, candidates, texts, depth + 1,
        threads, seed, options, read=lambda paths: inputs.update(record(roots, paths))))
    details = {"query_variant": variant, **found}
    if entry.query_prompt is not None:  # QUERY_PROMPT: the text its tag was made from
        details["query_prompt"] = entry.query_prompt
    if isinstance(entry, ServedModel):  # where a repair searches it again (runs.run_repair)
        details[ENDPOINT] = entry.endpoint
    counts, keep = {}, k
    if pairs is not None:
        hits, counts["pairs_unmatched_scored_0"], keep = keep_own_lists(hits, pairs, k)
    run, self_hits = finalize_run(hits, keep)
    paths = run_paths(place.runs_root, place.corpus, pool, name)
    with file_lock(paths.trec.parent / name):  # the run
        check_not_imported(place, entry.name)  # imported while this one searched
        write_run(run, paths, tag=name)
        seconds = time.perf_counter() - start
        info = run_manifest(run_identity(entry, pool, k, seed, variant, run_options),
                            details, paths, seconds,
                            counts={"queries": queries.height, "candidates": candidates.height,
                                    "rows": run.height, "self_hits_removed": self_hits,
                                    **counts},
                            inputs=inputs)
        write_json(info, paths.manifest)
    return info


@dataclass(frozen=True)
class IndexSettings:
    """How `index_pools` builds what a model searches: the retriever's own options
    (Retriever.OPTIONS), an encoder's store options (embed's: batch size, dtype, weights,
    device, part size) and the stage-times log each pool's time is appended to."""

    threads: int = 2
    options: Mapping[str, object] = field(default_factory=dict)
    store: Mapping[str, object] = field(default_factory=dict)
    times: Path | None = None


@dataclass(frozen=True)
class SearchSettings(IndexSettings):
    """How `search_model` searches (`make search`): the run's parameters (`run_options`: the
    declared options that change a run, by make variable: run_identity); `index`: what the
    pools searched search built first; `stale_only`: runs current for their pool kept."""

    k: int = TOP_K
    seed: int = 0
    variant: str = "full"
    run_options: Mapping[str, object] = field(default_factory=dict)
    index: bool = False
    stale_only: bool = False


def retriever_options(entry: ModelEntry, given: Mapping[str, object]) -> dict:
    """The options of `entry`'s retriever (Retriever.OPTIONS) among `given` (None: not given)."""
    return {name: given.get(name) for name in retriever(entry.kind).OPTIONS}


def model_to_search(place: Place, model: str, given: Mapping[str, object]) -> ModelEntry | None:
    """The entry of `model`, its retriever's options among `given` checked before any work (a
    GPU backend absent: refused); None where `model` is a run imported into the corpus (make
    import-run): nothing to search, eval scores it as it is. `given`'s query_prompt
    (QUERY_PROMPT) goes before its queries (models.with_query_prompt)."""
    if imported := imported_pools(place.runs_root, place.corpus, model):
        log.info(f"[search] {model} is a run imported into {len(imported)} pools "
                 f"({', '.join(imported)}), not a model: nothing to search")
        return None
    entry = routed(with_query_prompt(get_model(model), given.get("query_prompt")),
                   given.get("model_path"))
    check_name("model", entry.name)  # its runs' and store's file names
    kind = retriever(entry.kind)
    if not kind.ranks_alone:
        raise reranks_only(model, entry)
    kind.check(kind.options(retriever_options(entry, given)))
    return entry


def index_pools(place: Place, entry: ModelEntry, pools: list[str],
                settings: IndexSettings) -> None:
    """Build what `entry` searches for each pool, each timed; an encoder is loaded once for all
    of them. A device asked for and absent is refused even with nothing to build."""
    if settings.store.get("device"):
        from pipeline.encoding.workers import check_devices

        check_devices(settings.store["device"])
    if entry.embedded:
        from pipeline.encoding.embed import embed

        with timed("index", settings.times, model=entry.name, pools=len(pools)):
            embed(place, entry, pools, **settings.store)
        return
    for pool in pools:
        with timed("index", settings.times, model=entry.name, pool=pool):
            index(place, pool, entry, settings.threads, part_size=settings.store.get("part_size"),
                  **settings.options)


def search_model(place: Place, entry: ModelEntry, pools: list[str],
                 settings: SearchSettings) -> None:
    """Search `pools` one after another in this process (one JVM, or one model and device
    set-up, for all of them), each timed with its queries per second. With REPLACE=1 (the
    store options' `replace`), an embedded model's every pool is embedded before any run is
    kept as current, so that the runs a replaced store takes with it are searched again."""
    name = run_name(entry.name, settings.variant)
    # a Lucene index is checked for every pool first (a no-op when intact): a damaged one is
    # built again (verify's repair for it), and the runs made from the old one are then stale
    lucene = entry.kind == "bm25" and settings.options.get("bm25_engine") == "lucene"
    if settings.index and lucene:
        index_pools(place, entry, pools, settings)
    replace = bool(settings.store.get("replace")) and entry.embedded
    if settings.stale_only and entry.embedded:  # a store of another model: no run is current
        from pipeline.encoding.store_identity import check_identity

        check_identity(place, entry, settings.store.get("model_path"), replace)
    # REPLACE=1 embeds every pool before any run is kept: a served model's store found
    # another model's by its probes (embed) goes with every run made from it, current or not
    indexed_all = settings.index and replace and settings.stale_only
    if indexed_all:
        index_pools(place, entry, pools, settings)
    if settings.stale_only:
        kept = [p for p in pools if current_run(place, p, entry, settings.k, settings.seed,
                                                settings.variant, settings.run_options)]
        pools = [p for p in pools if p not in kept]
        log.info(f"[search] {name}: {len(kept)} current runs kept, {len(pools)} to search")
    if settings.index and pools and not lucene and not indexed_all:
        index_pools(place, entry, pools, settings)
    for pool in pools:
        with timed("search", settings.times, model=name, pool=pool) as info:
            out = search_pool(place, pool, entry, settings.k, settings.threads, settings.seed,
                              settings.variant, settings.run_options, **settings.options)
            info.update(queries_per_s=out["queries_per_s"])


def check_store_model(place: Place, entry: ModelEntry, pools: list[str],
                      settings: SearchSettings, call: str) -> None:
    """A store another model embedded refused in the API's words (`call`), or with `replace` removed
    with its runs (a damaged one is built again); then, with `settings.index`, what the model
    searches built for every pool, as a model object's store refuses settings its runs do not
    record."""
    from dataclasses import replace

    from pipeline.core.files import is_corrupt
    from pipeline.core.repair import Repair
    from pipeline.encoding.store_identity import check_identity
    from pipeline.layout import MANIFEST, store_dir

    if not is_corrupt(store_dir(place.index_root, place.corpus, entry.name) / MANIFEST):
        check_identity(place, entry, settings.store["model_path"],
                       bool(settings.store["replace"]), how="search again with replace=True",
                       repair=Repair("", place.corpus, entry.name, note=f"in Python: {call}"))
    if settings.index:  # untimed: mostly a check (search_model times what it builds)
        index_pools(place, entry, pools, replace(settings, times=None))
