"""Trust before use: how far an assessor's grades agree with CSFCube's expert grades.

CSFCube (Mysore et al. 2021; pipeline/external/csfcube.py) holds candidates graded 0-3 by
experts for each query paper's facet (background, method, result): its pools' qrels. An assessor
(an LLM, a person's labels, the stand-in: judging/assessor.py), or any judgments frame, grades
the same (query, candidate) pairs, and `agreement` compares the two, per facet and over all:

- weighted Cohen's kappa (Cohen 1968), 1 - sum(w * observed) / sum(w * expected by chance),
  with linear disagreement weights |i - j| / 3 (HEADLINE: a miss of one grade costs a third of
  a miss of three, so a 1 against a 2, across the threshold of relevance, still counts) and with
  quadratic ones ((i - j) / 3)^2 (the usual choice, equal to an intraclass correlation: Fleiss
  & Cohen 1973; it forgives a miss of one grade, costing 1/9, and so reads higher when most
  misses are of one grade); and unweighted kappa of the binary judgment relevant or not at
  grade >= 1 (trec_eval's relevance level, as the pools' estimates count) and at grade >= 2
  (CSFCube's threshold, as its MAP counts): THRESHOLDS;
- each with a 95% interval from the cluster bootstrap-t over query papers (Efron &
  Tibshirani 1993, An Introduction to the Bootstrap, ch. 12; Field & Welsh 2007,
  "Bootstrapping clustered data", JRSS B 69(3)): the C query papers drawn with replacement
  RESAMPLES times, each resample's kappa studentized by its own delete-one-paper jackknife
  standard error (Quenouille 1956, Tukey 1958; for kappa: Fleiss & Davies 1982, "Jackknifing
  functions of multinomial frequencies, with an application to a measure of concordance", Am.
  J. Epidemiol. 115(6)), the interval kappa - q_hi x se to kappa - q_lo x se
  (`bootstrap_t_interval`). Query papers, not pairs, are resampled, since the candidates of one
  query share its difficulty; the analytic large-sample variance (Fleiss, Cohen & Everitt
  1969) assumes independent pairs and is too narrow. Chosen by simulation
  (benchmarks/agreement_coverage.py, tests/judging/kappa_simulation.py: four CSFCube-like
  worlds, 4,000 samples each): with 16 query papers (a CSFCube facet's count) it covered the
  true kappas 93.6-95.5% of the time, 14 of the 16 (world, kappa) cells within 94-96%, the
  two below where short and long candidate lists mix with error rates of 5-70% (93.6% and
  93.8%); the delete-one-paper jackknife-t it replaced (kappa +- t(C-1) x that error,
  `jackknife_interval`) 92.2-95.0%, the jackknife over pairs 77-79%; with 34 papers 94.3-95.9%
  (the jackknife-t 93.3-95.4%). Its draws are seeded (SEED) and the papers put in an order of
  their own first, so the same inputs give the same interval;
- the exact agreement and the confusion matrix (rows: the expert's grade, columns: the
  assessor's), 4 x 4 with its empty cells.

The query side of each pair is the facet query the pipeline searches CSFCube with (the query
paper's title and its facet's sentences: the pool's queries.parquet), the candidate its title
and abstract: what the experts judged is relevance to that facet.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import fingerprint, outputs_intact
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.manifests import manifest
from pipeline.external.csfcube import FACETS
from pipeline.external.csfcube import LEVEL as CSFCUBE_LEVEL
from pipeline.judging.assessor import Assessor
from pipeline.judging.judgments import PAIR_TEXTS, judge, paper_texts
from pipeline.layout import agreement_paths, judging_log_path, pool_names
from pipeline.pools.build import load_pool, pool_manifest

log = logging.getLogger(__name__)

STAGE = "judge-agreement"
GRADES = (0, 1, 2, 3)
# the lowest grades that count relevant in the binary kappas: trec_eval's relevance level (1),
# CSFCube's (2: its MAP)
THRESHOLDS = (1, 2)
WEIGHTS = ("linear", "quadratic")
HEADLINE = "linear"
KAPPAS = (*WEIGHTS, *(f"ge{t}" for t in THRESHOLDS))  # ge<t>: unweighted, relevant at >= t
LEVEL = 0.95  # of the kappas' intervals
RESAMPLES = 2000  # the cluster bootstrap-t's resamples of the query papers
SEED = 20270113  # its draws': the same clusters give the same interval
ALL = "all"  # the row over every facet's pairs

# what the stage accepts as an assessor: an Assessor (judging/assessor.py), a judgments frame
# (query, doc, grade),
# or a callable given the pairs (query, doc and PAIR_TEXTS) that returns such a frame
Grades = Assessor | pl.DataFrame | Callable[[pl.DataFrame], pl.DataFrame]

HEADINGS = {"linear": "linear", "quadratic": "quadratic",
            **{f"ge{t}": f">= {t}" for t in THRESHOLDS}}
SUMMARY_SCHEMA: dict[str, Any] = {
    "facet": pl.String, "queries": pl.Int64, "papers": pl.Int64, "pairs": pl.Int64,
    "exact": pl.Float64,
    **{f"kappa_{k}{end}": pl.Float64 for k in KAPPAS for end in ("", "_low", "_high")}}
CONFUSION_SCHEMA: dict[str, Any] = {"facet": pl.String, "expert": pl.Int8,
                                    "assessor": pl.Int8, "pairs": pl.Int64}


# ---- kappa ----------------------------------------------------------------------------------
def disagreement_weights(kind: str, k: int = len(GRADES)) -> np.ndarray:
    """The k x k disagreement weights of weighted kappa: linear |i - j| / (k - 1), quadratic
    ((i - j) / (k - 1))^2; `unweighted`: 0 on the diagonal, 1 off it."""
    i = np.arange(k)
    distance = np.abs(i[:, None] - i[None, :]) / (k - 1)
    if kind == "linear":
        return distance
    if kind == "quadratic":
        return distance ** 2
    if kind == "unweighted":
        return (distance > 0).astype(float)
    raise ValueError(f"unknown kappa weighting {kind!r}: one of {KAPPAS}")


def kappa(confusion: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted kappa of confusion matrices (..., k, k): 1 - sum(w O) / sum(w E), E the
    product of the margins over n; NaN where chance predicts no disagreement (one grade only)."""
    m = np.asarray(confusion, dtype=float)
    k = m.shape[-1]
    # on the matrices flattened to rows of k x k cells, every sum is one product (n, sum(w O),
    # the margins; sum(w E) x n = the rows' margins . w . the columns'): numpy's sums over
    # small trailing axes are slow, and the bootstrap asks this of tens of thousands of
    # matrices at once. einsum, not `@`: a threaded BLAS took 5 to 50 times as long on these
    # thin products on 2 cores as one thread, and einsum's loops use none
    flat = m.reshape(-1, k * k)
    rows = np.einsum("ni,ij->nj", flat, np.kron(np.eye(k), np.ones((k, 1))))  # (i, j) -> i
    columns = np.einsum("ni,ij->nj", flat, np.kron(np.ones((k, 1)), np.eye(k)))  # -> j
    n = flat.sum(axis=1)
    observed = np.einsum("ni,i->n", flat, np.asarray(weights, dtype=float).reshape(-1))
    chance = np.einsum("ni,ij,nj->n", rows, np.asarray(weights, dtype=float), columns)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (1 - observed * n / chance).reshape(m.shape[:-2])


