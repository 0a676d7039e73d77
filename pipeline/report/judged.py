"""The report's "Beyond citations" section: per assessor whose judgments of a pool's sample
exist (make judge), each model's metrics from the citations alone and with the judged sample,
with the queries-and-draws intervals; the relevant papers the citations miss per query; and
per pair of models the difference with and without the sample, and whether the order changes
(pipeline/judging/inferred.py; docs/evaluation.md, "Beyond citations: judged samples")."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.judging.inferred import (
    ThinStratum,
    differences,
    jkap_thin,
    means,
    missed,
    pool_values,
)
from pipeline.judging.stage import JudgedPool, LeftOut, judged_pools
from pipeline.layout import Place, format_size
from pipeline.roots import where

log = logging.getLogger(__name__)

# the metrics the tables show (all are computed): jkAP the headline AP, infAP beside it for
# trec_eval's parity
SHOWN = ("jkAP", "infAP", "infNDCG@10", "infP@10")
PLOTTED = "jkAP"  # the plot's metric, the headline AP (report/build.py titles it)
STAND_IN = "a deterministic stand-in, NOT a judgment of relevance: it exercises the section only"


@dataclass(frozen=True)
class JudgedTables:
    """One assessor's tables (name, caption, header, rows) and the means its plot draws."""

    assessor: str
    stand_in: bool
    tables: list[tuple[str, str, list[str], list[list[str]]]]
    means: pl.DataFrame


