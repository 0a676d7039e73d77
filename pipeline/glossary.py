"""The pipeline's glossary, the names that are not paths: the metric sets and their parser, the
query variants, what the prefilter's options mean, id hashing. Standard library only (the
Makefile's input check runs it before the environment exists); pipeline/layout.py names the
files."""

from __future__ import annotations

import difflib
import hashlib
import re
import zlib

from pipeline.core.errors import InputError

MAX_CUTOFF = 100_000  # a metric's cutoff (@k): far above any run's depth
MAX_LEVEL = 100  # a relevance level (-l<n>): far above any collection's grades


def id_key(value: int | str) -> int:
    """An id as a number for seeding and sharding: an integer id itself, a string id's
    crc32 (stable across processes, unlike hash())."""
    return value if isinstance(value, int) else zlib.crc32(str(value).encode())



# a Semantic Scholar paper SHA (SPECTER's ids): 40 hex digits, read in any case (S2AG's
# paper-ids dataset writes them in lowercase: training_ids.read_shas lowers them)
S2_SHA = re.compile(r"[0-9a-fA-F]{40}")

CITATION_MODES = ("inbound", "outbound", "either")  # what "citations" means in the prefilter
# what make mdcr-scores does with a pair scored in two fields' pools (pipeline/mdcr/official.py)
SHARED_PAIRS = ("first", "max", "refuse")
# The retrievers' own options (Retriever.OPTIONS), their values and defaults: BM25's engine
# (pipeline/retrieval/bm25/engines.py) and the dense search's backend (dense/exact.py)
BM25_ENGINES, BM25_ENGINE = ("lucene", "arrays"), "arrays"
# learned sparse search: scipy arrays, or Lucene impact search (pipeline/retrieval/sparse/)
SPARSE_ENGINES, SPARSE_ENGINE = ("arrays", "lucene"), "arrays"
BACKENDS, BACKEND = ("auto", "faiss-cpu", "faiss-gpu", "torch-cuda", "torch-cpu"), "auto"
GPU_BACKENDS = ("faiss-gpu", "torch-cuda")  # those checked before a search (exact.check_backend)
RERANK_DEPTH = 100  # a first stage's candidates per query a reranker scores (retrieval/rerank.py)
FOS_SOURCES = ("external", "s2-fos-model")  # which S2AG field labels count



# The paper's sets: large-scale pools (top 500 per query) and MDCR-style benchmarks (the whole
# candidate list, MDCR §4); `beir` for outside collections; `csfcube` for CSFCube's facet pools
# (pipeline/external/csfcube.py): NDCG cut at 20% of each query's list, and MAP counting
# grades >= 2 as relevant, both normalised over the run's ranked list, as CSFCube's evaluation
# script computes them (equal to it on any run, complete or not).
METRIC_SETS: dict[str, tuple[str, ...]] = {
    "large-scale": ("map", "ndcg", "recall@30"),
    "mdcr": ("map", "ndcg", "recall@5"),
    "beir": ("ndcg@10", "recall@100"),
    "judged": ("ndcg@10", "map", "ndcg"),  # a collection's judged-only pool: SciDocs' MAP, NDCG
    "csfcube": ("ndcg%20", "map_ranked-l2"),
}
DEFAULT_METRICS = METRIC_SETS["large-scale"]
_KNOWN = ("map", "ndcg", "recall", "precision", "mrr", "r-precision", "hit_rate", "hits",
          "ndcg_burges", "f1")
# CSFCube's metrics (pipeline/metrics.py; not ranx's): `ndcg%<p>`, NDCG cut at p%
# of the query's ranked list, its ideal from the ranked list's grades (the official NDCG%20);
# `ndcg_judged%<p>`, the same with the ideal over every judged candidate (trec_eval's way);
# `map_ranked[-l<n>]`, AP over the relevant candidates the run ranked (the official MAP).
_PERCENT = re.compile(r"^ndcg(?:_judged)?%(\d+)$")
RANKED_MAP = "map_ranked"


def metric_percent(name: str) -> int | None:
    """p for `ndcg%<p>` and `ndcg_judged%<p>` (NDCG cut at p% of each query's list,
    pipeline/metrics.py), None for other metrics."""
    match = _PERCENT.match(name)
    return int(match.group(1)) if match else None


# The range every computed metric lies in: a share of the relevant or of the ranked list (MAP,
# NDCG, recall, precision, MRR, F1, success) between 0 and 1, except ranx's `hits`, a count of
# relevant candidates ranked (0 and up). The crossover's extrapolation stays inside it.
UNBOUNDED_METRICS = ("hits",)


