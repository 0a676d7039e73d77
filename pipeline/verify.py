"""`python -m pipeline verify [folder...]`: is every artifact whole, and made from its current
inputs? One line per problem, each naming the command that repairs it:

- CORRUPT: a file whose size or sha256 differs from its manifest, or a damaged manifest;
- PARTIAL: files without the manifest that is written last (a stage stopped half-way);
- STALE:   an artifact made from an input that has changed since (`pipeline.core.inputs.changed`:
           a pool from an older prefiltered.parquet, a run from older embeddings, a report
           from runs, evaluations or judged samples searched, scored or drawn again, or from
           one verify names (one it counted, not one it left out: `_reports_of_named`), ...;
           a pool whose EXCLUDE list changed, by the rule the stages apply: `list_problem`;
           a run or vectors imported from a file whose bytes changed since: `_changed_source`);
- ORPHAN:  an embedding part that no store manifest lists (a kill between its rename and the
           manifest's update);
- DEBRIS:  a temporary left by a killed process.

The judging artifacts (docs/judging.md) are checked as the others: a pool's samples and
judgments, and a corpus's judging page, against their manifests (a sample is STALE when a
run it was drawn from changed since), each repaired by `make judge` (`make judge-page`) with
the settings its manifest records (judging.stage.folder_repair). An assessor's log
(`<assessor>.jsonl`) grows by one line per pair and has no manifest to hold a checksum: its
form is checked (`_log_problems`): its first line describes an assessor, every other line
is a judgment, the last one whole.

What `make retire-pool` moved into a corpus's retired/ folders is skipped: no stage reads it.

Verify always reads the whole data roots and reports the problems that lie under the folders
asked for, so `verify corpora/demo/pools` finds exactly what `verify` finds there.

Each problem carries its repair as a value (pipeline/core/repair.py); a line shows it as the
command to type for these data roots (DATA=..., or each root: `pipeline.roots.where`), so that
running it, once, repairs the data verify read and not the checkout's own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.core.atomic import is_stale_temporary, is_temporary
from pipeline.core.checksums import file_problem, read_only, sha256_file
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.core.inputs import KINDS, Roots, changed
from pipeline.core.logs import counted
from pipeline.core.repair import Placeholder, Repair, Where
from pipeline.core.textfiles import SpecialFile, open_regular
from pipeline.corpus.manifest import VOUCHED_BY, corpus_repair, download_repair, raw_repair
from pipeline.encoding.store import store_repair
from pipeline.evaluation.evaluate import RESULTS_REPAIR, not_current
from pipeline.judging.files import (
    MOVE_LOG,
    described_assessor,
    head_problem,
    line_repair,
    log_lines,
    parse_record,
)
from pipeline.judging.judgments import LOG_VERSION
from pipeline.judging.stage import SAMPLE_STAGE, changed_runs, folder_repair, sampling_repair
from pipeline.layout import (
    ANALYSED,
    BM25_INDEX,
    EMBEDDINGS,
    IMPORT_RUN,
    JUDGING_PAGE,
    MANIFEST,
    REPORT_PAGE_SUFFIX,
    RUN_EVALUATION,
    RUN_METRICS,
    RUN_TABLE,
    TABLE_SUFFIX,
    Place,
    artifact_kind,
    is_retired,
    judging_folders,
    judging_logs,
    judging_page_path,
    judgments_manifest,
    manifest_globs,
    parse_pool_name,
    pool_names,
    pools_dir,
    report_corpus,
    report_manifest,
    reports_dir,
    run_file_parts,
    run_files,
    run_paths,
    store_parts_glob,
    table_file,
)
from pipeline.pools.build import list_problem, pool_repair, retire_repair, validation_pools
from pipeline.pools.exclusions import NO_LIST, read_list
from pipeline.readers import SOURCES
from pipeline.report.provenance import recorded_repair
from pipeline.retrieval.bm25.lucene import index_repair
from pipeline.retrieval.bm25.store import store_repair as analysed_repair
from pipeline.retrieval.runs import model_problem, recorded_run_repair, run_repair
from pipeline.roots import where

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Problem:
    kind: str  # CORRUPT, PARTIAL, STALE, ORPHAN, DEBRIS
    path: Path
    why: str
    repair: Repair

    def line(self, where: Where) -> str:
        """`<KIND> <path>: <why>; repair: <command>`, the command for the data `where` names."""
        return f"{self.kind} {self.path}: {self.why}; repair: {self.repair.command(where)}"


def _files(info: dict, kind: str) -> dict[str, dict]:
    """name -> fingerprint of the files a manifest vouches for."""
    if kind == "store":  # its parts, and the query vectors imported with them (if any)
        queries = (info.get("config", {}).get("imported") or {}).get("queries")
        return {part["file"]: part for part in [*info.get("parts", []), *filter(None, [queries])]}
    if kind == "corpus":
        return {name: fp for section in info.values() if isinstance(section, dict)
                for name, fp in section.get("outputs", {}).items()}
    if kind == "download":  # download.json: each dataset's files, in its folder
        return {f"{dataset}/{record['name']}": record
                for dataset, entry in info.get("datasets", {}).items()
                for record in entry.get("files", [])}
    return dict(info.get("outputs", {}))


def _inputs(info: dict, kind: str) -> dict[str, str]:
    """The recorded inputs under a data root (`corpora/...`). A corpus's ingest records its
    raw shards by their names in the raw folder instead (S2AG's as `papers/<file>`), which
    ingest itself compares; they are not data-root labels."""
    if kind == "corpus":
        return {k: v for section in info.values() if isinstance(section, dict)
                for k, v in section.get("inputs", {}).items()
                if k.partition("/")[0] in KINDS}
    if kind == "judging":  # a sample's runs, by model: _changed_runs
        return {}
    return info.get("inputs", {})




def _classify(path: Path, data: Roots) -> tuple[str, Repair] | None:
    """(kind, repair) of the artifact a manifest at `path` describes (layout.artifact_kind;
    an analysed-text store is checked as a store)."""
    kind = artifact_kind(path, data.corpora, data.runs, SOURCES)
    if kind is None:
        return None
    if kind == "judging":
        return kind, _judging_repair(path, data)
    if kind in ("pool", "report"):  # rebuilt with the settings their manifests record
        try:
            info = read_json(path)
        except InputError:
            info = None
        return kind, (pool_repair(path.parent.parent.parent, path.parent.name, info)
                      if kind == "pool" else _report_repair(path, info, data))
    repairs = {
        "corpus": lambda: corpus_repair(path.parent),
        "store": lambda: store_repair(path.parent),
        "analysed": lambda: analysed_repair(path.parent),
        "index": lambda: index_repair(path.parent),
        "tuning": lambda: run_repair(path.parent.parent.name, "bm25"),
        "run": lambda: _run_repair(path, data),
        "results": lambda: RESULTS_REPAIR,
        "raw": lambda: raw_repair(path.parent),
        "download": lambda: download_repair(path.parent),
    }
    return ("store" if kind == "analysed" else kind), repairs[kind]()


def _report_repair(path: Path, info: dict | None, data: Roots) -> Repair:
    """make report with the settings the report's manifest records; when no pool of the
    corpus is drawn without its EXCLUDE list any more (retired or removed: make report would
    refuse the list), the list to report is left to the user to name."""
    corpus = report_corpus(path)
    repair = recorded_repair(corpus, info)
    exclude = dict(repair.variables).get("EXCLUDE")
    if not exclude or exclude == NO_LIST:
        return repair
    try:
        tag = read_list(exclude).tag
    except InputError:
        return repair  # the list is gone or unreadable: make report says so
    if any(parse_pool_name(pool).exclusion == tag for pool in pool_names(data.corpora / corpus)):
        return repair
    return replace(repair, variables=tuple(
        (name, Placeholder("a list whose pools remain, or none") if name == "EXCLUDE" else value)
        for name, value in repair.variables), note="no pool drawn without its list is left, "
                   "retired or removed: make report cannot write it again as it was")


def _judging_repair(path: Path, data: Roots) -> Repair:
    """make judge with the sampling and assessor a pool's sample or judgments record (make
    judge-page with the page's sampling, for the judging page)."""
    corpus = _corpus_of(path, data) or ""
    if path.name == f"{JUDGING_PAGE}.{MANIFEST}":
        try:
            recorded = read_json(path).get("parameters")
        except InputError:
            recorded = None
        return sampling_repair(corpus, recorded, target="judge-page")
    stem = path.name.removesuffix(f".{MANIFEST}")
    return folder_repair(path.parent, corpus, path.with_name(table_file(stem)))


def _run_repair(path: Path, data: Roots) -> Repair:
    """A run's repair from what its manifest records (an imported run is imported again from
    its source: recorded_run_repair); an evaluation's is scoring the run again (make eval)."""
    corpus, pool, model, suffix = run_file_parts(path)
    if suffix == RUN_EVALUATION or data.runs is None:
        return run_repair(corpus, model, data.runs, pool)
    return recorded_run_repair(data.runs, corpus, pool, model, data.indexes)


def _corpus_of(path: Path, data: Roots) -> str | None:
    """The corpus an artifact belongs to: the first folder under its data root."""
    for root in (data.corpora, data.indexes, data.runs):
        if root is not None and path.is_relative_to(root) and len(path.relative_to(root).parts) > 1:
            return path.relative_to(root).parts[0]
    return None


def _manifests(data: Roots) -> list[Path]:
    found = []
    for root in (data.corpora, data.indexes, data.runs):
        if root is None or not root.exists():
            continue
        for pattern in manifest_globs():
            found += [p for p in root.rglob(pattern)
                      if not any(is_temporary(parent) for parent in p.parents)
                      and not is_retired(p, root)]  # make retire-pool's: read by no stage
    return sorted(set(found))


def check_manifest(path: Path, data: Roots, deep: bool) -> list[Problem]:
    """Problems of the artifact that the manifest at `path` describes."""
    found = _classify(path, data)
    if found is None:
        return []
    kind, repair = found
    try:
        info = read_json(path)
    except InputError as exc:
        return [Problem("CORRUPT", path, exc.message.split(": ", 1)[-1], repair)]
    problems = []
    for name, expected in _files(info, kind).items():
        problem = file_problem(path.parent / name, expected, deep)
        if problem:
            problems.append(Problem("PARTIAL" if problem == "missing" else "CORRUPT",
                                    path.parent / name, problem, repair))
    corpus = report_corpus(path) if kind == "report" else _corpus_of(path, data)
    stale = changed(replace(data, corpus=corpus), _inputs(info, kind))
    if kind == "report" and not isinstance(info.get("inputs"), dict):
        stale.append("made before reports recorded what they were made from")
    if kind == "report":
        stale += _changed_lists(path, info) + _left_out_current(path, info, data)
    if kind == "run" and "k1" in info.get("details", {}):
        corpus_dir = data.corpora / path.parent.parent.name
        if info["details"].get("tuned_on") != validation_pools(corpus_dir, path.parent.name):
            stale.append("its pool's validation pools changed since (BM25 is tuned on them)")
    if kind == "judging":
        stale += _changed_runs(path, info, data, deep)
    if stale:
        problems.append(Problem("STALE", path, stale[0], repair))
    if deep:
        problems += _changed_source(path, info, kind, repair)
    changed_list = list_problem(info) if kind == "pool" else None
    if changed_list:  # the stages' own rule (check_pool): they skip it, retire-pool moves it
        problems.append(Problem("STALE", path.parent, changed_list,
                                retire_repair(path.parent.parent.parent, path.parent.name)))
    if kind in ("store", "run"):
        problems += _changed_model(path, info, kind, data)
    if kind == "store":
        listed = set(_files(info, kind))
        problems += [Problem("ORPHAN", p, "an embedding part no manifest lists (a stopped "
                             "run)", repair)
                     for p in sorted(path.parent.glob(store_parts_glob()))
                     if p.name not in listed]
    return problems


def _changed_runs(path: Path, info: dict, data: Roots, deep: bool) -> list[str]:
    """Why a pool's sample is stale (judging.stage.changed_runs, as the report asks)."""
    if info.get("stage") != SAMPLE_STAGE or data.runs is None:
        return []
    parts = path.relative_to(data.runs).parts  # <corpus>/<pool>/judgments/[<sampling>/]...
    return changed_runs(data.runs, parts[0], parts[1], info, deep)


def _changed_model(path: Path, info: dict, kind: str, data: Roots) -> list[Problem]:
    """A store whose model identity changed since it was embedded, and each run searched from
    such a store: STALE (runs.model_problem, which collect and the report ask too)."""
    corpus = _corpus_of(path, data)
    if data.indexes is None or corpus is None:
        return []
    found = model_problem(info, data.indexes, corpus, path.parent if kind == "store" else None)
    return [Problem("STALE", path, *found)] if found else []


def _in_temporary(path: Path, data: Roots) -> bool:
    """Whether `path` lies in a temporary under a data root (a folder a stage is writing, or
    a killed one's debris: a corpus or store being imported), `path` itself not counted."""
    for root in (data.corpora, data.indexes, data.runs):
        if root is not None and path.is_relative_to(root):
            return any(is_temporary(Path(part)) for part in path.relative_to(root).parent.parts)
    return False


def _imported_source(info: dict, kind: str) -> tuple[str, str] | None:
    """(source file, sha256) an import recorded: an imported run's (make import-run) or
    imported vectors' (make import-vectors); None for other artifacts, or a DataFrame's run."""
    if kind == "run" and info.get("stage") == IMPORT_RUN:
        details = info.get("details", {})
        found = details.get("source_path"), details.get("source_sha256")
    elif kind == "store":
        imported = info.get("config", {}).get("imported") or {}
        found = imported.get("source"), imported.get("sha256")
    else:
        return None
    return found if all(isinstance(value, str) for value in found) else None


def _changed_source(path: Path, info: dict, kind: str, repair: Repair) -> list[Problem]:
    """An import whose source file's bytes differ from the sha256 its manifest records:
    STALE, imported again over it (REPLACE=1, as an import asks for another source). A source
    that is gone or unreadable is no problem, only said: the import is a copy, which the
    stages check against its own manifest."""
    recorded = _imported_source(info, kind)
    if recorded is None:
        return []
    source, sha = recorded
    try:
        now = sha256_file(Path(source))
    except OSError as exc:
        gone = "is gone" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc})"
        log.info(f"[verify] {path}: the file it was imported from, {source}, {gone}; the "
                 "imported copy is checked and used as it is (not a problem)")
        return []
    if now == sha:
        return []
    return [Problem("STALE", path, "its source file changed since it was imported (its sha256 "
                    "differs from the one the manifest records)",
                    replace(repair, variables=(*repair.variables, ("REPLACE", "1"))))]


