"""The judging stages over a corpus's pools (docs/judging.md): draw each pool's sample from
the named models' runs and write it (layout.sample_path, its manifest beside it), judge its
drawn pairs and write the pool's judgments (`judge_corpus`: make judge, pipeline.judge);
write the judging page of every pool's drawn pairs (`judging_page`: make judge-page); and
read back what the report counts (`judged_pools`).

A sample is made from the pool's citation qrels (those of its candidates, as eval scores
them) and the current runs of the models: its manifest records the models, SAMPLE, the seed,
the depth and the runs' sha256, so the same inputs keep the file and its manifest as they are
(byte-identical), and a pool whose runs changed is sampled again. Judgments are kept only
while their manifest's pairs are the sample's (assessor.pairs_digest): the report never
counts judgments of another sample.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import fingerprint
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.manifests import manifest
from pipeline.judging.assessor import (
    Assessor,
    judge_pool,
    pairs_digest,
    paper_texts,
    read_judgments,
)
from pipeline.judging.page import write_page
from pipeline.judging.sample import DEPTH, draw_sample, pairs_to_judge
from pipeline.layout import (
    MANIFEST,
    Place,
    judging_page_path,
    judgments_files,
    judgments_manifest,
    pool_names,
    run_paths,
    sample_path,
)

log = logging.getLogger(__name__)

SAMPLE_STAGE = "judge-sample"
SAMPLE = 20  # pairs per query (make's SAMPLE)
CONCURRENCY = 4  # requests at once of an api assessor (JUDGE_CONCURRENCY)


@dataclass(frozen=True)
class Sampling:
    """What a sample is drawn with: the models whose top `depth` ranks form its frame,
    `n` pairs per query, `seed`."""

    models: tuple[str, ...]
    n: int = SAMPLE
    seed: int = 0
    depth: int = DEPTH

    def parameters(self) -> dict[str, Any]:
        return {"models": list(self.models), "sample": self.n, "seed": self.seed,
                "depth": self.depth}


def sampling(models: Sequence[str] | str, n: int = SAMPLE, seed: int = 0,
             depth: int = DEPTH) -> Sampling:
    """The settings checked: one model or more (MODELS, separated by commas), each once."""
    names = models.replace(",", " ").split() if isinstance(models, str) else list(models)
    if not names or len(set(names)) != len(names):
        raise InputError(f"MODELS={','.join(names)!r}: name the models whose runs are sampled, "
                         "each once, separated by commas (MODELS=bm25,minilm)")
    return Sampling(tuple(names), n, seed, depth)


def sampled_pools(place: Place, settings: Sampling, pools: Sequence[str] | None = None
                  ) -> list[str]:
    """The pools to sample: `pools` as given, else every pool of the corpus that holds a run
    of each model (none: one line naming the command that makes them)."""
    if pools:
        return list(pools)
    found = [pool for pool in pool_names(place.corpus_dir)
             if all(run_paths(place.runs_root, place.corpus, pool, m).parquet.exists()
                    for m in settings.models)]
    if not found:
        raise InputError(f"no pool of corpus {place.corpus} has runs of every model of "
                         f"MODELS={','.join(settings.models)}: search them first (make eval "
                         f"CORPUS={place.corpus} MODEL=<each>)")
    return found


def pool_qrels(place: Place, pool: str) -> pl.DataFrame:
    """The pool's citation qrels among its candidates (query, doc, rel), as eval scores them."""
    from pipeline.pools.build import load_pool

    _, candidates, qrels = load_pool(place.corpus_dir, pool)
    return qrels.filter(pl.col("doc").is_in(candidates["corpusid"].implode()))


def pool_runs(place: Place, pool: str, models: Sequence[str]) -> dict[str, pl.DataFrame]:
    """Each model's current run of the pool (query, doc, rank); a stale or missing one is
    one line naming its repair."""
    from pipeline.retrieval.runs import load_run

    return {model: load_run(place, pool, model).select("query", "doc", "rank")
            for model in models}


def _bytes(frame: pl.DataFrame) -> bytes:
    import pyarrow.parquet as pq

    buffer = BytesIO()
    pq.write_table(frame.to_arrow(), buffer, compression="zstd")
    return buffer.getvalue()


