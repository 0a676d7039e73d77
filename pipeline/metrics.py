"""Per-query metrics of runs held as columns: ranx's numba kernels, fed in bulk (issue 8).

ranx stays the metric engine (its kernels equal trec_eval's definitions, docs/evaluation.md),
called through its public `ranx.evaluate` only, but a run never becomes the nested
{query: {doc: score}} dicts that `ranx.Run` is built from: the run's and the qrels' columns are
sorted once with polars and cut into ranx's typed list of (doc, score) arrays by one numba
function, which `ranx.evaluate` takes as they are, so 3,800 queries x 500 documents cost
milliseconds instead of seconds.

Counting rule: every query of the pool with at least one relevant candidate is evaluated; a
query absent from the run scores 0 on every metric (trec_eval's `-c`; trec_eval's default would
skip it and raise the mean). Queries without a relevant candidate are dropped and counted.

CSFCube's metrics (Mysore et al. 2021) are computed here, not by ranx, as its official
evaluation script (`ranking_eval.py`, `rank_metrics.py`) computes them from each query's ranked
list: the grades of the candidates the run ranked, in rank order (an unjudged one is grade 0).

- `ndcg%<p>` (the official NDCG%20): linear gains (the grade), the discount of `dcg_at_k`
  method 0 (ranks 1 and 2 both weigh 1, rank r >= 2 weighs 1 / log2(r)), the list cut at
  int(p / 100 x n) where n is the number of candidates the run ranks for the query, divided by
  the DCG of the ranked list's own grades sorted, cut at the same rank; 0 when that is 0
  (nothing relevant ranked, or a cut of 0).
- `map_ranked[-l<n>]` (the official MAP, `-l2`): grades >= n are relevant (1 without a
  level); AP is the mean of the precision at the rank of each relevant candidate the run
  ranked, so its denominator is the relevant candidates ranked, not all judged; 0 without one.
- `ndcg_judged%<p>` (stricter, not the official number): the same cut and discount, with the
  ideal DCG over every judged grade of the query, as trec_eval builds it; `map-l2` (ranx's,
  trec_eval's) is the stricter MAP. On a run that ranks every judged candidate (every run
  the pipeline makes of CSFCube's pools) each equals its official counterpart; on one that
  leaves judged relevant candidates out they are lower.

When a set holds one of these metrics, every judged query is evaluated (CSFCube averages every
query of its folds), also one without a relevant candidate: it scores 0 on every metric.

ranx's typed containers (`cache_typed_containers`): numba compiles the Python-side methods of
its typed Dict and List (make, append, get, iterate) for each key and value type in every
process; ranx builds every Run and Qrels, normalises and fuses through them, so each process
that touched ranx paid seconds of compiling (10 to 30 s on a busy machine) before any work.
Importing this module has numba cache those methods on disk as ranx's own kernels are, so only
the first process of an install compiles them.

ranx's kernels without ranx's package (`ranx_kernels`): `import ranx` runs its `__init__`,
which imports its Run and Qrels (pandas, ir_datasets), its comparison tables and statistical
tests (scipy.stats, tabulate), its plots (matplotlib, seaborn) and its fusion tuning (rich):
1.2 s of a fresh process on 2 cores (3 s on a loaded machine), for none of which scoring
asks (benchmarks/results/fresh_start.md). `ranx.evaluate` on typed lists is one call per metric,
`ranx.metrics.metric_switch(name)(qrels, run, k, level)`, the metric's name read by
`extract_metric_and_params`; this module makes those calls itself on ranx's own `ranx.metrics`
package, loaded under its own name without its parent's `__init__` (the only place the
pipeline reaches past ranx's public API: docs/install.md). The kernels, their numba cache and
their values are ranx's; a release that lays them out otherwise falls back to
`ranx.evaluate`, and tests/evaluation/test_kernels.py checks the two equal on every metric.

`warm_up` (`python -m pipeline warm`, which `make setup` runs) compiles every kernel an eval
stage uses, with the argument types it gives them (`_cut` takes read-only arrays whatever
polars hands over, so one compiled signature serves every run), so that an eval stage after it
loads them from numba's cache and compiles nothing (tests/evaluation/test_kernels.py).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numba
import numpy as np
import polars as pl
from numba.core import event as numba_event
from numba.core.errors import NumbaTypeSafetyWarning
from numba.typed import List

from pipeline.core.numba_cache import numba_cache
from pipeline.glossary import DEFAULT_METRICS, METRIC_SETS, RANKED_MAP, metric_percent

# numba defines no cached kernel where it has nowhere to write one (pipeline.core.numba_cache):
# a private folder then, before this module's kernels and ranx's are defined
if not numba.config.CACHE_DIR and (_FALLBACK := numba_cache()) is not None:
    numba.config.CACHE_DIR = str(_FALLBACK)


@functools.cache
def cache_typed_containers() -> int:
    """Have numba cache on disk the methods its typed Dict and List compile when used from
    Python (module doc: ranx's Run, Qrels, fusion), as `njit(cache=True)` caches a kernel:
    beside numba's own source where that is writable, else in numba's user-wide cache. A
    method numba finds no writable place for compiles per process, as before. Returns how
    many methods are cached (once per process; later calls return the same)."""
    from numba.core.registry import CPUDispatcher
    from numba.typed import typeddict, typedlist

    cached = 0
    for module in (typeddict, typedlist):
        for method in vars(module).values():
            if isinstance(method, CPUDispatcher):
                try:
                    method.enable_caching()
                except RuntimeError:  # numba: "no locator available": nowhere to write
                    continue
                cached += 1
    return cached


cache_typed_containers()


@numba.njit(cache=True)
def _cut(ids, values, offsets):  # pragma: no cover
    """ranx's input: one (n, 2) float64 array [doc, value] per query."""
    out = List()
    for q in range(len(offsets) - 1):
        lo, hi = offsets[q], offsets[q + 1]
        block = np.empty((hi - lo, 2), dtype=np.float64)
        block[:, 0] = ids[lo:hi]
        block[:, 1] = values[lo:hi]
        out.append(block)
    return out


def _doc_codes(*columns: pl.Series) -> list[np.ndarray]:
    """Document ids as float64 numbers ranx can compare: integer ids as they are (S2ORC's fit
    a float64 exactly), other ids (strings) by their position among all ids."""
    if all(c.dtype.is_integer() for c in columns):
        return [c.cast(pl.Float64).to_numpy() for c in columns]
    ids = pl.concat([c.cast(pl.String) for c in columns]).unique().sort()
    return [c.cast(pl.String).replace_strict(ids, pl.int_range(len(ids), eager=True),
                                             return_dtype=pl.Float64).to_numpy()
            for c in columns]


def _read_only(values: np.ndarray, dtype: type) -> np.ndarray:
    """`values` as a C-contiguous array of `dtype`, read-only (a view: nothing copied unless
    the type or layout differs)."""
    view = np.ascontiguousarray(values, dtype=dtype).view()
    view.flags.writeable = False
    return view


def cut(ids: np.ndarray, values: np.ndarray, offsets: np.ndarray) -> List:
    """ranx's input (`_cut`), its arguments always of one numba type: polars hands over
    read-only arrays or writable ones depending on how a column is held (zero-copy or not),
    and each combination would be a signature of its own, compiled on first sight (seconds),
    one that `warm_up` may not have met."""
    return _cut(_read_only(ids, np.float64), _read_only(values, np.float64),
                _read_only(offsets, np.int64))


def _offsets(positions: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(positions, minlength=n))]).astype(np.int64)