def _left_out_current(path: Path, info: dict, data: Roots) -> list[str]:
    """A report that left out a run (its manifest's `left_out`: an evaluation not current, a
    run not scored) whose evaluation is current now: STALE, since a report made now counts it.
    Its recorded inputs cannot say so when the repair made the same bytes again (a damaged run
    searched again the same way) or made a file it never read (the evaluation of a run not
    scored), so the reason collect left it out is asked again (evaluate.not_current)."""
    if data.runs is None or data.corpora is None:
        return []
    place = Place(data.corpora / report_corpus(path), data.indexes, data.runs)
    runs = dict.fromkeys(run_file_parts(Path(label))[1:3] for label in info.get("left_out") or ()
                         if label.startswith("runs/") and label.count("/") == 3)
    for pool, model in runs:  # its evaluation, or its run of no evaluation, left out
        try:
            if not_current(place, pool, model) is None:
                return [f"it left out the evaluation of {model} on {pool} as not current, "
                        "and it is current now"]
        except InputError:  # damaged, or its pool gone: still left out
            continue
    return []


def _changed_lists(path: Path, info: dict) -> list[str]:
    """A report whose TRAINING_SETS file (outside the data roots, its sha256 recorded as an
    import's source file's is) holds other bytes now: its leakage table is of the old list.
    A file gone is only said: make report would refuse it, naming it."""
    files = ((info.get("parameters") or {}).get("training_sets")) or {}
    reasons = []
    for model, sha in sorted((info.get("lists") or {}).items()):
        listed = files.get(model) if isinstance(files, dict) else None
        if not isinstance(listed, str):
            continue
        try:
            now = sha256_file(Path(listed))
        except OSError as exc:
            log.info(f"[verify] {path}: the TRAINING_SETS file of {model}, {listed}, cannot be "
                     f"read ({exc}); the report is checked as it is (not a problem)")
            continue
        if now != sha:
            reasons.append(f"its TRAINING_SETS file of {model} ({listed}) changed since")
    return reasons


