"""The Python API: `import pipeline` (docs/api.md).

A thin layer over the stage functions (pipeline.ingest, pipeline.pools.build,
pipeline.retrieval.search, pipeline.evaluation.evaluate, pipeline.report.build,
pipeline.verify): the same code the commands and the Makefile run, given a data folder once
(`Data`) and models by name. The stages are imported when a function is called, so importing
this module loads the standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.errors import InputError
from pipeline.core.repair import PIPELINE_COMMAND, Repair
from pipeline.layout import (
    Place,
    check_name,
    parse_size,
    raw_dir,
    run_name,
    split_run_name,
)
from pipeline.options.checks import DTYPES
from pipeline.options.declared import default, kind_run_options
from pipeline.roots import data_roots

if TYPE_CHECKING:
    import polars as pl

    from pipeline.ingest.synthetic import SyntheticConfig
    from pipeline.models import ModelEntry
    from pipeline.pools.build import PoolSpec
    from pipeline.report.build import Report
    from pipeline.retrieval.search import SearchSettings

__all__ = ["Data", "build_corpus", "build_pool", "build_report", "evaluate", "import_run",
           "search", "verify_data"]

class Data:
    """Where the data lives: a folder holding corpora/, indexes/ and runs/ (as DATA does for
    make), or any root given apart (as CORPORA_DIR, INDEX_DIR, RUNS_DIR do)."""

    def __init__(self, folder: str | os.PathLike | None = None, *,
                 corpora: str | os.PathLike | None = None,
                 indexes: str | os.PathLike | None = None,
                 runs: str | os.PathLike | None = None):
        from pipeline.options.arguments import check_value

        given = {"corpora": corpora, "indexes": indexes, "runs": runs}
        for name, value in {"folder": folder, **given}.items():
            check_value("Data", name, value)
        if folder is None and not all(given.values()):
            raise InputError("Data: give a folder (holding corpora/, indexes/, runs/), or all "
                            "three of corpora=, indexes=, runs=")
        roots = data_roots(folder if folder is not None else ".", **given)
        self.corpora: Path = roots["corpora"]
        self.indexes: Path = roots["indexes"]
        self.runs: Path = roots["runs"]

    @classmethod
    def of(cls, data: Data | str | os.PathLike) -> Data:
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
        """The folder of corpus `name` (corpora/<name>). The name is checked as the command
        line checks CORPUS (layout.check_name): never a path, so nothing is written outside
        the corpora folder."""
        return self.corpora / check_name("corpus", name)

    def place(self, corpus: str) -> Place:
        """Where corpus `corpus`'s data lives, as every stage function takes it."""
        return Place(self.corpus(corpus), self.indexes, self.runs)

    def pools(self, corpus: str) -> list[str]:
        """The names of the corpus's pool folders, sorted."""
        from pipeline.pools.build import pool_folders

        return pool_folders(self.corpus(corpus))

    def results(self, collect: bool = True) -> pl.DataFrame:
        """Every current evaluation gathered into runs/results.parquet (written) and returned:
        one row per run, query and metric (`collect_results`). `collect=False` reads the
        results.parquet written last instead (`make eval` writes it), refused when it differs
        from its manifest or its evaluations changed since (`read_results`)."""
        if not collect:
            from pipeline.core.inputs import Roots
            from pipeline.evaluation.evaluate import read_results
            from pipeline.layout import RESULTS_FILE

            return read_results(self.runs / RESULTS_FILE,
                                Roots(self.corpora, self.indexes, self.runs))
        from pipeline.evaluation.evaluate import collect_results

        return collect_results(self.corpora, self.indexes, self.runs)


def _entry(model: str | ModelEntry) -> ModelEntry:
    """The registry's entry of a model name, or a ModelEntry given, whose name (the file name
    of its runs and store) is checked."""
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