def metric_range(name: str) -> tuple[float, float]:
    """The least and the greatest value metric `name` (ranx's, as outputs carry it) can take:
    (0, 1), or (0, inf) for a count (`hits`)."""
    base = name.partition("-l")[0].partition("@")[0]
    return (0.0, float("inf")) if base in UNBOUNDED_METRICS else (0.0, 1.0)


def _within(text: str, high: int) -> bool:
    """Whether `text` is a whole number 1..high in ASCII digits (str.isdigit() also takes
    '²', which int() refuses)."""
    return re.fullmatch(r"[0-9]+", text) is not None and 0 < int(text) <= high


def _valid_metric(name: str) -> bool:
    """Whether `name` is one metric this pipeline computes (parse_metrics' grammar)."""
    percent = metric_percent(name)
    metric, _, level = name.partition("-l")
    base, _, cut = metric.partition("@")
    if percent is not None:
        return 0 < percent <= 100
    if base == RANKED_MAP:
        return not cut and (not level or _within(level, MAX_LEVEL))
    return (base in _KNOWN and (not cut or _within(cut, MAX_CUTOFF))
            and (not level or _within(level, MAX_LEVEL)))


# The same measures in ir_measures' and trec_eval's words (docs/evaluation.md, "Metric names"):
# each read as ranx's name, the canonical one that outputs carry. ir_measures' `Name(rel=n)@k`
# (P, R and Success need the cutoff) and trec_eval's `name_k` (`name.k`, as its -m takes it)
# with the pipeline's level suffix `-l<n>` (trec_eval's -l<n> option).
IR_MEASURES_NAMES = {"AP": "map", "MAP": "map", "nDCG": "ndcg", "NDCG": "ndcg", "P": "precision",
                     "Precision": "precision", "R": "recall", "Recall": "recall", "RR": "mrr",
                     "MRR": "mrr", "Rprec": "r-precision", "RPrec": "r-precision",
                     "Success": "hit_rate"}
_IR_MEASURES_CUT = ("P", "Precision", "R", "Recall", "Success")  # a cutoff needed
TREC_EVAL_NAMES = {"map": "map", "map_cut": "map", "ndcg": "ndcg", "ndcg_cut": "ndcg",
                   "P": "precision", "recall": "recall", "recip_rank": "mrr",
                   "Rprec": "r-precision", "success": "hit_rate"}
_TREC_EVAL_CUT = ("map_cut", "ndcg_cut", "P", "recall", "success")  # families: one cutoff each
# Measures of theirs computed here by no name (ranx's bpref is not trec_eval's, and the
# scorer passes no judged non-relevant document) -> the closest that is
NOT_COMPUTED = {"Judged": "precision", "Bpref": "map", "BPref": "map", "bpref": "map",
                "infAP": "map", "ERR": "ndcg", "nERR": "ndcg", "SDCG": "ndcg",
                "SetP": "precision", "SetR": "recall", "SetF": "f1", "NumRelRet": "hits",
                "num_rel_ret": "hits", "set_P": "precision", "set_recall": "recall",
                "set_F": "f1"}
_IR_MEASURE = re.compile(r"([A-Za-z]+)(?:\(([^()]*)\))?(?:@([0-9]+))?")
_TREC_EVAL = re.compile(r"([A-Za-z_]+?)(?:[_.]([0-9]+))?(?:-l([0-9]+))?")


def _named(base: str, cut: str | None, level: str | None) -> str:
    """ranx's name of `base` with a cutoff and a relevance level (1, the default, unwritten)."""
    return (base + (f"@{int(cut)}" if cut else "")
            + (f"-l{int(level)}" if level and int(level) != 1 else ""))


def _from_trec_eval(name: str) -> str | None:
    """ranx's name of trec_eval's `name` (`ndcg_cut_10` -> `ndcg@10`, `P_10-l2` ->
    `precision@10-l2`); None when `name` is none of trec_eval's measures computed here."""
    found = _TREC_EVAL.fullmatch(name)
    if not found or found.group(1) not in TREC_EVAL_NAMES:
        return None
    measure, cut, level = found.groups()
    if (cut is None) == (measure in _TREC_EVAL_CUT):
        raise InputError(f"metric {name!r}: trec_eval's {measure} "
                         + (f"is a family of cutoffs: name one, such as {measure}_10"
                            if cut is None else "takes no cutoff"))
    if level and TREC_EVAL_NAMES[measure] == "ndcg":
        raise InputError(f"metric {name!r}: trec_eval's {measure} takes the grades as gains "
                         f"and ignores -l: write {name.partition('-l')[0]}")
    return _named(TREC_EVAL_NAMES[measure], cut, level)