def _partial(data: Roots) -> list[Problem]:
    """Artifacts whose files exist but whose manifest (written last) does not; none inside a
    temporary, which is no artifact yet (its debris is swept whole: `_debris`)."""
    problems = []
    for corpus_dir in sorted(p for p in data.corpora.glob("*/") if p.is_dir()):
        try:
            sections = read_json(corpus_dir / MANIFEST) if (corpus_dir / MANIFEST).exists() \
                else {}
        except InputError:
            continue  # corrupt: check_manifest reports it
        vouched = {n for s in sections.values() if isinstance(s, dict)
                   for n in s.get("outputs", {})}
        for name in VOUCHED_BY:
            if (corpus_dir / name).exists() and name not in vouched:
                problems.append(Problem("PARTIAL", corpus_dir / name, "no manifest section "
                                        "vouches for it (its stage stopped half-way)",
                                        corpus_repair(corpus_dir, sections)))
        for pool_dir in sorted(pools_dir(corpus_dir).glob("*/")):
            if pool_dir.is_dir() and not is_temporary(pool_dir) and \
                    not (pool_dir / MANIFEST).exists():
                problems.append(Problem("PARTIAL", pool_dir, f"no {MANIFEST} (the pool stage "
                                        "stopped half-way)", pool_repair(corpus_dir,
                                                                         pool_dir.name)))
    if data.runs is not None:
        for run in [*run_files(data.runs, RUN_TABLE), *run_files(data.runs, RUN_METRICS)]:
            corpus, pool, model, suffix = run_file_parts(run)
            paths = run_paths(data.runs, corpus, pool, model)
            manifest = paths.evaluation if suffix == RUN_METRICS else paths.manifest
            if not manifest.exists() and not is_temporary(run):
                repair = (run_repair(corpus, model, data.runs, pool) if suffix == RUN_METRICS
                          else recorded_run_repair(data.runs, corpus, pool, model, data.indexes))
                problems.append(Problem("PARTIAL", run, f"no {manifest.name} (its stage "
                                        "stopped half-way)", repair))
        for page in sorted(reports_dir(data.runs).glob(f"*{REPORT_PAGE_SUFFIX}")):
            corpus = page.name[: -len(REPORT_PAGE_SUFFIX)]
            if not report_manifest(page.parent, corpus).exists():
                problems.append(Problem("PARTIAL", page, "no manifest vouches for the report "
                                        "(made before reports had one, or stopped half-way)",
                                        recorded_repair(corpus, None)))
    if data.runs is not None:
        problems += _judging_partial(data.runs)
    if data.indexes is not None:
        for index in sorted(data.indexes.glob(f"*/*/{BM25_INDEX}/")):
            if not (index / MANIFEST).exists():
                problems.append(Problem("PARTIAL", index, f"no {MANIFEST}",
                                        index_repair(index)))
        for store in sorted(data.indexes.glob(f"*/{EMBEDDINGS}/*/")):
            if not (store / MANIFEST).exists() and any(store.glob(store_parts_glob())):
                problems.append(Problem("ORPHAN", store, "embedding parts without a store "
                                        "manifest", store_repair(store)))
        for store in sorted(data.indexes.glob(f"*/{ANALYSED}/*/")):
            if not (store / MANIFEST).exists() and any(store.glob(store_parts_glob())):
                problems.append(Problem("ORPHAN", store, "analysed-text parts without a "
                                        "store manifest", analysed_repair(store)))
    return [p for p in problems if not is_temporary(p.path) and not _in_temporary(p.path, data)]