def build_corpus(data: Data | str | os.PathLike, name: str, *,
                 synthetic: int | str | SyntheticConfig | None = None,
                 shards: int | None = None, seed: int | None = None,
                 raw: str | os.PathLike | None = None, source: str | None = None,
                 fos_source: str = default("FOS_SOURCE"), strict: bool = False,
                 citations: str = default("CITATIONS"), min_citations: int | None = None,
                 workers: int = default("THREADS")) -> Path:
    """Make corpus `name`: ingest its raw shards and prefilter them; return its folder.

    The raw shards are read from `raw` (default: corpora/<name>/<source>, source s2orc or
    s2ag: SOURCE's default, s2ag for a corpus named s2ag). With `synthetic` (a number of
    papers, or a SyntheticConfig), synthetic S2ORC shards are written into
    corpora/<name>/s2orc first (`shards` of them, from `seed`: SyntheticConfig's defaults when
    not given; never into a `raw` folder of the user's). Each stage is a no-op when its
    outputs are current. `workers`: THREADS's default; `min_citations`: None, the
    prefilter's (3, MDCR §3)."""
    from pipeline.ingest import ingest, prefilter
    from pipeline.options.declared import BY_NAME
    from pipeline.readers import reader

    data = Data.of(data)
    source = source or BY_NAME["SOURCE"].default({"CORPUS": name})  # type: ignore[operator]
    corpus_dir = data.corpus(name)
    reader(source)  # a known source: it names the raw folder
    if synthetic is not None and raw is not None:
        raise InputError(f"build_corpus: raw={str(raw)!r} is a release to read, and synthetic= "
                         f"writes its shards into {raw_dir(data.corpora, name, 's2orc')}: give "
                         "one of them")
    if synthetic is not None and source != "s2orc":
        raise InputError(f"build_corpus: synthetic shards are in S2ORC's format: give "
                         f"source='s2orc', not {source!r}")
    raw_folder = Path(raw) if raw is not None else raw_dir(data.corpora, name, source)
    if synthetic is not None:
        from pipeline.ingest.synthetic import SyntheticConfig, generate

        given = {key: value for key, value in (("n_shards", shards), ("seed", seed))
                 if value is not None}
        cfg = synthetic if isinstance(synthetic, SyntheticConfig) else SyntheticConfig(
            n_papers=parse_size(str(synthetic)), **given)
        generate(raw_folder, cfg, workers=workers)
    ingest(raw_folder, corpus_dir, strict=strict, workers=workers, source=source,
           fos_source=fos_source)
    prefilter(corpus_dir, citations,  # type: ignore[arg-type]
              **({} if min_citations is None else {"min_citations": min_citations}))
    return corpus_dir


def build_pool(data: Data | str | os.PathLike, corpus: str, spec: PoolSpec | None = None,
               **fields: Any) -> str:
    """Build one pool of `corpus` (queries, candidates, qrels) and return its name. Give a
    PoolSpec, or its fields as keywords (size: a number or '20k'), each checked by its
    declaration (`exclusion` has none: the pool's list fills it)."""
    from dataclasses import fields as spec_fields

    from pipeline.options.arguments import argument, check_options
    from pipeline.pools.build import PoolSpec
    from pipeline.pools.build import build_pool as build

    check_options("build_pool", "", fields, [f.name for f in spec_fields(PoolSpec)
                                             if argument("build_pool", f.name)])
    if spec is not None and fields:
        raise InputError("build_pool: give a PoolSpec or its fields as keywords, not both")
    if spec is None:
        if "size" in fields:
            fields["size"] = parse_size(str(fields["size"]))
        spec = PoolSpec(**fields)
    # its refusals name SIZE and QUERIES, worded as the API's keywords (size, n_queries)
    return build(Data.of(data).corpus(corpus), spec)["name"]