def binary(confusion: np.ndarray, threshold: int) -> np.ndarray:
    """The 2 x 2 matrices (not relevant, relevant: grade >= `threshold`) of (..., 4, 4) ones."""
    m = np.asarray(confusion)
    k = m.shape[-1]
    # each cell (i, j) to (i >= threshold, j >= threshold): one product over the flattened
    # matrices (fast on many, as `kappa`'s)
    side = (np.arange(k) >= threshold).astype(int)
    to = np.zeros((k * k, 4), dtype=m.dtype)
    to[np.arange(k * k), (2 * side[:, None] + side[None, :]).reshape(-1)] = 1
    return np.einsum("ni,ij->nj", m.reshape(-1, k * k), to).reshape(*m.shape[:-2], 2, 2)


def kappas(confusion: np.ndarray) -> dict[str, np.ndarray]:
    """Each of KAPPAS of the 4 x 4 confusion matrices (..., 4, 4)."""
    out = {kind: kappa(confusion, disagreement_weights(kind)) for kind in WEIGHTS}
    for threshold in THRESHOLDS:
        out[f"ge{threshold}"] = kappa(binary(confusion, threshold),
                                      disagreement_weights("unweighted", 2))
    return out


def jackknife_interval(per_cluster: np.ndarray, level: float = LEVEL
                       ) -> dict[str, tuple[float, float]]:
    """Intervals of KAPPAS from per-cluster confusion matrices (c, 4, 4): kappa of them all
    +- t(c - 1) x the delete-one-cluster jackknife standard error, sqrt((c - 1) / c x
    sum (kappa_-i - mean)^2), kept within kappa's range [-1, 1]. NaN bounds with fewer than 2
    clusters, or where leaving one out leaves no disagreement expected by chance (no kappa)."""
    from scipy.stats import t as student

    count = per_cluster.shape[0]
    total = per_cluster.sum(axis=0)
    points, left_out = kappas(total), kappas(total[None] - per_cluster)
    # t's quantile once for every kappa (scipy's ppf costs a millisecond a call)
    factor = float(student.ppf(0.5 + level / 2, count - 1)) if count >= 2 else math.nan
    out = {}
    for kind in KAPPAS:
        values = left_out[kind]
        if count < 2 or not np.all(np.isfinite(values)) or not math.isfinite(points[kind]):
            out[kind] = (math.nan, math.nan)
            continue
        error = math.sqrt((count - 1) / count * float(((values - values.mean()) ** 2).sum()))
        half = factor * error
        out[kind] = (max(-1.0, float(points[kind]) - half), min(1.0, float(points[kind]) + half))
    return out


