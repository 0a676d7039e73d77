"""The false-positive rate of the report's queries-and-draws interval, wherever the variance of a
difference comes from (issue 47).

Under the crossed normal model the mean difference is N(delta, V) independent of the three mean
squares, so an interval's rejection rate at delta 0 is an integral over the mean squares'
chi-squares (`variance.interval_power`, the same quadrature as the queries-needed table). This
script tabulates it over the draw term's share of V (columns) and the interaction's share of
the rest (rows) for 30, 100 and 1,000 queries and 2, 3, 5 and 10 draws, for

- **shipped**: the report's interval (`variance.half_widths`): sqrt(t(Q-1)^2 max(MS_Q - MS_E,
  0) + t(R-1)^2 MS_R) / sqrt(QR), Banerjee's construction with MS_E subtracted on the queries'
  side;
- **first**: the issue-42 form, sqrt(t(Q-1)^2 MS_Q + t(R-1)^2 max(MS_R - MS_E, 0)) / sqrt(QR);
- **satterthwaite**: one t on Satterthwaite's degrees of freedom for MS_Q + MS_R - MS_E
  (floored at MS_Q);

and simulates the parametric bootstrap t (critical value at the estimated components) at a
few settings. Writes benchmarks/results/interval_level.json and .md.

`widths` (issue 58): what the shipped interval's margin costs, the median of its half-width
over the mean squares' chi-squares (the same quadrature's equal-probability nodes) divided by
the half-width of an interval that knew the components, z(0.975) sqrt(V), over the same grid
plus an interaction that is the whole of the rest (WIDTH_RESID_SHARES). Writes
benchmarks/results/interval_width.json and .md; the level maps are left as they are.

Usage: .venv/bin/python benchmarks/interval_level.py [widths]
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from pipeline.evaluation import variance  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
DRAW_SHARES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99)
RESID_SHARES = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9)
QUERIES = (30, 100, 1000)
DRAWS = (2, 3, 5, 10)
ALPHA = 0.05
HalfWidth = Callable[[np.ndarray, np.ndarray, np.ndarray, int, int], np.ndarray]


def setting(queries: int, draws: int, draw_share: float, resid_share: float
            ) -> tuple[float, float, float]:
    """s2_query, s2_draw, s2_resid of a difference whose mean has variance 1."""
    rest = 1 - draw_share
    return (rest * (1 - resid_share) * queries, draw_share * draws,
            rest * resid_share * queries * draws)


def _t2(df: np.ndarray | float) -> np.ndarray:
    from scipy.stats import t

    return t.ppf(1 - ALPHA / 2, df) ** 2


def shipped(ms_q, ms_r, ms_e, q, r):
    return variance.half_widths(ms_q, ms_r, ms_e, q, r, 1 - ALPHA)[1]


def first(ms_q, ms_r, ms_e, q, r):
    return np.sqrt((_t2(q - 1) * ms_q + _t2(r - 1) * np.maximum(ms_r - ms_e, 0)) / (q * r))


def satterthwaite(ms_q, ms_r, ms_e, q, r):
    total = np.maximum(ms_q + ms_r - ms_e, ms_q)
    df = total ** 2 / (ms_q ** 2 / (q - 1) + ms_r ** 2 / (r - 1) + ms_e ** 2 / ((q - 1) * (r - 1)))
    return np.sqrt(_t2(np.maximum(df, 1.0)) * total / (q * r))


FORMS: dict[str, HalfWidth] = {"shipped": shipped, "first": first,
                               "satterthwaite": satterthwaite}


def _mean_squares(queries: int, draws: int, components: tuple[float, float, float]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """MS_Q, MS_R, MS_E at the quadrature's nodes (`variance.NODES`, broadcastable) and the
    mean's true standard deviation sqrt(V)."""
    s2_query, s2_draw, s2_resid = components
    q, r = queries, draws
    expected = (s2_resid + r * s2_query, s2_resid + q * s2_draw, s2_resid)
    nodes = variance.NODES
    ms_q = expected[0] * variance._quantiles(q - 1, nodes[0])[:, None, None]
    ms_r = expected[1] * variance._quantiles(r - 1, nodes[1])[None, :, None]
    ms_e = expected[2] * variance._quantiles((q - 1) * (r - 1), nodes[2])[None, None, :]
    return ms_q, ms_r, ms_e, math.sqrt((expected[0] + expected[1] - expected[2]) / (q * r))


def rejection(form: HalfWidth, queries: int, draws: int, components: tuple[float, float, float]
              ) -> float:
    """P(|dbar| > half-width) at delta 0, integrated as `variance.interval_power` does."""
    from scipy.special import ndtr

    ms_q, ms_r, ms_e, sd = _mean_squares(queries, draws, components)
    return float((2 * ndtr(-form(ms_q, ms_r, ms_e, queries, draws) / sd)).mean())


