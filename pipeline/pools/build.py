"""Query sets and candidate pools (docs/pools.md; MDCR §3).

Dataset-level: queries are prefiltered papers of the query year; the pool holds every paper
they cite plus papers sampled at random from prefiltered papers up to the candidate year.
Field-level: queries carry the field; negatives come from the field-cited set (papers cited by
any paper labelled with the field). Relevance is binary: cited by the query.

Determinism and nesting: queries depend only on (seed, scope); negatives are a prefix of one
seeded permutation of a size-independent population, so with the same seed and repeat the 10k
pool is contained in the 20k pool.
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.atomic import is_temporary
from pipeline.core.checksums import check_outputs, fingerprints
from pipeline.core.current import stale
from pipeline.core.errors import InputError, OptionError
from pipeline.core.files import read_json, read_parquet, write_json, write_parquet
from pipeline.core.inputs import Roots, changed, record
from pipeline.core.locks import file_lock
from pipeline.core.manifests import manifest
from pipeline.core.repair import Repair
from pipeline.corpus.files import corpus_file
from pipeline.corpus.manifest import corpus_repair, written_whole
from pipeline.fields import MAG_FIELDS, field_slug, resolve_field
from pipeline.layout import (
    CITATIONS,
    MANIFEST,
    PAPERS,
    POOL_CANDIDATES,
    POOL_FILES,
    POOL_QRELS,
    POOL_QUERIES,
    POOL_SPEC,
    PREFILTERED,
    SPLITS,
    check_name,
    exclusion_tag,
    parse_pool_name,
    pool_dir,
    pool_name,
    pool_names,
    pools_dir,
)
from pipeline.pools.exclusions import NO_LIST, PaperList, list_changed, read_list

log = logging.getLogger(__name__)


class NoQueriesError(InputError):
    """No paper qualifies as a query for this pool."""


class NoQueriesLeft(NoQueriesError, OptionError):
    """No query left for a validation pool: its refusal names the query count's option."""


@dataclass(frozen=True)
class Named:
    """Which declared options (pipeline/options/declared.py, by make variable) give a pool's
    size and query count, for its refusals (OptionError, worded by each door): make pool's
    by default, pools-paper's own for its grid (PAPER_SIZES, ...)."""

    size: str = "SIZE"
    queries: str = "QUERIES"


POOL_OPTIONS = Named()

DATASET_QUERIES = 3800  # MDCR §3: 3,800 query papers
FIELD_QUERIES = 200  # MDCR §3: 200 per field


@dataclass(frozen=True)
class PoolSpec:
    size: int
    field: str | None = None  # None: dataset-level pool
    repeat: int = 0
    queries: int | None = None  # default: 3,800 dataset-level, 200 per field
    query_year: int = 2019
    max_year: int = 2019
    seed: int = 0
    min_positives: int = 1
    exclude: str | None = None  # file of CorpusIDs never used as queries (training sets)
    split: str = "test"  # or "validation": queries disjoint from the test pool's (MDCR §3)
    exclusion: str = ""  # the digest of `exclude`'s ids (`with_exclusion` fills it): its name

    @property
    def scope(self) -> str:
        return "all" if self.field is None else field_slug(self.field)

    @property
    def name(self) -> str:
        return pool_name(self.scope, self.size, self.repeat, self.seed, self.split,
                         self.exclusion)

    @property
    def queries_wanted(self) -> int:
        if self.queries is not None:
            return self.queries
        return DATASET_QUERIES if self.field is None else FIELD_QUERIES


# A pool manifest's parameters are PoolSpec's fields, `queries` under the key it had before
# the field took its option's name (n_queries): pools drawn before stay current, and the
# manifests written since are read by releases before.
RECORDED_AS = {"queries": "n_queries"}


def spec_record(spec: PoolSpec) -> dict:
    """A PoolSpec as a pool's manifest records its parameters."""
    return {RECORDED_AS.get(key, key): value for key, value in asdict(spec).items()}


