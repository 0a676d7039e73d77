"""Crossings as the report gives them (issue 79): sizes printed as given (a size stored as the
float 2000.0 is 2k, not 2.0k), and no crossing under the least pool the grid can build with
the scope's queries (a pool holds their cited papers: its manifest's `positives`)."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.evaluation.crossover import crossover_rows, from_table, pool_least
from tests.evaluation.test_crossover_sizes import DEMO, frame

MEET = 800.0  # where the planted lines meet: below the demo's 2k, within its span (to 400)


def meeting_rows(sizes: tuple[int, ...] = DEMO) -> pl.DataFrame:
    """Two models (not at a floor) whose lines in log size meet at MEET candidates, with the
    columns `crossover_rows` reads (one dataset scope; a pool per size and repeat)."""
    x = np.log(np.asarray(sizes, dtype=np.float64) / MEET)
    rows = frame({"a": tuple(0.30 + 0.02 * x), "b": tuple(0.30 - 0.01 * x)}, sizes)
    return rows.with_columns(level=pl.lit("dataset"), scope=pl.lit("all"),
                             field=pl.lit(None, pl.String),
                             pool=pl.format("all-{}-r{}", pl.col("size"), pl.col("repeat")))


def outcome(rows: list[list[str]]) -> tuple[str, str]:
    """The crossing cell and the outcome of the one row."""
    assert len(rows) == 1, rows
    return rows[0][5], rows[0][-1]


def test_a_crossing_under_the_least_pool_is_not_given():
    """Lines meeting at 800 candidates below pools of 2k-10k: given as an extrapolation where
    the least pool is 1 candidate (no manifest) or 500; not given where the scope's pools
    hold 1,000 cited papers (the greatest of its pools counts), and the outcome says why."""
    rows = meeting_rows()
    pools = rows["pool"].unique().sort().to_list()
    crossing, said = outcome(crossover_rows(rows, "map"))
    assert crossing == "800" and "extrapolated: 800 candidates" in said, said
    crossing, said = outcome(crossover_rows(rows, "map", dict.fromkeys(pools, 500)))
    assert crossing == "800", said
    least = {**dict.fromkeys(pools, 500), pools[0]: 1000}
    crossing, said = outcome(crossover_rows(rows, "map", least))
    assert crossing == "-" and "extrapolated: 800" not in said, said
    assert "the pool size falls under 1,000 candidates (the least pool these queries allow" \
        in said, said


def test_the_least_pool_is_read_from_the_pools_manifests(tmp_path):
    """`pool_least`: each pool's manifest `positives`; a pool without a manifest, or no
    corpus folder, gives none (LEAST stands)."""
    from pipeline.core.files import write_json
    from pipeline.layout import MANIFEST, pool_dir

    folder = pool_dir(tmp_path, "all-2k-r0")
    folder.mkdir(parents=True)
    write_json({"counts": {"positives": 1234}}, folder / MANIFEST)
    assert pool_least(tmp_path, ["all-2k-r0", "all-5k-r0"]) == {"all-2k-r0": 1234}
    assert pool_least(None, ["all-2k-r0"]) == {}


def test_sizes_stored_as_floats_print_as_given():
    """A size column of floats (2000.0): the sizes cell, the measured range in the outcome and
    the gap alone (`from_table`) print 2k, 5k, 10k, never 2.0k."""
    rows = meeting_rows().with_columns(pl.col("size").cast(pl.Float64))
    cells = crossover_rows(rows, "map")[0]
    assert cells[2] == "2k, 5k, 10k", cells
    assert "[2k, 10k]" in cells[-1] and ".0k" not in " ".join(cells), cells
    x = np.log(np.asarray(DEMO, dtype=np.float64) / MEET)
    diff = np.broadcast_to((0.03 * x)[None, :, None], (30, 3, 3)) \
        + np.random.default_rng(79).normal(0, 0.01, (30, 3, 3))
    found = from_table(diff, [float(s) for s in DEMO])
    assert found.sizes == DEMO and all(isinstance(s, int) for s in found.sizes)
    assert "[2k, 10k]" in found.text and ".0k" not in found.text, found.text