def width_ratio(form: HalfWidth, queries: int, draws: int,
                components: tuple[float, float, float]) -> float:
    """The median half-width of `form` over the mean squares' chi-squares (each node of the
    quadrature equally likely), over z(1 - ALPHA/2) sqrt(V): the half-width of the interval
    that knew the components (level exactly 1 - ALPHA, the narrowest such interval)."""
    from scipy.stats import norm

    ms_q, ms_r, ms_e, sd = _mean_squares(queries, draws, components)
    half = np.broadcast_to(form(ms_q, ms_r, ms_e, queries, draws),
                           np.broadcast_shapes(ms_q.shape, ms_r.shape, ms_e.shape))
    return float(np.median(half) / (float(norm.ppf(1 - ALPHA / 2)) * sd))


def bootstrap_rate(queries: int, draws: int, draw_share: float, resid_share: float,
                   datasets: int = 2000, seed: int = 0) -> float:
    """The parametric bootstrap t's simulated rejection rate at delta 0: each data set's
    critical value is the one that gives its estimated components (truncated) level ALPHA for
    t = dbar / sqrt(max(MS_Q + MS_R - MS_E, MS_Q) / QR)."""
    from scipy.special import ndtr

    q, r, df_e = queries, draws, (queries - 1) * (draws - 1)
    s2q, s2r, s2e = setting(q, r, draw_share, resid_share)
    a, b, c = s2e + r * s2q, s2e + q * s2r, s2e
    rng = np.random.default_rng(seed)
    ms_q = a * rng.chisquare(q - 1, datasets) / (q - 1)
    ms_r = b * rng.chisquare(r - 1, datasets) / (r - 1)
    ms_e = c * rng.chisquare(df_e, datasets) / df_e
    x_q, x_r, x_e = (v.ravel() for v in np.broadcast_arrays(
        variance._quantiles(q - 1, 12)[:, None, None],
        variance._quantiles(r - 1, 128)[None, :, None],
        variance._quantiles(df_e, 6)[None, None, :]))
    a_h, b_h = np.maximum(ms_q, ms_e), np.maximum(ms_r, ms_e)
    c_h = np.minimum(ms_e, np.minimum(a_h, b_h) * (1 - 1e-9))
    ratio = (np.maximum(a_h[:, None] * x_q + b_h[:, None] * x_r - c_h[:, None] * x_e,
                        a_h[:, None] * x_q) / (a_h + b_h - c_h)[:, None])
    low, high = np.full(datasets, 0.5), np.full(datasets, 60.0)
    for _ in range(40):  # bisection on the critical value, every data set at once
        mid = (low + high) / 2
        above = (2 * ndtr(-mid[:, None] * np.sqrt(ratio))).mean(axis=1) > ALPHA
        low, high = np.where(above, mid, low), np.where(above, high, mid)
    stat_sd = np.sqrt(np.maximum(ms_q + ms_r - ms_e, ms_q) / (a + b - c))
    return float((2 * ndtr(-(low + high) / 2 * stat_sd)).mean())


BOOTSTRAP_SETTINGS = ((30, 3, 0.2, 0.1), (30, 3, 0.7, 0.0), (30, 3, 0.9, 0.0), (30, 3, 0.7, 0.9))
WIDTH_RESID_SHARES = (*RESID_SHARES, 1.0)  # 1.0: no query effect, the interaction alone
# (name, draw share, interaction share): the settings `widths` summarizes for every design
WIDTH_SETTINGS = (("queries alone", 0.0, 0.0), ("queries, interaction 0.5", 0.0, 0.5),
                  ("interaction 0.9", 0.0, 0.9), ("interaction alone", 0.0, 1.0),
                  ("draws 0.5", 0.5, 0.0), ("draws 0.99", 0.99, 0.0))


def main() -> None:
    maps = {form: {f"{q}x{r}": [[rejection(fn, q, r, setting(q, r, d, e)) for d in DRAW_SHARES]
                                for e in RESID_SHARES] for q in QUERIES for r in DRAWS}
            for form, fn in FORMS.items()}
    boot = [{"queries": q, "draws": r, "draw_share": d, "resid_share": e,
             "rate": bootstrap_rate(q, r, d, e)} for q, r, d, e in BOOTSTRAP_SETTINGS]
    result = {"machine": machine(), "draw_shares": DRAW_SHARES, "resid_shares": RESID_SHARES,
              "nodes": variance.NODES, "maps": maps, "bootstrap": boot}
    (OUT / "interval_level.json").write_text(json.dumps(result, indent=1) + "\n")
    (OUT / "interval_level.md").write_text(markdown(result))