def _x100(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    return f"{_x100(value)} [{_x100(low)}, {_x100(high)}]"


def _scope(scope: str, size: int) -> str:
    return f"{scope} {format_size(size)}"


def _who(group: Sequence[JudgedPool]) -> str:
    first = group[0]
    return f"{first.assessor} ({STAND_IN})" if first.stand_in else first.assessor


def _number(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def jkap_flag(group: Sequence[JudgedPool]) -> str:
    """The means caption's line next to jkAP where a pool's sample leaves some stratum with
    fewer judged pairs per query than jkAP needed in the simulation (inferred.thin_strata),
    naming the SAMPLE that would avoid it in every pool of `group`; "" where none does."""
    thin: dict[str, ThinStratum] = {}  # label: the thinnest seen over the pools
    sample = 0
    for p in group:
        strata, needed = jkap_thin(p.pool, p.qrels, p.judgments, p.sample)
        for stratum in strata:
            if stratum.label not in thin or stratum.judged < thin[stratum.label].judged:
                thin[stratum.label] = stratum
        sample = max(sample, needed)  # every pool's: the SAMPLE keeps none of them thin
    if not thin:
        return ""
    ordered = sorted(thin.values(), key=lambda stratum: int(stratum.label.split("-")[0]))
    short = ", ".join(f"{_number(s.judged)} of {_number(s.needed)} in ranks {s.label}"
                      for s in ordered)
    seen = [text for deep, text in (
        (False, "with 2 or 3 judged above the deepest stratum it read up to 0.01 low"),
        (True, "with 2 in the deepest, where relevant papers are rare, about +0.02 high"))
        if any(s.deepest == deep for s in ordered)]
    line = (f"jkAP may be biased here: the samples judge fewer pairs per query than jkAP "
            f"needed to be unbiased in the simulation, {short} ({' and '.join(seen)}: "
            f"docs/evaluation.md), and SAMPLE={sample} would avoid it (make judge, every drawn "
            "pair judged)")
    log.warning(f"[report] {group[0].assessor}: {line}")
    return line


def assessor_tables(corpus: str, group: Sequence[JudgedPool], name: str | None = None
                    ) -> JudgedTables:
    """The tables of one assessor's judgments over the report's pools (`group`), named
    `judged-<name>-...` (default: the judgments' file stem)."""
    values = pl.concat([pool_values(p.pool, p.qrels, p.runs, p.judgments, p.sample)
                        for p in group])
    values = values.filter(pl.col("metric").is_in(SHOWN))
    stem, who = name or group[0].file_name, _who(group)
    models = sorted({m for p in group for m in p.models})
    mean = means(values).sort("size", "scope", "metric", "model")
    flag = f"; {line}" if (line := jkap_flag(group)) else ""
    rows = [[_scope(r["scope"], r["size"]), r["metric"], r["model"], str(r["queries"]),
             str(r["draws"]), _interval(r["cited"], r["cited_low"], r["cited_high"]),
             _interval(r["inferred"], r["low"], r["high"])] for r in mean.iter_rows(named=True)]
    tables = [(f"judged-{stem}-means",
               f"{corpus}: beyond citations, judged by {who}: each model's mean x100 from the "
               "citations alone and with the judged sample of the candidates "
               f"{', '.join(models)} rank high that the citations leave unjudged; jkAP, the "
               "headline AP: statAP (Aslam, Pavlu & Yilmaz 2006) with the stratified "
               "jackknife's bias correction (Quenouille 1956; Jones 1974; second order where a "
               "stratum has 3 judged pairs or more: Schucany, Gray & Owen 1971), a stratum with "
               f"fewer than 2 judged pairs left uncorrected{flag}; infAP: xinfAP (Yilmaz, "
               "Kanoulas & Aslam 2008, trec_eval's infAP), which over-counts on thin samples; "
               "P@k: the known relevant in each model's top k and, per stratum, its unjudged "
               "ones at the share judged relevant among its own judged ones (at most 1); nDCG: "
               "Horvitz-Thompson, capped at 1 (biased up on thin samples: "
               "docs/evaluation.md); 95% intervals over queries and pool draws",
               ["pools", "metric", "model", "queries", "draws", "citations", "with the sample"],
               rows)]
    lost = pl.concat([missed(p.pool, p.qrels, p.judgments, p.sample) for p in group])
    rows = []
    for pool in sorted(lost["pool"].unique().to_list()):
        part = lost.filter(pl.col("pool") == pool)
        count = part.height
        total, se = float(part["missed"].sum()), float((part["se"] ** 2).sum() ** 0.5)
        rows.append([pool, str(count), f"{part['cited'].mean():.1f}",
                     str(int(part["judged"].sum())), str(int(part["found"].sum())),
                     f"{total / count:.1f} [{max(0.0, (total - 1.96 * se) / count):.1f}, "
                     f"{(total + 1.96 * se) / count:.1f}]",
                     f"{part['missed'].min():.1f}-{part['missed'].max():.1f}"])
    tables.append((f"judged-{stem}-missed",
                   f"{corpus}: relevant papers the citations miss, judged by {who}: per pool, "
                   "the mean relevant citations per query, the drawn pairs judged and the "
                   "relevant among them, and the estimated relevant candidates per query the "
                   "citations miss (Horvitz-Thompson over the sampling frame, 95% normal "
                   "interval from the stratified variance), with its range over the queries",
                   ["pool", "queries", "cited per query", "judged", "relevant found",
                    "missed per query", "range"], rows))
    pairs = differences(values).sort("size", "scope", "metric", "a", "b")
    rows = [[_scope(r["scope"], r["size"]), r["metric"], f"{r['a']} - {r['b']}",
             _interval(r["cited"], r["cited_low"], r["cited_high"]),
             _interval(r["inferred"], r["low"], r["high"]),
             _interval(r["shift"], r["shift_low"], r["shift_high"]), r["verdict"]]
            for r in pairs.iter_rows(named=True)]
    tables.append((f"judged-{stem}-pairs",
                   f"{corpus}: does the ranking survive, judged by {who}: each pair's mean "
                   "difference x100 from the citations alone and with the judged sample, and "
                   "the shift between them, each with its 95% interval over queries and pool "
                   "draws; the order kept or reversed, and which intervals exclude 0",
                   ["pools", "metric", "pair", "citations", "with the sample", "shift",
                    "order"], rows))
    return JudgedTables(group[0].assessor, group[0].stand_in, tables, mean)


def judged_tables(place: Place, pools: Sequence[str],
                  left_out: list[LeftOut] | None = None) -> list[JudgedTables]:
    """Each assessor's tables over the judged samples of `pools` (none without judgments),
    one set per sampling setting where an assessor judged several (their names then end in
    the sampling's folder name); what was left out appended to `left_out` (left_out_table)."""
    found = judged_pools(place, sorted(pools), left_out)
    keys = sorted({(p.file_name, p.sampling) for p in found})
    stems = [stem for stem, _ in keys]
    return [assessor_tables(place.corpus, [p for p in found
                                           if (p.file_name, p.sampling) == (stem, sampling)],
                            stem if stems.count(stem) == 1 else f"{stem}-{sampling or 'old'}")
            for stem, sampling in keys]


def left_out_table(place: Place, left_out: Sequence[LeftOut]
                   ) -> tuple[str, str, list[str], list[list[str]]] | None:
    """The report's table of the samples and judgments it did not count (file, from the runs
    root's folder on; why; the command that makes them count again); None when it counted
    every one."""
    if not left_out:
        return None
    return ("judged-left-out",
            f"{place.corpus}: judging files the section above does not count, why, and the command "
            "that judges them again",
            ["file", "why", "repair"],
            [[str(item.path.relative_to(place.runs_root.parent)), item.why,
              item.repair.command(where(place.corpus_dir.parent, place.index_root,
                                        place.runs_root))] for item in left_out])


def draw_judged(means_frame: pl.DataFrame, path: Path, title: str) -> None:
    """PLOTTED (jkAP) x100 against pool size per model: from the citations alone (dashed) and
    with the judged sample (solid), the dataset-level pools (the first scope)."""
    from pipeline.report.plots import plot_lines

    rows = means_frame.filter(pl.col("metric") == PLOTTED)
    scope = sorted(rows["scope"].unique().to_list())[:1]
    rows = rows.filter(pl.col("scope").is_in(scope)).sort("model", "size")
    lines = []
    for model in rows["model"].unique().sort().to_list():
        own = rows.filter(pl.col("model") == model)
        lines.append((f"{model}, citations", own["size"].to_list(),
                      [100 * v for v in own["cited"].to_list()], "--"))
        lines.append((f"{model}, with the sample", own["size"].to_list(),
                      [100 * v for v in own["inferred"].to_list()], "-"))
    plot_lines(lines, path, title, f"{PLOTTED} x100 (mean over queries and draws)")
