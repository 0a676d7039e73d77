"""The judging stages over a corpus's pools (docs/judging.md): draw each pool's sample from
the named models' runs and write it (layout.sample_path, its manifest beside it), judge its
drawn pairs and write the pool's judgments (`judge_corpus`: make judge, pipeline.judge);
write the judging page of every pool's drawn pairs (`judging_page`: make judge-page); and
read back what the report counts (`judged_pools`).

Each sampling setting (MODELS, SAMPLE, SAMPLE_SEED, JUDGE_DEPTH: `Sampling`) has a folder of
its own in each pool (layout.judging_folder, named by the settings' digest: `Sampling.name`),
holding its sample and the judgments made of it, so judging with other settings (or a run of
them that fails) never replaces an earlier sample nor leaves its judgments "of another
sample". The one folder of the layout before (`<pool>/judgments/` itself) is still read, and
moved into its settings' folder when they are judged again (`_move_old_layout`).

A sample is made from the pool's citation qrels (those of its candidates, as eval scores
them) and the current runs of the models: its manifest records the models, SAMPLE, the seed,
the depth and the runs' sha256, so the same inputs keep the file and its manifest as they are
(byte-identical), and a pool whose runs changed is sampled again (in the same folder).
Judgments are counted only while their manifest's pairs are their sample's
(judgments.pairs_digest): the report never counts judgments of another sample, and says in its
own text which files it left out and why (`judged_pools`' `LeftOut`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import file_problem, fingerprint
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.manifests import manifest
from pipeline.core.repair import Placeholder, Repair
from pipeline.judging.assessor import Assessor
from pipeline.judging.judgments import (
    Judged,
    judge_pool,
    outside,
    pairs_digest,
    paper_texts,
    read_judgments,
)
from pipeline.judging.page import query_texts, write_page
from pipeline.judging.sample import DEPTH, draw_sample, pairs_to_judge
from pipeline.layout import (
    JUDGING_SAMPLE,
    JUDGMENTS,
    MANIFEST,
    TABLE_SUFFIX,
    Place,
    judging_folder,
    judging_folders,
    judging_page_path,
    judgments_files,
    judgments_manifest,
    pool_names,
    run_paths,
    sample_path,
    sampling_name,
    table_file,
)
from pipeline.roots import where

log = logging.getLogger(__name__)

SAMPLE_STAGE = "judge-sample"
PAGE_STAGE = "judge-page"
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

    @property
    def name(self) -> str:
        """Its folder's name in each pool (layout.sampling_name): the sha256 of the settings,
        the models sorted (a sample is drawn from the union of their top ranks)."""
        key = {**self.parameters(), "models": sorted(self.models)}
        return sampling_name(hashlib.sha256(json.dumps(key, sort_keys=True).encode())
                             .hexdigest())


def recorded_sampling(parameters: Any) -> Sampling | None:
    """The Sampling a sample's manifest records (its `parameters`), or None when they are not
    one (a damaged manifest)."""
    try:
        return sampling(parameters["models"], int(parameters["sample"]),
                        int(parameters["seed"]), int(parameters["depth"]))
    except (KeyError, TypeError, ValueError, InputError):
        return None


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


def _move_old_layout(place: Place, pool: str, settings: Sampling) -> None:
    """A pool judged before samplings had folders, with these settings (its sample's manifest
    says): its sample and judgments moved into the settings' folder, where this stage checks
    them as its own (the data files first, then the manifests that vouch for them)."""
    old = judging_folder(place.runs_root, place.corpus, pool)
    new = judging_folder(place.runs_root, place.corpus, pool, settings.name)
    record = judgments_manifest(old / table_file(JUDGING_SAMPLE))
    try:
        made = read_json(record) if record.is_file() else {}
    except InputError:
        return  # unreadable: verify names it
    recorded = recorded_sampling(made.get("parameters"))
    if recorded is None or recorded.name != settings.name or new.exists():
        return
    new.mkdir(parents=True)
    files = [p for p in sorted(old.iterdir()) if p.is_file()
             and p.name.endswith((TABLE_SUFFIX, f".{MANIFEST}"))]
    for path in sorted(files, key=lambda p: p.name.endswith(f".{MANIFEST}")):
        path.rename(new / path.name)
    log.info(f"[judge] {pool}: the sample and judgments of {old} moved to {new} (a folder per "
             "sampling setting)")


def draw_pool_sample(place: Place, pool: str, settings: Sampling) -> pl.DataFrame:
    """The pool's sample (sample.draw_sample) from its qrels and the models' runs, written
    nowhere."""
    qrels = pool_qrels(place, pool)
    ids = {"query": qrels["query"].dtype, "doc": qrels["doc"].dtype}
    runs = {model: run.cast(ids)  # the ids as the qrels type them (runs may differ)
            for model, run in pool_runs(place, pool, settings.models).items()}
    return draw_sample(pool, qrels, runs, settings.n, settings.seed, settings.depth)


def sample_pool(place: Place, pool: str, settings: Sampling,
                sample: pl.DataFrame | None = None) -> pl.DataFrame:
    """Draw the pool's sample (or take `sample`, drawn by draw_pool_sample) and write it with
    its manifest, unless the file holds these bytes already from the same settings and runs
    (then both are kept)."""
    _move_old_layout(place, pool, settings)
    if sample is None:
        sample = draw_pool_sample(place, pool, settings)
    path = sample_path(place.runs_root, place.corpus, pool, settings.name)
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
    once) and the pool's judgments of the sample written beside it. One row per pool
    (JUDGED_SCHEMA)."""
    rows = []
    chosen = sampled_pools(place, settings, pools)
    for pool in chosen:  # before any pair is asked: judgments compared nowhere cost nothing
        if mixed := mixed_depths(place, pool, settings.models):
            raise InputError(f"{place.corpus}/{pool}: the runs of MODELS are of different "
                             f"depths ({mixed}): a sample of them would be compared nowhere "
                             "(the report compares no runs of two depths); search them again "
                             "at one depth (K), then make judge")
    drawn = {pool: draw_pool_sample(place, pool, settings) for pool in chosen}
    _check_labels(judge, settings, drawn)
    for pool, fresh in drawn.items():
        sample = sample_pool(place, pool, settings, fresh)
        pairs = pairs_to_judge(sample)
        judged = _judge_sample(place, pool, settings, pairs, judge, concurrency, progress)
        counts = judged.counts()
        rows.append({"pool": pool, "queries": sample["query"].n_unique(),
                     "frame": sample.height, "drawn": pairs.height,
                     "graded": counts["graded"], "ungraded": counts["ungraded"],
                     "unjudged": counts["unjudged"], "asked": judged.asked,
                     "recorded": judged.recorded, "judgments": judge.file_name})
    return pl.DataFrame(rows, schema=JUDGED_SCHEMA)


