"""Pool sizes, pool names and the named choices the Makefile checks. Standard library only
(used by the Makefile's input check)."""

from __future__ import annotations

import re
import zlib
from typing import NamedTuple

from pipeline.core.errors import InputError

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kKmM]?)$")


def parse_size(text: str) -> int:
    """'20000', '20k', '2M', '1.5M' -> number of candidate papers."""
    match = _SIZE.match(str(text).strip().replace("_", ""))
    if not match:
        raise InputError(
            f"malformed SIZE {text!r}: write a number of papers such as 20000, 20k or 2M"
        )
    number, unit = match.groups()
    value = float(number) * {"": 1, "k": 1_000, "m": 1_000_000}[unit.lower()]
    if value != int(value) or value < 1:
        raise InputError(f"malformed SIZE {text!r}: it must be a whole number of papers >= 1")
    return int(value)


def format_size(size: int) -> str:
    """20000 -> '20k', 2000000 -> '2M', 1500 -> '1500' (the inverse of parse_size)."""
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def id_key(value: int | str) -> int:
    """An id as a number for seeding and sharding: an integer id itself, a string id's
    crc32 (stable across processes, unlike hash())."""
    return value if isinstance(value, int) else zlib.crc32(str(value).encode())


SPLITS = ("test", "validation")
CITATION_MODES = ("inbound", "outbound", "either")  # what "citations" means in the prefilter
SOURCES = ("s2orc", "s2ag")  # corpus readers (ingest)
FOS_SOURCES = ("external", "s2-fos-model")  # which S2AG field labels count


class PoolName(NamedTuple):
    scope: str
    size: int
    repeat: int
    seed: int
    split: str = "test"


def pool_name(scope: str, size: int, repeat: int, seed: int = 0, split: str = "test") -> str:
    """Folder name of a pool: scope is 'all' (dataset-level) or a field slug. The seed is part
    of the name unless it is 0, so pools of two seeds never overwrite each other; validation
    pools (MDCR §3: for tuning BM25) end in '-val'."""
    seed_part = f"-s{seed}" if seed else ""
    split_part = "-val" if split == "validation" else ""
    return f"{scope}-{format_size(size)}{seed_part}-r{repeat}{split_part}"


def parse_pool_name(name: str) -> PoolName:
    """Inverse of pool_name: 'medicine-20k-r0' -> ('medicine', 20000, 0, 0, 'test'),
    'all-10k-s1-r2-val' -> ('all', 10000, 2, 1, 'validation')."""
    match = re.match(r"^(.+)-([0-9.]+[kM]?)(?:-s(\d+))?-r(\d+)(-val)?$", name)
    if not match:
        raise InputError(f"malformed pool name {name!r}: expected <scope>-<size>[-s<seed>]"
                         "-r<repeat>[-val]")
    scope, size, seed, repeat, val = match.groups()
    return PoolName(scope, parse_size(size), int(repeat), int(seed or 0),
                    "validation" if val else "test")


# The paper's sets: large-scale pools (top 500 per query) and MDCR-style benchmarks (the whole
# candidate list, MDCR §4); `beir` for outside collections.
METRIC_SETS: dict[str, tuple[str, ...]] = {
    "large-scale": ("map", "ndcg", "recall@30"),
    "mdcr": ("map", "ndcg", "recall@5"),
    "beir": ("ndcg@10", "recall@100"),
}
DEFAULT_METRICS = METRIC_SETS["large-scale"]
_KNOWN = ("map", "ndcg", "recall", "precision", "mrr", "r-precision", "hit_rate", "hits",
          "ndcg_burges", "f1", "bpref")


def parse_metrics(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """A metric set's name or metric names (ranx's, e.g. `map ndcg@10 recall@30`), checked."""
    names = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    if len(names) == 1 and names[0] in METRIC_SETS:
        return METRIC_SETS[names[0]]
    for name in names:
        base, _, cut = name.partition("@")
        if base not in _KNOWN or (cut and not (cut.isdigit() and int(cut) > 0)):
            raise InputError(f"unknown metric {name!r}; use a set "
                             f"({', '.join(METRIC_SETS)}) or names like map, ndcg@10, "
                             f"recall@30 (known: {', '.join(_KNOWN)})")
    if not names:
        raise InputError("no metric given: use a set (large-scale, mdcr, beir) or names")
    return tuple(dict.fromkeys(names))


# Perturbed queries (pipeline/pools/queries.py): QUERY_VARIANT and the names of their runs.
VARIANTS = ("full", "title", "abstract", "shuffled", "deleted30", "typos")
VARIANT_SEP = "~"


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise InputError(f"QUERY_VARIANT {variant!r}: use one of {', '.join(VARIANTS)}")
    return variant


def run_name(model: str, variant: str = "full") -> str:
    """The name a run is written under: the model's, plus `~<variant>` for perturbed queries."""
    return model if check_variant(variant) == "full" else f"{model}{VARIANT_SEP}{variant}"


def split_run_name(name: str) -> tuple[str, str]:
    """`bm25~title` -> ("bm25", "title"); `bm25` -> ("bm25", "full")."""
    model, _, variant = name.partition(VARIANT_SEP)
    return model, check_variant(variant or "full")