def search(data: Data | str | os.PathLike, corpus: str, pool: str | Sequence[str] | None,
           model: str | ModelEntry, *, k: int = default("K"), threads: int = default("THREADS"),
           seed: int = default("SEED"), variant: str = default("QUERY_VARIANT"),
           query_prompt: str | None = None, replace: bool = False, index: bool = True,
           stale_only: bool = True, repair_pools: bool = False, batch_size: int | None = None,
           dtype: str = DTYPES[0], part_size: int | None = None,
           model_path: str | os.PathLike | None = None, device: str | None = None,
           program: str | None = None, **options: Any) -> str:
    """`make search` (the search command is this function): retrieve the top `k` candidates of
    each query of `pool` (a name, a list of them, or None: every usable pool of the corpus)
    with `model` (a registered name such as 'bm25', an 'hf:' model, or a ModelEntry), one
    pool after another in this process, and write the runs; return the run's name (the
    model's, plus '+q<tag>' with a `query_prompt` before each query's text, and '~<variant>'
    for perturbed queries); each default is its option's declared one (K's 500, THREADS's 2,
    SEED's, QUERY_VARIANT's). `options`: those of the search's declared options
    (pipeline/options/declared.py, as make search and the search command take them) and the
    retriever's own (its kind's Retriever.OPTIONS: BM25's engine, an encoder's backend), others
    refused. As make search: what the model searches is built first (`index`; encoders embed
    what is missing, with the store's `batch_size`, `dtype`, `part_size`, `model_path` and
    `device`), a run made with these arguments is kept as it is (`stale_only`: the rule of
    search.current_run; `seed` counts where it changes the run), and with `repair_pools` the
    corpus's stale or damaged pools are built again first (make pools); the command line's
    --index, --stale-only, --repair-pools, off unless given. A model named as a run imported
    into the corpus (import_run) is that run: nothing to search; a ModelEntry of that name is
    refused. A store of the model's name embedded by another model (another model identity:
    its weights or files, its endpoint) is refused, naming `replace=True`, or with `program`
    (how a repair calls the pipeline's commands: the command line's) make's REPLACE=1; with
    `replace` that store and the runs searched from it are removed, then embedded and
    searched again. Each pool's time goes to the corpus's stage-times log."""
    from pipeline.layout import stage_times_path
    from pipeline.models import with_query_prompt
    from pipeline.options.arguments import check_options
    from pipeline.pools.grid import repair_pools as repair
    from pipeline.pools.grid import stage_pools
    from pipeline.retrieval.registry import retriever
    from pipeline.retrieval.search import (
        SearchSettings,
        check_not_imported,
        model_to_search,
        retriever_options,
        search_model,
    )
    from pipeline.roots import where

    data = Data.of(data)
    place, times = data.place(corpus), stage_times_path(data.runs, corpus)
    given = {**options, "query_prompt": query_prompt, "model_path": model_path}
    if isinstance(model, str) and model_to_search(place, model, given) is None:
        return model  # a run imported under this name (make import-run): nothing to search
    entry = with_query_prompt(_entry(model), query_prompt)
    check_options("search", entry.kind, options, list(retriever(entry.kind).OPTIONS))
    check_not_imported(place, entry.name)  # a ModelEntry named as an imported run
    named = where(data.corpora, data.indexes, data.runs, program or PIPELINE_COMMAND)
    if repair_pools:
        repair(place.corpus_dir, times, named)
    pools = stage_pools(place.corpus_dir, [pool] if isinstance(pool, str) else pool, "search",
                        named)
    for each in pools:
        check_name("pool", each)
    given = retriever(entry.kind).options(retriever_options(entry, given))
    store = store_options(batch_size, dtype, part_size, model_path, device, replace)
    settings = SearchSettings(threads=threads, options=given, store=store, times=times, k=k,
                              seed=seed, variant=variant, run_options=kind_run_options(
                                  entry, given), index=index, stale_only=stale_only)
    if entry.embedded and program is None:  # in Python's words (the call is its repair)
        _check_store_model(place, entry, pools, settings,
                           _call("search", corpus, pool, model, query_prompt=query_prompt,
                                 model_path=model_path, replace=True))
    search_model(place, entry, pools, settings)
    return run_name(entry.name, variant)


def embed(data: Data | str | os.PathLike, corpus: str, pool: str | Sequence[str] | None,
          model: str, *, num_shards: int = default("SHARDS"), shard: int | None = None,
          batch_size: int | None = None, dtype: str = DTYPES[0], part_size: int | None = None,
          model_path: str | os.PathLike | None = None, device: str | None = None,
          replace: bool = False, program: str | None = None) -> Path:
    """`make embed` (the embed command is this function): embed the papers of `pool` (a name,
    a list of them, or None: every usable pool of the corpus) missing from the store of `model`
    (a registered name), shard `shard` of `num_shards` (None: each in turn, as a job array's
    tasks would), each timed into the corpus's stage-times log; return the store's folder.
    The store's options are search's. A store of another model under the name is refused,
    or with `replace` (REPLACE=1) embedded again; `program`: as search's."""
    from pipeline.encoding.embed import embed_shards
    from pipeline.layout import stage_times_path, store_dir
    from pipeline.models import get_model
    from pipeline.pools.grid import stage_pools
    from pipeline.roots import where

    data = Data.of(data)
    place = data.place(corpus)
    pools = stage_pools(place.corpus_dir, [pool] if isinstance(pool, str) else pool, "embed",
                        where(data.corpora, data.indexes, data.runs, program or PIPELINE_COMMAND))
    embed_shards(place, model, pools, range(num_shards) if shard is None else [shard],
                 num_shards, stage_times_path(data.runs, corpus),
                 **store_options(batch_size, dtype, part_size, model_path, device, replace))
    return store_dir(data.indexes, corpus, get_model(model).name)


def store_options(batch_size: int | None, dtype: str, part_size: int | None,
                  model_path: str | os.PathLike | None, device: str | None, replace: bool) -> dict:
    """The store's options as embed takes them: a part size only where given (each store has
    its own default)."""
    return {"batch_size": batch_size, "dtype": dtype, "model_path": model_path,
            "device": device, **({"part_size": part_size} if part_size else {}),
            "replace": replace}