def _check_labels(judge: Assessor, settings: Sampling, samples: dict[str, pl.DataFrame]
                  ) -> None:
    """A labels file (JUDGE=file:) whose labels name no pair of any of the `samples` is
    refused before anything is written: its labels were drawn with other settings. Those
    outside the samples are counted in a warning (each pool's judgments count theirs)."""
    labelled = judge.labelled
    if not labelled:
        return
    pairs = {(str(query), str(doc)) for sample in samples.values()
             for query, doc in pairs_to_judge(sample).select("query", "doc").iter_rows()}
    unused = outside(judge, pairs) or 0
    drawn = (f"the samples of MODELS={','.join(settings.models)} SAMPLE={settings.n} "
             f"SAMPLE_SEED={settings.seed} JUDGE_DEPTH={settings.depth} in {len(samples)} "
             "pools")
    if unused == len(labelled):
        raise InputError(f"{judge.name}: none of its {len(labelled)} labels names a pair of "
                         f"{drawn}: the labels were probably drawn with other settings "
                         "(SAMPLE, MODELS, POOL): give those of the judging page they were "
                         "made on; nothing written")
    if unused:
        log.warning(f"[judge] {judge.name}: {unused} of its {len(labelled)} labels name no "
                    f"pair of {drawn}: were they drawn with other settings (SAMPLE, MODELS, "
                    "POOL)? Those are not used")