def per_query(run: pl.DataFrame, qrels: pl.DataFrame, queries: pl.Series,
              metrics: Sequence[str] = DEFAULT_METRICS, every_judged: bool = False
              ) -> tuple[pl.DataFrame, int]:
    """One row per query of `queries` with a relevant document, one column per metric; and how
    many queries had none (dropped). `every_judged` (and a set with CSFCube's metrics): every
    query with a judgment counts, one without a relevant document scoring 0, as the official
    MDCR and CSFCube scripts average them in.

    run: query, doc, rank (1 = best; ties already broken); qrels: query, doc, rel (graded)."""
    asked = qrels.filter(pl.col("query").is_in(queries.implode()))
    judged = asked.filter(pl.col("rel") > 0)
    every_judged = every_judged or any(csfcube_metric(m) for m in metrics)
    evaluated = (asked if every_judged else judged)["query"].unique().sort()
    dropped = queries.n_unique() - len(evaluated)
    schema = {"query": queries.dtype, **dict.fromkeys(metrics, pl.Float64)}
    if len(evaluated) == 0:
        return pl.DataFrame(schema=schema), dropped
    position = pl.DataFrame({"query": evaluated,
                             "qpos": pl.int_range(len(evaluated), eager=True)})
    ranked = run.join(position, on="query").sort("qpos", "rank")
    relevant = judged.join(position, on="query").sort(["qpos", "rel", "doc"],
                                                      descending=[False, True, False])
    run_docs, qrel_docs = _doc_codes(ranked["doc"], relevant["doc"])
    run_list = cut(run_docs, -ranked["rank"].cast(pl.Float64).to_numpy(),
                   _offsets(ranked["qpos"].to_numpy(), len(evaluated)))
    qrels_list = cut(qrel_docs, relevant["rel"].cast(pl.Float64).to_numpy(),
                     _offsets(relevant["qpos"].to_numpy(), len(evaluated)))
    # a query without a relevant candidate (evaluated only beside CSFCube's metrics) scores 0
    has_relevant = np.isin(np.arange(len(evaluated)), relevant["qpos"].to_numpy())
    scores = {}
    graded = asked.join(position, on="query").select("qpos", "doc", "rel")
    ranx_scores = ranx_per_query(qrels_list, run_list,
                                 [m for m in metrics if not csfcube_metric(m)])
    for metric in metrics:
        if csfcube_metric(metric):
            scores[metric] = csfcube_values(metric, ranked.select("qpos", "doc"), graded,
                                            len(evaluated))
        else:
            scores[metric] = np.where(has_relevant, ranx_scores[metric], 0.0)
    return pl.DataFrame({"query": evaluated, **scores}, schema=schema), dropped