def recorded_spec(parameters: dict) -> PoolSpec:
    """The PoolSpec a pool's manifest records (spec_record's)."""
    fields = {recorded: key for key, recorded in RECORDED_AS.items()}
    return PoolSpec(**{fields.get(key, key): value for key, value in parameters.items()})


def with_exclusion(spec: PoolSpec) -> tuple[PoolSpec, PaperList | None]:
    """The spec with its exclusion list read (EXCLUDE): its path made absolute and the digest
    of its ids filled in, which names the pool. A list whose ids changed since a pool was drawn
    without it is refused: that pool keeps the old list's name and contents."""
    if spec.exclude == NO_LIST:  # EXCLUDE=none, as make report takes it
        spec = replace(spec, exclude=None)
    if spec.exclude is None:
        if spec.exclusion:
            raise InputError(f"pool {spec.name}: drawn without an exclusion list whose file is "
                             "not recorded; build it again with make pool EXCLUDE=<the list>")
        return spec, None
    papers = read_list(spec.exclude)
    if spec.exclusion and spec.exclusion != papers.digest:
        raise InputError(
            f"EXCLUDE {spec.exclude} has other papers than when pool {spec.name} was drawn "
            f"without it (ids sha256 {papers.digest[:12]}..., recorded {spec.exclusion[:12]}...)"
            ": put the old list back to rebuild that pool, or build the new list's pools "
            "(make pool EXCLUDE=..., a new name) and retire that one (make retire-pool)")
    return replace(spec, exclude=papers.path, exclusion=papers.digest), papers


def _scope_seed(spec: PoolSpec) -> int:
    return zlib.crc32(spec.scope.encode())


def select_queries(corpus_dir: Path, spec: PoolSpec, named: Named = POOL_OPTIONS
                   ) -> tuple[pl.DataFrame, pl.DataFrame, int, int]:
    """Sample the query papers and their qrels; returns (queries, qrels, eligible count, papers
    of the query year and scope that the exclusion list left out)."""
    spec, excluded = with_exclusion(spec)
    pre = pl.scan_parquet(corpus_dir / PREFILTERED)
    candidates = pre.filter(pl.col("year") <= spec.max_year).select("corpusid")
    eligible = pre.filter(pl.col("year") == spec.query_year)
    if spec.field is not None:
        eligible = eligible.filter(pl.col("fields").list.contains(spec.field))
    left_out, share = 0, ""
    if excluded is not None:
        listed = pl.col("corpusid").is_in(pl.Series(excluded.ids).implode())
        left_out, of_year = eligible.select(listed.sum(), pl.len()).collect().row(0)
        eligible = eligible.filter(~listed)
        share = (f"the EXCLUDE list leaves out {left_out} of the {of_year} prefiltered "
                 f"{spec.query_year} papers{' in ' + spec.field if spec.field else ''} "
                 f"({100 * left_out / max(of_year, 1):.1f}%)")
    positives = (
        pl.scan_parquet(corpus_dir / CITATIONS)
        .join(eligible.select(citing="corpusid"), on="citing", how="semi")
        .filter(pl.col("citing") != pl.col("cited"))
        .join(candidates, left_on="cited", right_on="corpusid", how="semi")
    )
    counts = positives.group_by("citing").agg(n=pl.len()).filter(
        pl.col("n") >= spec.min_positives)
    pool_of_queries = (
        eligible.join(counts, left_on="corpusid", right_on="citing", how="semi")
        .select("corpusid", field=pl.col("fields").list.first() if spec.field is None
                else pl.lit(spec.field))
        .sort("corpusid").collect()
    )
    n_eligible = pool_of_queries.height
    if n_eligible == 0 and left_out:
        raise NoQueriesError(f"no query candidates for pool {spec.name}: {share}, and none of "
                             f"the others cites a paper of year <= {spec.max_year}; check the "
                             f"EXCLUDE list {excluded.path}")
    if n_eligible == 0:
        raise NoQueriesError(
            f"no query candidates for pool {spec.name}: no prefiltered {spec.query_year} paper"
            f"{' in ' + spec.field if spec.field else ''} cites a paper of year <= "
            f"{spec.max_year}; check the corpus and --query-year"
        )
    eligible_words = f"{n_eligible} eligible" + (f" after {share}" if share else "")
    # One seeded permutation of the eligible papers per (seed, scope): test queries are its
    # first QUERIES, validation queries its last, so the two splits never share a query
    # whatever counts they ask for (as long as together they fit).
    order = np.random.default_rng([spec.seed, 1, _scope_seed(spec)]).permutation(n_eligible)
    take = min(spec.queries_wanted, n_eligible)
    picked = np.sort(order[:take] if spec.split == "test" else order[::-1][:take])
    shared = _other_split_queries(corpus_dir, spec, pool_of_queries["corpusid"].to_numpy()[picked])
    if len(shared) and spec.split == "validation":  # a small scope: leave the test queries out
        picked = picked[~np.isin(pool_of_queries["corpusid"].to_numpy()[picked], shared)]
        if len(picked) == 0:
            raise NoQueriesLeft(f"no query candidates for validation pool {spec.name}: the "
                                f"test pools use all of them ({eligible_words}); ask for "
                                f"fewer queries ({{{named.queries}}})")
    elif len(shared):
        raise OptionError(f"pool {spec.name}: {len(shared)} of its queries are queries of a "
                          "validation pool of the same seed; ask for fewer queries "
                          f"({{{named.queries}}}) in one of them, so that both fit in the "
                          f"{eligible_words} papers")
    queries = pool_of_queries[picked]
    qrels = (
        positives.join(queries.lazy().select(citing="corpusid"), on="citing", how="semi")
        .select(query="citing", doc="cited", rel=pl.lit(1, dtype=pl.Int32))
        .sort("query", "doc").collect()
    )
    return queries, qrels, n_eligible, left_out