def _jackknife_errors(per_cluster: np.ndarray) -> dict[str, np.ndarray]:
    """Each of KAPPAS' delete-one-cluster jackknife standard error, sqrt((c - 1) / c x
    sum (kappa_-i - mean)^2), of per-cluster confusion matrices (..., c, 4, 4): (...) each,
    NaN where a left-out kappa is."""
    count = per_cluster.shape[-3]
    total = per_cluster.sum(axis=-3)
    left_out = kappas(total[..., None, :, :] - per_cluster)
    return {kind: np.sqrt((count - 1) / count * ((values - values.mean(axis=-1, keepdims=True))
                                                 ** 2).sum(axis=-1))
            for kind, values in left_out.items()}


def _canonical(per_cluster: np.ndarray) -> np.ndarray:
    """The clusters in an order of their own counts (lexicographic over the 16 cells), so
    that the bootstrap's resamples, drawn by position, do not depend on the order given."""
    flat = per_cluster.reshape(len(per_cluster), -1)
    return per_cluster[np.lexsort(flat.T[::-1])]


def bootstrap_t_interval(per_cluster: np.ndarray, level: float = LEVEL,
                         resamples: int = RESAMPLES, seed: int = SEED
                         ) -> dict[str, tuple[float, float]]:
    """Intervals of KAPPAS from per-cluster confusion matrices (c, 4, 4), the clusters (query
    papers) resampled with replacement (the cluster bootstrap-t: Efron & Tibshirani 1993, An
    Introduction to the Bootstrap, ch. 12; Field & Welsh 2007, "Bootstrapping clustered
    data"): with kappa the estimate of all of them and se its delete-one-cluster jackknife
    standard error, [kappa - q_hi se, kappa - q_lo se], q_lo and q_hi the (1 -+ level) / 2
    quantiles over `resamples` resamples of t* = (kappa* - kappa) / se*, each resample's own
    kappa and jackknife error (its c drawn clusters left out in turn); kept within [-1, 1];
    where that error is 0 (every paper's pairs alike: all in agreement, say), the point.
    The clusters are put in an order of their own first (`_canonical`) and the draws seeded
    by `seed`, so the same clusters give the same interval. NaN bounds with fewer than 2
    clusters, where a left-out kappa is undefined, or where fewer than half the resamples give
    a t*."""
    count = per_cluster.shape[0]
    nan = dict.fromkeys(KAPPAS, (math.nan, math.nan))
    if count < 2:
        return nan
    clusters = _canonical(np.asarray(per_cluster, dtype=float))
    points, errors = kappas(clusters.sum(axis=0)), _jackknife_errors(clusters)
    drawn = clusters[np.random.default_rng(seed).integers(0, count, size=(resamples, count))]
    again, again_errors = kappas(drawn.sum(axis=1)), _jackknife_errors(drawn)
    out = {}
    for kind in KAPPAS:
        point, error = float(points[kind]), float(errors[kind])
        if error == 0.0 and math.isfinite(point):  # every paper alike (all agree): no spread
            out[kind] = (point, point)
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (again[kind] - point) / again_errors[kind]
        ratio = ratio[np.isfinite(ratio)]
        if not (math.isfinite(point) and math.isfinite(error)) or 2 * ratio.size < resamples:
            out[kind] = (math.nan, math.nan)
            continue
        low, high = np.quantile(ratio, [(1 - level) / 2, (1 + level) / 2])
        out[kind] = (max(-1.0, point - float(high) * error), min(1.0, point - float(low) * error))
    return out