def _judge_sample(place: Place, pool: str, settings: Sampling, pairs: pl.DataFrame,
                  assessor: Assessor, concurrency: int, progress: bool) -> Judged:
    """Judge a pool's drawn `pairs` by `assessor` (an api assessor's answers in its corpus's
    log) and write the judgments in the sampling's folder, the settings in their manifest
    (what `make verify` names the repair from)."""
    return judge_pool(place.runs_root, place.corpus_dir, place.corpus, pool, pairs, assessor,
                      concurrency, progress, settings.name, settings.parameters())


def judging_page(place: Place, settings: Sampling, pools: Sequence[str] | None = None) -> Path:
    """make judge-page: the judging page of every sampled pool's drawn pairs (each pair once:
    nested pools share theirs), written to layout.judging_page_path; its labels file is read
    back by JUDGE=file:<labels.tsv> with the same settings."""
    samples = [sample_pool(place, pool, settings)
               for pool in sampled_pools(place, settings, pools)]
    drawn = {s["pool"][0]: pairs_to_judge(s) for s in samples if s.height}
    pairs = pl.concat([pairs_to_judge(s) for s in samples]).unique().sort("query", "doc")
    if not pairs.height:
        raise InputError(f"corpus {place.corpus}: the samples hold no pair to judge (every "
                         "candidate the models rank high is cited or judged): nothing to "
                         "write")
    queries = query_texts(place.corpus_dir, drawn)  # a collection's: their own text
    ids = pairs["doc"].cast(pairs["query"].dtype)
    if queries is None:  # the queries are papers of the corpus
        ids = pl.concat([pairs["query"], ids])
    out = judging_page_path(place.runs_root, place.corpus)
    record = judgments_manifest(out)
    parameters = settings.parameters()
    try:
        made = read_json(record) if record.exists() else {}
    except InputError:
        made = {}
    before = out.read_bytes() if out.exists() else None
    if made.get("parameters") != parameters or before is None:
        record.unlink(missing_ok=True)  # the page is replaced: its manifest first
    digest = write_page(pairs, paper_texts(place.corpus_dir, ids), out,
                        title=f"Judging {place.corpus}: {pairs.height} pairs", queries=queries)
    if (record.exists() and out.read_bytes() == before
            and made.get("outputs", {}).get(out.name) == fingerprint(out)):
        return out  # the same page of the same settings: its manifest kept, byte for byte
    write_json(manifest(PAGE_STAGE, parameters, corpus=place.corpus,
                        outputs={out.name: fingerprint(out)},
                        counts={"pairs": pairs.height, "pools": len(samples)},
                        digest=digest, sampling=settings.name), record)
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
    sampling: str = ""  # the sampling's folder (layout.sampling_name); "" the old layout's


@dataclass(frozen=True)
class LeftOut:
    """A sample or judgments file the report does not count, why, and what to run."""

    path: Path
    why: str
    repair: Repair


def sampling_repair(corpus: str, parameters: Any, judge: Any = None,
                    target: str = "judge") -> Repair:
    """`make judge` (or `target`: judge-page) with the sampling settings a manifest records,
    and JUDGE as `judge` (a judgments manifest's `parameters.assessor`: judge_variables);
    placeholders for what is not recorded."""
    settings = recorded_sampling(parameters)
    values = (("MODELS", ",".join(settings.models)), ("SAMPLE", str(settings.n)),
              ("SAMPLE_SEED", str(settings.seed)), ("JUDGE_DEPTH", str(settings.depth))
              ) if settings else (("MODELS", Placeholder("the models sampled")),)
    judged = judge_variables(judge) if target == "judge" else ()
    return Repair(target, corpus, variables=(*values, *judged))


