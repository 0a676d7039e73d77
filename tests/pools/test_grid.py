"""Work over several pools (pipeline/pools/grid.py): the grid of fields x sizes x repeats, the
pools a stage works on, and the repair of every stale pool, called as a library."""

from __future__ import annotations

import json
import logging

import pytest

from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.core.repair import HERE
from pipeline.fields import resolve_fields
from pipeline.layout import MANIFEST, parse_pool_name, pool_dir, pool_names
from pipeline.pools.build import Named, NoQueriesError, PoolSpec, build_pool
from pipeline.pools.grid import build_grid, repair_pools, stage_pools
from tests.conftest import N_QUERIES, POOL_SIZES, copy_corpus


def timed_pools(times) -> list[str]:
    return [json.loads(line)["pool"] for line in times.read_text().splitlines()]


def test_an_exhausted_field_is_sampled_once(corpus_dir, tmp_path):
    """MDCR §3 on FIELD=all: a field whose field-cited set the size exhausts gets repeat 0
    only, the others every repeat; each pool built is timed."""
    corpus = copy_corpus(corpus_dir, tmp_path / "small")
    times = tmp_path / "times.jsonl"
    fields = resolve_fields("all")
    build_grid(corpus, fields, [POOL_SIZES[0]], 2, times, queries=2, seed=3)
    built = pool_names(corpus)
    assert built and sorted(timed_pools(times)) == built
    scopes = {parse_pool_name(name).scope for name in built}
    for scope in scopes:
        first = read_json(pool_dir(corpus, f"{scope}-800-s3-r0") / MANIFEST)
        again = f"{scope}-800-s3-r1" in built
        assert again != first["counts"]["exhausted"], scope
    repeated = [scope for scope in scopes if f"{scope}-800-s3-r1" in built]
    assert 0 < len(repeated) < len(scopes)  # both cases on this corpus


def test_fields_without_queries_are_skipped_one_alone_refused(corpus_dir, tmp_path):
    corpus = copy_corpus(corpus_dir, tmp_path / "small")
    build_grid(corpus, resolve_fields("biology medicine"), [POOL_SIZES[0]], 1,
               tmp_path / "times.jsonl", query_year=1900, max_year=1900)
    with pytest.raises(NoQueriesError, match="no query candidates"):
        build_grid(corpus, [None], [POOL_SIZES[0]], 1, tmp_path / "times.jsonl",
                   query_year=1900, max_year=1900)
    assert pool_names(corpus) == []


def test_the_grid_names_its_callers_options(corpus_dir, tmp_path):
    """pools-paper's errors name its own options (their declarations, by make variable), as
    the grid is told: no rewriting; the library's message is the command line's."""
    corpus = copy_corpus(corpus_dir, tmp_path / "small")
    with pytest.raises(InputError) as caught:
        build_grid(corpus, [None], [10], 1, tmp_path / "times.jsonl",
                   Named("PAPER_SIZES", "PAPER_QUERIES"), queries=N_QUERIES)
    message = caught.value.message
    assert message.startswith("--paper-sizes 10 cannot hold") and "--size" not in message
    assert "(--paper-queries)" in message and "(--queries)" not in message
    with pytest.raises(InputError, match=r"^--size 10 cannot hold.*\(--queries\)$"):
        build_pool(corpus, PoolSpec(size=10, queries=N_QUERIES))


def test_a_stage_works_on_the_pools_named_else_every_usable_one(corpus_dir, tmp_path):
    corpus = copy_corpus(corpus_dir, tmp_path / "small")
    with pytest.raises(InputError, match="no pools under") as caught:
        stage_pools(corpus, None, "eval", HERE)
    assert caught.value.repair.target == "pool"
    assert stage_pools(corpus, ["all-800-r0"], "eval", HERE) == ["all-800-r0"]
    built = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES))["name"]
    assert stage_pools(corpus, None, "eval", HERE) == [built]


def test_a_pool_whose_list_changed_is_named_skipped_and_counted(corpus_dir, tmp_path, caplog):
    corpus = copy_corpus(corpus_dir, tmp_path / "small")
    listed = tmp_path / "list.txt"
    listed.write_text("1\n")
    old = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES,
                                      exclude=str(listed)))["name"]
    listed.write_text("2\n")
    with caplog.at_level(logging.WARNING), pytest.raises(InputError, match="every pool of"):
        stage_pools(corpus, None, "embed", HERE)
    assert f"[embed] pool {old} skipped" in caplog.text
    assert f"make retire-pool CORPUS=small POOL={old}" in caplog.text
    assert "[embed] 1 of 1 pools skipped" in caplog.text


def test_repair_rebuilds_a_damaged_pool_byte_for_byte(corpus_dir, tmp_path):
    corpus = copy_corpus(corpus_dir, tmp_path / "small")
    name = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES))["name"]
    files = sorted(p for p in pool_dir(corpus, name).iterdir() if p.suffix == ".parquet")
    before = {p.name: p.read_bytes() for p in files}
    files[0].write_bytes(b"damaged")
    times = tmp_path / "times.jsonl"
    repair_pools(corpus, times, HERE)
    assert {p.name: p.read_bytes() for p in files} == before
    assert timed_pools(times) == [name]


def test_every_size_of_a_grid_is_checked_before_any_pool_is_built(corpus_dir, tmp_path):
    """`build_pools(..., size='600 608 ... 2992')` wrote 80 pools, then refused size 1240
    without a word of them (issue 88): a size too large or too small anywhere in the grid is
    refused first, and nothing is built or timed."""
    corpus = copy_corpus(corpus_dir, tmp_path / "small")
    times = tmp_path / "times.jsonl"
    for sizes, said in (([POOL_SIZES[0], 10**8], "size 100000000 exceeds the papers "
                         "available: .* in all; choose a smaller --size$"),
                        ([POOL_SIZES[0], 1], "size 1 cannot hold the")):
        with pytest.raises(InputError, match=said):
            build_grid(corpus, [None], sizes, 2, times, queries=N_QUERIES)
        assert pool_names(corpus) == [] and not times.exists()