def listed_in(corpus_dir: Path, papers: PaperList) -> int:
    """How many of the list's distinct ids are prefiltered papers of the corpus (what pools
    are drawn from): 0 means the list leaves nothing out here."""
    return (pl.scan_parquet(corpus_dir / PREFILTERED)
            .filter(pl.col("corpusid").is_in(pl.Series(papers.ids).implode()))
            .select(pl.len()).collect().item())


def _other_split_queries(corpus_dir: Path, spec: PoolSpec, ids: np.ndarray) -> np.ndarray:
    """Those of `ids` that are queries of an existing pool of the other split (same seed and
    scope): test and validation counts together exceed the eligible papers."""
    shared = [np.empty(0, dtype=np.int64)]
    for name in pool_names(corpus_dir):
        other_name = parse_pool_name(name)
        if ((other_name.scope, other_name.seed, other_name.exclusion)
                != (spec.scope, spec.seed, exclusion_tag(spec.exclusion))
                or other_name.split == spec.split):
            continue
        info = pool_manifest(corpus_dir, name)  # its files checked before they are read
        check_outputs(pool_dir(corpus_dir, name), info, repair=pool_repair(corpus_dir, name))
        other = read_parquet(pool_dir(corpus_dir, name) / POOL_QUERIES, ["corpusid"])
        shared.append(np.intersect1d(ids, other["corpusid"].to_numpy()))
    return np.unique(np.concatenate(shared))


def negative_population(corpus_dir: Path, spec: PoolSpec, exclude: pl.Series
                        ) -> tuple[pl.Series, int]:
    """Sorted ids negatives are sampled from: all candidates (dataset-level) or the field-cited
    set (field-level), minus `exclude` (queries and positives); and the size of that set before
    the exclusion (the field-cited set size MDCR §3 compares with SIZE)."""
    papers = pl.scan_parquet(corpus_dir / PREFILTERED).filter(
        pl.col("year") <= spec.max_year).select("corpusid")
    if spec.field is not None:
        labelled = pl.scan_parquet(corpus_dir / PAPERS).filter(
            pl.col("fields").list.contains(spec.field)).select(citing="corpusid")
        cited = (pl.scan_parquet(corpus_dir / CITATIONS)
                 .join(labelled, on="citing", how="semi").select(corpusid="cited").unique())
        papers = papers.join(cited, on="corpusid", how="semi")
    scope = papers.sort("corpusid").collect()["corpusid"]
    return scope.filter(~scope.is_in(exclude.implode())), len(scope)