def judge_variables(described: Any) -> tuple[tuple[str, str], ...]:
    """JUDGE (and JUDGE_URL) as a judgments manifest or a log records its assessor
    (assessor.describe()); a placeholder where the record cannot say (a person's labels file,
    named by its name only; an endpoint shown with hidden parts)."""
    made = described if isinstance(described, dict) else {}
    if made.get("kind") == "api" and isinstance(made.get("model"), str):
        endpoint = made.get("endpoint")
        url = endpoint if isinstance(endpoint, str) and "<" not in endpoint else \
            Placeholder("the chat endpoint")
        return ("JUDGE", f"api:{made['model']}"), ("JUDGE_URL", url)
    if made.get("kind") == "standin" and isinstance(made.get("seed"), int):
        return (("JUDGE", f"standin:{made['seed']}"),)
    if made.get("kind") == "file":
        return (("JUDGE", Placeholder("file:labels.tsv, the labels file judged")),)
    return (("JUDGE", Placeholder("the assessor")),)


def folder_repair(folder: Path, corpus: str, judgments: Path | None = None) -> Repair:
    """The repair of a sample or judgments file in a judging `folder` (either layout): make
    judge with the sampling its sample's manifest records (else one of its judgments'
    manifests: `sampling`), and JUDGE as `judgments`' manifest records it (else the first
    judgments' of the folder: judging again judges the sample again); first, where the runs
    the sample was drawn from are of different depths now (which make judge refuses), the
    search that brings them to one (`depth_repair`)."""
    def read(path: Path) -> dict[str, Any]:
        try:
            return read_json(path) if path.is_file() else {}
        except InputError:
            return {}

    sample = read(judgments_manifest(folder / table_file(JUDGING_SAMPLE)))
    others = [read(judgments_manifest(p)) for p in sorted(folder.glob(f"*{TABLE_SUFFIX}"))
              if p.name != table_file(JUDGING_SAMPLE)]
    parameters = sample.get("parameters") or next(
        (m["sampling"] for m in others if m.get("sampling")), None)
    judged = read(judgments_manifest(judgments)) if judgments else {}
    assessors = [m.get("parameters", {}).get("assessor") for m in (judged, *others)]
    pool_folder = (folder if folder.name == JUDGMENTS else folder.parent).parent
    return depth_repair(pool_folder.parent.parent, corpus, pool_folder.name, sample) or \
        sampling_repair(corpus, parameters, next(filter(None, assessors), None))


def _sample_of(place: Place, pool: str, folder: Path, left: list[LeftOut]
               ) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    """A sampling folder's sample and its manifest, when both are whole; else None, what is
    wrong appended to `left`."""
    path = folder / sample_path(place.runs_root, place.corpus, pool).name
    record = judgments_manifest(path)
    if not (path.exists() and record.exists()):
        if any(judgments_files(place.runs_root, place.corpus, pool, _sampling_of(folder))):
            left.append(LeftOut(path, "judgments without their sample (or its manifest)",
                                folder_repair(folder, place.corpus)))
        return None
    try:
        made = read_json(record)
    except InputError as exc:
        left.append(LeftOut(path, f"its manifest cannot be read ({exc})",
                            folder_repair(folder, place.corpus)))
        return None
    if made.get("outputs", {}).get(path.name, {}).get("sha256") != \
            hashlib.sha256(path.read_bytes()).hexdigest():
        left.append(LeftOut(path, "its bytes differ from its manifest's (changed or damaged)",
                            folder_repair(folder, place.corpus)))
        return None
    if reasons := changed_runs(place.runs_root, place.corpus, pool, made):
        left.append(LeftOut(path, f"stale: {reasons[0]}",
                            folder_repair(folder, place.corpus)))
        return None
    if mixed := mixed_depths(place, pool, list(made.get("inputs") or {})):
        left.append(LeftOut(path, f"its runs are of different depths ({mixed}): no model is "
                            "compared with one of another depth",
                            folder_repair(folder, place.corpus)))
        return None
    return pl.read_parquet(path), made


