"""Pool invariants (docs/pools.md): positives present, years, nesting, determinism, field pools."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.layout import pool_names
from pipeline.pools.build import PoolSpec, build_pool, load_pool
from tests.conftest import N_QUERIES, POOL_SIZES, copy_corpus, pool_of


def papers(corpus_dir) -> pl.DataFrame:
    return pl.read_parquet(corpus_dir / "prefiltered.parquet")


@pytest.fixture()
def private(corpus_dir, tmp_path):
    """A private copy of the session corpus (no pools) for tests that build pools: the
    session's corpus keeps only its own pools, whatever ran before."""
    return copy_corpus(corpus_dir, tmp_path / "private")


@pytest.mark.parametrize("size", POOL_SIZES)
def test_dataset_pool_invariants(corpus_dir, size):
    queries, candidates, qrels = load_pool(corpus_dir, pool_of(size))
    assert queries.height == N_QUERIES
    assert candidates.height == size
    assert candidates["corpusid"].is_unique().all()
    years = papers(corpus_dir).select("corpusid", "year")
    assert (queries.join(years, on="corpusid")["year"] == 2019).all()
    assert candidates.join(years, on="corpusid")["year"].max() <= 2019
    assert candidates.join(years, on="corpusid").height == size  # all prefiltered
    # every cited paper (prefiltered, <= 2019) of every query is a candidate and a qrel
    cites = pl.read_parquet(corpus_dir / "citations.parquet")
    expected = (cites.join(queries.select(citing="corpusid"), on="citing")
                .join(years.filter(pl.col("year") <= 2019), left_on="cited",
                      right_on="corpusid")
                .filter(pl.col("citing") != pl.col("cited")))
    assert set(zip(expected["citing"], expected["cited"], strict=True)) == set(
        zip(qrels["query"], qrels["doc"], strict=True))
    assert set(qrels["doc"]) <= set(candidates["corpusid"])
    assert (qrels["rel"] == 1).all()
    # queries are never sampled as negatives
    sampled = candidates.filter(pl.col("type") == "sampled")["corpusid"]
    assert not set(sampled) & set(queries["corpusid"])


def test_pools_of_one_seed_are_nested(corpus_dir):
    small, large = (set(load_pool(corpus_dir, pool_of(s))[1]["corpusid"])
                    for s in POOL_SIZES)
    assert small < large
    q_small, q_large = (load_pool(corpus_dir, pool_of(s))[0] for s in POOL_SIZES)
    assert q_small.equals(q_large)


def test_rebuild_is_a_noop_and_identical(corpus_dir, tmp_path):
    copy = copy_corpus(corpus_dir, tmp_path / "c")
    spec = PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1)
    build_pool(copy, spec)
    for name in ("queries.parquet", "candidates.parquet", "qrels.parquet"):
        assert pl.read_parquet(copy / "pools" / spec.name / name).equals(
            pl.read_parquet(corpus_dir / "pools" / spec.name / name))
    before = (copy / "pools" / spec.name / "manifest.json").stat().st_mtime_ns
    build_pool(copy, spec)
    assert (copy / "pools" / spec.name / "manifest.json").stat().st_mtime_ns == before
    other = build_pool(copy, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1,
                                      repeat=1))
    assert other["name"].endswith("-r1")
    assert not pl.read_parquet(copy / "pools" / other["name"] / "candidates.parquet").equals(
        pl.read_parquet(copy / "pools" / spec.name / "candidates.parquet"))