# ---- the frames -----------------------------------------------------------------------------
def _column(frame: pl.DataFrame, names: tuple[str, ...], what: str, where: str) -> str:
    found = [n for n in names if n in frame.columns]
    if not found:
        raise InputError(f"{where}: no column {' or '.join(names)} ({what}); give a judgments "
                         "frame of query, doc and grade (0-3)")
    return found[0]


def judgments_frame(frame: pl.DataFrame, where: str = "the judgments") -> pl.DataFrame:
    """(query, doc, grade Int8) of a judgments frame: query or query_id, doc or docid, grade
    0-3 (a person's labels file names them query_id, docid). A grade outside 0-3, or a pair
    graded twice differently, is refused in one line; a pair given twice alike is kept once;
    a pair without a grade (null) is left out."""
    query = _column(frame, ("query", "query_id"), "the query", where)
    doc = _column(frame, ("doc", "docid"), "the candidate", where)
    _column(frame, ("grade",), "0-3", where)
    out = frame.select(query=pl.col(query).cast(pl.String), doc=pl.col(doc).cast(pl.String),
                       grade=pl.col("grade")).filter(pl.col("grade").is_not_null())
    try:
        out = out.with_columns(pl.col("grade").cast(pl.Int64, strict=True))
    except pl.exceptions.PolarsError:
        raise InputError(f"{where}: grades must be the integers 0-3") from None
    bad = out.filter(~pl.col("grade").is_in(GRADES))
    if bad.height:
        q, d, g = bad.row(0)
        raise InputError(f"{where}: query {q}, candidate {d} has the grade {g}; grades are the "
                         "integers 0-3")
    out = out.unique(maintain_order=True)
    clash = out.filter(pl.len().over("query", "doc") > 1)
    if clash.height:
        q, d, _ = clash.row(0)
        raise InputError(f"{where}: query {q}, candidate {d} is graded twice with different "
                         "grades: keep one")
    return out.with_columns(pl.col("grade").cast(pl.Int8)).sort("query", "doc")


def csfcube_pools(corpus_dir: Path) -> dict[str, str]:
    """facet -> pool name of an imported CSFCube corpus; a corpus without them is one line."""
    pools: dict[str, str] = {}
    for name in pool_names(corpus_dir):
        info = pool_manifest(corpus_dir, name)
        if info.get("level") == CSFCUBE_LEVEL:
            pools[info["parameters"]["facet"]] = name
    if not pools:
        raise InputError(f"corpus {corpus_dir.name} has no CSFCube pools: import the release "
                         "first (make import-csfcube SRC=<the CSFCube release> "
                         f"CORPUS={corpus_dir.name})")
    return {facet: pools[facet] for facet in FACETS if facet in pools}


