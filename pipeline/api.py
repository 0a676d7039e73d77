"""The Python API, `import pipeline` (docs/api.md): the code the commands and the Makefile run,
given a data folder once (`Data`). Stages are imported when a function is called, so importing this
module loads the standard library only."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pipeline.core.annotations import (
    Alpha,
    Check,
    Counts,
    Deltas,
    Folder,
    Help,
    Metrics,
    Model,
    Models,
    Pools,
    Results,
    Run,
    TrainingSets,
)
from pipeline.core.errors import InputError, OptionError
from pipeline.core.numbers import power_level
from pipeline.core.repair import PIPELINE_COMMAND, Repair, Where
from pipeline.layout import (
    Place,
    check_name,
    parse_size,
    raw_dir,
    run_name,
    stage_times_path,
)
from pipeline.options import checks
from pipeline.options.checks import DTYPES, model_name
from pipeline.options.declared import MODEL_ID, default, kind_run_options
from pipeline.roots import data_roots, where

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import polars as pl

    from pipeline.ingest.synthetic import SyntheticConfig
    from pipeline.models import ModelEntry
    from pipeline.pools.build import PoolSpec
    from pipeline.report.build import Report

__all__ = ["Data", "build_corpus", "build_pool", "build_report", "evaluate", "import_run",
           "list_models", "search", "sweep", "verify_data", "warm"]

class Data:
    """Where the data lives: a folder holding corpora/, indexes/ and runs/ (make's DATA), or each
    root given apart (CORPORA_DIR, INDEX_DIR, RUNS_DIR)."""

    def __init__(self, folder: str | os.PathLike | None = None, *,
                 corpora: str | os.PathLike | None = None,
                 indexes: str | os.PathLike | None = None,
                 runs: str | os.PathLike | None = None):
        from pipeline.options.arguments import check_value, hints

        given = {"corpora": corpora, "indexes": indexes, "runs": runs}
        said = hints(Data.__init__)
        for name, value in {"folder": folder, **given}.items():
            check_value("Data", name, value, said[name])
        if folder is None and not all(given.values()):
            raise InputError("Data: give a folder (holding corpora/, indexes/, runs/), or all "
                            "three of corpora=, indexes=, runs=")
        roots = data_roots(folder if folder is not None else ".", **given)
        self.corpora: Path = roots["corpora"]
        self.indexes: Path = roots["indexes"]
        self.runs: Path = roots["runs"]

    @classmethod
    def of(cls, data: DataFolder) -> Data:
        """`data` itself, or the data folder it names."""
        return data if isinstance(data, Data) else cls(data)

    def __repr__(self) -> str:
        return f"Data(corpora={str(self.corpora)!r}, indexes={str(self.indexes)!r}, " \
               f"runs={str(self.runs)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Data) and (self.corpora, self.indexes, self.runs) == (
            other.corpora, other.indexes, other.runs)

    def __hash__(self) -> int:
        return hash((self.corpora, self.indexes, self.runs))

    def corpus(self, name: str) -> Path:
        """The folder of corpus `name`, the name checked as CORPUS is: never a path, so nothing is
        written outside the corpora folder."""
        return self.corpora / check_name("corpus", name)

    def place(self, corpus: str) -> Place:
        """Where corpus `corpus`'s data lives, as every stage function takes it."""
        return Place(self.corpus(corpus), self.indexes, self.runs)

    def pools(self, corpus: str) -> list[str]:
        """The names of the corpus's pool folders, sorted."""
        from pipeline.pools.build import pool_folders

        return pool_folders(self.corpus(corpus))

    def _named(self, program: str | None = None) -> Where:
        """How a repair command names these roots (`program`: how it calls the pipeline)."""
        return where(self.corpora, self.indexes, self.runs, program or PIPELINE_COMMAND)

    def _times(self, corpus: str) -> Path:
        """The log of corpus `corpus`'s stage times (the report's stage-times table)."""
        return stage_times_path(self.runs, corpus)

    def results(self, collect: bool = True) -> pl.DataFrame:
        """Every current evaluation gathered into runs/results.parquet (written) and returned;
        `collect=False` reads the file written last, refused when it differs from its manifest or
        its evaluations changed since."""
        if not collect:
            from pipeline.core.inputs import Roots
            from pipeline.evaluation.evaluate import read_results
            from pipeline.layout import RESULTS_FILE

            return read_results(self.runs / RESULTS_FILE,
                                Roots(self.corpora, self.indexes, self.runs))
        from pipeline.core.locks import file_lock
        from pipeline.evaluation.evaluate import collect_results
        from pipeline.layout import RESULTS_FILE

        with file_lock(self.runs / RESULTS_FILE):  # a report reading them waits (build_report)
            return collect_results(self.corpora, self.indexes, self.runs)


# The rules of the API's own arguments that several functions take, on their parameters
# (core/annotations.py: Check, Help; with a Help, also their command's option)
DataFolder = Data | Folder
Program = Annotated[str | None, Check(checks.named)]  # how a repair names the pipeline
Name = Annotated[str, Check(checks.named)]  # a model's or a metric's, as results.parquet has it
GivenPools = Annotated[Pools | None, Check(checks.pool_name),
                       Help("pool name (repeatable; default all)", repeats=True,
                            changes_run=False)]
ReadModels = Annotated[Models, Check(checks.scored_runs), Help(
    "the models whose runs it reads, separated by commas (mdcr: those whose top ranks give the "
    "negatives, the paper's bm25,specter,scincl; judge, judge-page: those whose top ranks are "
    "sampled)", required=True)]
BatchSize = Annotated[int | None, Check(checks.batch_count),
                      Help("papers per batch (default: the encoder's)", changes_run=False)]
PartSize = Annotated[int | None, Check(checks.part_count), Help(
    "papers per store part, the work a kill can lose (default: 4,096 for embeddings, 50,000 "
    "for BM25's analysed-text store)", changes_run=False)]
Dtype = Annotated[str, Check(checks.choice(DTYPES)),
                  Help("the store's vectors: float32, or float16 (half the disk)",
                       changes_run=MODEL_ID)]
StaleOnly = Annotated[bool, Check(), Help(
    "keep what is current: runs intact and made from their pool's current files, evaluations "
    "made from the current pool and run", changes_run=False)]
RepairPools = Annotated[bool, Check(), Help(
    "first rebuild every pool that is stale, damaged or half-written (as make pools)",
    changes_run=False)]
MinCitations = Annotated[int | None, Check(checks.non_negative), Help(
    "citations a paper needs to stay (default: the prefilter's, MDCR §3)")]
CpusPerTask = Annotated[int | None, Check(checks.cpus_per_task), Help("CPUs of each SLURM job")]
SyntheticShards = Annotated[int | None, Check(checks.synth_shard_count)]


def _entry(model: str | ModelEntry) -> ModelEntry:
    """The registry's entry of `model`, or the ModelEntry given, refused where its name is a
    registered or derived model's with other settings."""
    from pipeline.models import get_model

    entry = get_model(model) if isinstance(model, str) else model
    check_name("model", entry.name)
    if not isinstance(model, str):
        try:
            known = get_model(entry.name)
        except InputError:
            return entry
        if known != entry:  # one name, one model: its runs and store are named so
            raise InputError(f"model {entry.name!r} is a registered or derived model's name "
                             "(make models), given here with other settings: give your entry "
                             "a name of its own")
    return entry


def generate_corpus(data: DataFolder, corpus: str, *,
                    papers: Annotated[int | str | SyntheticConfig | None,
                                     Check(checks.synthetic_papers)] = None,
                    shards: SyntheticShards = None, seed: int | None = None, repair: bool = False,
                    threads: int = default("THREADS")) -> dict:
    """`make corpus`'s synthetic shards (the synth command), written into corpora/<corpus>/s2orc,
    each setting not given as the shards there were made; with `repair`, the damaged or missing ones
    written again. A no-op when current; timed into the corpus's stage-times log. Returns the
    generator's manifest."""
    from pipeline.core.timing import timed
    from pipeline.ingest.synthetic import SyntheticConfig, chosen_config, generate

    data = Data.of(data)
    out_dir = raw_dir(data.corpora, check_name("corpus", corpus), "s2orc")
    cfg = papers if isinstance(papers, SyntheticConfig) else chosen_config(
        out_dir, n_papers=parse_size(str(papers)) if papers else None, n_shards=shards,
        seed=seed, repair=repair)
    with timed("synth", data._times(corpus), papers=cfg.n_papers) as info:
        made = generate(out_dir, cfg, workers=threads)
        info.update(made["counts"])
    return made


def ingest_corpus(data: DataFolder, corpus: str, *,
                  raw: Folder | None = None, source: str | None = None,
                  strict: bool = False, fos_source: str = default("FOS_SOURCE"),
                  threads: int = default("THREADS")) -> dict:
    """`make corpus`'s ingest (the ingest command): the raw shards of `corpus` (from `raw`, default
    corpora/<corpus>/<source>) into papers.parquet and citations.parquet. A no-op when current;
    timed into the corpus's stage-times log. Returns the manifest's ingest section."""
    from pipeline.core.timing import timed
    from pipeline.ingest import ingest

    data = Data.of(data)
    corpus_dir = data.corpus(corpus)
    source = _source(source, corpus_dir)
    folder = Path(raw) if raw else raw_dir(data.corpora, corpus, source)
    with timed("ingest", data._times(corpus)) as info:
        made = ingest(folder, corpus_dir, strict=strict, workers=threads, source=source,
                      fos_source=fos_source)
        # the quarantined lines have lines of their own (ingest's), naming their dataset
        info.update({k: v for k, v in made["counts"].items() if not k.endswith("quarantined")})
    return made


def _source(source: str | None, corpus_dir: Path) -> str:
    """`source`, else the one the corpus's manifest records it was ingested with, else
    SOURCE's default for its name; a known one (it names the raw folder). A source given that
    contradicts the recorded one is refused, naming both: a corpus is read by one reader."""
    from pipeline.corpus.manifest import recorded_source
    from pipeline.options.declared import BY_NAME
    from pipeline.readers import reader

    recorded, corpus = recorded_source(corpus_dir), corpus_dir.name
    if source and recorded and source != recorded:
        raise OptionError(f"{{SOURCE=}}: corpus {corpus} was ingested from {recorded} (its "
                          f"manifest.json): leave {{SOURCE}} out, or read {source} into "
                          "another {CORPUS}", {"SOURCE": source})
    source = source or recorded or BY_NAME["SOURCE"].default(  # type: ignore[operator]
        {"CORPUS": corpus})
    reader(source)
    return source


def prefilter_corpus(data: DataFolder, corpus: str, *,
                     citations: str = default("CITATIONS"), min_citations: MinCitations = None
                     ) -> dict:
    """`make corpus`'s prefilter (the prefilter command): prefiltered.parquet of `corpus`, the
    dropped papers counted by reason. A no-op when current; timed into the corpus's stage-times log.
    Returns the manifest's prefilter section."""
    from pipeline.core.timing import timed
    from pipeline.ingest import prefilter

    data = Data.of(data)
    corpus_dir = data.corpus(corpus)
    with timed("prefilter", data._times(corpus)) as info:
        made = prefilter(corpus_dir, citations,  # type: ignore[arg-type]
                         **({} if min_citations is None else {"min_citations": min_citations}))
        info.update(made["counts"])
    return made


def build_corpus(data: DataFolder, corpus: str, *,
                 synthetic: Annotated[int | str | SyntheticConfig | None,
                                    Check(checks.synthetic_papers)] = None,
                 shards: SyntheticShards = None, seed: int | None = None,
                 raw: Folder | None = None, source: str | None = None,
                 fos_source: str = default("FOS_SOURCE"), strict: bool = False,
                 citations: str = default("CITATIONS"), min_citations: MinCitations = None,
                 threads: int = default("THREADS")) -> Path:
    """`make corpus` (the corpus command): synthetic shards first with `synthetic`, then
    ingest_corpus and prefilter_corpus, each a no-op when current; returns the corpus folder. With
    `synthetic`, a `raw` other than corpora/<corpus>/s2orc or a `source` other than s2orc is
    refused."""
    data = Data.of(data)
    corpus_dir = data.corpus(corpus)
    source = _source(source, corpus_dir)
    shards_dir = raw_dir(data.corpora, corpus, "s2orc")
    if synthetic is not None and raw and os.path.abspath(raw) != os.path.abspath(shards_dir):
        into = str(shards_dir).replace("{", "{{").replace("}", "}}")
        raise OptionError("{RAW=} is a release to read, and the synthetic shards are written "
                          f"into {into}: give one of them", {"RAW": str(raw)})
    if synthetic is not None and source != "s2orc":
        raise InputError(f"build_corpus: synthetic shards are in S2ORC's format: give "
                         f"source='s2orc', not {source!r}")
    if synthetic is not None:
        generate_corpus(data, corpus, papers=synthetic, shards=shards, seed=seed, threads=threads)
    ingest_corpus(data, corpus, raw=raw, source=source, strict=strict, fos_source=fos_source,
                  threads=threads)
    prefilter_corpus(data, corpus, citations=citations, min_citations=min_citations)
    return corpus_dir


def build_pool(data: DataFolder, corpus: str, spec: PoolSpec | None = None, *,
               size: Annotated[int | str | None, Check(parse_size)] = None,
               field: Annotated[str | None, Check()] = None,  # one field, not FIELD's list
               repeat: Annotated[int | None, Check(checks.repeat_index)] = None,
               queries: int | None = None, seed: int | None = None, split: str | None = None,
               query_year: Annotated[int | None, Check(checks.non_negative)] = None,
               max_year: Annotated[int | None, Check(checks.non_negative)] = None,
               min_positives: Annotated[int | None, Check(checks.positive)] = None,
               exclude: Folder | None = None) -> str:
    """Build one pool of `corpus` and return its name: from a PoolSpec, or its fields as keywords
    (not both; a field not given: PoolSpec's default)."""
    fields = {name: value for name, value in locals().items()
              if name not in ("data", "corpus", "spec") and value is not None}
    from pipeline.pools.build import PoolSpec
    from pipeline.pools.build import build_pool as build

    if spec is not None and fields:
        raise InputError("build_pool: give a PoolSpec or its fields as keywords, not both")
    if spec is None:
        if size is None:
            raise InputError("build_pool: missing size: give a pool size (e.g. 20k) or a "
                             "PoolSpec")
        spec = PoolSpec(**{**fields, "size": parse_size(str(size))})
    # its refusals name SIZE and QUERIES, worded as the API's keywords (size, queries)
    return build(Data.of(data).corpus(corpus), spec)["name"]


def build_pools(data: DataFolder, corpus: str, *,
                size: int | str | None = None, field: str | None = None,
                repeats: int = default("REPEATS"), queries: int | None = None,
                seed: int = default("SEED"), split: str = default("SPLIT"),
                exclude: Folder | None = None,
                query_year: Annotated[int | None, Check(checks.non_negative),
                                      Help("the queries' year (default: PoolSpec's)")] = None,
                rebuild: Annotated[Pools | None, Check(checks.pool_name), Help(
                    "rebuild an existing pool from its recorded parameters (if stale)",
                    repeats=True)] = None, repair: bool = False) -> list[str]:
    """`make pool` and `make pools` (the pool command): a pool of `corpus` for each field x size x
    repeat, their names returned; or instead `rebuild`'s pools built again from their recorded
    parameters, or with `repair` every stale, damaged or half-written pool (one whose EXCLUDE list
    changed is named and skipped). A current pool is kept; each is timed into the corpus's
    stage-times log."""
    from pipeline.fields import resolve_fields
    from pipeline.pools.build import pool_folders
    from pipeline.pools.grid import build_grid, rebuild_pools, usable_pools

    data = Data.of(data)
    corpus_dir, times = data.corpus(corpus), data._times(corpus)
    if repair or rebuild:  # make pools: each pool whose list changed is named and skipped
        names = (usable_pools(corpus_dir, pool_folders(corpus_dir), "pool", data._named())
                 if repair else [rebuild] if isinstance(rebuild, str) else list(rebuild or ()))
        rebuild_pools(corpus_dir, names, times)
        return names
    if not size:
        raise OptionError("pool: give {SIZE} (e.g. 20k) or --rebuild <pool>")
    fields = resolve_fields(field) if field else [None]
    sizes = [parse_size(text) for text in str(size).split()]
    settings = {"queries": queries, "seed": seed, "split": split,
                "exclude": None if exclude is None else str(exclude),
                **({} if query_year is None else {"query_year": query_year,
                                                  "max_year": query_year})}
    return build_grid(corpus_dir, fields, sizes, repeats, times, **settings)


def build_paper_pools(data: DataFolder, corpus: str, *,
                      seed: int = default("SEED"), exclude: Folder | None = None,
                      paper_sizes: int | str = default("PAPER_SIZES"),
                      paper_queries: int = default("PAPER_QUERIES"),
                      paper_field_size: int | str = default("PAPER_FIELD_SIZE"),
                      paper_field_queries: int = default("PAPER_FIELD_QUERIES"),
                      paper_repeats: int = default("PAPER_REPEATS")) -> list[str]:
    """`make pools-paper` (the pools-paper command): the paper's grid of `corpus`'s pools (MDCR §3),
    dataset-level and of the 19 fields, for the test then the validation split. Returns the pools'
    names; its refusals name its own arguments."""
    from pipeline.fields import resolve_fields
    from pipeline.pools.build import Named
    from pipeline.pools.grid import build_grid

    data = Data.of(data)
    corpus_dir, times = data.corpus(corpus), data._times(corpus)
    names = []
    for split in ("test", "validation"):
        common = {"seed": seed, "split": split, "exclude": str(exclude) if exclude else None}
        for fields, sizes, queries, named in (
                ([None], paper_sizes, paper_queries, Named("PAPER_SIZES", "PAPER_QUERIES")),
                (resolve_fields("all"), paper_field_size, paper_field_queries,
                 Named("PAPER_FIELD_SIZE", "PAPER_FIELD_QUERIES"))):
            parsed = [parse_size(text) for text in str(sizes).split()]
            settings = {"queries": queries, **common}
            names += build_grid(corpus_dir, fields, parsed, paper_repeats, times, named,
                                **settings)
    return names


def retire_pool(data: DataFolder, corpus: str, pool: str
                ) -> list[tuple[Path, Path]]:
    """`make retire-pool` (the retire-pool command): pool `pool`, its Lucene index and its runs
    moved into the corpus's retired/ folders, where no stage reads them; returns the (from, to)
    moves. Only a pool make pool built; one retired before is never replaced."""
    from pipeline.pools.retire import retire_pool as retire

    moves = retire(Data.of(data).place(corpus), pool)
    log.info(f"[retire-pool] {pool}: {len(moves)} folders moved into retired/ (its files, its "
             "Lucene index and its runs, where it had them)")
    return moves


def training_ids(src: Folder, paper_ids: str | os.PathLike,
                 out: str | os.PathLike) -> dict:
    """`make training-ids` (the training-ids command): the papers of a list named by S2 SHA written
    to the new file `out` as CorpusIDs, one per line, looked up in S2AG's paper-ids dataset. Returns
    the counts: shas, corpus_ids, shas_not_found."""
    from pipeline.ingest.training_ids import convert

    counts = convert(Path(src), Path(paper_ids), Path(out))
    log.info(f"[training-ids] {out}: {counts['corpus_ids']} CorpusIDs of {counts['shas']} "
             f"SHAs ({counts['shas_not_found']} not found)")
    return counts


def download(data: DataFolder, corpus: str, *,
             raw: Folder | None = None, release: str = default("RELEASE"),
             datasets: str = default("DATASETS"), first: int | None = None,
             update: bool = False, parallel: int = default("PARALLEL"),
             retries: Annotated[int | None, Check(checks.retry_count), Help(
                 "retries without progress before a file (or API call) is an error (default: "
                 "s2client.Settings')")] = None,
             backoff: Annotated[float | None, Check(checks.backoff), Help(
                 "seconds of the first pause between tries, doubling each time (default: "
                 "s2client.Settings')")] = None) -> dict:
    """`make download` (the download command): the S2AG `datasets` of `release` from the Semantic
    Scholar Datasets API (its key: S2_API_KEY) into `raw` (default corpora/<corpus>/s2ag), a
    download stopped before finished. Returns the summary (release, files and bytes per dataset);
    logs the make corpus command that ingests it."""
    from pipeline.ingest.download import download as fetch
    from pipeline.ingest.s2client import Settings

    data = Data.of(data)
    settings = Settings.from_environment(**{key: value for key, value in (
        ("parallel", parallel), ("retries", retries), ("backoff", backoff)) if value is not None})
    folder = Path(raw) if raw else raw_dir(data.corpora, check_name("corpus", corpus), "s2ag")
    summary = fetch(folder, settings, release=release, datasets=datasets.replace(
        ",", " ").split(), first=first, update=update)
    following = Repair("corpus", corpus, variables=(("SOURCE", "s2ag"), *(
        (("RAW", str(folder)),) if raw else ())))
    log.info("release %s in %s; next: %s", summary["release"], folder,
             following.command(data._named()))
    return summary


def search(data: DataFolder, corpus: str, pool: GivenPools,
           model: Model, *, k: int = default("K"), threads: int = default("THREADS"),
           seed: int = default("SEED"), query_variant: str = default("QUERY_VARIANT"),
           query_prompt: str | None = None, replace: bool = False,
           index: Annotated[bool, Check(), Help("index the pools it searches first",
                                                changes_run=False)] = True,
           stale_only: StaleOnly = True, repair_pools: RepairPools = False,
           batch_size: BatchSize = None,
           dtype: Dtype = DTYPES[0], part_size: PartSize = None,
           model_path: str | os.PathLike | None = None, device: str | None = None,
           program: Program = None, **options: Any) -> str:
    """`make search` (the search command): the top `k` candidates of each query of `pool` (None:
    every usable pool) retrieved by `model` and written as runs, each pool timed; returns the run's
    name. `options`: search's declared options and the retriever's own, others refused. What the
    model searches is built first (`index`), a current run is kept (`stale_only`), `repair_pools`
    first builds stale pools again. A model named as an imported run is that run: nothing searched.
    A store of the name that another model embedded is refused (worded as make's with `program`), or
    with `replace` removed with its runs and made again."""
    from pipeline.encoding.embed import store_options
    from pipeline.encoding.families import routed
    from pipeline.models import with_query_prompt
    from pipeline.options.arguments import known_options
    from pipeline.retrieval.registry import retriever
    from pipeline.retrieval.search import (
        SearchSettings,
        check_not_imported,
        check_store_model,
        model_to_search,
        retriever_options,
        search_model,
    )

    data = Data.of(data)
    place, times = data.place(corpus), data._times(corpus)
    given = {**options, "query_prompt": query_prompt, "model_path": model_path}
    entry = model_to_search(place, model, given) if isinstance(model, str) else routed(
        with_query_prompt(_entry(model), query_prompt), model_path)  # a name: resolved there
    if entry is None:
        return model  # a run imported under this name (make import-run): nothing to search
    known_options("search", entry.kind, options, list(retriever(entry.kind).OPTIONS))
    check_not_imported(place, entry.name)  # a ModelEntry named as an imported run
    pools = _stage_pools(data, corpus, pool, "search", program, repair_pools)
    given = retriever(entry.kind).options(retriever_options(entry, given))
    store = store_options(batch_size, dtype, part_size, model_path, device, replace)
    settings = SearchSettings(threads=threads, options=given, store=store, times=times, k=k,
                              seed=seed, variant=query_variant, run_options=kind_run_options(
                                  entry, given), index=index, stale_only=stale_only)
    if entry.embedded and program is None:  # in Python's words (the call is its repair)
        check_store_model(place, entry, pools, settings,
                          _call("search", corpus, pool, model, query_prompt=query_prompt,
                                model_path=model_path, replace=True))
    search_model(place, entry, pools, settings)
    return run_name(entry.name, query_variant)


def embed(data: DataFolder, corpus: str, pool: GivenPools,
          model: str, *, shards: int = default("SHARDS"), shard: int | None = None,
          batch_size: BatchSize = None, dtype: Dtype = DTYPES[0], part_size: PartSize = None,
          model_path: str | os.PathLike | None = None, device: str | None = None,
          replace: bool = False, program: Program = None) -> Path:
    """`make embed` (the embed command): the papers of `pool` (None: every usable pool) missing from
    `model`'s store embedded, shard `shard` (None: each in turn), each timed; returns the store's
    folder. A store of another model under the name is refused, or with `replace` embedded again."""
    from pipeline.encoding.embed import embed_shards, store_options
    from pipeline.layout import store_dir
    from pipeline.models import get_model

    data = Data.of(data)
    place = data.place(corpus)
    pools = _stage_pools(data, corpus, pool, "embed", program)
    embed_shards(place, model, pools, range(shards) if shard is None else [shard],
                 shards, data._times(corpus),
                 **store_options(batch_size, dtype, part_size, model_path, device, replace))
    return store_dir(data.indexes, corpus, get_model(model).name)


def index(data: DataFolder, corpus: str, pool: GivenPools,
          model: Model, *, threads: int = default("THREADS"),
          repair_pools: RepairPools = False, batch_size: BatchSize = None, dtype: Dtype = DTYPES[0],
          part_size: PartSize = None, model_path: str | os.PathLike | None = None,
          device: str | None = None, replace: bool = False, program: Program = None,
          **options: Any) -> list[str]:
    """`make index` (the index command): what `model` searches built for `pool` (None: every usable
    pool), what is current kept, each pool timed; returns the pools. `options`: the retriever's own
    and the index command's declared ones, others refused."""
    from pipeline.encoding.embed import store_options
    from pipeline.encoding.families import routed
    from pipeline.options.arguments import known_options
    from pipeline.retrieval.registry import retriever
    from pipeline.retrieval.search import IndexSettings, index_pools, retriever_options

    data = Data.of(data)
    place, times = data.place(corpus), data._times(corpus)
    entry = routed(_entry(model), model_path)
    known_options("index", entry.kind, options, list(retriever(entry.kind).OPTIONS))
    pools = _stage_pools(data, corpus, pool, "index", program, repair_pools)
    options = retriever_options(entry, {**options, "model_path": model_path})
    index_pools(place, entry, pools, IndexSettings(threads, options, store_options(
        batch_size, dtype, part_size, model_path, device, replace), times))
    return pools


def _stage_pools(data: Data, corpus: str, pool: Pools | None, stage: str,
                 program: Program, repair: bool = False) -> list[str]:
    """The pools `stage` works on: `pool`, else every usable one; with `repair`, the corpus's stale
    or damaged pools built again first."""
    from pipeline.pools.grid import repair_pools, stage_pools

    corpus_dir, named = data.corpus(corpus), data._named(program)
    if repair:
        repair_pools(corpus_dir, data._times(corpus), named)
    return stage_pools(corpus_dir, [pool] if isinstance(pool, str) else pool, stage, named)


def submit_embed(data: DataFolder, corpus: str, pool: GivenPools,
                 model: str, *, shards: int = default("SHARDS"),
                 partition: str | None = None, gpus_per_task: int = default("GPUS_PER_TASK"),
                 slurm_time: str | None = None, cpus_per_task: CpusPerTask = None,
                 batch_size: BatchSize = None, dtype: Dtype = DTYPES[0],
                 part_size: PartSize = None, model_path: str | os.PathLike | None = None,
                 device: str | None = None, replace: bool = False) -> str:
    """`make embed EXECUTOR=slurm` (the submit-embed command): a SLURM array of `shards` tasks
    embedding `pool`, written under <runs>/slurm/ and submitted; returns its job id. A store of
    another model under the name is refused, or with `replace` removed here, once, before anything
    is submitted."""
    from pipeline.models import get_model
    from pipeline.slurm import Resources
    from pipeline.slurm import submit_embed as submit

    place = Data.of(data).place(corpus)
    pools = [pool] if isinstance(pool, str) else pool
    options = {"--pool": None if pools is None else list(pools), "--batch-size": batch_size,
               "--dtype": dtype, "--model-path": model_path, "--device": device,
               "--part-size": part_size}  # each task's embed options
    return submit(place, get_model(model).name, shards,
                  Resources(partition, gpus_per_task, slurm_time, cpus_per_task), options,
                  replace=replace)


def after_embed(data: DataFolder, corpus: str, pool: GivenPools,
                model: str, command: Sequence[str], *, shards: int = default("SHARDS"),
                partition: str | None = None, gpus_per_task: int = default("GPUS_PER_TASK"),
                slurm_time: str | None = None, cpus_per_task: CpusPerTask = None,
                model_path: str | os.PathLike | None = None, program: Program = None
                ) -> str | int:
    """`make eval EXECUTOR=slurm`'s step (the after-embed command): while papers of `pool` are
    missing from `model`'s store, `command` submitted after the recorded embed array, its job id
    returned; once every shard is in, run here, its exit status returned. Refused where papers are
    missing and no array is queued or running, and where the store is another model's."""
    from pipeline.encoding.families import routed
    from pipeline.models import get_model
    from pipeline.slurm import Resources, run_here, submit_after_embed

    data = Data.of(data)
    place = data.place(corpus)
    pools = _stage_pools(data, corpus, pool, "after-embed", program)
    model_path = None if model_path is None else str(model_path)
    job_id = submit_after_embed(place, routed(get_model(model), model_path), shards,
                                Resources(partition, gpus_per_task, slurm_time, cpus_per_task),
                                list(command), pools, model_path=model_path)
    return run_here(list(command)) if job_id is None else job_id


def _call(function: str, corpus: str, pool: str, model: str | ModelEntry,
          **keywords: object) -> str:
    """A call of the API as a repair shows it: values as Python literals, a model object by its
    name, the keywords not None."""
    shown = repr(model) if isinstance(model, str) else \
        f"<the {type(model).__name__} named {model.name!r}>"
    given = "".join(f", {key}={str(value) if isinstance(value, os.PathLike) else value!r}"
                    for key, value in keywords.items() if value is not None)
    return f"pipeline.{function}(<data>, {corpus!r}, {pool!r}, {shown}{given})"


def _run(model: str | ModelEntry, place: Place | None = None, pool: str = "") -> str:
    """The run name of `model`: an imported run's by its name; a ModelEntry's (never an
    imported run's: scoring it would score the import) or a registered model's."""
    if not isinstance(model, str):
        entry = _entry(model)
        if place is not None:
            from pipeline.retrieval.search import check_not_imported

            check_not_imported(place, entry.name)
        return entry.name
    if place is not None:  # a run imported under its own name (import_run)
        from pipeline.retrieval.imported import imported_pools

        if pool in imported_pools(place.runs_root, place.corpus, model):
            return model
    return model_name(model, "run")


def import_run(data: DataFolder, corpus: str, pool: str | None, run: Run,
               model: str, *, drop_unknown: bool = False, replace: bool = False) -> dict:
    """`make import-run`: a run made elsewhere imported as the run `model` of `pool` (None: of every
    pool, by its queries; then {pool: manifest} is returned), unknown ids refused unless
    `drop_unknown`, duplicates refused. Returns the run's manifest; the same source again changes
    nothing, another under the name needs `replace`."""
    from pipeline.retrieval.imported import import_run as run_import

    place = Data.of(data).place(corpus)
    return run_import(place, pool, run, model, drop_unknown=drop_unknown, replace=replace)


def import_collection(data: DataFolder, dataset: str, *, corpus: str,
                      split: str = default("SPLIT"), replace: bool = False,
                      judged: bool = False) -> str:
    """`make import-irds`: the ir_datasets collection `dataset` imported as corpus `corpus` with one
    pool of `split`; returns the pool's name. The same collection again changes nothing; another in
    its place needs `replace`."""
    from pipeline.external.irds import import_irds

    place = Data.of(data).place(corpus)
    info = import_irds(dataset, place.corpus_dir, split, replace, place.derived, judged)
    return info["collection"]["pools"][0]


def import_beir(data: DataFolder, src: Folder, *, corpus: str,
                split: str = default("SPLIT"), replace: bool = False,
                judged: bool = False) -> str:
    """`make import-beir`: the test collection in BEIR's layout at `src` imported as corpus `corpus`
    with one pool of `split`; returns the pool's name. The same collection again changes nothing;
    another in its place needs `replace`."""
    from pipeline.external.beir import import_beir as read_beir

    place = Data.of(data).place(corpus)
    info = read_beir(Path(src), place.corpus_dir, split, replace, place.derived, judged)
    return info["collection"]["pools"][0]


def import_csfcube(data: DataFolder, src: Folder, *, corpus: str,
                   replace: bool = False) -> list[str]:
    """`make import-csfcube`: the CSFCube release at `src` imported as corpus `corpus`, a pool per
    facet, all checked before anything is written; returns the pools' names. The same release again
    changes nothing; another in its place needs `replace`."""
    from pipeline.external.csfcube import import_csfcube as read_csfcube

    place = Data.of(data).place(corpus)
    return read_csfcube(Path(src), place.corpus_dir, replace, place.derived)[
        "collection"]["pools"]


def import_mdcr(data: DataFolder, src: Folder, *, corpus: str,
                split: str = default("SPLIT"), replace: bool = False) -> list[str]:
    """`make import-mdcr`: the official MDCR release's `split` at `src` imported as the benchmark
    corpus `corpus`, a pool per field; returns the pools' names. A benchmark of other contents is
    replaced only with `replace`."""
    from pipeline.mdcr.official import import_benchmark

    place = Data.of(data).place(corpus)
    return import_benchmark(Path(src), place.corpus_dir, split, replace, place.derived)[
        "benchmark"]["pools"]


def export_mdcr(data: DataFolder, corpus: str, out: str | os.PathLike, *,
                split: str = default("SPLIT")) -> dict:
    """`make export-mdcr`: the benchmark corpus `corpus` written in the official MDCR layout into
    the folder `out`; returns what was written."""
    from pipeline.mdcr.official import export_benchmark

    return export_benchmark(Data.of(data).corpus(corpus), Path(out), split)


def _model_names(models: str | Sequence[str | ModelEntry]) -> list[str]:
    """Models given as one string (separated by commas or spaces) or a list, by name."""
    if isinstance(models, str):
        return models.replace(",", " ").split()
    return [m if isinstance(m, str) else _entry(m).name for m in models]


def build_mdcr(data: DataFolder, corpus: str, models: ReadModels,
               out: Annotated[str, Check(checks.corpus_name),
                              Help("the benchmark's corpus name", required=True)], *,
               seed: int = default("SEED"),
               positives: Annotated[int | None, Check(checks.mdcr_count), Help(
                   "positives per query (default: build_mdcr's)")] = None,
               per_type: Annotated[int | None, Check(checks.mdcr_count),
                                   Help("negatives of each type")] = None,
               top: Annotated[int | None, Check(checks.depth), Help(
                   "model-based negatives from the top N; most cited: the field's top N")] = None,
               replace: bool = False,
               program: Program = None) -> dict:
    """`make mdcr` (the mdcr command): an MDCR-style benchmark (MDCR §4) of `corpus`'s field-level
    test pools, the runs of `models` giving its model-based negatives, written as corpus `out` and
    timed; returns its manifest. A benchmark of other contents is replaced only with `replace`; the
    log line names the command that evaluates a model on it."""
    from pipeline.core.timing import timed
    from pipeline.mdcr.build import build_mdcr as build
    from pipeline.mdcr.build import built_summary

    data = Data.of(data)
    place, out_dir = data.place(corpus), data.corpus(out)
    given = {key: value for key, value in (("positives", positives), ("per_type", per_type),
                                           ("top", top)) if value is not None}
    with timed("mdcr", data._times(corpus), out=out) as info:
        built = build(place, out_dir, _model_names(models), seed, replace=replace, **given)
        info.update(built["benchmark"]["counts"])
    log.info(built_summary(out_dir, built, data._named(program)))
    return built


def mdcr_jaccard(data: DataFolder, corpus: str, models: ReadModels, *,
                 seed: int = default("SEED"),
                 depth: Annotated[int | None, Check(checks.depth), Help(
                     "negatives compared per query (default: pipeline/mdcr/build.py's "
                     "JACCARD_DEPTH)")] = None) -> pl.DataFrame:
    """`make mdcr-jaccard` (the mdcr-jaccard command): the Jaccard index of the highest-ranked
    negatives of each pair of `models`, averaged over queries and fields (MDCR §4: pick the models
    whose negatives overlap least), written to runs/reports/ and returned."""
    from pipeline.mdcr.build import JACCARD_DEPTH, negative_jaccard
    from pipeline.report.build import jaccard_report

    place = Data.of(data).place(corpus)
    depth = depth or JACCARD_DEPTH
    table = negative_jaccard(place, _model_names(models), seed, depth)
    jaccard_report(table, place.runs_root, corpus, depth)
    return table


def mdcr_scores(data: DataFolder, corpus: str, model: str,
                out: str | os.PathLike, *, split: str = default("SPLIT"),
                shared_pairs: str = default("SHARED_PAIRS")) -> int:
    """`make mdcr-scores` (the mdcr-scores command): the official scores file of the runs `model` on
    the benchmark's `split`, written to `out`, one score per pair (`shared_pairs`: which, for a
    pair in two fields' pools); returns how many scores the file holds."""
    from pipeline.mdcr.official import model_scores_file

    return model_scores_file(Data.of(data).place(corpus), model, split, Path(out),
                             shared_pairs)


def mdcr_evaluate(benchmark: Annotated[str | os.PathLike, Check(checks.given_path),
                                         Help("mdcr_test.json or mdcr_val.json", required=True)],
                  scores: Annotated[str | os.PathLike, Check(checks.given_path),
                                    Help('{"<query>_<candidate>": score} JSON', required=True)]
                  ) -> tuple[pl.DataFrame, dict[str, float]]:
    """The mdcr-evaluate command's numbers: the official evaluator's for `scores` against
    `benchmark`, a row per field (x100) and each metric's macro average. Writes nothing."""
    from pipeline.mdcr.official import evaluate_files

    return evaluate_files(Path(benchmark), Path(scores))


def export_beir(data: DataFolder, corpus: str, pool: str,
                out: str | os.PathLike) -> dict:
    """`make export-beir`: pool `pool` of `corpus` written as the BEIR folder `out`; returns the
    datasheet. `out` is new, empty or an earlier export; an MDCR-style pool is refused."""
    from pipeline.external.export import export_beir as write_beir

    return write_beir(Data.of(data).place(corpus), pool, Path(out))


def mteb_result(data: DataFolder, corpus: str, pool: str,
                model: Model) -> dict:
    """The run of `model` on `pool` as an MTEB TaskResult's dict, scored from the saved run; writes
    nothing."""
    from pipeline.external.mteb_results import mteb_result as result_of

    place = Data.of(data).place(corpus)
    return result_of(place, pool, _run(model, place, pool))


def export_mteb(data: DataFolder, corpus: str, model: str,
                out: str | os.PathLike) -> list[Path]:
    """`make export-mteb`: the run `model` of each pool of `corpus` that has one written into `out`
    as an MTEB TaskResult file; returns the files. Refused where no pool has a run of `model`, and
    for files in `out` that an export did not write."""
    from pipeline.external.mteb_results import export_mteb as write_mteb

    return write_mteb(Data.of(data).place(corpus), model, Path(out))


def evaluate(data: DataFolder, corpus: str, pool: GivenPools, model: Models, *,
             metrics: Metrics = default("METRICS"),  # noqa: B008 (a str: immutable)
             means: bool = False, save: bool = True, stale_only: StaleOnly = True,
             collect: Annotated[bool, Check(), Help("then gather every evaluation into "
                                                   "runs/results.parquet (as collect)")] = False,
             program: Program = None) -> pl.DataFrame:
    """`make eval` (the eval command): the runs of `model` scored on `pool` (None: every usable
    pool), saved and timed as make eval saves them, a current evaluation kept (`stale_only`),
    metrics beyond a pool's own added to its saved evaluation; `save=False` writes nothing,
    `collect` then gathers runs/results.parquet. Returns the metrics asked, a row per model, query
    and candidate set (with `means`: per model); several pools add a `pool` column. A run imported
    under its own name is scored on the pools it was imported into; one pool named alone without it
    is refused."""
    from pipeline.evaluation.evaluate import (
        eval_is_current,
        eval_pools,
        eval_run,
        metrics_table,
        pool_metrics,
    )

    data = Data.of(data)
    place, one = data.place(corpus), isinstance(pool, str)
    pools = list(_stage_pools(data, corpus, pool, "eval", program))
    models = [model] if isinstance(model, str) or not isinstance(model, Sequence) else model
    runs = [_scored(m, place, pools, one) for m in models]  # checked before anything is written
    text = metrics if isinstance(metrics, str) else " ".join(metrics)
    wanted = {each: pool_metrics(place.corpus_dir, each, text) for each in pools}
    if save:
        for m, names in zip(models, runs, strict=True):
            if isinstance(m, str):  # make eval's stage: what it scores, logs and times
                eval_pools(place, m, pools, text, stale_only, data._times(corpus))
                continue
            for each, name in names.items():  # an entry, which no registry name looks up
                if not (stale_only and eval_is_current(place, each, name, wanted[each])):
                    eval_run(place, each, name, wanted[each])
    if collect:
        _collect(data)
    return metrics_table(place, runs, wanted, saved=save, means=means, one=one)


def _scored(model: str | ModelEntry, place: Place, pools: list[str], one: bool
            ) -> dict[str, str]:
    """The pools `model`'s runs are scored on, each with the run's name: an imported run's, those it
    was imported into (one pool named alone refused, as `_run` does); a model's, all."""
    if one:
        return {pools[0]: _run(model, place, pools[0])}
    if isinstance(model, str):
        from pipeline.retrieval.imported import imported_pools

        if imported := imported_pools(place.runs_root, place.corpus, model):
            return {each: model for each in pools if each in imported}
    return dict.fromkeys(pools, _run(model, None if isinstance(model, str) else place))


def collect(data: DataFolder) -> pl.DataFrame:
    """The collect command (make eval's last step): every current evaluation gathered into
    runs/results.parquet (written; one not current left out, logged with the command that makes it
    current) and returned."""
    return _collect(Data.of(data))


def _collect(data: Data) -> pl.DataFrame:
    from pipeline.layout import RESULTS_FILE

    results = data.results()
    log.info(f"[collect] {results.height} rows in {data.runs / RESULTS_FILE}")
    return results


def build_report(data: DataFolder, corpus: str, seed: int = default("SEED"), *,
                 collect: bool = True, exclude: Folder | None = None,
                 training_sets: TrainingSets | None = None,
                 shared_pairs: str = default("SHARED_PAIRS")) -> Report:
    """`make report` (the report command, then `Report.save()`): the Report of `corpus` and pool
    seed `seed` from every evaluation (`collect=False`: runs/results.parquet as written last); its
    `save()` writes it under runs/reports/ with the digests of what it was made from, from one
    state of the data (report.build.build_consistent: never evaluations from before and after a
    `make eval` beside it). `shared_pairs` (SHARED_PAIRS): the score Table 3 gives a pair
    listed under two fields, as `make mdcr-scores` writes it."""
    from pipeline.core.inputs import Roots
    from pipeline.layout import RESULTS_FILE
    from pipeline.report.build import build_consistent, report_lists, training_lists

    data = Data.of(data)
    check_name("corpus", corpus)
    if isinstance(training_sets, str):
        training_sets = training_lists(training_sets)
    lists = (None if exclude is None else str(exclude),
             {model: str(path) for model, path in (training_sets or {}).items()})
    report_lists(*lists)  # a refusal before results are collected: it writes nothing
    if collect and not (data.runs / corpus).is_dir():  # load_results's refusal, first
        raise InputError(f"no evaluated runs for CORPUS={corpus} and SEED={seed} in "
                         f"{data.runs / RESULTS_FILE}: run `make eval`")
    return build_consistent(Roots(data.corpora, data.indexes, data.runs), corpus, seed, lists,
                            collect, shared_pairs)


def verify_data(data: DataFolder, *folders: str | os.PathLike,
                deep: bool = True, program: Name = PIPELINE_COMMAND) -> list[str]:
    """`make verify`: one line per problem of the data (or of `folders` in it), each with the
    command that repairs it; [] when all is well."""
    from pipeline.core.inputs import Roots
    from pipeline.verify import verify

    data = Data.of(data)
    return verify(Roots(data.corpora, data.indexes, data.runs),
                  [Path(f) for f in folders] or None, deep=deep, named=data._named(program))


def sweep(data: DataFolder) -> list[Path]:
    """`make sweep` (the sweep command): the temporaries that stopped processes of this host left
    under the data roots removed; returns the paths removed, sorted."""
    from pipeline.core.atomic import sweep_temporaries

    data = Data.of(data)
    removed = sweep_temporaries((data.corpora, data.indexes, data.runs))
    log.info(f"[sweep] {len(removed)} temporaries of stopped processes removed")
    return removed


def list_models() -> list[ModelEntry]:
    """`make models` (the models command): the model registry's entries, in its order. Not `models`:
    that name is the registry's module."""
    from pipeline.models import REGISTRY

    return list(REGISTRY.values())


def warm() -> dict[str, Any]:
    """`make setup`'s last step (the warm command): every numba kernel a BM25 search and an eval use
    compiled or loaded from its cache, then the pipeline's modules compiled to bytecode, a line
    logged for each (a warning for kernels cached nowhere). Returns kernels, compiled, caches,
    seconds and modules (None: not every module's bytecode could be written)."""
    from pipeline.evaluation.warm import warm as ready

    return ready()


def import_vectors(data: DataFolder, corpus: str, model: str,
                   src: Folder, similarity: str = default("SIMILARITY"), *,
                   replace: bool = False) -> str:
    """`make import-vectors`: the store of `vectors:<model>` of `corpus` filled from `src`'s vectors
    (bad ones refused; ids of no paper of the corpus dropped and counted). The same file again
    changes nothing; another file or similarity needs `replace`. Returns the model's name, as search
    and evaluate take it."""
    from pipeline.encoding.vectors import import_vectors as fill

    return fill(Data.of(data).place(corpus), model, src, similarity, replace)["model"]


def crossover(results: Results, a: Name, b: Name, *, metric: Name = "map"
              ) -> pl.DataFrame:
    """Where the curves of models `a` and `b` against pool size cross, per scope, as the report's
    crossover section: the crossing size and its 95% interval (none for an extrapolated crossing).
    Writes nothing; nothing random."""
    from pipeline.evaluation.crossover import crossovers
    from pipeline.report.rows import results_table

    table = results_table(results, "crossover", {"size", "repeat", "model", "query",
                                                  "metric", "value"})
    return crossovers(table, a, b, metric)


def variance(results: Results, corpus: str | None = None,
             seed: int = default("SEED")) -> pl.DataFrame:
    """Where each model's mean comes from, per pool size, scope and metric: the two-way
    random-effects decomposition over queries x pool draws of the rows a report reads, as the
    report's variance section. Writes nothing."""
    from pipeline.evaluation.variance import components
    from pipeline.report.rows import report_rows

    return components(report_rows(results, corpus, seed, "variance"))


def topic_set_size(results: Results,
                   deltas: Deltas = (0.01, 0.02, 0.05),
                   draws: Counts = (1, 3, 5, 10), corpus: str | None = None,
                   seed: int = default("SEED"), alpha: Alpha = 0.05,
                   power: Annotated[float, Check(power_level)] = 0.8
                   ) -> pl.DataFrame:
    """How many queries each pair of models needs for the report's test, at level `alpha`, to reach
    `power` against each of `deltas` with each number of pool `draws`, from the variance components
    of the pair's difference on the rows `variance` reads. Writes nothing."""
    from pipeline.evaluation.variance import pair_components, queries_needed
    from pipeline.report.rows import report_rows

    rows = report_rows(results, corpus, seed, "topic_set_size")
    return queries_needed(pair_components(rows), tuple(map(float, deltas)),
                          tuple(map(int, draws)), alpha, power)


def _assessor(judge: str, judge_url: str | None) -> Any:
    """The assessor JUDGE names (judging/assessor.py), JUDGE_URL given or the environment's."""
    from pipeline.judging.assessor import assessor

    environ = dict(os.environ)
    if judge_url is not None:
        environ["JUDGE_URL"] = judge_url
    return assessor(judge, environ)


def _sampling(models: str | Sequence[str], sample: int, sample_seed: int,
              judge_depth: int) -> Any:
    """The judging sample's settings, each model by its runs' name (a registered model's, or a run
    imported under its own name)."""
    from pipeline.judging.stage import sampling

    names = models.replace(",", " ").split() if isinstance(models, str) else list(models)
    return sampling([model_name(name, "scored") for name in names], sample, sample_seed,
                    judge_depth)


def judge(data: DataFolder, corpus: str, models: ReadModels,
          judge: str, *, sample: int = default("SAMPLE"),
          sample_seed: int = default("SAMPLE_SEED"), judge_depth: int = default("JUDGE_DEPTH"),
          judge_concurrency: int = default("JUDGE_CONCURRENCY"),
          judge_url: str | None = None) -> pl.DataFrame:
    """`make judge`: in every pool of `corpus` with runs of all `models`, a sample of the unjudged
    candidates they rank in their top `judge_depth` judged by `judge`, and the pool's judgments
    written. A pair in its assessor's log is not asked again; the same inputs rewrite nothing.
    Returns a row per pool."""
    from pipeline.judging.stage import judge_corpus

    place = Data.of(data).place(corpus)
    settings = _sampling(models, sample, sample_seed, judge_depth)
    return judge_corpus(place, settings, _assessor(judge, judge_url),
                        concurrency=judge_concurrency)


def judge_page(data: DataFolder, corpus: str, models: ReadModels, *,
               sample: int = default("SAMPLE"), sample_seed: int = default("SAMPLE_SEED"),
               judge_depth: int = default("JUDGE_DEPTH")) -> Path:
    """`make judge-page`: the samples `judge` draws with these settings, written and shown on one
    judging page for a person (returned), whose labels judge(..., judge='file:<labels.tsv>') reads
    back."""
    from pipeline.judging.stage import judging_page

    place = Data.of(data).place(corpus)
    return judging_page(place, _sampling(models, sample, sample_seed, judge_depth))


def judge_agreement(data: DataFolder, corpus: str, judge: str, *,
                    judge_url: str | None = None,
                    judge_concurrency: int = default("JUDGE_CONCURRENCY")) -> Any:
    """`make judge-agreement`: CSFCube's expert-judged pairs graded by `judge`, and its agreement
    with the experts written under runs/<corpus>/judgments/agreement/. Returns the Agreement."""
    from pipeline.judging.agreement import judge_agreement as agree

    place = Data.of(data).place(corpus)
    return agree(place.runs_root, place.corpus_dir, _assessor(judge, judge_url),
                 concurrency=judge_concurrency)