def corpus_inputs(corpus_dir: Path) -> dict[str, str]:
    """What a pool is made from: the corpus's prefiltered.parquet (label -> sha256)."""
    return record(Roots.of(corpus_dir), [corpus_dir / PREFILTERED])


def check_corpus(corpus_dir: Path) -> None:
    """Refuse a corpus whose files a pool reads disagree with its manifest (sizes and sha256):
    a damaged prefiltered.parquet is named with the command that rebuilds it, never read."""
    for name in (PAPERS, CITATIONS, PREFILTERED):
        corpus_file(corpus_dir, name)


def _up_to_date(pool_dir: Path, spec: PoolSpec, inputs: dict[str, str]) -> bool:
    """Same parameters, same input, and files that match the manifest (not the manifest alone:
    a damaged candidates.parquet makes the pool out of date)."""
    return stale(pool_dir / MANIFEST, spec_record(spec), files=pool_dir, inputs=inputs) is None


def pool_field(field: object) -> str | None:
    """A pool's field by its name in MAG_FIELDS (given in any case, '-' or '_' for its
    spaces, as FIELD), or None for a dataset-level pool; anything else is refused, naming the
    fields."""
    if field is None:
        return None
    try:
        if isinstance(field, str) and field.strip():
            return resolve_field(field)
    except InputError:
        pass
    raise InputError(f"pool field {field!r}: give one of the 19 MAG fields "
                     f"({', '.join(MAG_FIELDS)}; case does not matter), or None for a "
                     "dataset-level pool")


def build_pool(corpus_dir: Path, spec: PoolSpec, named: Named = POOL_OPTIONS) -> dict:
    """Write queries, candidates, qrels and manifest for one pool; a no-op when up to date.
    Its errors name the size and query count as `named`.

    The manifest is removed first and written last, so a pool killed half-way is never taken
    for complete; a lock keeps two processes from building one pool at once.
    """
    check_corpus(corpus_dir)
    spec, excluded = with_exclusion(replace(spec, field=pool_field(spec.field)))
    check_name("pool", spec.name)  # a field given by a caller becomes its folder's name
    if spec.split not in SPLITS:
        raise InputError(f"pool split {spec.split!r}: use one of {', '.join(SPLITS)}")
    if spec.size < 1 or spec.repeat < 0 or spec.queries_wanted < 1:
        raise InputError(f"pool size {spec.size} / repeat {spec.repeat} / queries "
                         f"{spec.queries_wanted}: size and queries must be >= 1, repeat >= 0")
    folder = pool_dir(corpus_dir, spec.name)
    inputs = corpus_inputs(corpus_dir)
    with file_lock(pool_dir(corpus_dir, spec.name)):
        if _up_to_date(folder, spec, inputs):
            log.info(f"[pool] {spec.name} is up to date")
            return read_json(folder / MANIFEST)
        return _build_pool(corpus_dir, spec, folder, inputs, excluded, named)


def check_size(spec: PoolSpec, positives: int, queries: int, population: int,
               named: Named = POOL_OPTIONS) -> None:
    """The rule of a pool's size: room for the `positives` its `queries` cite and, for a
    dataset-level pool, no more than those and the `population` of others there are (a
    field-level pool a size exhausts holds its whole field-cited set: MDCR §3)."""
    if spec.size < positives:
        raise OptionError(
            f"{{{named.size}=}} cannot hold the {positives} papers cited by the {queries} "
            f"queries: choose a larger {{{named.size}}} (at least {positives}), or fewer "
            f"queries ({{{named.queries}}})", {named.size: spec.size})
    if spec.field is None and spec.size > positives + population:
        raise OptionError(
            f"{{{named.size}=}} exceeds the papers available: {positives} cited + "
            f"{population} others up to {spec.max_year}, {positives + population} in all; "
            f"choose a smaller {{{named.size}}}", {named.size: spec.size})