def _check_store_model(place: Place, entry: ModelEntry, pools: list[str],
                       settings: SearchSettings, call: str) -> None:
    """The model's store, when another model embedded it (another model identity), refused in
    the API's words (`call`, the call again with replace=True), or with `replace` removed
    with the runs searched from it (embed.check_identity, as make search does first). A store
    whose manifest is damaged is not read: it is built again (embed's repair_store; this call
    is the repair of a model object's). Then, with `settings.index`, what the model searches
    is built for every pool, the runs kept as current too: a model object's store refuses
    one of other settings there (its task, say), which its runs do not record."""
    from dataclasses import replace

    from pipeline.core.files import is_corrupt
    from pipeline.encoding.embed import check_identity
    from pipeline.layout import MANIFEST, store_dir
    from pipeline.retrieval.search import index_pools

    if not is_corrupt(store_dir(place.index_root, place.corpus, entry.name) / MANIFEST):
        check_identity(place, entry, settings.store["model_path"],
                       bool(settings.store["replace"]), how="search again with replace=True",
                       repair=Repair("", place.corpus, entry.name, note=f"in Python: {call}"))
    if settings.index:  # untimed: mostly a check (search_model times what it builds)
        index_pools(place, entry, pools, replace(settings, times=None))


def _call(function: str, corpus: str, pool: str, model: str | ModelEntry,
          **keywords: object) -> str:
    """A call of the API as a repair shows it (Repair's note): its values as Python literals
    (a path as a str), a model object by its name, the keywords given (not None)."""
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
    name, variant = split_run_name(model)
    return run_name(_entry(name).name, variant)


def import_run(data: Data | str | os.PathLike, corpus: str, pool: str | None, run: Any,
               model: str, *, drop_unknown: bool = False, replace: bool = False) -> dict:
    """Import a run made elsewhere (`run`: a TREC file's path, a DataFrame with query, doc,
    score, or a ranx Run) as the run `model` of `pool`, checked against the pool (unknown ids
    refused unless `drop_unknown`, duplicates refused, ties kept and broken as trec_eval does);
    then `evaluate` and `build_report` score it like any model's. Returns the run's manifest
    (its counts, the source's sha256); the same source again changes nothing, another under
    the same name needs `replace` (`make import-run`; pipeline/retrieval/imported.py).
    `pool` None: a run of the whole collection, each pool getting the lines of its queries
    (CSFCube's facet pools); returns {pool: its manifest}."""
    from pipeline.retrieval.imported import import_run as run_import

    place = Data.of(data).place(corpus)
    return run_import(place, None if pool is None else check_name("pool", pool), run, model,
                      drop_unknown=drop_unknown, replace=replace)


def import_collection(data: Data | str | os.PathLike, dataset: str, *, corpus: str,
                      split: str = default("SPLIT"), replace: bool = False,
                      judged: bool = False) -> str:
    """Import the ir_datasets collection `dataset` ('beir/scidocs': documents, queries and
    qrels) as the corpus `corpus` with one pool of `split` (test, or dev: a validation pool),
    as `make import-irds` does; return the pool's name (with `judged`, the judged-only pool
    beside it, as JUDGED=1: docs/collections.md). The same collection again changes
    nothing; another one in place of an imported collection needs `replace`
    (pipeline/external/irds.py)."""
    from pipeline.external.irds import import_irds

    place = Data.of(data).place(corpus)
    info = import_irds(dataset, place.corpus_dir, split, replace, place.derived, judged)
    return info["collection"]["pools"][0]


def import_beir(data: Data | str | os.PathLike, src: str | os.PathLike, *, corpus: str,
                split: str = default("SPLIT"), replace: bool = False,
                judged: bool = False) -> str:
    """Import the test collection in BEIR's layout at `src` (corpus.jsonl, queries.jsonl,
    qrels/<split>.tsv) as the corpus `corpus` with one pool of `split`, as `make import-beir`
    does; return the pool's name (with `judged`, the judged-only pool beside it, as JUDGED=1).
    The same collection again changes nothing; another one in place of an imported collection
    needs `replace` (pipeline/external/beir.py)."""
    from pipeline.external.beir import import_beir as read_beir

    place = Data.of(data).place(corpus)
    info = read_beir(Path(src), place.corpus_dir, split, replace, place.derived, judged)
    return info["collection"]["pools"][0]


def import_csfcube(data: Data | str | os.PathLike, src: str | os.PathLike, *, corpus: str,
                   replace: bool = False) -> list[str]:
    """Import the CSFCube release at `src` (its annotations, abstracts, queries and folds) as
    the corpus `corpus` with one pool per facet, as `make import-csfcube` does; return the
    pools' names. Everything is checked before anything is written; the same release again
    changes nothing; another one in its place needs `replace` (pipeline/external/csfcube.py)."""
    from pipeline.external.csfcube import import_csfcube as read_csfcube

    place = Data.of(data).place(corpus)
    return read_csfcube(Path(src), place.corpus_dir, replace, place.derived)[
        "collection"]["pools"]


