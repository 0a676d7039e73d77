"""Vectors reused from the other stores of a DATA: a text is embedded once per DATA, its
vector copied, by text digest, from any store of the same vector identity."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.core.atomic import is_temporary
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.encoding.store import vectors_of_texts
from pipeline.encoding.store_texts import current_digests
from pipeline.encoding.writer import add_part
from pipeline.layout import MANIFEST, Place, store_dirs

# What a store's config records that changes no vector: a store whose config differs from this
# embed's in these only lends its vectors (`reuse`); everything else (the entry's fields, dtype,
# max_length, text format, the loaded settings, the model's identity) must be equal
NOT_VECTOR = {"model": ("name", "notes")}
# The kinds whose vectors are reused across the stores of a DATA: one vector per paper, made
# by this process's encoder from the config alone (multi-vector rows, served endpoints and
# objects are embedded by each store itself)
REUSED_KINDS = ("dense", "st")


def vector_identity(config: dict) -> dict:
    """A store's config without what changes no vector (NOT_VECTOR): two stores of equal
    identity hold the same vector for the same text."""
    out = dict(config)
    for key, fields in NOT_VECTOR.items():
        if isinstance(out.get(key), dict):
            out[key] = {k: v for k, v in out[key].items() if k not in fields}
    return out


def lenders(index_root: Path, store: Path, config: dict) -> list[Path]:
    """The other stores of the index root (the same DATA) whose vectors this store can take:
    the same vector identity; a store being made (a temporary) or whose manifest is unreadable
    lends nothing."""
    identity, found = vector_identity(config), []
    for other in store_dirs(index_root):
        if other == store or is_temporary(other) or is_temporary(other.parent.parent):
            continue
        try:
            made = read_json(other / MANIFEST).get("config") if (other / MANIFEST).exists() \
                else None
        except InputError:
            continue
        if isinstance(made, dict) and vector_identity(made) == identity:
            found.append(other)
    return found


def reuse(place: Place, store: Path, config: dict, missing: np.ndarray, columns: list[str],
           inputs: dict[str, str], part_size: int) -> tuple[np.ndarray, int]:
    """Copy into `store` the vectors that other stores of the same DATA and vector identity
    hold for the texts the papers `missing` have now (matched by text digest alone, whatever
    the paper's id there: a vector depends only on the text and the model), in parts of at
    most `part_size` papers; a text is embedded once per DATA. Returns (ids still to embed,
    papers copied). Read a part at a time: memory is the digests and one part's vectors."""
    sources = lenders(place.index_root, store, config) if len(missing) else []
    if not sources:
        return missing, 0
    now_ids, now = current_digests(place.corpus_dir, missing, ["title", "abstract", *columns])
    wanted, paper_text = np.unique(now, return_inverse=True)
    by_text = np.argsort(paper_text, kind="stable")  # papers grouped by their text
    starts = np.searchsorted(paper_text[by_text], np.arange(len(wanted)))
    counts = np.diff(np.append(starts, len(by_text)))
    taken = np.zeros(len(wanted), dtype=bool)
    copied = _Copies(store, config, inputs, part_size)
    for source in sources:
        for positions, vectors in vectors_of_texts(source, wanted, taken):
            n = counts[positions]  # every paper of each text takes its vector
            papers = by_text[np.repeat(starts[positions] - np.cumsum(n) + n, n)
                             + np.arange(n.sum())]
            copied.add(now_ids[papers], np.repeat(vectors, n, axis=0), now[papers], source)
    copied.flush()
    have = now_ids[taken[paper_text]]
    return np.setdiff1d(missing, have), len(have)


class _Copies:
    """Vectors copied from other stores (`reuse`), written as parts of at most `part_size`
    papers, each part's manifest device naming the stores it was copied from."""

    def __init__(self, store: Path, config: dict, inputs: dict[str, str], part_size: int):
        self.store, self.config, self.inputs, self.part_size = store, config, inputs, part_size
        self.held: list[tuple[np.ndarray, np.ndarray, np.ndarray, Path]] = []

    def add(self, ids: np.ndarray, vectors: np.ndarray, digests: np.ndarray,
            source: Path) -> None:
        self.held.append((ids, vectors, digests, source))
        while sum(len(held[0]) for held in self.held) >= self.part_size:
            self.flush(self.part_size)

    def flush(self, size: int | None = None) -> None:
        """Write the first `size` papers held (default: all) as one part."""
        if not self.held:
            return
        sources = sorted({str(held[3]) for held in self.held})
        ids, vectors, digests = (np.concatenate(c) for c in list(zip(*self.held, strict=True))[:3])
        size = len(ids) if size is None else size
        rest = self.held[-1][3]
        self.held = [(ids[size:], vectors[size:], digests[size:], rest)] if len(ids) > size \
            else []
        order = np.argsort(ids[:size], kind="stable")
        add_part(self.store, self.config, ids[:size][order], vectors[:size][order],
                 f"copied from {', '.join(sources)}", inputs=self.inputs,
                 digests=digests[:size][order])