def test_field_pool_samples_from_the_field_cited_set(private):
    spec = PoolSpec(size=600, field="Medicine", queries=10, seed=1)
    info = build_pool(private, spec)
    queries, candidates, qrels = load_pool(private, spec.name)
    all_papers = pl.read_parquet(private / "papers.parquet")
    assert queries.join(papers(private), on="corpusid")["fields"].list.contains(
        "Medicine").all()
    medicine = all_papers.filter(pl.col("fields").list.contains("Medicine"))["corpusid"]
    cites = pl.read_parquet(private / "citations.parquet")
    field_cited = set(cites.filter(pl.col("citing").is_in(medicine.implode()))["cited"])
    sampled = candidates.filter(pl.col("type") == "sampled")["corpusid"]
    assert set(sampled) <= field_cited
    assert set(qrels["doc"]) <= set(candidates["corpusid"])
    assert info["level"] == "field" and pool_names(private) == [spec.name]
    # the manifest reports what the paper reports: positives per query, field-cited set size
    prefiltered = papers(private).filter(pl.col("year") <= 2019)["corpusid"]
    assert info["counts"]["field_cited_set"] == len(field_cited & set(prefiltered))
    per_query = qrels.group_by("query").len()["len"]
    assert info["counts"]["median_positives_per_query"] == per_query.median()
    assert info["counts"]["mean_positives_per_query"] == round(per_query.mean(), 2)


def test_field_pool_larger_than_the_field_cited_set_takes_all(private):
    info = build_pool(private, PoolSpec(size=50_000, field="Art", queries=5, seed=1))
    assert info["counts"]["exhausted"] and info["warnings"]
    assert info["counts"]["candidates"] < 50_000
    with pytest.raises(InputError, match="every repeat would be the same"):
        build_pool(private, PoolSpec(size=50_000, field="Art", queries=5, seed=1,
                                     repeat=1))


def left_in_pools(corpus: Path) -> list[str]:
    """What is in the corpus's pools folder (lock files too), by name."""
    folder = corpus / "pools"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_bad_pool_requests_are_clear_errors(private):
    with pytest.raises(InputError, match="cannot hold the"):
        build_pool(private, PoolSpec(size=10, queries=N_QUERIES, seed=1))
    with pytest.raises(InputError, match="exceeds the papers available"):
        build_pool(private, PoolSpec(size=10_000_000, queries=N_QUERIES, seed=1))
    with pytest.raises(InputError, match="does not exist"):
        load_pool(private, "all-3k-r9")
    assert pool_names(private) == []  # nothing half-built
    assert left_in_pools(private) == []  # nor a lock file


def test_a_field_is_one_of_the_fields(private, corpus_dir):
    """`build_pool(field="Nope")` blamed the query year (no query paper of 2019 in Nope) and
    left a lock file; `field=""` was a pool named `-500-r0` (issue 46). An unknown field is
    refused naming it and the 19 fields, an empty one too, before anything is written; a
    field is read as the command line reads FIELD (any case, '-' for spaces)."""
    from pipeline.fields import MAG_FIELDS

    for field in ("Nope", "", "  ", "all", "Medicine Biology"):
        with pytest.raises(InputError) as refused:
            build_pool(private, PoolSpec(size=800, field=field, queries=5, seed=1))
        line = refused.value.message
        assert line.startswith(f"pool field {field!r}: ") and "\n" not in line
        assert all(name in line for name in MAG_FIELDS), line
    assert left_in_pools(private) == []
    named = build_pool(private, PoolSpec(size=800, field="medicine", queries=5, seed=1))
    assert named["name"] == "medicine-800-s1-r0" and named["parameters"]["field"] == "Medicine"
    made = (private / "pools" / named["name"] / "manifest.json").stat().st_mtime_ns
    build_pool(private, PoolSpec(size=800, field="Medicine", queries=5, seed=1))
    assert (private / "pools" / named["name"] / "manifest.json").stat().st_mtime_ns == made


def test_exclusion_list_removes_queries(corpus_dir, tmp_path):
    spec = PoolSpec(size=POOL_SIZES[1], queries=N_QUERIES, seed=1)
    queries = load_pool(corpus_dir, spec.name)[0]["corpusid"].to_list()
    path = tmp_path / "exclude.txt"
    path.write_text("".join(f"{q}\n" for q in queries[:5]))
    copy = copy_corpus(corpus_dir, tmp_path / "c")
    built = build_pool(copy, PoolSpec(size=POOL_SIZES[1], queries=N_QUERIES, seed=1,
                                      exclude=str(path)))
    assert built["name"] != spec.name  # the list's ids name the pool
    picked = set(load_pool(copy, built["name"])[0]["corpusid"])
    assert not picked & set(queries[:5]) and len(picked) == N_QUERIES
    assert built["counts"]["query_candidates_excluded"] == 5


