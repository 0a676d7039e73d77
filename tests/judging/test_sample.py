"""The sample of unjudged candidates: the frame, the allocation rule, the draw (seeded, the
same bytes whatever the threads), what is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.judging.sample import (
    allocate,
    draw_sample,
    pairs_to_judge,
    strata_edges,
)
from pipeline.judging.stage import _bytes
from pipeline.layout import sample_path
from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[2]


def _runs(seed: int = 0, queries: int = 6, docs: int = 500, depth: int = 150
          ) -> dict[str, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    return {model: pl.concat([pl.DataFrame({"query": q, "doc": rng.permutation(docs)[:depth],
                                            "rank": np.arange(1, depth + 1)})
                              for q in range(queries)]) for model in ("bm25", "minilm")}


def _qrels(queries: int = 6) -> pl.DataFrame:
    return pl.DataFrame({"query": np.repeat(np.arange(queries), 3),
                         "doc": np.tile([3, 7, 11], queries), "rel": 1})


def test_allocation_spends_the_budget_by_the_rule():
    """Rates proportional to 1/sqrt(edge), capped at 1 with the rest passed on, rounded by
    largest remainder with two draws at least per stratum (one where it holds one)."""
    edges = (10, 30, 100)
    drawn = allocate(np.array([[10, 40, 150], [5, 5, 5], [0, 30, 200], [1, 1, 300]]), 12,
                     edges)
    # c (10/sqrt10 + 40/sqrt30 + 150/sqrt100) = 12: expected 1.49, 3.44, 7.07 -> 1, 3, 7 and
    # the one left to the largest remainder
    assert drawn[0].tolist() == [2, 3, 7]
    # 1-10 capped at its 5 (rate 1.27 > 1); 7 left: 4.52, 2.48 -> 4 + 1, 2
    assert drawn[1].tolist() == [5, 5, 2]
    assert drawn[2].tolist() == [0, 3, 9]  # 2.58, 9.42
    assert drawn[3].tolist() == [1, 1, 10]  # one each at least: 1, 1, 11 over 12, less 1
    assert (drawn.sum(axis=1) == 12).all()
    rates = drawn[0] / np.array([10, 40, 150])
    assert rates[0] > rates[1] > rates[2]
    assert allocate(np.array([[3, 4, 5]]), 50, edges).tolist() == [[3, 4, 5]]  # all of it
    assert strata_edges(50) == (10, 30, 50) and strata_edges(20) == (10, 20)


def test_every_stratum_of_two_or_more_gets_two_draws():
    """The jackknife's 2 judged pairs: SAMPLE 8 over strata of 10, 40 and 150 would give the
    top stratum 1 by the rates (expected 0.99, 2.29, 4.71); it gets 2, the deepest 4. A stratum
    of one gets its one; a budget under the minimums is raised to them (2 x the strata)."""
    edges = (10, 30, 100)
    drawn = allocate(np.array([[10, 40, 150], [3, 12, 150], [1, 3, 60], [0, 2, 2],
                               [8, 2, 1]]), 8, edges)
    assert drawn.tolist() == [[2, 2, 4], [2, 2, 4], [1, 2, 5], [0, 2, 2], [5, 2, 1]]
    assert allocate(np.array([[10, 40, 150], [1, 1, 1]]), 3, edges).tolist() == [[2, 2, 2],
                                                                                [1, 1, 1]]
    sizes = np.random.default_rng(4).integers(0, 60, (500, 3))
    for n in (3, 8, 20):
        drawn = allocate(sizes, n, edges)
        least = np.minimum(sizes, 2)
        assert (drawn >= least).all() and (drawn <= sizes).all()
        assert (drawn.sum(axis=1) == np.maximum(np.minimum(n, sizes.sum(axis=1)),
                                                least.sum(axis=1))).all()


def test_the_sample_draws_from_the_unjudged_top_ranks_with_its_probabilities():
    runs, qrels = _runs(), _qrels()
    sample = draw_sample("all-2k-r0", qrels, runs, 20, seed=5)
    assert sample.columns == ["pool", "query", "doc", "best_rank", "stratum", "probability",
                              "sampled", "seed"]
    # the frame: each model's top 100, less what the qrels judge, by best rank
    top = pl.concat([r.filter(pl.col("rank") <= 100) for r in runs.values()])
    expected = (top.group_by("query", "doc").agg(best=pl.col("rank").min())
                .join(qrels, on=["query", "doc"], how="anti"))
    assert sample.height == expected.height
    joined = sample.join(expected, on=["query", "doc"])
    assert (joined["best_rank"] == joined["best"]).all()
    assert sample.join(qrels, on=["query", "doc"]).height == 0  # a citation is never drawn
    per = (sample.group_by("query", "stratum")
           .agg(size=pl.len(), drawn=pl.col("sampled").sum(), p=pl.col("probability")))
    for row in per.iter_rows(named=True):
        assert all(p == row["drawn"] / row["size"] for p in row["p"])
    assert (sample.group_by("query").agg(pl.col("sampled").sum())["sampled"] == 20).all()
    assert set(sample["stratum"]) == {"1-10", "11-30", "31-100"}
    assert pairs_to_judge(sample).height == 20 * 6


def test_a_seed_gives_the_same_sample_and_another_seed_another():
    runs, qrels = _runs(), _qrels()
    one = draw_sample("all-2k-r0", qrels, runs, 20, seed=1)
    assert one.equals(draw_sample("all-2k-r0", qrels, {k: runs[k].sample(fraction=1.0,
                                                                         seed=3)
                                                       for k in reversed(runs)}, 20, seed=1))
    assert not one["sampled"].equals(draw_sample("all-2k-r0", qrels, runs, 20, seed=2)["sampled"])


def test_nested_pools_share_the_pairs_they_can():
    """Permanent random numbers: a pair drawn in the larger pool is drawn in the smaller one
    where it falls in a stratum whose budget reaches as far."""
    runs, qrels = _runs(), _qrels()
    big = draw_sample("all-5k-r0", qrels, runs, 20, seed=1)
    small_runs = {k: r.filter(pl.col("doc") < 400).with_columns(
        rank=pl.col("rank").rank("ordinal").over("query").cast(pl.Int64))
        for k, r in runs.items()}
    small = draw_sample("all-2k-r0", qrels, small_runs, 20, seed=1)
    shared = pairs_to_judge(big).join(pairs_to_judge(small), on=["query", "doc"]).height
    independent = draw_sample("all-2k-r0", qrels, small_runs, 20, seed=99)
    chance = pairs_to_judge(big).join(pairs_to_judge(independent), on=["query", "doc"]).height
    assert shared > chance


SCRIPT = """
import sys, numpy as np, polars as pl
sys.path.insert(0, {root!r})
from tests.judging.test_sample import _runs, _qrels
from pipeline.judging.sample import draw_sample
from pipeline.judging.stage import _bytes
from pathlib import Path
Path(sys.argv[1]).write_bytes(_bytes(draw_sample("all-2k-r0", _qrels(), _runs(), 20, seed=7)))
"""


@pytest.mark.parametrize("threads", ["1", "2"])
def test_the_file_is_byte_identical_whatever_the_threads(tmp_path, threads):
    path = sample_path(tmp_path / "runs", "demo", "all-2k-r0")
    assert path == tmp_path / "runs" / "demo" / "all-2k-r0" / "judgments" / "sample.parquet"
    path.parent.mkdir(parents=True)  # the bytes the judging stage writes there
    path.write_bytes(_bytes(draw_sample("all-2k-r0", _qrels(), _runs(), 20, seed=7)))
    other = tmp_path / "other.parquet"
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT)), str(other)],
                          env={**os.environ, "POLARS_MAX_THREADS": threads}, cwd=ROOT,
                          capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert other.read_bytes() == path.read_bytes()


def test_a_budget_below_the_strata_is_refused_in_one_line():
    with pytest.raises(InputError, match=r"SAMPLE=2: .* at least 3, one per stratum") as refused:
        draw_sample("all-2k-r0", _qrels(), _runs(), 2)
    assert "\n" not in str(refused.value)
    with pytest.raises(InputError, match="no run to sample from"):
        draw_sample("all-2k-r0", _qrels(), {}, 20)