def import_mdcr(data: Data | str | os.PathLike, src: str | os.PathLike, *, corpus: str,
                split: str = default("SPLIT"), replace: bool = False) -> list[str]:
    """Import the official MDCR release's `split` at `src` (mdcr_<split>.json and
    mdcr_<split>_data.jsonl) as the benchmark corpus `corpus`, a pool per field, as `make
    import-mdcr` does; return the pools' names. A corpus holds one split (import val into a
    corpus of its own); a benchmark with other contents is replaced only with `replace`
    (pipeline/mdcr/official.py)."""
    from pipeline.mdcr.official import import_benchmark

    place = Data.of(data).place(corpus)
    return import_benchmark(Path(src), place.corpus_dir, split, replace, place.derived)[
        "benchmark"]["pools"]


def export_mdcr(data: Data | str | os.PathLike, corpus: str, out: str | os.PathLike, *,
                split: str = default("SPLIT")) -> dict:
    """Write the benchmark corpus `corpus` in the official MDCR layout into the folder `out`
    (mdcr_<split>.json, mdcr_<split>_data.jsonl), which the official evaluator reads, as `make
    export-mdcr` does; return what was written (files, fields, queries, papers, and the
    negative types the official evaluator ignores) (pipeline/mdcr/official.py)."""
    from pipeline.mdcr.official import export_benchmark

    return export_benchmark(Data.of(data).corpus(corpus), Path(out), split)


def export_beir(data: Data | str | os.PathLike, corpus: str, pool: str,
                out: str | os.PathLike) -> dict:
    """Write pool `pool` of `corpus` as a BEIR folder `out` (corpus.jsonl: its candidates,
    queries.jsonl: its queries as BM25 reads them, qrels/<split>.tsv, datasheet.json), as
    `make export-beir` does; return the datasheet. `out` is new, empty or an earlier export;
    an MDCR-style pool is refused (pipeline/external/export.py)."""
    from pipeline.external.export import export_beir as write_beir

    return write_beir(Data.of(data).place(corpus), pool, Path(out))


def mteb_result(data: Data | str | os.PathLike, corpus: str, pool: str,
                model: str | ModelEntry) -> dict:
    """The run of `model` on `pool` as an MTEB TaskResult (the dict its JSON file holds:
    `mteb.TaskResult.from_dict` takes it), scored from the saved run, nothing written; `make
    export-mteb` writes one per pool (pipeline/external/mteb_results.py)."""
    from pipeline.external.mteb_results import mteb_result as result_of

    place = Data.of(data).place(corpus)
    return result_of(place, check_name("pool", pool), _run(model, place, pool))


def export_mteb(data: Data | str | os.PathLike, corpus: str, model: str,
                out: str | os.PathLike) -> list[Path]:
    """Write the run `model` (a run's name) of each pool of `corpus` that has one as an MTEB
    TaskResult file (`mteb_result`'s dict), `<out>/<model>/no_revision_available/
    <corpus>.<pool>.json`, MTEB's results tree that `mteb.TaskResult.from_disk` reads, as `make
    export-mteb` does; return the files. Refused where no pool has a run of `model`, and for
    files in `out` that an export did not write (pipeline/external/mteb_results.py)."""
    from pipeline.external.mteb_results import export_mteb as write_mteb

    return write_mteb(Data.of(data).place(corpus), model, Path(out))