def markdown(result: dict) -> str:
    lines = ["# False positives of the queries-and-draws interval (issue 47)", "",
             "Rejection rate of a true difference of 0 at level 0.05, integrated over the mean "
             "squares' chi-squares (quadrature nodes " + " x ".join(map(str, result["nodes"]))
             + "), by the draw term's share of the mean's variance (columns) and the "
             "interaction's share of the rest (rows). `benchmarks/interval_level.py`; "
             f"{result['machine']}.", ""]
    header = "| interaction \\ draw | " + " | ".join(f"{d:g}" for d in result["draw_shares"])
    rule = "|---" * (len(result["draw_shares"]) + 1) + "|"
    for form, by_design in result["maps"].items():
        lines += [f"## {form}", ""]
        for design, rows in by_design.items():
            flat = [x for row in rows for x in row]
            lines += [f"{design.replace('x', ' queries x ')} draws: "
                      f"{min(flat):.3f}-{max(flat):.3f}", ""]
            if design.startswith("100x"):
                lines += [header, rule]
                lines += [f"| {e:g} | " + " | ".join(f"{x:.3f}" for x in row) + " |"
                          for e, row in zip(result["resid_shares"], rows, strict=True)]
                lines.append("")
    lines += ["## parametric bootstrap t (simulated, 2,000 data sets each)", "",
              "| queries | draws | draw share | interaction share | rejection rate |",
              "|---|---|---|---|---|"]
    lines += [f"| {b['queries']} | {b['draws']} | {b['draw_share']:g} | {b['resid_share']:g} "
              f"| {b['rate']:.3f} |" for b in result["bootstrap"]]
    return "\n".join(lines) + "\n"


def widths() -> None:
    """The shipped interval's median half-width over the known-components interval's, with
    its level beside it at the summarized settings: interval_width.json and .md."""
    maps = {f"{q}x{r}": [[width_ratio(shipped, q, r, setting(q, r, d, e)) for d in DRAW_SHARES]
                         for e in WIDTH_RESID_SHARES] for q in QUERIES for r in DRAWS}
    summary = {f"{q}x{r}": [{"setting": name, "draw_share": d, "resid_share": e,
                             "ratio": width_ratio(shipped, q, r, setting(q, r, d, e)),
                             "rate": rejection(shipped, q, r, setting(q, r, d, e))}
                            for name, d, e in WIDTH_SETTINGS] for q in QUERIES for r in DRAWS}
    result = {"machine": machine(), "draw_shares": DRAW_SHARES,
              "resid_shares": WIDTH_RESID_SHARES, "nodes": variance.NODES, "maps": maps,
              "summary": summary}
    (OUT / "interval_width.json").write_text(json.dumps(result, indent=1) + "\n")
    (OUT / "interval_width.md").write_text(width_markdown(result))


def width_markdown(result: dict) -> str:
    lines = ["# The width of the queries-and-draws interval against one that knew the "
             "components (issue 58)", "",
             "The report's interval (`variance.half_widths`) is wider than it would need to be "
             "if the variance components were known: its median half-width over the mean "
             "squares' chi-squares (quadrature nodes " + " x ".join(map(str, result["nodes"]))
             + ", each equally likely) divided by z(0.975) sqrt(V), the half-width of the "
             "interval that knew the components (level exactly 0.05). In brackets the "
             "shipped interval's false-positive rate at a true difference of 0 "
             "(`rejection`, as interval_level.md). Shares: of the mean's variance V, the draw "
             "effect's; of the rest, the interaction's (1.0: no query effect at all). "
             f"`benchmarks/interval_level.py widths`; {result['machine']}.", ""]
    names = [s["setting"] for s in next(iter(result["summary"].values()))]
    lines += ["| queries x draws | " + " | ".join(names) + " |",
              "|---" * (len(names) + 1) + "|"]
    for design, settings in result["summary"].items():
        lines.append(f"| {design.replace('x', ' x ')} | " + " | ".join(
            f"{s['ratio']:.2f} ({s['rate']:.3f})" for s in settings) + " |")
    lines += ["", "## The ratio by draw share (columns) and interaction share (rows)", ""]
    header = "| interaction \\ draw | " + " | ".join(f"{d:g}" for d in result["draw_shares"])
    rule = "|---" * (len(result["draw_shares"]) + 1) + "|"
    for design, rows in result["maps"].items():
        flat = [x for row in rows for x in row]
        lines += [f"{design.replace('x', ' queries x ')} draws: {min(flat):.2f}-{max(flat):.2f}",
                  ""]
        if design.startswith("100x"):
            lines += [header, rule]
            lines += [f"| {e:g} | " + " | ".join(f"{x:.2f}" for x in row) + " |"
                      for e, row in zip(result["resid_shares"], rows, strict=True)]
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] not in ([], ["widths"]):
        sys.stderr.write(f"interval_level.py {' '.join(sys.argv[1:])}: unknown arguments; give "
                         "none (the level maps) or `widths` (the width ratios)\n")
        sys.exit(2)
    widths() if sys.argv[1:] == ["widths"] else main()