def check_sizes(corpus_dir: Path, spec: PoolSpec, sizes: list[int],
                named: Named = POOL_OPTIONS) -> None:
    """Each of `sizes` for pools of `spec`'s scope, split and queries checked (check_size)
    before any is built: the queries, their positives and the others do not depend on the
    size or the repeat, so a grid is refused whole, not after the pools of its sizes before
    the first one too large."""
    check_corpus(corpus_dir)
    spec = replace(spec, field=pool_field(spec.field), size=sizes[0])
    queries, qrels, _, _ = select_queries(corpus_dir, spec, named)
    positives = qrels["doc"].unique()
    population, _ = negative_population(corpus_dir, spec,
                                        pl.concat([queries["corpusid"], positives]))
    for size in sizes:
        check_size(replace(spec, size=size), len(positives), queries.height, len(population),
                   named)


def _build_pool(corpus_dir: Path, spec: PoolSpec, pool_dir: Path, inputs: dict[str, str],
                excluded: PaperList | None, named: Named) -> dict:
    start = time.perf_counter()
    queries, qrels, n_eligible, left_out = select_queries(corpus_dir, spec, named)
    positives = qrels["doc"].unique().sort()
    population, scope_size = negative_population(
        corpus_dir, spec, pl.concat([queries["corpusid"], positives]))
    check_size(spec, len(positives), queries.height, len(population), named)
    need = spec.size - len(positives)
    exhausted = need > len(population)
    if exhausted and spec.repeat > 0:
        raise OptionError(
            f"pool {spec.name}: the {spec.field} field-cited set ({len(population)} papers) is "
            f"smaller than {{{named.size}}}, so every repeat would be the same pool; use "
            "repeat 0 only"
        )
    stream = 2 if spec.split == "test" else 4
    rng = np.random.default_rng([spec.seed, stream, spec.repeat, _scope_seed(spec)])
    sampled = population.to_numpy()[rng.permutation(len(population))[:need]]
    candidates = pl.concat([
        pl.DataFrame({"corpusid": positives, "type": "cited"}),
        pl.DataFrame({"corpusid": sampled, "type": "sampled"},
                     schema={"corpusid": pl.Int64, "type": pl.String}),
    ]).sort("corpusid")
    warnings = []
    if excluded is not None:
        matched = listed_in(corpus_dir, excluded)
        line = (f"EXCLUDE {excluded.path}: {matched} of its {excluded.ids.size} ids are "
                f"prefiltered papers of the corpus, {left_out} of them papers of "
                f"{spec.query_year}{' in ' + spec.field if spec.field else ''} left out of the "
                "queries")
        if matched:
            log.info(f"[pool] {spec.name}: {line}")
        else:  # a list of another corpus's ids, or of other ids: it changes nothing but the name
            warnings.append(f"{line}: the list matches no paper here, so the pool's queries "
                            "are those without it (under a new name)")
    if queries.height < spec.queries_wanted:
        warnings.append(f"only {queries.height} of {spec.queries_wanted} requested queries "
                        f"exist ({n_eligible} eligible"
                        + (f"; the EXCLUDE list left out {left_out} more)" if left_out else ")"))
    if exhausted:
        warnings.append(f"field-cited set holds {len(population)} papers: the pool has all of "
                        f"them, {candidates.height} candidates instead of {spec.size}")
    for line in warnings:
        log.warning(f"[pool] {spec.name}: {line}")
    (pool_dir / MANIFEST).unlink(missing_ok=True)
    write_json(manifest("pool-spec", spec_record(spec)), pool_dir / POOL_SPEC)  # for `--repair`
    write_parquet(queries.to_arrow(), pool_dir / POOL_QUERIES)
    write_parquet(candidates.to_arrow(), pool_dir / POOL_CANDIDATES)
    write_parquet(qrels.to_arrow(), pool_dir / POOL_QRELS)
    per_query = qrels.group_by("query").len()["len"]
    counts = {
        "queries": queries.height, "queries_requested": spec.queries_wanted,
        "query_candidates": n_eligible, "candidates": candidates.height,
        "positives": len(positives), "qrels": qrels.height,
        "mean_positives_per_query": round(qrels.height / max(queries.height, 1), 2),
        "median_positives_per_query": float(per_query.median()) if len(per_query) else 0.0,
        "field_cited_set": scope_size if spec.field is not None else None,
        "negative_population": len(population), "exhausted": exhausted,
        "query_candidates_excluded": left_out,
    }
    info = manifest("pool", spec_record(spec), name=spec.name, scope=spec.scope, split=spec.split,
                    level="dataset" if spec.field is None else "field",
                    exclusion=excluded.record() if excluded is not None else None,
                    inputs=inputs, outputs=fingerprints(pool_dir, POOL_FILES), counts=counts,
                    warnings=warnings, seconds=round(time.perf_counter() - start, 2))
    write_json(info, pool_dir / MANIFEST)
    return info