def expert_pairs(corpus_dir: Path) -> pl.DataFrame:
    """CSFCube's expert-judged pairs of an imported corpus, every facet's: facet, paper (the
    query paper), query (`<pid>_<facet>`), doc, expert (the adjudicated grade 0-3), and the
    texts an assessor reads (PAIR_TEXTS: the facet query's title and sentences, the
    candidate's title and abstract), sorted."""
    frames = []
    for facet, pool in csfcube_pools(corpus_dir).items():
        queries, _, qrels = load_pool(corpus_dir, pool)
        frames.append(qrels.join(
            queries.select(query="corpusid", paper="paper", query_title="title",
                           query_abstract="abstract"), on="query", how="left")
            .with_columns(facet=pl.lit(facet), expert=pl.col("rel").cast(pl.Int8)))
    pairs = pl.concat(frames)
    texts = paper_texts(corpus_dir, pairs["doc"]).select(
        doc="corpusid", doc_title="title", doc_abstract="abstract")
    pairs = pairs.join(texts, on="doc", how="left")
    return pairs.select("facet", "paper", "query", "doc", "expert", *PAIR_TEXTS).sort(
        "facet", "query", "doc")


# ---- agreement ------------------------------------------------------------------------------
@dataclass
class Agreement:
    """An assessor's agreement with the expert: `summary` (SUMMARY_SCHEMA: a row per facet and
    ALL), `confusion` (CONFUSION_SCHEMA: 16 cells per row of summary), and counts: the expert's
    pairs, those the assessor graded, those it did not, and its grades of other pairs."""

    summary: pl.DataFrame
    confusion: pl.DataFrame
    counts: dict[str, int] = field(default_factory=dict)

    def headline(self, facet: str = ALL) -> float:
        """The headline kappa (HEADLINE weights) of `facet` (default: over all pairs)."""
        return self.summary.filter(pl.col("facet") == facet)[f"kappa_{HEADLINE}"][0]


def agreement(expert: pl.DataFrame, graded: pl.DataFrame, level: float = LEVEL) -> Agreement:
    """The agreement of `graded` (a judgments frame: judgments_frame) with `expert` (query,
    doc, expert grade; optional facet, else one group, and paper, the cluster the interval
    resamples, else the query), over the pairs both graded: per facet, then ALL."""
    grades = judgments_frame(graded)
    if "paper" not in expert.columns:
        expert = expert.with_columns(paper=pl.col("query"))
    if "facet" not in expert.columns:
        expert = expert.with_columns(facet=pl.lit(ALL))
    keys = expert.select("facet", "paper", pl.col("query", "doc").cast(pl.String),
                         pl.col("expert").cast(pl.Int8))
    both = keys.join(grades, on=["query", "doc"], how="inner").rename({"grade": "assessor"})
    counts = {"expert_pairs": keys.height, "graded": both.height,
              "not_graded": keys.height - both.height,
              "not_expert_pairs": grades.join(keys, on=["query", "doc"], how="anti").height}
    if not both.height:
        example = keys.row(0, named=True) if keys.height else {"query": "?", "doc": "?"}
        raise InputError(f"the judgments grade none of the expert's {keys.height} pairs: judge "
                         f"the expert's own pairs (query ids like {example['query']!r}, "
                         f"candidates like {example['doc']!r})")
    present = set(both["facet"]) - {ALL}
    groups = [*(f for f in FACETS if f in present), *sorted(present - set(FACETS)), ALL]
    rows, cells = [], []
    for group in groups:
        part = both if group == ALL else both.filter(pl.col("facet") == group)
        matrix = _confusion(part)
        per_paper = np.stack([_confusion(p) for _, p in part.group_by(
            "paper", maintain_order=True)]) if part.height else matrix[None]
        point = kappas(matrix)
        bounds = bootstrap_t_interval(per_paper, level)
        row: dict[str, Any] = {"facet": group, "queries": part["query"].n_unique(),
                               "papers": part["paper"].n_unique(), "pairs": part.height,
                               "exact": float(np.trace(matrix) / matrix.sum())}
        for kind in KAPPAS:
            row[f"kappa_{kind}"] = _finite(point[kind])
            row[f"kappa_{kind}_low"], row[f"kappa_{kind}_high"] = map(_finite, bounds[kind])
        rows.append(row)
        cells += [(group, e, a, int(matrix[e, a])) for e in GRADES for a in GRADES]
    summary = pl.DataFrame(rows, schema=SUMMARY_SCHEMA)
    confusion = pl.DataFrame(cells, schema=CONFUSION_SCHEMA, orient="row")
    if counts["not_graded"]:
        log.info(f"[{STAGE}] {counts['not_graded']} of the expert's {keys.height} pairs have no "
                 "grade of the assessor: left out")
    return Agreement(summary, confusion, counts)