def ranx_per_query(qrels_list: List, run_list: List, metrics: list[str]
                   ) -> dict[str, np.ndarray]:
    """Each metric's per-query values as `ranx.evaluate(qrels, run, metrics,
    return_mean=False)` gives them for ranx's typed lists: its kernels called as it calls them
    (module doc: `ranx_kernels`). ranx sets numba's threads to 1 below 10 queries (for the
    whole process): they are set back."""
    if not metrics:
        return {}
    kernels = ranx_kernels()
    if kernels is None:
        return _ranx_evaluate(qrels_list, run_list, metrics)
    threads = numba.get_num_threads()
    try:
        if len(qrels_list) < 10:  # as ranx.evaluate: a tiny input is not worth the threads
            numba.set_num_threads(1)
        with warnings.catch_warnings():  # ranx's kernels index with prange's unsigned counter
            warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
            values = {}
            for metric in metrics:
                name, k, level = ranx_metric(metric)
                values[metric] = kernels(name)(qrels_list, run_list, k, level)
    finally:
        numba.set_num_threads(threads)
    return {m: np.asarray(values[m], dtype=np.float64) for m in metrics}


def _ranx_evaluate(qrels_list: List, run_list: List, metrics: list[str]
                   ) -> dict[str, np.ndarray]:
    """`ranx_per_query` through `ranx.evaluate` (a ranx whose kernels are laid out otherwise).
    A lone metric is asked twice: ranx 0.3's evaluate with return_mean=False returns one
    metric's array by its name less the cutoff (a KeyError for `recall@30`), two or more as a
    dict."""
    from ranx import evaluate  # here, not at the top: importing ranx costs seconds

    threads = numba.get_num_threads()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
            values = evaluate(qrels_list, run_list, metrics * 2 if len(metrics) == 1 else metrics,
                              return_mean=False)
    finally:
        numba.set_num_threads(threads)
    return {m: np.asarray(values[m], dtype=np.float64) for m in metrics}


def ranx_metric(name: str) -> tuple[str, int | float, int]:
    """A metric's name as `ranx.evaluate` reads it (its `extract_metric_and_params`): the
    kernel's name, the cutoff k (0: the whole list; RBP's persistence, a fraction) and the
    relevance level (`-l<n>`: grades >= n are relevant; 1 without)."""
    level = 1
    if "-l" in name:
        name, given = name.split("-l")
        level = int(given)
    if "rbp" in name:
        parts = name.split(".") if "." in name else name.split("@")
        if len(parts) == 1:
            raise ValueError("RBP requires persistence value. Example: `rpb.95`")
        return parts[0], float(f"0.{parts[1]}"), level
    parts = name.split("@")
    return parts[0], int(parts[1]) if len(parts) > 1 else 0, level