def sample_pool(place: Place, pool: str, settings: Sampling) -> pl.DataFrame:
    """Draw the pool's sample (sample.draw_sample) and write it with its manifest, unless the
    file holds these bytes already from the same settings and runs (then both are kept)."""
    qrels = pool_qrels(place, pool)
    ids = {"query": qrels["query"].dtype, "doc": qrels["doc"].dtype}
    runs = {model: run.cast(ids)  # the ids as the qrels type them (runs may differ)
            for model, run in pool_runs(place, pool, settings.models).items()}
    sample = draw_sample(pool, qrels, runs, settings.n, settings.seed, settings.depth)
    path = sample_path(place.runs_root, place.corpus, pool)
    record = judgments_manifest(path)
    data = _bytes(sample)
    inputs = {model: fingerprint(run_paths(place.runs_root, place.corpus, pool, model).parquet)
              for model in settings.models}
    parameters = settings.parameters()
    try:
        made = read_json(record) if record.exists() else {}
    except InputError:
        made = {}
    if (path.exists() and path.read_bytes() == data and made.get("parameters") == parameters
            and made.get("inputs") == inputs):
        return sample
    record.unlink(missing_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    drawn = int(sample["sampled"].sum())
    write_json(manifest(SAMPLE_STAGE, parameters, corpus=place.corpus, pool=pool,
                        inputs=inputs, outputs={path.name: fingerprint(path)},
                        counts={"frame": sample.height, "drawn": drawn,
                                "queries": sample["query"].n_unique(),
                                "pairs": pairs_digest(pairs_to_judge(sample))}), record)
    return sample


JUDGED_SCHEMA = {"pool": pl.String, "queries": pl.Int64, "frame": pl.Int64, "drawn": pl.Int64,
                 "graded": pl.Int64, "ungraded": pl.Int64, "unjudged": pl.Int64,
                 "asked": pl.Int64, "recorded": pl.Int64, "judgments": pl.String}


def judge_corpus(place: Place, settings: Sampling, judge: Assessor,
                 pools: Sequence[str] | None = None, concurrency: int = CONCURRENCY,
                 progress: bool = True) -> pl.DataFrame:
    """make judge: each pool's sample drawn and written, its drawn pairs judged by `judge`
    (an api assessor's answers in the corpus's log: a pair shared by nested pools is asked
    once) and the pool's judgments written. One row per pool (JUDGED_SCHEMA)."""
    rows = []
    for pool in sampled_pools(place, settings, pools):
        sample = sample_pool(place, pool, settings)
        pairs = pairs_to_judge(sample)
        judged = judge_pool(place.runs_root, place.corpus_dir, place.corpus, pool, pairs, judge,
                            concurrency, progress)
        counts = judged.counts()
        rows.append({"pool": pool, "queries": sample["query"].n_unique(),
                     "frame": sample.height, "drawn": pairs.height,
                     "graded": counts["graded"], "ungraded": counts["ungraded"],
                     "unjudged": counts["unjudged"], "asked": judged.asked,
                     "recorded": judged.recorded, "judgments": judge.file_name})
    return pl.DataFrame(rows, schema=JUDGED_SCHEMA)


def judging_page(place: Place, settings: Sampling, pools: Sequence[str] | None = None) -> Path:
    """make judge-page: the judging page of every sampled pool's drawn pairs (each pair once:
    nested pools share theirs), written to layout.judging_page_path; its labels file is read
    back by JUDGE=file:<labels.tsv> with the same settings."""
    samples = [sample_pool(place, pool, settings)
               for pool in sampled_pools(place, settings, pools)]
    pairs = pl.concat([pairs_to_judge(s) for s in samples]).unique().sort("query", "doc")
    if not pairs.height:
        raise InputError(f"corpus {place.corpus}: the samples hold no pair to judge (every "
                         "candidate the models rank high is cited or judged): nothing to "
                         "write")
    ids = pl.concat([pairs["query"], pairs["doc"].cast(pairs["query"].dtype)])
    out = judging_page_path(place.runs_root, place.corpus)
    write_page(pairs, paper_texts(place.corpus_dir, ids), out,
               title=f"Judging {place.corpus}: {pairs.height} pairs")
    return out


# ---- what the report reads back ---------------------------------------------------------------
@dataclass(frozen=True)
class JudgedPool:
    """One pool's sample and the judgments of it by one assessor, as the report counts them."""

    pool: str
    models: tuple[str, ...]
    sample: pl.DataFrame
    judgments: pl.DataFrame  # query, doc, grade
    assessor: str  # its name (api:<model>, standin:<seed>, file:<labels>)
    file_name: str  # the judgments' file stem
    stand_in: bool
    qrels: pl.DataFrame
    runs: dict[str, pl.DataFrame]


def judged_pools(place: Place, pools: Sequence[str]) -> list[JudgedPool]:
    """Every (pool of `pools`, assessor) whose sample and judgments are whole and of the same
    pairs, with the pool's qrels and the sampled models' runs; judgments of another sample,
    or damaged, are left out with a log line (judge again)."""
    found = []
    for pool in pools:
        path = sample_path(place.runs_root, place.corpus, pool)
        record = judgments_manifest(path)
        if not (path.exists() and record.exists()):
            continue
        made = read_json(record)
        if made.get("outputs", {}).get(path.name, {}).get("sha256") != \
                hashlib.sha256(path.read_bytes()).hexdigest():
            log.warning(f"[report] {path}: its bytes differ from its manifest's: left out "
                        "(make judge draws it again)")
            continue
        sample = pl.read_parquet(path)
        digest = pairs_digest(pairs_to_judge(sample))
        models = tuple(made["parameters"]["models"])
        for judged in judgments_files(place.runs_root, place.corpus, pool):
            stem = judgments_manifest(judged).name.removesuffix(f".{MANIFEST}")
            try:
                frame = read_judgments(judged)
                described = read_json(judgments_manifest(judged))
            except InputError as exc:
                log.warning(f"[report] {judged}: left out ({exc})")
                continue
            if described.get("parameters", {}).get("pairs") != digest:
                log.warning(f"[report] {judged}: judgments of another sample of {pool}: left "
                            "out (make judge with the sample's settings judges it again)")
                continue
            found.append(JudgedPool(pool, models, sample, frame.select("query", "doc", "grade"),
                                    described.get("assessor", stem), stem,
                                    bool(described.get("stand_in")), pool_qrels(place, pool),
                                    pool_runs(place, pool, models)))
    return found