def evaluate(data: Data | str | os.PathLike, corpus: str, pool: str,
             model: str | ModelEntry | Sequence[str | ModelEntry], *,
             metrics: str | Sequence[str] = default("METRICS"), means: bool = False,
             save: bool | None = None) -> pl.DataFrame:
    """Score the runs of `model` (a name, a run name 'bm25~title', a ModelEntry, or a list of
    them) on `pool`. Saved as `make eval` saves them, a current evaluation kept as it is
    (eval_is_current): by default with the pool's own metrics (`metrics='auto'`) only, so an
    exploratory call with others writes nothing; `save=True` adds the metrics asked to the
    saved evaluation, as make eval METRICS=... does; `save=False` never writes.
    Returns a polars DataFrame of the metrics asked: with
    `means=False`, one row per model, query and candidate set (`negatives`: 'all', and per
    negative type on MDCR-style pools) with a column per metric; with `means=True`, one row per
    model with each metric's mean over the pool's queries (over CSFCube's folds: the mean of
    the folds' means). `metrics`: 'auto' (the pool's own set), a set's name or metric names
    (ranx's, ir_measures' or trec_eval's; the columns carry ranx's)."""
    import polars as pl

    from pipeline.core.files import read_json
    from pipeline.evaluation.evaluate import eval_is_current, eval_run, pool_metrics, score_run
    from pipeline.layout import run_paths

    place = Data.of(data).place(corpus)
    check_name("pool", pool)
    models = [model] if isinstance(model, str) or not isinstance(model, Sequence) else model
    names = [_run(m, place, pool) for m in models]  # each checked before anything is written
    wanted = pool_metrics(place.corpus_dir, pool, metrics if isinstance(metrics, str)
                          else " ".join(metrics))
    if save is None:
        save = wanted == pool_metrics(place.corpus_dir, pool)
    frames = []
    for name in names:
        paths = run_paths(place.runs_root, corpus, pool, name)
        if not save:
            values, info = score_run(place, pool, name, wanted)
        else:
            if not eval_is_current(place, pool, name, wanted):
                eval_run(place, pool, name, wanted)
            values, info = pl.read_parquet(paths.metrics), read_json(paths.evaluation)
        if means:
            frames.append(pl.DataFrame([{"model": name, **{m: info["means"][m] for m in wanted}}],
                                       schema={"model": pl.String,
                                               **dict.fromkeys(wanted, pl.Float64)}))
        else:  # the metrics asked, of those saved
            frames.append(values.select(pl.lit(name).alias("model"),
                                        pl.exclude(set(values.columns) - {"query", "negatives",
                                                                          *wanted})))
    return pl.concat(frames, how="vertical_relaxed")


def build_report(data: Data | str | os.PathLike, corpus: str, seed: int = default("SEED"), *,
                 collect: bool = True, exclude: str | os.PathLike | None = None,
                 training_sets: dict[str, str | os.PathLike] | None = None) -> Report:
    """Gather every evaluation (runs/results.parquet; `collect=False`: as written last) and
    make the report of `corpus` and pool seed `seed`: a Report, whose `save()` writes it under
    runs/reports/ as `make report` does. `exclude`: the exclusion list whose pools are reported
    (as EXCLUDE; 'none' for the pools without one); `training_sets`: model -> file of its
    training papers, for the leakage table (as TRAINING_SETS)."""
    from pipeline.report.build import build_report as build
    from pipeline.report.build import report_lists

    data = Data.of(data)
    check_name("corpus", corpus)
    lists = (None if exclude is None else str(exclude),
             {model: str(path) for model, path in (training_sets or {}).items()})
    report_lists(*lists)  # a refusal before results are collected: it writes nothing
    if collect:
        if not (data.runs / corpus).is_dir():
            raise InputError(f"build_report: corpus={corpus!r} has no runs in {data.runs}: "
                             f"evaluate its runs first (pipeline.evaluate, or make eval "
                             f"CORPUS={corpus})")
        data.results()
    return build(data.runs, corpus, seed, data.corpora, *lists, index_root=data.indexes)


def verify_data(data: Data | str | os.PathLike, *folders: str | os.PathLike,
                deep: bool = True, program: str = PIPELINE_COMMAND) -> list[str]:
    """`make verify`: one line per problem of the data (or of `folders` under it), each with
    the command that repairs it; [] when all is well. `deep=False` skips the checksums.
    `program`: how a repair that is a pipeline command calls it ('mdcr-pipeline', the
    console script, where the user ran that)."""
    from pipeline.core.inputs import Roots
    from pipeline.roots import where
    from pipeline.verify import verify

    data = Data.of(data)
    return verify(Roots(data.corpora, data.indexes, data.runs),
                  [Path(f) for f in folders] or None, deep=deep,
                  named=where(data.corpora, data.indexes, data.runs, program))


def import_vectors(data: Data | str | os.PathLike, corpus: str, model: str,
                   src: str | os.PathLike, similarity: str = default("SIMILARITY"), *,
                   replace: bool = False) -> str:
    """Fill the store of model `vectors:<model>` of `corpus` from vectors computed elsewhere
    (`src`: parquet, columns corpusid and vector), as `make import-vectors` does: one
    dimension, no NaN or value beyond float32, no id twice (else an InputError), ids that are
    no paper of the corpus dropped and counted. The same file again changes nothing; another
    file or similarity under the same name needs `replace`. Returns the model's name, which
    `search` and `evaluate` take."""
    from pipeline.encoding.vectors import import_vectors as fill

    return fill(Data.of(data).place(corpus), model, src, similarity, replace)["model"]