def _judging_partial(runs: Path) -> list[Problem]:
    """A pool's sample or judgments file (either layout) or a corpus's judging page without
    the manifest written after it."""
    problems = []
    for corpus_dir in sorted(p for p in runs.glob("*/") if p.is_dir()):
        corpus = corpus_dir.name
        for pool_dir in sorted(p for p in corpus_dir.glob("*/") if p.is_dir()):
            for folder in judging_folders(runs, corpus, pool_dir.name):
                for table in sorted(folder.glob(f"*{TABLE_SUFFIX}")):
                    if not judgments_manifest(table).exists() and not is_temporary(table):
                        problems.append(Problem(
                            "PARTIAL", table, f"no {judgments_manifest(table).name} (its "
                            "stage stopped half-way)", folder_repair(folder, corpus)))
        page = judging_page_path(runs, corpus)
        if page.is_file() and not judgments_manifest(page).exists():
            problems.append(Problem("PARTIAL", page, "no manifest vouches for the page (made "
                                    "before judging pages had one, or stopped half-way)",
                                    sampling_repair(corpus, None, target="judge-page")))
        problems += [p for log_path in judging_logs(runs, corpus)
                     for p in _log_problems(log_path, corpus)]
    return problems


def _log_problems(path: Path, corpus: str) -> list[Problem]:
    """An assessor's log (append-only, resumable: docs/judging.md): its first line describes
    an assessor, every other line is a judgment (CORRUPT otherwise: moved away, its pairs are
    asked again), its last line is whole (PARTIAL otherwise: the next make judge drops it and
    asks that pair again). Every line is checked by the rules the log's reader applies
    (judging/files.py: a grade an integer 0-3 or null, each field of its type), and named
    with the same repair. A grade changed into another grade is a judgment still: no
    checksum can vouch for a file that grows by a line per pair."""
    try:
        with open_regular(path) as handle:
            data = handle.read()
    except SpecialFile:
        return [Problem("CORRUPT", path, "is not a regular file (a device, a pipe or a socket)",
                        MOVE_LOG)]
    except OSError as exc:
        return [Problem("CORRUPT", path, f"cannot be read ({exc})", MOVE_LOG)]
    lines, cut = log_lines(data)
    assessor = described_assessor(lines[0], LOG_VERSION) if lines else None
    if lines and assessor is None:
        return [Problem("CORRUPT", path, head_problem(lines[0]), MOVE_LOG)]
    for number, line in enumerate(lines[1:], 2):
        _, why = parse_record(line)
        if why is not None:
            return [Problem("CORRUPT", path, f"line {number} is not a judgment: {why}",
                            line_repair(number))]
    if cut:
        return [Problem("PARTIAL", path, "its last line was cut short (a run stopped while "
                        "writing it)", sampling_repair(corpus, None, assessor))]
    return []