def changed_runs(runs_root: Path, corpus: str, pool: str, made: dict[str, Any],
                 deep: bool = False) -> list[str]:
    """Why a pool's sample (its manifest `made`) is stale: a run it was drawn from (its
    `inputs`, model -> fingerprint) is gone or changed since; make judge draws it again. What
    verify calls STALE and what the report leaves out."""
    reasons = []
    for model, recorded in sorted((made.get("inputs") or {}).items()):
        run = run_paths(runs_root, corpus, pool, model).parquet
        if isinstance(recorded, dict) and file_problem(run, recorded, deep):
            reasons.append(f"the run of {model} it was drawn from is gone or changed since")
    depths = run_depths(runs_root, corpus, pool, sorted(made.get("inputs") or {}))
    if reasons and len(set(depths.values())) > 1:  # what make judge would refuse: said
        reasons = [f"{reason} (its runs are of different depths now: "
                   f"{', '.join(f'{m} {d}' for m, d in depths.items())})" for reason in reasons]
    return reasons


def mixed_depths(place: Place, pool: str, models: Sequence[str]) -> str | None:
    """The models' cuts in `pool` in words ("bm25 100, random 500") when their runs are cut
    at more than one depth (`run_depths`; a run whose manifest is missing or records none is
    not counted: verify names it); None when they compare (one depth, or complete runs)."""
    depths = run_depths(place.runs_root, place.corpus, pool, models)
    if len(set(depths.values())) < 2:
        return None
    return ", ".join(f"{model} {depth}" for model, depth in depths.items())


EVERY_CANDIDATE = "every candidate"  # the cut of a complete run (runs.RunCut.complete)


def run_depths(runs_root: Path, corpus: str, pool: str, models: Sequence[str]
               ) -> dict[str, int | str]:
    """model -> where its run in `pool` cut its lists, for the runs whose manifest records it
    (runs.run_cut): its depth, or EVERY_CANDIDATE for a complete run (one that ranks every
    candidate of its pool compares with any depth that reaches them, as in the report)."""
    from pipeline.retrieval.runs import run_cut

    depths: dict[str, int | str] = {}
    for model in sorted(models):
        manifest_path = run_paths(runs_root, corpus, pool, model).manifest
        try:
            cut = run_cut(read_json(manifest_path)) if manifest_path.is_file() else None
        except InputError:
            cut = None  # an unreadable manifest: verify names it
        if cut is not None and cut.complete:
            depths[model] = EVERY_CANDIDATE
        elif cut is not None and cut.depth is not None:
            depths[model] = cut.depth
    return depths


def depth_repair(runs_root: Path, corpus: str, pool: str, made: dict[str, Any]
                 ) -> Repair | None:
    """Where the runs a sample was drawn from (its manifest `made`) are of different depths
    now, `make judge` refuses them: the repair is the step before it, the search of one model
    again at the depth the others share (make eval's K; for complete runs, a K that reaches
    the pool's candidates). The depth is the one of the runs the sample was drawn from (those
    that kept their bytes; else the depth most runs have, complete first, then the deeper),
    else the next where every run of another depth is one make eval searches (an imported
    run is not). A run searched again at its old depth ranks as before, so the sample counts
    again; else make judge, which then accepts the runs, draws it again (one model at a time:
    verify names the next). Where no search brings them to one depth, what to do, said. None
    where the runs are of one depth (make judge repairs it)."""
    from pipeline.retrieval.runs import run_repair, searched_pools

    recorded = made.get("inputs") or {}
    depths = run_depths(runs_root, corpus, pool, sorted(recorded))
    if len(set(depths.values())) < 2:
        return None
    kept = {depths[model] for model, fp in recorded.items() if model in depths
            and isinstance(fp, dict)
            and not file_problem(run_paths(runs_root, corpus, pool, model).parquet, fp)}
    counts = {d: list(depths.values()).count(d) for d in depths.values()}
    targets = sorted(counts, key=lambda d: (
        not (len(kept) == 1 and d in kept), -counts[d], d != EVERY_CANDIDATE,
        -(d if isinstance(d, int) else 0)))
    for target in targets:
        behind = [m for m in depths if depths[m] != target]
        k = target if isinstance(target, int) else _reaching(runs_root, corpus, pool, behind)
        if k is None or any(pool not in searched_pools(runs_root, corpus, m) for m in behind):
            continue
        repair = run_repair(corpus, behind[0], runs_root, pool)
        return Repair(repair.target, corpus, repair.model, variables=(
            *(item for item in repair.variables if item[0] != "K"), ("K", str(k))))
    return Repair("", note="no search brings the sampled runs to one depth (an imported run's "
                  "lists are its own): import the run again cut at the others' depth, or "
                  "judge other MODELS")


