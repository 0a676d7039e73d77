"""Query texts: a query paper's own title and abstract, the text of a collection's query (BEIR:
queries are not papers of the corpus), or a perturbed version of either (QUERY_VARIANT).

Variants follow the textual-neighbours paper (Singh et al.), seeded per query:
- `full`: title and abstract as they are (the default);
- `title`, `abstract`: one of the two only (a short query, as a search box gets);
- `shuffled`: title kept, the abstract's sentences in a random order (T_AShuff);
- `deleted30`: title kept, 30% of the abstract's words deleted at random (T_ADelRand);
- `typos`: every word of 4+ characters gets, with probability 0.2, one character edit (a
  deletion, a swap of two neighbours or a substitution by a random letter).
A run made with a variant is named `<model>~<variant>`, beside the full-query run, so the
report can show each model's drop.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.corpus.files import corpus_file
from pipeline.glossary import check_variant, id_key
from pipeline.layout import PREFILTERED

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def own_text(queries: pl.DataFrame) -> bool:
    """Whether a pool's queries carry their own text (a collection's queries, not papers)."""
    return "title" in queries.columns


def query_texts(corpus_dir: Path, queries: pl.DataFrame, variant: str = "full",
                seed: int = 0) -> pl.DataFrame:
    """corpusid, title, abstract of each query (sorted by id), perturbed by `variant`."""
    if own_text(queries):
        texts = queries.select("corpusid", "title", "abstract")
    else:
        texts = (pl.scan_parquet(corpus_file(corpus_dir, PREFILTERED))
                 .join(queries.lazy().select("corpusid"), on="corpusid", how="semi")
                 .select("corpusid", "title", "abstract").collect())
    texts = texts.sort("corpusid").with_columns(pl.col("title", "abstract").fill_null(""))
    if check_variant(variant) == "full":
        return texts
    rows = [perturb(t, a, variant, _rng(seed, variant, i))
            for i, t, a in texts.iter_rows()]
    return texts.with_columns(title=pl.Series([t for t, _ in rows], dtype=pl.String),
                              abstract=pl.Series([a for _, a in rows], dtype=pl.String))


# the variants drawn from the seed (`perturb` asks `_rng`); the others ignore it
SEEDED_VARIANTS = frozenset({"shuffled", "deleted30", "typos"})


def _rng(seed: int, variant: str, query) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(variant.encode()), id_key(query)])


def perturb(title: str, abstract: str, variant: str, rng: np.random.Generator
            ) -> tuple[str, str]:
    """(title, abstract) as `variant` changes them (module doc)."""
    if variant == "title":
        return title, ""
    if variant == "abstract":
        return "", abstract
    if variant == "shuffled":
        sentences = _SENTENCE.split(abstract.strip())
        return title, " ".join(sentences[i] for i in rng.permutation(len(sentences)))
    if variant == "deleted30":
        words = abstract.split()
        drop = set(rng.choice(len(words), size=round(0.3 * len(words)), replace=False).tolist())
        return title, " ".join(w for i, w in enumerate(words) if i not in drop)
    if variant == "typos":
        return _typos(title, rng), _typos(abstract, rng)
    return title, abstract


def _typos(text: str, rng: np.random.Generator, rate: float = 0.2) -> str:
    words = text.split(" ")
    for i, word in enumerate(words):
        if len(word) < 4 or rng.random() >= rate:
            continue
        at = int(rng.integers(1, len(word) - 1))  # an inner character: keeps the word's ends
        edit = int(rng.integers(3))
        if edit == 0:
            words[i] = word[:at] + word[at + 1:]
        elif edit == 1:
            words[i] = word[:at] + word[at + 1] + word[at] + word[at + 2:]
        else:
            words[i] = word[:at] + _LETTERS[int(rng.integers(26))] + word[at + 1:]
    return " ".join(words)
