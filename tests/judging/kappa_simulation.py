"""Samples of CSFCube-like expert and assessor grades, for the coverage of the agreement's
intervals (pipeline/judging/agreement.py; benchmarks/agreement_coverage.py and
tests/judging/test_agreement.py): query papers, each with its candidates graded 0-3 by the
expert, in a grade mix of its own, and by an assessor at an error rate of its own, so that one
query's pairs are alike (clustered). An error moves the grade one down or up (0.45 each) or two
up (0.1), within 0-3.

WORLDS: `tests`, the lists of the tests' synthetic release (20 to 45 candidates a query); the
others CSFCube's own lists of about 100 or 250 candidates a query (docs/collections.md), with
the grade mixes about equal (`csfcube`) or far apart from query to query (`heterogeneous`),
and `mixed`, short and long lists together with error rates of 5 to 70%. The population's
kappa: that of 20,000 queries' pairs pooled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.judging.agreement import (
    KAPPAS,
    bootstrap_t_interval,
    jackknife_interval,
    kappas,
)


@dataclass(frozen=True)
class World:
    """Candidates per query (drawn from `sizes`, or uniform over `span` when given), the
    grade mix's Dirichlet `alpha` (grades 0-3), and the range of the queries' error rates."""

    sizes: tuple[int, ...] = (100, 250)
    alpha: tuple[float, float, float, float] = (4.0, 2.0, 1.2, 0.8)
    errors: tuple[float, float] = (0.1, 0.5)
    span: tuple[int, int] | None = None


WORLDS = {
    "tests": World(alpha=(4.0, 2.0, 1.5, 1.0), errors=(0.15, 0.55), span=(20, 45)),
    "csfcube": World(),
    "heterogeneous": World(alpha=(0.5, 0.25, 0.15, 0.1), errors=(0.1, 0.6)),
    "mixed": World(sizes=(20, 45, 100, 250), alpha=(1.0, 0.5, 0.3, 0.2), errors=(0.05, 0.7)),
}
PAPERS = 16  # query papers of a CSFCube facet (16 background, 17 method, 17 result)


def queries(rng: np.random.Generator, count: int, world: World) -> np.ndarray:
    """Per-query confusion matrices (count, 4, 4): rows the expert's grade, columns the
    assessor's."""
    if world.span is not None:
        sizes = rng.integers(world.span[0], world.span[1] + 1, size=count)
    else:
        sizes = rng.choice(np.asarray(world.sizes), size=count)
    query = np.repeat(np.arange(count), sizes)
    mix = rng.dirichlet(world.alpha, size=count).cumsum(axis=1)[query]
    expert = (rng.random(query.size)[:, None] > mix).sum(axis=1).clip(0, 3)
    low, high = world.errors
    wrong = rng.random(query.size) < (low + (high - low) * rng.random(count))[query]
    step = rng.choice([-1, 1, 2], size=query.size, p=[0.45, 0.45, 0.1])
    graded = np.where(wrong, np.clip(expert + step, 0, 3), expert)
    out = np.zeros((count, 4, 4))
    np.add.at(out, (query, expert, graded), 1)
    return out


METHODS = {"bootstrap-t": bootstrap_t_interval, "jackknife-t": jackknife_interval}


def coverage(world: World, papers: int, samples: int, seed: int = 0,
             methods: tuple[str, ...] = tuple(METHODS)) -> dict[str, dict[str, float]]:
    """How often each interval of `methods` (METHODS: the agreement's cluster bootstrap-t, the
    jackknife-t it replaced) holds the population's kappas, over `samples` samples of `papers`
    query papers of `world`: {method: {kappa: share}}."""
    rng = np.random.default_rng(seed)
    truth = kappas(queries(rng, 20_000, world).sum(axis=0))
    hits = {method: dict.fromkeys(KAPPAS, 0) for method in methods}
    for _ in range(samples):
        sample = queries(rng, papers, world)
        for method in methods:
            bounds = METHODS[method](sample)
            for kind in KAPPAS:
                hits[method][kind] += bounds[kind][0] <= truth[kind] <= bounds[kind][1]
    return {method: {kind: count / samples for kind, count in kinds.items()}
            for method, kinds in hits.items()}