def _ir_measures_level(name: str, measure: str, params: str) -> str | None:
    """The relevance level of ir_measures' parameters (`rel=2`), None for the default; a
    parameter that makes another measure is refused."""
    graded = IR_MEASURES_NAMES[measure] == "ndcg"  # its grades are the gains: no rel=
    level = None
    for param in filter(None, (p.strip() for p in params.split(","))):
        key, _, value = (part.strip().strip("'\"") for part in param.partition("="))
        if key == "rel" and not graded and _within(value, MAX_LEVEL):
            level = value
        elif not (key == "judged_only" and value == "False"
                  or key == "dcg" and value == "log2" and graded):
            closest = " (the closest computed here: ndcg_burges)" if value == "exp-log2" else ""
            takes = ("a cutoff only" if graded
                     else f"a cutoff and rel=<1 to {MAX_LEVEL}> only")
            raise InputError(f"metric {name!r}: ir_measures' {param} is not computed here"
                             f"{closest}; {measure} takes {takes}")
    return level


def _from_ir_measures(name: str) -> str | None:
    """ranx's name of ir_measures' `name` (`nDCG@10` -> `ndcg@10`, `AP(rel=2)@100` ->
    `map@100-l2`); None when `name` is none of ir_measures' measures computed here."""
    found = _IR_MEASURE.fullmatch(name)
    if not found or found.group(1) not in IR_MEASURES_NAMES:
        return None
    measure, params, cut = found.groups()
    if (cut is None and measure in _IR_MEASURES_CUT
            or cut is not None and measure in ("Rprec", "RPrec")):
        raise InputError(f"metric {name!r}: ir_measures' {measure} "
                         + (f"needs a cutoff, such as {measure}@10" if cut is None
                            else "takes no cutoff"))
    return _named(IR_MEASURES_NAMES[measure], cut, _ir_measures_level(name, measure, params or ""))


# Every measure's spelling in the three vocabularies (and CSFCube's), longest first: a name in
# any case is read as the spelling its start matches (`p@10` as ir_measures' `P@10`)
_SPELLINGS = sorted({*_KNOWN, RANKED_MAP, *IR_MEASURES_NAMES, *TREC_EVAL_NAMES, *NOT_COMPUTED},
                    key=lambda spelling: (-len(spelling), spelling))


def _exact(name: str) -> str | None:
    """ranx's name of `name` spelled exactly as one vocabulary spells it; None otherwise."""
    if _valid_metric(name):
        return name
    translated = _from_trec_eval(name) or _from_ir_measures(name)
    return translated if translated is not None and _valid_metric(translated) else None


def _any_case(name: str) -> set[str]:
    """ranx's names that `name` means in any letter case: its start respelled as each
    vocabulary's measure whose spelling it matches (`NDCG_CUT_10`, `p@10`, `Map`); a respelling
    that a vocabulary refuses counts as none (its refusal is said when no other reads it)."""
    found = set()
    for respelled in _respellings(name):
        try:
            canonical = _exact(respelled)
        except InputError:
            continue
        if canonical is not None:
            found.add(canonical)
    return found


def _respellings(name: str) -> list[str]:
    """`name` with its start respelled as each measure spelling it matches in any case (and
    a level suffix `-L2` as `-l2`), longest spelling first."""
    name = re.sub(r"-L([0-9]+)$", r"-l\1", name)
    return [spelling + name[len(spelling):] for spelling in _SPELLINGS
            if name.lower().startswith(spelling.lower())]


def _not_computed(name: str) -> str | None:
    """The measure of `name` (in any case) that no vocabulary computes here (NOT_COMPUTED)."""
    measure = re.match(r"[A-Za-z_]*?(?=[@(.]|_?[0-9]|-l|$)", name)
    measure = measure.group(0) if measure else ""
    return measure if measure in NOT_COMPUTED else next(
        (m for m in NOT_COMPUTED if m.lower() == measure.lower()), None)


