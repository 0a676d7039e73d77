"""A benchmark as a corpus: `corpora/<name>/prefiltered.parquet` holds its papers and one pool
per field holds its queries, each query's typed candidates and its positives.

The benchmark's tidy form, what `build` makes and `official` reads and writes, is one row per
listed candidate: field, query, doc, type; positives have type "cited" (the official "true").
A pool of the benchmark is an ordinary pool folder whose `candidates.parquet` also names the
query (query, corpusid, type), so search ranks each query's own list
(pipeline/retrieval/search.py) and
eval adds per-type scores (MDCR Table 4). Such a corpus has no raw input: the Makefile neither
ingests nor prefilters it (its manifest has a `benchmark` section instead).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import polars as pl

from pipeline.core.atomic import scratch_dir
from pipeline.core.checksums import fingerprint, fingerprints
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, read_parquet, write_json, write_parquet
from pipeline.core.inputs import corpus_label
from pipeline.core.manifests import manifest
from pipeline.corpus.files import corpus_file
from pipeline.corpus.install import claim_corpus, install_corpus
from pipeline.evaluation.evaluate import POSITIVE_TYPE
from pipeline.fields import field_slug
from pipeline.layout import MANIFEST, POOL_FILES, PREFILTERED, pool_dir, pool_name, pool_names

LEVEL = "mdcr"  # the pool manifests' level
NOMINAL_SIZE = 65  # MDCR §4: 5 positives + 6 types x 10 negatives; the pools' size in names


def is_benchmark(corpus_dir: Path) -> bool:
    path = corpus_dir / MANIFEST
    return path.exists() and "benchmark" in read_json(path)


def write_benchmark(corpus_dir: Path, papers: pl.DataFrame, table: pl.DataFrame, stage: str,
                    parameters: dict, split: str = "test", seed: int = 0,
                    extra: dict | None = None, replace: bool = False,
                    derived: tuple[Path, ...] = ()) -> dict:
    """Write the benchmark `table` (field, query, doc, type) and its `papers` (corpusid, title,
    abstract, ...) as the corpus `corpus_dir`: a new corpus, or the same one again (a no-op),
    or with `replace` in place of a benchmark with other contents, whose `derived` indexes and
    runs are removed (`corpus.install.install_corpus`; a kill leaves the old corpus or the new
    one). Every listed id must have a paper."""
    from pipeline.retrieval.bm25.analysis import check_ids

    claim_corpus(corpus_dir, f"make {stage}")
    listed = pl.concat([table["query"], table["doc"]]).unique()
    check_ids(listed.sort(), "paper", str(parameters.get("source", f"make {stage}")))
    missing = listed.filter(~listed.is_in(papers["corpusid"].implode()))
    if len(missing):
        raise InputError(f"{len(missing)} ids of the benchmark have no title/abstract record "
                         f"(e.g. {missing.sort()[0]}): give the papers file that goes with it")
    papers = papers.filter(pl.col("corpusid").is_in(listed.implode())).sort("corpusid")
    fields = sorted(table["field"].unique().to_list())
    with scratch_dir(corpus_dir.parent, corpus_dir.name) as tmp:
        write_parquet(papers.to_arrow(), tmp / PREFILTERED)
        # what its pools are made from, labelled by the corpus's final place
        made_from = {corpus_label(PREFILTERED):
                     fingerprint(tmp / PREFILTERED)["sha256"]}
        pools = {}
        for field in fields:
            rows = table.filter(pl.col("field") == field)
            name = pool_name(field_slug(field), NOMINAL_SIZE, 0, seed, split)
            pools[name] = _write_pool(pool_dir(tmp, name), name, field, rows, stage,
                                      parameters, split, made_from, (extra or {}).get(field, {}))
        info = {"benchmark": manifest(stage, parameters, outputs=fingerprints(
            tmp, [PREFILTERED]), counts={
                "papers": papers.height, "fields": len(fields), "queries": table["query"]
                .n_unique(), "pairs": table.select("query", "doc").unique().height,
                "by_type": dict(table.group_by("type").len().sort("type").iter_rows())},
            pools=sorted(pools))}
        write_json(info, tmp / MANIFEST)
        installed = install_corpus(tmp, corpus_dir, list(derived), replace, "benchmark")
    info["installed"] = installed
    return info


def _write_pool(pool_dir: Path, name: str, field: str, rows: pl.DataFrame, stage: str,
                parameters: dict, split: str, made_from: dict[str, str], extra: dict) -> dict:
    queries = rows.select(corpusid="query", field=pl.lit(field)).unique().sort("corpusid")
    candidates = rows.select("query", corpusid="doc", type="type").sort("query", "type",
                                                                        "corpusid")
    qrels = (rows.filter(pl.col("type") == POSITIVE_TYPE)
             .select("query", "doc", rel=pl.lit(1, pl.Int32)).unique().sort("query", "doc"))
    pool_dir.mkdir(parents=True)
    for file, frame in zip(POOL_FILES, (queries, candidates, qrels), strict=True):
        write_parquet(frame.to_arrow(), pool_dir / file)
    per_query = rows.select("query", "doc").unique().group_by("query").len()["len"]
    counts = {"queries": queries.height, "candidates": candidates["corpusid"].n_unique(),
              "pairs": int(per_query.sum()), "qrels": qrels.height,
              "min_candidates_per_query": int(per_query.min()),
              "max_candidates_per_query": int(per_query.max()),
              "by_type": dict(rows.group_by("type").len().sort("type").iter_rows())}
    info = manifest(stage, {**parameters, "field": field}, name=name, scope=field_slug(field),
                    split=split, level=LEVEL, metrics="mdcr",
                    inputs=made_from,
                    outputs=fingerprints(pool_dir, POOL_FILES), counts=counts, **extra)
    write_json(info, pool_dir / MANIFEST)
    return info


def read_benchmark(corpus_dir: Path, split: str | None = None) -> tuple[pl.DataFrame,
                                                                      pl.DataFrame]:
    """(table, papers) of a benchmark corpus: the inverse of write_benchmark (pools of one
    split when given)."""
    table = benchmark_table(corpus_dir, split)
    return table, read_parquet(corpus_file(corpus_dir, PREFILTERED))


def benchmark_table(corpus_dir: Path, split: str | None = None,
                    pools: Collection[str] | None = None) -> pl.DataFrame:
    """The benchmark's table (field, query, doc, type) from its pools: those of one split
    when given, and only `pools` when given (the pools a model was evaluated on)."""
    from pipeline.pools.build import load_pool, pool_manifest

    if not is_benchmark(corpus_dir):
        raise InputError(f"{corpus_dir} is not an MDCR-style benchmark (no benchmark section in "
                         "its manifest.json): build one with `make mdcr` or import one")
    frames = []
    for name in benchmark_pools(corpus_dir, split):
        if pools is not None and name not in pools:
            continue
        _, candidates, _ = load_pool(corpus_dir, name)
        field = pool_manifest(corpus_dir, name)["parameters"]["field"]
        frames.append(candidates.select(field=pl.lit(field), query="query", doc="corpusid",
                                        type="type"))
    if not frames:
        which = f" of split {split}" if split else ""
        raise InputError(f"{corpus_dir} has no benchmark pools{which}")
    return pl.concat(frames)


def benchmark_pools(corpus_dir: Path, split: str | None = None) -> list[str]:
    """The benchmark's pools (of one split when given) in the benchmark's order, pool names
    sorted: the order SHARED_PAIRS=first follows."""
    from pipeline.pools.build import pool_manifest

    return [name for name in pool_names(corpus_dir)
            if (info := pool_manifest(corpus_dir, name)).get("level") == LEVEL
            and (not split or info.get("split") == split)]