def pool_manifest(corpus_dir: Path, name: str) -> dict:
    """The manifest of an existing pool, or a one-line error naming what to run."""
    path = pool_dir(corpus_dir, name) / MANIFEST
    if not path.exists():
        known = ", ".join(pool_names(corpus_dir)) or "none yet"
        if kind := written_whole(corpus_dir):  # its pools came with it: no command makes another
            raise InputError(f"pool {name!r} does not exist under {corpus_dir}/pools: corpus "
                             f"{corpus_dir.name} is a {kind} with its own pools ({known}); "
                             "give one of them")
        raise InputError(f"pool {name!r} does not exist under {corpus_dir}/pools "
                         f"(existing: {known}); build it", Repair("pool", corpus_dir.name))
    return read_json(path, pool_repair(corpus_dir, name))


def pool_files(corpus_dir: Path, name: str) -> list[Path]:
    """The files of a pool: what a run or an evaluation of it records among its inputs."""
    return [pool_dir(corpus_dir, name) / f for f in POOL_FILES]


def pool_repair(corpus_dir: Path, name: str, info: dict | None = None) -> Repair:
    """The command that rebuilds a pool: from its recorded parameters for a pool built here,
    the corpus's own command for a benchmark's or an imported collection's pools (known from
    the corpus when the pool's own manifest is lost or damaged)."""
    if (info.get("stage") != "pool") if info is not None else written_whole(corpus_dir):
        return corpus_repair(corpus_dir)
    return Repair("pools", corpus_dir.name,
                  note="rebuilds it from its recorded parameters")


def check_pool(corpus_dir: Path, name: str) -> dict:
    """Refuse a pool whose files are damaged or that was made from another prefiltered.parquet
    than the corpus's current one (stale, whatever made it: built, imported, a benchmark);
    return its manifest."""
    info = pool_manifest(corpus_dir, name)
    if "outputs" not in info:
        raise InputError(f"pool {name} was built by an older version of the pipeline (no file "
                         "checksums in its manifest)", pool_repair(corpus_dir, name))
    check_outputs(pool_dir(corpus_dir, name), info, repair=pool_repair(corpus_dir, name, info))
    changed_list = list_problem(info)
    if changed_list:
        raise InputError(f"pool {name}: {changed_list}", retire_repair(corpus_dir, name))
    corpus_file(corpus_dir, PREFILTERED)
    stale = changed(Roots.of(corpus_dir), info.get("inputs", {}))
    if stale:
        raise InputError(f"pool {name} is stale: {stale[0]} (prefiltered.parquet changed since "
                         "it was made)", pool_repair(corpus_dir, name, info))
    return info


BUILT = ("pool", "pool-spec")  # the stages of a pool's manifest and `.spec.json` (make pool)