def _results_table(results: str | os.PathLike | pl.DataFrame) -> pl.DataFrame:
    """A DataFrame as it is; a path read by `read_results`: a results.parquet beside its
    manifest checked against it (a damaged one refused, with the command that collects it
    again), a file without one read as the user's own table, with a warning that it is
    unverified."""
    import polars as pl

    from pipeline.evaluation.evaluate import read_results

    return results if isinstance(results, pl.DataFrame) else read_results(Path(results))


def crossover(results: str | os.PathLike | pl.DataFrame, a: str, b: str, *, metric: str = "map"
              ) -> pl.DataFrame:
    """Where the curves of models `a` and `b` against pool size cross, per scope (the
    dataset-level pools, each field's) measured at two or more sizes: `a` - `b` on `metric`
    fitted as a line in log pool size (checked with 3+ sizes), the size where it is 0, and its
    95% interval over queries and pool draws within the measured sizes (none for an
    extrapolated crossing), as the report's crossover section
    (pipeline/evaluation/crossover.py). `results`: runs/results.parquet's path, or a DataFrame
    of its columns. Writes nothing; nothing random."""
    from pipeline.evaluation.crossover import crossovers

    table = _results_table(results)
    missing = sorted({"size", "repeat", "model", "query", "metric", "value"}
                     - set(table.columns))
    if missing:
        raise InputError(f"crossover: results lack the column(s) {', '.join(missing)} of "
                         "runs/results.parquet")
    return crossovers(table, a, b, metric)


def _report_rows(results: str | os.PathLike | pl.DataFrame, corpus: str | None, seed: int,
                 function: str) -> pl.DataFrame:
    """The rows a report reads from runs/results.parquet (its path or a DataFrame of its
    columns): one corpus (`corpus`, needed when there are several), pool seed `seed`, the test
    split (the validation split when there is none), every candidate (`negatives` "all"), the
    full queries (no QUERY_VARIANT run); one exclusion list."""
    import polars as pl

    from pipeline.layout import VARIANT_SEP

    table = _results_table(results)
    missing = sorted({"scope", "size", "seed", "repeat", "model", "query", "metric", "value"}
                     - set(table.columns))
    if missing:
        raise InputError(f"{function}: results lack the column(s) {', '.join(missing)} of "
                         "runs/results.parquet")
    if corpus is not None and "corpus" in table.columns:
        table = table.filter(pl.col("corpus") == corpus)
    table = table.filter(pl.col("seed") == seed,
                         ~pl.col("model").str.contains(VARIANT_SEP, literal=True))
    if "negatives" in table.columns:
        table = table.filter(pl.col("negatives") == "all")
    if "split" in table.columns and (table["split"] == "test").any():
        table = table.filter(pl.col("split") == "test")
    for column, what in (("corpus", "corpus=<one>"), ("split", "one split"),
                         ("exclusion", "the rows of one exclusion list")):
        if column in table.columns and table[column].n_unique() > 1:
            raise InputError(f"{function}: results hold several {column}s "
                             f"({', '.join(sorted(map(str, table[column].unique())))}): give "
                             f"{what}")
    if table.is_empty():
        raise InputError(f"{function}: no rows of seed {seed}"
                         + (f" and corpus {corpus}" if corpus else "") + " in results")
    return table


def variance(results: str | os.PathLike | pl.DataFrame, corpus: str | None = None,
             seed: int = default("SEED")) -> pl.DataFrame:
    """Where each model's mean comes from, per pool size, scope and metric: the two-way
    random-effects decomposition over queries x pool draws (repeats) of the rows a report reads
    (`_report_rows`: `results` runs/results.parquet's path or a DataFrame of its columns;
    `corpus` needed when it holds several; `seed` the pools' seed). Returns size, scope,
    metric, model, queries, draws, mean, se, s2_query, s2_draw, s2_resid, share_query,
    share_draw, share_interaction (null with one draw), as the report's variance section
    (pipeline/evaluation/variance.py; docs/evaluation.md). Writes nothing."""
    from pipeline.evaluation.variance import components

    return components(_report_rows(results, corpus, seed, "variance"))