def _debris(data: Roots) -> list[Problem]:
    """Temporaries of stopped processes, each swept whole (`make sweep`): the outermost only,
    not what lies inside one (a killed import's pools)."""
    return [Problem("DEBRIS", p, "temporary of a stopped process", Repair("sweep"))
            for root in (data.corpora, data.indexes, data.runs) if root and root.exists()
            for p in sorted(root.rglob(".*.tmp"))
            if is_stale_temporary(p) and not _in_temporary(p, data)]


def _under(path: Path, folders: list[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved.is_relative_to(f) for f in folders)


def _made_with(input_path: Path, problem: Path) -> bool:
    """Whether a report's recorded input is a file of the artifact a problem names: the same
    run's (its folder, its run name) or the folder's own manifest (a pool's, a judging
    folder's), so its repair writes that input again."""
    same_folder = input_path.parent.resolve() == (
        problem if problem.is_dir() else problem.parent).resolve()
    return same_folder and (input_path.name == MANIFEST or
                            input_path.name.split(".")[0] == problem.name.split(".")[0])


def _reports_of_named(problems: list[Problem], data: Roots) -> list[Problem]:
    """A report made from an artifact verify names (damaged, partial or stale): STALE too, after
    the problems of its inputs, since their repairs make its inputs again: `make report` last
    then leaves nothing to repair (the one staleness rule says it once those repairs ran).
    Only the inputs it counted: one it left out (its manifest's `left_out`: a stale sample, an
    evaluation collect left out), it said so in its text, and a report made now says the
    same; once that input's repair changes its bytes, the staleness rule names the report."""
    named = [p for p in problems if _classify_report(p.path, data) is None]
    if not named:
        return []
    stale = []
    reported = {p.path for p in problems}
    for path in _manifests(data):
        found = _classify_report(path, data)
        if found is None or path in reported:
            continue
        try:
            info = read_json(path)
        except InputError:
            continue
        roots = replace(data, corpus=report_corpus(path))
        left = set(info.get("left_out") or ())
        inputs = [(label, roots.path(label)) for label in info.get("inputs") or {}
                  if label not in left]
        hit = next(((label, problem) for label, input_path in inputs if input_path is not None
                    for problem in named if _made_with(input_path, problem.path)), None)
        if hit is not None:
            stale.append(Problem("STALE", path, f"its input {roots.shown(hit[0])} is "
                                 f"{hit[1].kind} (above)", found))
    return stale


def _classify_report(path: Path, data: Roots) -> Repair | None:
    """The repair of the report whose manifest is at `path`; None for any other path."""
    if artifact_kind(path, data.corpora, data.runs, SOURCES) != "report":
        return None
    found = _classify(path, data)
    return found[1] if found else None


def find_problems(data: Roots, folders: list[Path] | None = None, deep: bool = True
                  ) -> tuple[list[Problem], int]:
    """Every problem under `folders` (default: the whole data roots), and how many manifests
    were checked. Manifests whose artifact cannot lie under them are skipped."""
    folders = [f.resolve() for f in folders] if folders else None
    checked, problems = 0, []
    for path in _manifests(data):
        artifact = path.parent.resolve()
        if folders and not any(artifact.is_relative_to(f) or f.is_relative_to(artifact)
                               for f in folders):
            continue
        checked += 1
        problems += check_manifest(path, data, deep)
    problems += _partial(data) + _debris(data)
    problems += _reports_of_named(problems, data)
    if folders:
        problems = [p for p in problems if _under(p.path, folders)]
    return problems, checked


def verify(data: Roots, folders: list[Path] | None = None, deep: bool = True,
           named: Where | None = None) -> list[str]:
    """One line per problem (the command prints them), each repair shown as the command for
    the data roots verified as a command names them (`named`, by default `where` of `data`),
    and a summary logged.
    Data roots that do not exist, or hold nothing to check, are an error: a check that found
    no data must not pass (a typo in DATA, an unmounted scratch disk)."""
    roots = [r for r in (data.corpora, data.indexes, data.runs) if r is not None]
    if not any(r.is_dir() for r in roots):
        raise InputError(f"none of the data folders exists ({', '.join(map(str, roots))}): "
                         "nothing to verify; check DATA (or --corpora-root, --index-root, "
                         "--runs-root)")
    for folder in folders or []:
        if not folder.exists():
            raise InputError(f"{folder} does not exist: give a folder under the data roots "
                             f"({data.corpora}, {data.indexes}, {data.runs})")
    with read_only():
        problems, checked = find_problems(data, folders, deep)
    if not checked and not problems:
        looked = ", ".join(str(f) for f in folders) if folders else ", ".join(map(str, roots))
        raise InputError(f"no pipeline data under {looked}: nothing was verified; check DATA "
                         "(or the --*-root options), or build something first (make demo)")
    named = named or where(data.corpora, data.indexes, data.runs)
    lines = [p.line(named) for p in problems]
    found = counted(len(lines), "problem") if lines else "no problems"
    log.info(f"[verify] {counted(checked, 'manifest')} checked"
             f"{' with checksums' if deep else ''}: {found}")
    return lines