def _confusion(part: pl.DataFrame) -> np.ndarray:
    """The 4 x 4 counts of (expert, assessor) grades of `part`."""
    matrix = np.zeros((len(GRADES), len(GRADES)))
    np.add.at(matrix, (part["expert"].to_numpy(), part["assessor"].to_numpy()), 1)
    return matrix


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


# ---- grades from an assessor ------------------------------------------------------------------
def assessor_grades(pairs: pl.DataFrame, source: Grades, log_path: Path | None = None,
                    concurrency: int = 4, progress: bool = True) -> pl.DataFrame:
    """The judgments (query, doc, grade) of `pairs` (query, doc, PAIR_TEXTS) by `source`: an
    Assessor (judging/judgments.py's judge; an api assessor's answers in its log at
    `log_path`), a judgments frame as it is, or a callable given the pairs."""
    if isinstance(source, Assessor):
        judged = judge(pairs.select("query", "doc", *PAIR_TEXTS), source,
                       log_path if source.cached else None, concurrency, progress)
        return judged.frame.select("query", "doc", "grade")
    if isinstance(source, pl.DataFrame):
        return source
    if callable(source):
        out = source(pairs.select("query", "doc", *PAIR_TEXTS))
        if not isinstance(out, pl.DataFrame):
            raise InputError(f"the assessor {source!r} returned a {type(out).__name__}, not a "
                             "judgments frame of query, doc and grade")
        return out
    raise InputError(f"an assessor is an Assessor (JUDGE=...), a judgments frame or a callable, "
                     f"not a {type(source).__name__}")


# ---- the stage ------------------------------------------------------------------------------
def judge_agreement(runs_root: Path, corpus_dir: Path, source: Grades, name: str | None = None,
                    label: str | None = None, concurrency: int = 4, progress: bool = True
                    ) -> Agreement:
    """The stage: CSFCube's expert-judged pairs of the corpus at `corpus_dir` graded by
    `source`, the agreement written to layout.agreement_paths (a parquet table, the confusion
    matrices, both in markdown, the manifest last). `name`: the files' stem (an Assessor's own
    file name by default), `label`: how the table names the assessor. A rerun on the same
    inputs leaves the files as they were."""
    corpus = corpus_dir.name
    if isinstance(source, Assessor):
        name, label = name or source.file_name, label or source.name
        described, stand_in = source.describe(), source.stand_in
    else:
        if not name:
            raise ValueError("name the judgments (the files' stem) when they are not an Assessor's")
        label, described, stand_in = label or name, {"kind": "given", "name": name}, False
    pairs = expert_pairs(corpus_dir)
    graded = assessor_grades(pairs, source, judging_log_path(runs_root, corpus, name),
                             concurrency, progress)
    result = agreement(pairs, graded)
    table, confusion, markdown, record = agreement_paths(runs_root, corpus, name)
    outputs = {table: _parquet_bytes(result.summary), confusion: _parquet_bytes(result.confusion),
               markdown: to_markdown(result, label, stand_in, corpus).encode()}
    parameters = {"assessor": described, "level": LEVEL,
                  "interval": f"cluster-bootstrap-t:{RESAMPLES}:{SEED}",
                  "headline": HEADLINE, "judgments": _digest(graded),
                  "expert": _digest(pairs.select("query", "doc", grade="expert"))}
    if not _current(record, parameters, outputs):
        record.unlink(missing_ok=True)
        for path, data in outputs.items():
            with atomic_path(path) as tmp:
                tmp.write_bytes(data)
        write_json(manifest(STAGE, parameters, corpus=corpus, assessor=label,
                            stand_in=stand_in, counts=result.counts,
                            outputs={p.name: fingerprint(p) for p in outputs}), record)
    overall = result.summary.filter(pl.col("facet") == ALL).row(0, named=True)
    log.info(f"[{STAGE}] {label}{' (a stand-in)' if stand_in else ''} against CSFCube's "
             f"experts, {overall['pairs']} pairs: {HEADLINE} kappa "
             f"{_number(overall[f'kappa_{HEADLINE}'])} -> {markdown}")
    return result