def recorded(corpus_dir: Path, name: str) -> dict | None:
    """A pool's manifest, or (a manifest lost or damaged) the `.spec.json` written before its
    files; None when neither can be read."""
    folder = pool_dir(corpus_dir, name)
    for path in (folder / MANIFEST, folder / POOL_SPEC):
        try:
            return read_json(path)
        except InputError:
            continue
    return None


def list_problem(info: dict) -> str | None:
    """Why the pool a manifest (or `.spec.json`) describes is no longer what its EXCLUDE list
    says: the list's file gone, unreadable or holding other papers (exclusions.list_changed).
    The one rule check_pool, `make pools` and verify apply; None for a current list or none."""
    parameters = info.get("parameters") or {}
    if info.get("stage") not in BUILT or not parameters.get("exclusion"):
        return None
    return list_changed(parameters.get("exclude"), parameters["exclusion"],
                        (info.get("exclusion") or {}).get("file_sha256"))


def changed_lists(corpus_dir: Path, names: list[str]) -> list[tuple[str, str]]:
    """(pool, why) of each of `names` whose EXCLUDE list changed since it was drawn (in the
    order given): no stage can use or rebuild them; retire_repair says what to do."""
    problems = [(name, list_problem(recorded(corpus_dir, name) or {})) for name in names]
    return [(name, why) for name, why in problems if why]


def retire_repair(corpus_dir: Path, name: str) -> Repair:
    """What to do with a pool whose EXCLUDE list changed: retire it (its files and runs moved
    aside, pipeline/pools/retire.py), or put the old list back."""
    return Repair("retire-pool", corpus_dir.name, variables=(("POOL", name),),
                  note="or put the old list back where it was")


def _recorded_spec(corpus_dir: Path, name: str) -> PoolSpec | None:
    """The parameters a pool was built with: from its manifest, or (a manifest lost or damaged)
    from the `.spec.json` written before its files; None for a pool not built here."""
    folder = pool_dir(corpus_dir, name)
    info = recorded(corpus_dir, name)
    if info is not None:
        if info.get("stage") not in BUILT:
            return None  # a benchmark's or a collection's pool: its corpus command rebuilds it
        return recorded_spec(info["parameters"])
    raise InputError(f"pool {name}: neither its manifest nor {POOL_SPEC} can be read, so its "
                     f"parameters are lost: rm -r {folder}, then build it again with the "
                     "make pool command that made it")


def rebuild_pool(corpus_dir: Path, name: str) -> dict | None:
    """Rebuild a pool from its recorded parameters (no-op if current; None for a pool that
    its corpus's own command writes)."""
    spec = _recorded_spec(corpus_dir, name)
    if spec is None:
        return None
    changed_list = list_problem(recorded(corpus_dir, name) or {})
    if changed_list:
        raise InputError(f"pool {name} cannot be rebuilt: {changed_list}",
                         retire_repair(corpus_dir, name))
    if spec.name != name:
        raise InputError(f"pool {name}: its manifest describes pool {spec.name}; delete the "
                         "folder and build the pool again with `make pool`")
    return build_pool(corpus_dir, spec)


def pool_folders(corpus_dir: Path) -> list[str]:
    """Every pool folder of a corpus, complete or not (`make pools` repairs them all)."""
    return sorted(p.name for p in pools_dir(corpus_dir).glob("*/")
                  if p.is_dir() and not is_temporary(p))


def load_pool(corpus_dir: Path, name: str) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(queries, candidates, qrels) of a checked pool, or a one-line error naming what to run."""
    check_pool(corpus_dir, name)
    folder = pool_dir(corpus_dir, name)
    return tuple(read_parquet(folder / f) for f in POOL_FILES)  # type: ignore


def validation_pools(corpus_dir: Path, pool: str) -> list[str]:
    """The validation pools built like `pool` (none for a validation pool itself)."""
    name = parse_pool_name(pool)
    if name.split == "validation":
        return []
    return sorted(p for p in pool_names(corpus_dir)
                  if (v := parse_pool_name(p)).split == "validation"
                  and (v.scope, v.size, v.seed, v.exclusion)
                  == (name.scope, name.size, name.seed, name.exclusion))