def test_all_fields_with_repeats(corpus_dir, tmp_path):
    from pipeline.cli.main import main

    copy = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    code = main(["--corpora-root", str(copy.parent), "--runs-root", str(tmp_path / "runs"),
                 "pool", "--corpus", "small", "--field", "all", "--size", "400",
                 "--repeats", "2", "--queries", "5", "--seed", "0"])
    assert code == 0
    built = pool_names(copy)
    medicine = [p for p in built if p.startswith("medicine-")]
    assert medicine == ["medicine-400-r0", "medicine-400-r1"]
    for name in built:  # a field whose cited set is below SIZE gets one sample only
        info = load_pool(copy, name)
        scope = name.rsplit("-", 2)[0]
        if name.endswith("-r0") and len(info[1]) < 400:
            assert f"{scope}-400-r1" not in built


def test_a_truncated_pool_file_is_rebuilt_not_up_to_date(corpus_dir, tmp_path):
    """Defect 7: `make pool` called a pool with a truncated candidates.parquet up to date."""
    copy = copy_corpus(corpus_dir, tmp_path / "c")
    spec = PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1)
    build_pool(copy, spec)
    path = copy / "pools" / spec.name / "candidates.parquet"
    good = path.read_bytes()
    path.write_bytes(good[:36])
    with pytest.raises(InputError, match=r"candidates\.parquet: .*truncated"):
        load_pool(copy, spec.name)
    build_pool(copy, spec)
    assert path.read_bytes() == good


def test_seeds_have_their_own_pools(corpus_dir, tmp_path):
    """Defect 5: SEED=1 overwrote the seed-0 pool of the same name."""
    copy = copy_corpus(corpus_dir, tmp_path / "c")
    zero = build_pool(copy, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=0))
    one = build_pool(copy, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1))
    assert (zero["name"], one["name"]) == ("all-800-r0", "all-800-s1-r0")
    queries = [set(load_pool(copy, n)[0]["corpusid"]) for n in (zero["name"], one["name"])]
    assert queries[0] != queries[1]


def test_a_stale_pool_is_refused_then_rebuilt(corpus_dir, tmp_path):
    """Defect 5: a pool built from an older prefiltered.parquet was used as if current."""
    from pipeline.ingest import prefilter
    from pipeline.pools.build import rebuild_pool

    copy = copy_corpus(corpus_dir, tmp_path / "c")
    spec = PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1)
    build_pool(copy, spec)
    prefilter(copy, "either")
    with pytest.raises(InputError, match="is stale"):
        load_pool(copy, spec.name)
    rebuild_pool(copy, spec.name)
    assert load_pool(copy, spec.name)[1].height == spec.size


def test_validation_pools_have_queries_disjoint_from_the_test_pools(corpus_dir, tmp_path):
    """MDCR §3: BM25 is tuned on validation sets built the same way as the test sets."""
    copy = copy_corpus(corpus_dir, tmp_path / "c")
    for field in (None, "Medicine"):
        size = POOL_SIZES[0] if field is None else 600
        test = PoolSpec(size=size, field=field, queries=8, seed=1)
        val = PoolSpec(size=size, field=field, queries=8, seed=1, split="validation")
        build_pool(copy, test)
        info = build_pool(copy, val)
        assert val.name.endswith("-val") and info["split"] == "validation"
        test_q, _, _ = load_pool(copy, test.name)
        val_q, val_c, val_qrels = load_pool(copy, val.name)
        assert val_q.height == 8 and not set(val_q["corpusid"]) & set(test_q["corpusid"])
        assert set(val_qrels["doc"]) <= set(val_c["corpusid"])  # built the same way
        assert val_c.height == size