def canonical_metric(name: str) -> str:
    """`name` as ranx names it, the name every output carries: ranx's names and CSFCube's
    (`ndcg%20`) as they are, ir_measures' and trec_eval's translated, in any letter case where
    that reads as one measure (`p@10`, `NDCG@10`, `Map`); a name none of them gives a measure
    computed here is refused in one short line, with the nearest names that are."""
    if (exact := _exact(name)) is not None:
        return exact
    found = _any_case(name)
    if len(found) == 1:
        return found.pop()
    if found:
        raise InputError(f"metric {name!r} reads as {' or '.join(sorted(found))} in another "
                         "letter case: write it in one vocabulary's case (docs/evaluation.md)")
    if (measure := _not_computed(name)) is not None:
        cut = re.search(r"[@_.]([0-9]+)", name)
        closest = NOT_COMPUTED[measure] + (f"@{cut.group(1)}" if cut else "")
        raise InputError(f"metric {name!r}: {measure} is not computed here; the closest "
                         f"measure that is: {closest} (names: docs/evaluation.md)")
    for respelled in _respellings(name):  # a vocabulary's refusal (a cutoff missing, ...)
        try:
            _from_trec_eval(respelled)
            _from_ir_measures(respelled)
        except InputError as exc:
            raise InputError(exc.message.replace(repr(respelled), repr(name), 1)) from None
    nearest = nearest_metrics(name)
    hint = f" (did you mean {' or '.join(map(repr, nearest))}?)" if nearest else ""
    raise InputError(f"unknown metric {name!r}{hint}: give a set ({', '.join(METRIC_SETS)}) or "
                     f"names in ranx's, ir_measures' or trec_eval's words, cutoffs 1 to "
                     f"{MAX_CUTOFF:,}, levels 1 to {MAX_LEVEL} (docs/evaluation.md)")


def nearest_metrics(name: str, n: int = 3) -> list[str]:
    """The metrics `name` most likely means (at most `n`): the closest known names, in any
    vocabulary, with its cutoff and level; [] when nothing is close."""
    metric, _, level = name.partition("-l")
    base, _, cut = metric.partition("@")
    spellings = {s.lower(): s for s in [*_KNOWN, RANKED_MAP, *METRIC_SETS]}
    close = [spellings[c] for c in difflib.get_close_matches(base.lower(), list(spellings), n=n)]
    guesses = []
    for known in close:
        guess = known + (f"@{cut}" if cut else "") + (f"-l{level}" if level else "")
        guesses.append(guess if known in METRIC_SETS or _valid_metric(guess) else known)
    return list(dict.fromkeys(guesses))


def metric_names(text: str) -> list[str]:
    """The names of a metric list, separated by spaces or commas (not those inside an
    ir_measures name's parentheses: `AP(rel=2, judged_only=False)`)."""
    return re.findall(r"(?:[^\s,(]|\([^()]*\))+", text)


def parse_metrics(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """A metric set's name or metric names, each in ranx's words (`map ndcg@10 recall@30`, a
    relevance level `map-l2`: grades >= 2 count), ir_measures' (`AP nDCG@10 AP(rel=2)`),
    trec_eval's (`map ndcg_cut_10 P_10`) or CSFCube's (`ndcg%20`, `ndcg_judged%20`,
    `map_ranked-l2`), as ranx's names (`canonical_metric`), each once; an unknown name is
    refused with the nearest known one."""
    names = metric_names(text) if isinstance(text, str) else list(text)
    if len(names) == 1 and names[0].lower() in METRIC_SETS:
        return METRIC_SETS[names[0].lower()]
    if not names:
        raise InputError(f"no metric given: use a set ({', '.join(METRIC_SETS)}) or names")
    return tuple(dict.fromkeys(canonical_metric(name) for name in names))


# Perturbed queries (pipeline/pools/queries.py): QUERY_VARIANT (runs named by layout.run_name).
VARIANTS = ("full", "title", "abstract", "shuffled", "deleted30", "typos")


# A query prompt the user chooses (QUERY_PROMPT; pipeline/models.py with_query_prompt): the
# model `<name>+q<8 hex digits of the prompt's sha256>` encodes its queries after the prompt;
# its papers are its base model's, in the same store (layout.store_dir), so another prompt
# costs the queries' encoding only, and its runs are its own.
PROMPT_TAG = re.compile(r"\+(q[0-9a-f]{8})")


# A QUERY_PROMPT of one word (letters, digits, `_`, `-`: no space, no punctuation) is a prompt
# name (an st: model's configuration's); a literal one-word prompt is written with a trailing
# space ('cites '), as it is prepended to the query's text.
PROMPT_NAME = re.compile(r"[A-Za-z0-9_-]+")


def is_prompt_name(prompt: str) -> bool:
    """Whether QUERY_PROMPT's value is a prompt's name rather than its text."""
    return PROMPT_NAME.fullmatch(prompt) is not None


def prompt_tag(prompt: str) -> str:
    """The tag a query prompt adds to its model's name: q + its sha256's first 8 digits."""
    return "q" + hashlib.sha256(prompt.encode()).hexdigest()[:8]


def split_prompt_tag(model: str) -> tuple[str, str]:
    """`st--a--b+q1a2b3c4d` -> ("st--a--b", "q1a2b3c4d"); a name without one -> (name, "")."""
    found = PROMPT_TAG.search(model)
    if found is None or found.end() != len(model):
        return model, ""
    return model[:found.start()], found.group(1)


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise InputError(f"QUERY_VARIANT {variant!r}: use one of {', '.join(VARIANTS)}")
    return variant
