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



CITATION_MODES = ("inbound", "outbound", "either")  # what "citations" means in the prefilter
# The retrievers' own options (Retriever.OPTIONS), their values and defaults: BM25's engine
# (pipeline/retrieval/bm25/engines.py) and the dense search's backend (dense/exact.py)
BM25_ENGINES, BM25_ENGINE = ("lucene", "arrays"), "arrays"
BACKENDS, BACKEND = ("auto", "faiss-cpu", "faiss-gpu", "torch-cuda", "torch-cpu"), "auto"
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
          "ndcg_burges", "f1", "bpref")
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


# trec_eval's (and pytrec_eval's) names of metrics -> ours: `P_10` is `precision@10`
TREC_EVAL_NAMES = {"P": "precision", "recip_rank": "mrr", "ndcg_cut": "ndcg", "map_cut": "map",
                   "recall": "recall", "Rprec": "r-precision", "success": "hit_rate",
                   "ndcg": "ndcg", "map": "map", "bpref": "bpref"}


def nearest_metric(name: str) -> str | None:
    """The metric `name` most likely means: trec_eval's name translated (`ndcg_cut_10` ->
    `ndcg@10`), else the closest known name with its cutoff and level; None when nothing is
    close."""
    trec = re.fullmatch(r"([A-Za-z_]+?)(?:_([0-9]+))?", name)
    if trec and trec.group(1) in TREC_EVAL_NAMES:
        base, cut = TREC_EVAL_NAMES[trec.group(1)], trec.group(2)
        guess = f"{base}@{cut}" if cut else base
        return guess if _valid_metric(guess) else None
    metric, _, level = name.partition("-l")
    base, _, cut = metric.partition("@")
    close = difflib.get_close_matches(base.lower(), [*_KNOWN, RANKED_MAP, *METRIC_SETS], n=1)
    if not close:
        return None
    guess = close[0] + (f"@{cut}" if cut else "") + (f"-l{level}" if level else "")
    return guess if close[0] in METRIC_SETS or _valid_metric(guess) else close[0]


def parse_metrics(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """A metric set's name or metric names (ranx's, e.g. `map ndcg@10 recall@30`, with an
    optional relevance level `map-l2`: grades >= 2 count; and CSFCube's `ndcg%20`,
    `ndcg_judged%20`, `map_ranked-l2`), checked; an unknown name is refused with the nearest
    known one."""
    names = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    if len(names) == 1 and names[0] in METRIC_SETS:
        return METRIC_SETS[names[0]]
    for name in names:
        if not _valid_metric(name):
            nearest = nearest_metric(name)
            hint = f" (did you mean {nearest!r}?)" if nearest else ""
            raise InputError(f"unknown metric {name!r}{hint}; use a set "
                             f"({', '.join(METRIC_SETS)}) or names like map, ndcg@10, "
                             f"recall@30, map-l2 (grades >= 2 relevant), ndcg%20 (cut at 20% "
                             f"of each query's list), map_ranked-l2 (CSFCube's AP over the "
                             f"ranked list); cutoffs 1 to {MAX_CUTOFF:,}, levels 1 "
                             f"to {MAX_LEVEL} (known: {', '.join(_KNOWN)})")
    if not names:
        raise InputError(f"no metric given: use a set ({', '.join(METRIC_SETS)}) or names")
    return tuple(dict.fromkeys(names))


# Perturbed queries (pipeline/pools/queries.py): QUERY_VARIANT (runs named by layout.run_name).
VARIANTS = ("full", "title", "abstract", "shuffled", "deleted30", "typos")


# A query prompt the user chooses (QUERY_PROMPT; pipeline/models.py with_query_prompt): the
# model `<name>+q<8 hex digits of the prompt's sha256>` encodes its queries after the prompt;
# its papers are its base model's, in the same store (layout.store_dir), so another prompt
# costs the queries' encoding only, and its runs are its own.
PROMPT_TAG = re.compile(r"\+(q[0-9a-f]{8})")


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