def _reaching(runs_root: Path, corpus: str, pool: str, models: Sequence[str]) -> int | None:
    """The K at which each of `models`' runs in `pool` ranks every candidate (the most
    candidates their manifests count: runs.run_cut's rule); None where none records it."""
    found = []
    for model in models:
        try:
            counts = read_json(run_paths(runs_root, corpus, pool, model).manifest).get("counts")
        except InputError:
            continue
        candidates = counts.get("candidates") if isinstance(counts, dict) else None
        if isinstance(candidates, int) and not isinstance(candidates, bool):
            found.append(candidates)
    return max(found, default=None)


def _sampling_of(folder: Path) -> str | None:
    """The sampling name of a judging folder (None: the old layout's `judgments/`)."""
    from pipeline.layout import JUDGMENTS

    return None if folder.name == JUDGMENTS else folder.name


def judged_pools(place: Place, pools: Sequence[str], left_out: list[LeftOut] | None = None
                 ) -> list[JudgedPool]:
    """Every (pool of `pools`, sample, assessor) whose sample and judgments are whole and of
    the same pairs, with the pool's qrels and the sampled models' runs, in every sampling
    folder of the pool (the old layout's included). Judgments of another sample, or damaged,
    are left out: a log line each, and a LeftOut appended to `left_out` (the report says
    them)."""
    found: list[JudgedPool] = []
    left = left_out if left_out is not None else []
    shown = where(place.corpus_dir.parent, place.index_root, place.runs_root)
    for pool in pools:
        folders = judging_folders(place.runs_root, place.corpus, pool)
        names = {folder.name for folder in folders}
        for folder in folders:
            sampling_folder = _sampling_of(folder)
            kept = len(left)
            read = _sample_of(place, pool, folder, left)
            if read is not None and sampling_folder is None:
                settings = recorded_sampling(read[1].get("parameters"))
                if settings is not None and settings.name in names:
                    continue  # the old layout's sample judged again in its own folder: that one
            if read is not None:
                found += _judged_of(place, pool, sampling_folder, *read, left)
            elif len(left) > kept:  # the sample is left out: so are the judgments of it
                left += [LeftOut(judged, "its sample is left out", left[kept].repair)
                         for judged in judgments_files(place.runs_root, place.corpus, pool,
                                                       sampling_folder)]
            for item in left[kept:]:
                log.warning(f"[report] {item.path}: left out: {item.why} "
                            f"({item.repair.command(shown)})")
    return found


def _judged_of(place: Place, pool: str, folder: str | None, sample: pl.DataFrame,
               made: dict[str, Any], left: list[LeftOut]) -> list[JudgedPool]:
    """The judgments of one sample that count, the rest appended to `left`."""
    digest = pairs_digest(pairs_to_judge(sample))
    models = tuple(made["parameters"]["models"])
    found = []
    for judged in judgments_files(place.runs_root, place.corpus, pool, folder):
        stem = judgments_manifest(judged).name.removesuffix(f".{MANIFEST}")
        try:
            frame = read_judgments(judged)
            described = read_json(judgments_manifest(judged))
        except InputError as exc:
            left.append(LeftOut(judged, str(exc).removeprefix(f"{judged}: "),
                                folder_repair(judged.parent, place.corpus, judged)))
            continue
        name = described.get("assessor", stem)
        if described.get("parameters", {}).get("pairs") != digest:
            left.append(LeftOut(judged, "judgments of another sample of the pool (drawn with "
                                "other settings, or from runs that changed since)",
                                folder_repair(judged.parent, place.corpus, judged)))
            continue
        found.append(JudgedPool(pool, models, sample, frame.select("query", "doc", "grade"),
                                name, stem, bool(described.get("stand_in")),
                                pool_qrels(place, pool), pool_runs(place, pool, models),
                                folder or ""))
    return found