def _digest(frame: pl.DataFrame) -> str:
    """The sha256 of the grades compared, the assessor's or the expert's (a judgments frame, as
    sorted query, doc, grade lines)."""
    rows = judgments_frame(frame).iter_rows()
    return hashlib.sha256("".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows).encode()).hexdigest()


def _parquet_bytes(frame: pl.DataFrame) -> bytes:
    """`frame` as the parquet file write_parquet would write (zstd)."""
    import pyarrow.parquet as pq

    buffer = BytesIO()
    pq.write_table(frame.to_arrow(), buffer, compression="zstd")
    return buffer.getvalue()


def _current(record: Path, parameters: dict[str, Any], outputs: dict[Path, bytes]) -> bool:
    """Whether the files hold `outputs`' bytes already and the manifest at `record` vouches
    for them, made with `parameters`: then nothing is rewritten."""
    try:
        if any(path.read_bytes() != data for path, data in outputs.items()):
            return False
        made = read_json(record)
    except (OSError, InputError):
        return False
    return (made.get("parameters") == parameters and set(made.get("outputs", {}))
            == {p.name for p in outputs} and outputs_intact(record.parent, made, deep=True))


# ---- markdown -------------------------------------------------------------------------------
def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _with_interval(row: dict[str, Any], kind: str) -> str:
    low, high = row[f"kappa_{kind}_low"], row[f"kappa_{kind}_high"]
    return f"{_number(row[f'kappa_{kind}'])} [{_number(low)}, {_number(high)}]"


def to_markdown(result: Agreement, label: str, stand_in: bool, corpus: str) -> str:
    """The agreement as markdown: the kappas with their intervals, then each confusion matrix;
    no time or path in it, so the same agreement gives the same bytes."""
    lines = [f"## Agreement of {label} with CSFCube's expert grades (corpus {corpus})", ""]
    if stand_in:
        lines += ["**A deterministic stand-in, not a relevance assessor: its agreement "
                  "exercises the report only.**", ""]
    lines += [f"Weighted Cohen's kappa over the pairs both graded; headline: {HEADLINE} "
              "weights. >= t: unweighted kappa of relevant (grade >= t) or not. Intervals: "
              f"{LEVEL:.0%}, the cluster bootstrap-t over query papers ({RESAMPLES:,} "
              "resamples of the papers, each kappa studentized by the jackknife error leaving "
              "out one paper at a time). Pairs of the expert the assessor did not grade: "
              f"{result.counts['not_graded']}.", "",
              "| facet | queries | papers | pairs | exact | "
              + " | ".join(f"kappa {HEADINGS[k]}" for k in KAPPAS) + " |",
              "|---|" + "---:|" * (4 + len(KAPPAS))]
    for row in result.summary.iter_rows(named=True):
        lines.append(f"| {row['facet']} | {row['queries']} | {row['papers']} | {row['pairs']} | "
                     f"{row['exact']:.3f} | " + " | ".join(_with_interval(row, k)
                                                           for k in KAPPAS) + " |")
    for facet in result.summary["facet"]:
        cells = result.confusion.filter(pl.col("facet") == facet)
        lines += ["", f"Confusion, {facet} (rows: expert, columns: assessor):", "",
                  "| expert \\ assessor | " + " | ".join(map(str, GRADES)) + " |",
                  "|---|" + "---:|" * len(GRADES)]
        for grade in GRADES:
            counts = cells.filter(pl.col("expert") == grade).sort("assessor")["pairs"]
            lines.append(f"| {grade} | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(lines) + "\n"