def topic_set_size(results: str | os.PathLike | pl.DataFrame,
                   deltas: Sequence[float] = (0.01, 0.02, 0.05),
                   draws: Sequence[int] = (1, 3, 5, 10), corpus: str | None = None,
                   seed: int = default("SEED"), alpha: float = 0.05, power: float = 0.8
                   ) -> pl.DataFrame:
    """How many queries each pair of models needs for a test the report runs, at level
    `alpha`, to reach `power` against each difference in `deltas` (metric units, 0.01 = 1 point
    x100) with each number of pool `draws`, from that pair's difference's variance components
    per pool size, scope and metric (as `variance` selects the rows): the queries-and-draws
    interval excluding 0 wherever several draws were measured (an estimate of 0 included), the
    paired t over queries only for one draw measured with one. `queries` allows for what the
    measured draws can know of the components (the expected power over their posterior:
    `variance.assured_size`); `queries_point` and `reason_point` are the number at the
    estimates. Returns size, scope, metric, a, b, delta, draws, queries (null: see reason),
    test, reason, queries_point, reason_point, s2_draw, s2_draw_upper (its one-sided 90%
    upper bound), queries_upper and reason_upper (at that bound),
    measured_draws, draw_df, identical; pools measured with one draw give draws = 1 only (the
    draw's variance is unknown). Writes nothing."""
    from pipeline.evaluation.variance import pair_components, queries_needed

    rows = _report_rows(results, corpus, seed, "topic_set_size")
    return queries_needed(pair_components(rows), tuple(map(float, deltas)),
                          tuple(map(int, draws)), alpha, power)


def _assessor(judge: str, judge_url: str | None) -> Any:
    """The assessor JUDGE names (judging/assessor.py), JUDGE_URL given or the environment's."""
    from pipeline.judging.assessor import assessor

    environ = dict(os.environ)
    if judge_url is not None:
        environ["JUDGE_URL"] = judge_url
    return assessor(judge, environ)


def _sampling(models: str | Sequence[str], sample_size: int, sample_seed: int,
              depth: int) -> Any:
    """The judging sample's settings, each model by its runs' name (a registered model's, or
    a run imported under its own name)."""
    from pipeline.judging.stage import sampling

    names = models.replace(",", " ").split() if isinstance(models, str) else list(models)
    runs = []
    for name in names:
        try:
            runs.append(_run(name))
        except InputError:
            runs.append(check_name("model", name))
    return sampling(runs, sample_size, sample_seed, depth)


def judge(data: Data | str | os.PathLike, corpus: str, models: str | Sequence[str],
          judge: str, *, sample_size: int = default("SAMPLE"),
          sample_seed: int = default("SAMPLE_SEED"), depth: int = default("JUDGE_DEPTH"),
          concurrency: int = default("JUDGE_CONCURRENCY"),
          judge_url: str | None = None) -> pl.DataFrame:
    """`make judge`: in every pool of `corpus` with runs of all `models`, draw a sample of the
    candidates they rank in their top `depth` that the citations leave unjudged
    (`sample_size` pairs per query, stratified by rank, seeded by `sample_seed`), judge it by
    `judge` (api:<model> at `judge_url` or JUDGE_URL, file:<labels.tsv>, standin:<seed>) and
    write the pool's judgments (docs/judging.md). A pair judged before, in its assessor's
    log, is not asked again; the same inputs rewrite nothing. Returns one row per pool:
    pool, queries, frame, drawn, graded, ungraded, unjudged, asked, recorded, judgments."""
    from pipeline.judging.stage import judge_corpus

    place = Data.of(data).place(corpus)
    settings = _sampling(models, sample_size, sample_seed, depth)
    return judge_corpus(place, settings, _assessor(judge, judge_url),
                        concurrency=concurrency)


def judge_page(data: Data | str | os.PathLike, corpus: str, models: str | Sequence[str], *,
               sample_size: int = default("SAMPLE"), sample_seed: int = default("SAMPLE_SEED"),
               depth: int = default("JUDGE_DEPTH")) -> Path:
    """`make judge-page`: the samples `judge` draws with these settings, written (each
    pool's) and shown on one judging page for a person (runs/<corpus>/judgments/
    judging-page.html, returned); its labels file is read back by
    judge(..., judge='file:<labels.tsv>') with the same settings."""
    from pipeline.judging.stage import judging_page

    place = Data.of(data).place(corpus)
    return judging_page(place, _sampling(models, sample_size, sample_seed, depth))


def judge_agreement(data: Data | str | os.PathLike, corpus: str, judge: str, *,
                    judge_url: str | None = None,
                    concurrency: int = default("JUDGE_CONCURRENCY")) -> Any:
    """`make judge-agreement`: CSFCube's expert-judged pairs (a corpus `make import-csfcube`
    made) graded by `judge`, and the assessor's agreement with the experts (weighted kappa
    per facet, with jackknife intervals, and the confusion matrices) written under
    runs/<corpus>/judgments/agreement/ (pipeline/judging/agreement.py). Returns the
    Agreement: `summary` (a row per facet and one for all), `confusion`, `counts`."""
    from pipeline.judging.agreement import judge_agreement as agree

    place = Data.of(data).place(corpus)
    return agree(place.runs_root, place.corpus_dir, _assessor(judge, judge_url),
                 concurrency=concurrency)