_LOADING = threading.Lock()
KERNELS = "ranx.metrics"  # ranx's package of metric kernels, `metric_switch` its dispatch


def ranx_kernels() -> Callable | None:
    """ranx's `metric_switch` (a metric's name -> its numba kernel), from ranx's own
    `ranx.metrics` package loaded under its own name without running ranx's `__init__`
    (module doc). Where ranx is imported already, its own. None when this ranx has no such
    package or function (then `ranx.evaluate`). As importing ranx does, numba's threading
    layer is set to ranx's, "workqueue" (for the parallel kernels not launched yet)."""
    with _LOADING:
        module = sys.modules.get(KERNELS)
        if module is None and "ranx" in sys.modules:
            module = importlib.import_module(KERNELS)
        if module is None:
            module = _load_kernels()
        return getattr(module, "metric_switch", None)


def _load_kernels():
    """`ranx.metrics` imported as a package of its own: its modules import one another
    (relatively, or as `ranx.metrics.common`), numba and numpy only. Undone (None) if it
    fails: nothing half-loaded stays in sys.modules."""
    spec = importlib.util.find_spec("ranx")
    folder = (Path(next(iter(spec.submodule_search_locations))) / "metrics"
              if spec is not None and spec.submodule_search_locations else None)
    if folder is None or not (folder / "__init__.py").is_file():
        return None
    kernels = importlib.util.spec_from_file_location(
        KERNELS, folder / "__init__.py", submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(kernels)
    sys.modules[KERNELS] = module
    try:
        kernels.loader.exec_module(module)
    except Exception:
        for name in [n for n in sys.modules if n == KERNELS or n.startswith(KERNELS + ".")]:
            del sys.modules[name]
        return None
    numba.config.THREADING_LAYER = "workqueue"  # ranx's __init__ sets it so
    return module


def csfcube_metric(name: str) -> bool:
    """Whether `name` is one of CSFCube's metrics, computed here (module doc): `ndcg%<p>`,
    `ndcg_judged%<p>`, `map_ranked[-l<n>]`."""
    return metric_percent(name) is not None or name.partition("-l")[0] == RANKED_MAP


def csfcube_values(metric: str, ranked: pl.DataFrame, graded: pl.DataFrame,
                   n_queries: int) -> np.ndarray:
    """One of CSFCube's metrics (module doc) for queries 0..n_queries-1: `ranked` (qpos, doc)
    is each query's run in rank order, `graded` (qpos, doc, rel) every judgment of the query."""
    lists = ranked_grades(ranked, graded)
    percent = metric_percent(metric)
    if percent is None:
        level = metric.partition("-l")[2]
        return ranked_ap(lists, n_queries, int(level) if level else 1)
    return ndcg_percent(lists, graded, n_queries, percent,
                        judged_ideal=metric.startswith("ndcg_judged%"))


def ranked_grades(ranked: pl.DataFrame, graded: pl.DataFrame) -> pl.DataFrame:
    """Each query's ranked list as the official script reads it: qpos, rel (the candidate's
    grade, 0 when unjudged), position (1-based rank), n (the list's length)."""
    return (ranked.with_row_index("order")
            .join(graded, on=["qpos", "doc"], how="left")
            .sort("order")
            .select("qpos", rel=pl.col("rel").fill_null(0).cast(pl.Float64),
                    position=pl.int_range(1, pl.len() + 1).over("qpos"),
                    n=pl.len().over("qpos")))


def _discounted(gains: pl.Expr, position: pl.Expr) -> pl.Expr:
    """A gain at 1-based `position` as CSFCube's `dcg_at_k` (method 0) weighs it: ranks 1 and
    2 by 1, rank r >= 2 by 1 / log2(r)."""
    return gains / pl.when(position == 1).then(1.0).otherwise(position.cast(pl.Float64).log(2))


def _dcg(grades: pl.DataFrame, cuts: pl.DataFrame, name: str) -> pl.DataFrame:
    """qpos, `name`: the DCG of each query's grades (qpos, rel, position) up to its cut."""
    return (grades.join(cuts, on="qpos").filter(pl.col("position") <= pl.col("cut"))
            .group_by("qpos").agg(_discounted(pl.col("rel"), pl.col("position")).sum()
                                  .alias(name)))


def _per_query(table: pl.DataFrame, n_queries: int) -> pl.DataFrame:
    """`table` (qpos, ...) with a row for every query 0..n_queries-1, in order, nulls 0."""
    return (pl.DataFrame({"qpos": pl.int_range(n_queries, eager=True)})
            .join(table, on="qpos", how="left").sort("qpos").fill_null(0.0))


def ndcg_percent(lists: pl.DataFrame, graded: pl.DataFrame, n_queries: int, percent: int,
                 judged_ideal: bool = False) -> np.ndarray:
    """NDCG%<percent> of queries 0..n_queries-1 from their ranked lists (`ranked_grades`). The
    cut is int(percent / 100 x n), n the length of the query's ranked list (Python's int() of
    the float product, as CSFCube's `int(0.20*len(ranked))`; a float64 product, the same here).
    The ideal is the ranked list's grades sorted (the official script's), or with
    `judged_ideal` every judged grade of the query (`graded`: qpos, doc, rel) sorted."""
    cuts = lists.group_by("qpos").agg(cut=(pl.col("n").first() * (percent / 100)).floor())
    pool = (graded.select("qpos", rel=pl.col("rel").cast(pl.Float64)) if judged_ideal
            else lists.select("qpos", "rel"))
    best = (pool.sort(["qpos", "rel"], descending=[False, True])
            .with_columns(position=pl.int_range(1, pl.len() + 1).over("qpos")))
    table = _per_query(_dcg(lists, cuts, "dcg").join(_dcg(best, cuts, "ideal"), on="qpos",
                                                     how="full", coalesce=True), n_queries)
    ideal = table["ideal"].to_numpy()
    return np.divide(table["dcg"].to_numpy(), ideal, out=np.zeros(n_queries, dtype=np.float64),
                     where=ideal > 0)


def ranked_ap(lists: pl.DataFrame, n_queries: int, level: int) -> np.ndarray:
    """CSFCube's AP (`rank_metrics.average_precision` of the list made binary at grade >=
    `level`) of queries 0..n_queries-1 from their ranked lists (`ranked_grades`): the mean of
    the precision at each relevant rank; 0 for a list without a relevant candidate."""
    hits = lists.with_columns(hit=(pl.col("rel") >= level).cast(pl.Float64))
    ap = (hits.with_columns(precision=pl.col("hit").cum_sum().over("qpos") / pl.col("position"))
          .filter(pl.col("hit") > 0).group_by("qpos").agg(ap=pl.col("precision").mean()))
    return _per_query(ap, n_queries)["ap"].to_numpy()


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels of every metric set once, so that the
    first `make eval` after an install does not pay the JIT (`make setup` calls this): the
    same calls an eval stage makes, with the same argument types (`cut`)."""
    run = pl.DataFrame({"query": [1, 1, 2], "doc": [1, 2, 3], "rank": [1, 2, 1]})
    qrels = pl.DataFrame({"query": [1, 2], "doc": [2, 4], "rel": [1, 2]})
    names = sorted({m for metrics in METRIC_SETS.values() for m in metrics})
    per_query(run, qrels, pl.Series([1, 2]), names)


KERNEL_MODULES = ("pipeline.", "ranx.", "numba.typed.")  # whose kernels the stages use


def kernel_caches() -> dict[str, int]:
    """Where the kernels this process has used so far (of `KERNEL_MODULES`) are cached: each
    folder (numba's cache path, or NUMBA_CACHE_DIR for those under it; "" for none, a kernel
    each process compiles) -> how many."""
    from numba.core.registry import CPUDispatcher

    chosen = numba.config.CACHE_DIR
    found: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith(KERNEL_MODULES):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, CPUDispatcher) and value.overloads:
                where = value.stats.cache_path or ""
                if chosen and where.startswith(chosen):
                    where = chosen
                found[where] = found.get(where, 0) + 1
    return found


@contextlib.contextmanager
def compilations() -> Iterator[list[str]]:
    """The functions numba compiles inside the block (`module.qualname`, as each finished
    compiling: a nested kernel before the one that calls it); loading one from numba's cache
    is no compile."""
    compiled: list[str] = []
    with numba_event.install_recorder("numba:compile") as recorder:
        yield compiled
    for _, event in recorder.buffer:
        if event.is_end:
            function = event.data["dispatcher"].py_func
            compiled.append(f"{function.__module__}.{function.__qualname__}")
