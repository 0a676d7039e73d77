"""jkAP's thin-sample flag (issue 71): what the report's line states (inferred.JK_BIAS, the
bias range of samples so thin; JK_WITHIN_SAMPLE, the SAMPLE that kept jkAP within 0.01) holds
in the simulation's worlds, two of them sparse (benchmarks/results/jkap_flag.json, made by
benchmarks/jkap_flag.py from tests/judging/simulation.py), and the flag fires where the
simulation found the bias: at SAMPLE 4 to 24 and at every rate, not from SAMPLE 30."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.jkap_flag import WITHIN, budget, findings, one
from pipeline.judging.inferred import (
    JK_BIAS,
    JK_NEEDED,
    JK_NEEDED_DEEPEST,
    JK_WITHIN_SAMPLE,
    thin_mask,
)
from tests.judging.simulation import FLAG_DESIGNS, WORLDS, Design, flag_design, run

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "jkap_flag.json"


@pytest.fixture(scope="module")
def report() -> dict:
    return json.loads(RESULTS.read_text())


def test_the_committed_figures_are_of_the_simulations_worlds_and_designs(report):
    """Three worlds (dense, and two sparse: relevance a quarter as common, or as rare and no
    likelier high in the ranks than low, with fewer citations), each at every design, 400
    data sets each; the summary is what the cells give."""
    assert report["worlds"] == json.loads(json.dumps(WORLDS))
    assert len(WORLDS) >= 2 and {"sparse", "flat"} <= set(WORLDS)
    assert [(r["world"], r["design"]) for r in report["runs"]] == [
        (world, name) for world in WORLDS for name in FLAG_DESIGNS]
    assert {budget(n) for n in FLAG_DESIGNS} >= {4, 8, 12, 20}
    assert all(c["sets"] >= 400 for r in report["runs"] for c in r["cells"])
    assert report["findings"] == json.loads(json.dumps(findings(report["runs"])))


def test_the_flags_stated_bias_bound_holds_in_every_world(report):
    """Every cell of a flagged design, in every world: bias -+ 2 MC errors within JK_BIAS, the
    range the report's line states; the bound is no wider than the rounding (0.005) needs.
    Unflagged designs are within 0.01. The flagged intervals' coverage is recorded, per cell."""
    low, high = JK_BIAS
    found = report["findings"]
    flagged = [c for r in report["runs"] for c in r["cells"] if c["flagged"] >= 0.5]
    assert flagged and all(low <= c["bias"] - 2 * c["mc_error"] and
                           c["bias"] + 2 * c["mc_error"] <= high for c in flagged)
    assert low == pytest.approx(math.floor(found["flagged_low"] / 0.005) * 0.005)
    assert high == pytest.approx(math.ceil(found["flagged_high"] / 0.005) * 0.005)
    assert found["clear_largest"] < WITHIN
    assert all(0.0 < c["coverage"] <= 1.0 and c["flagged_coverage"] is not None
               for c in flagged)
    lowest, highest = found["flagged_coverage"]
    assert lowest == min(c["coverage"] for c in flagged) and highest <= 1.0


def test_the_named_sample_is_where_every_world_comes_within_a_hundredth(report):
    """JK_WITHIN_SAMPLE is the smallest simulated SAMPLE from which every larger one keeps
    every cell of every world within 0.01 (|bias| + 2 MC errors); the flag fires at every
    SAMPLE below it and every rate, in every world, and at none from it: the rule's needs
    (JK_NEEDED, JK_NEEDED_DEEPEST) sit where the bias does."""
    assert report["findings"]["within_all"] == JK_WITHIN_SAMPLE
    assert (JK_NEEDED, JK_NEEDED_DEEPEST) == (4, 12)
    for r in report["runs"]:
        n = budget(r["design"])
        fires = all(c["flagged"] == 1.0 for c in r["cells"])
        silent = all(c["flagged"] == 0.0 for c in r["cells"])
        assert fires if n is None or n < JK_WITHIN_SAMPLE else silent, r["design"]
        if n is not None and n >= JK_WITHIN_SAMPLE:
            assert all(abs(c["bias"]) + 2 * c["mc_error"] < WITHIN for c in r["cells"])
    # below it, some world's cells are off by more
    below = [r for r in report["runs"] if budget(r["design"]) == max(
        n for n in map(budget, FLAG_DESIGNS) if n is not None and n < JK_WITHIN_SAMPLE)]
    assert any(abs(c["bias"]) + 2 * c["mc_error"] >= WITHIN for r in below for c in r["cells"])


def test_the_flag_on_simulated_pools_is_the_reports_rule():
    """thin_mask (the report's rule, thin_strata's) on the simulation's pool draws: a stratum
    is thin where the mean judged pairs per query fall short of min(its candidates, 4), or
    12 in the deepest; every world's SAMPLE 24 is flagged in its deepest stratum, SAMPLE 30
    nowhere (2 data sets, 6 pool draws a size)."""
    sizes = np.array([[[14, 30, 90], [3, 30, 100]]])  # one pool, two queries
    judged = np.array([[[4, 4, 12], [3, 4, 12]]])
    assert thin_mask(sizes, judged).tolist() == [[False, False, False]]
    assert thin_mask(sizes, judged - [0, 0, 1]).tolist() == [[False, False, True]]
    assert thin_mask(sizes, judged - [1, 0, 0]).tolist() == [[True, False, False]]
    for world in WORLDS:
        for n, deepest in ((24, True), (30, False)):
            design, _ = flag_design(world, f"SAMPLE {n}")
            result = run(1, 2, design, metrics=("jkAP",))
            for size in (150, 300):
                thin = result[size, -1, "thin", ""]
                assert thin[..., -1].all() == deepest and not thin[..., :-1].any(), (world, n)
    assert Design().relevance == (0.4, 0.2, 0.08, 0.02)  # the default world is the dense one


@pytest.mark.slow
@pytest.mark.parametrize(("world", "name"), [("flat", "SAMPLE 4"), ("flat", "SAMPLE 30"),
                                             ("sparse", "rate 10%")])
def test_the_benchmark_cells_are_the_simulations_numbers(report, world, name):
    """The worst-biased flagged design (flat, SAMPLE 4), the named SAMPLE in the worst world,
    and the most negative bias (sparse, 10%) rerun with the benchmark's seeds and sets: the
    committed cells again, to float rounding (about 40 s each on 2 busy cores)."""
    [committed] = [r for r in report["runs"] if (r["world"], r["design"]) == (world, name)]
    again = one(world, name, report["sets"])
    assert again["seed"] == committed["seed"] and again["judged"] == committed["judged"]
    for new, old in zip(again["cells"], committed["cells"], strict=True):
        for key, value in old.items():
            assert new[key] == pytest.approx(value, abs=1e-12), (key, new, old)
