"""Lists of papers left out of the queries (EXCLUDE) or known to be in a model's training set
(TRAINING_SETS, the report's leakage table): read from the formats they are published in.

A list is a set of CorpusIDs. Its identity is the sha256 of its sorted, distinct ids, one per
line (`digest`), whatever the file's order, repeats or layout: the same papers give the same
pools. The formats, told apart by the file's content (docs/pools.md#exclusion-lists):

- `corpusids`: text, one CorpusID per line (blank lines and `#` comments skipped);
- `json-list`: a JSON list of CorpusIDs, as numbers or digit strings (SciNCL's released
  `s2orc_paper_ids.json` and `query_s2orc_paper_ids.json`: S2ORC paper ids are CorpusIDs).

Lists of Semantic Scholar paper SHAs (SPECTER's `train.txt` and `data.json`) name papers by
another id: `python -m pipeline training-ids` turns them into CorpusIDs with S2AG's `paper-ids`
dataset; given here, they are refused with that command.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.core.checksums import file_sha256
from pipeline.core.errors import InputError
from pipeline.glossary import S2_SHA
from pipeline.layout import exclusion_tag

NO_LIST = "none"  # EXCLUDE=none: the pools drawn without a list (make report, with several)
INT64_MAX = 2**63 - 1
WHOLE = re.compile(r"[0-9]+")  # a CorpusID as written: ASCII digits


@dataclass(frozen=True)
class PaperList:
    """A list of papers: its file, its format, its distinct CorpusIDs (sorted) and digest."""

    path: str
    format: str
    ids: np.ndarray = field(compare=False, repr=False)
    digest: str
    file_sha256: str
    lines: int  # entries read (repeats included): ids.size <= lines

    @property
    def tag(self) -> str:
        """What names the pools drawn without it (`layout.pool_name`)."""
        return exclusion_tag(self.digest)

    def record(self) -> dict:
        """What a manifest records of it (never the ids themselves)."""
        return {"path": self.path, "format": self.format, "ids": int(self.ids.size),
                "entries": self.lines, "ids_sha256": self.digest,
                "file_sha256": self.file_sha256}


def _corpus_id(value: object, where: str) -> int:
    text = str(value).strip()
    # ASCII digits only: str.isdigit() also takes '²', which int() refuses
    if isinstance(value, bool) or not WHOLE.fullmatch(text) or int(text) > INT64_MAX:
        hint = (": a Semantic Scholar SHA, not a CorpusID; convert the list with `python -m "
                "pipeline training-ids`" if S2_SHA.fullmatch(text) else "")
        raise InputError(f"{where}: {text[:40]!r} is not a CorpusID (a whole number){hint}")
    return int(text)


def _read_text(path: Path) -> list[int]:
    ids = []
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, 1):
            text = line.split("#", 1)[0].strip()
            if text:
                ids.append(_corpus_id(text, f"{path}, line {number}"))
    return ids


def _read_json(path: Path) -> list[int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); give a JSON list of CorpusIDs, or a "
                         "text file with one CorpusID per line") from None
    if isinstance(data, dict):
        raise InputError(f"{path}: a JSON object (SPECTER's data.json names papers by SHA): "
                         "convert it to CorpusIDs with `python -m pipeline training-ids`")
    if not isinstance(data, list):
        raise InputError(f"{path}: JSON {type(data).__name__}, not a list of CorpusIDs")
    return [_corpus_id(value, f"{path}, item {i}") for i, value in enumerate(data, 1)]


@dataclass(frozen=True)
class ListFormat:
    """A published format of a list of papers: how to tell it and how to read it."""

    name: str
    description: str
    matches: Callable[[bytes], bool]  # from the file's first bytes
    read: Callable[[Path], list[int]]


FORMATS = {f.name: f for f in (
    ListFormat("json-list", "a JSON list of CorpusIDs (SciNCL's s2orc_paper_ids.json)",
               lambda head: head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"[", b"{"),
               _read_json),
    ListFormat("corpusids", "text, one CorpusID per line", lambda head: True, _read_text),
)}


def read_list(path: str | Path, what: str = "EXCLUDE") -> PaperList:
    """The list in file `path` (any of FORMATS), or a one-line error naming it."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"{what} {path}: no such file; give a list of CorpusIDs (one per line, "
                         "or a JSON list)")
    try:
        with file.open("rb") as handle:
            head = handle.read(64)
        fmt = next(f for f in FORMATS.values() if f.matches(head))
        ids = fmt.read(file)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} {path}: unreadable ({exc.__class__.__name__}); give a text "
                         "file of CorpusIDs") from None
    if not ids:
        raise InputError(f"{what} {path}: holds no CorpusID; give the list of papers to leave "
                         "out (or leave the variable empty)")
    distinct = np.unique(np.asarray(ids, dtype=np.int64))
    digest = hashlib.sha256("".join(f"{i}\n" for i in distinct.tolist()).encode()).hexdigest()
    return PaperList(str(file.resolve()), fmt.name, distinct, digest, file_sha256(file),
                     len(ids))


def list_changed(path: str | None, digest: str, file_sha: str | None = None) -> str | None:
    """Why the list a pool was drawn without (its file `path`, the digest of its ids, the
    file's sha256 then) no longer names that pool's papers: the file gone, unreadable, or
    holding other ids; None while it names the same papers. The one rule every stage and
    verify apply to a pool's list (pools.build.list_problem)."""
    if not path or not Path(path).is_file():
        return f"its EXCLUDE list {path} is gone"
    if file_sha is not None and file_sha256(Path(path)) == file_sha:
        return None  # the same bytes: the same ids
    try:
        now = read_list(path)
    except InputError as exc:
        return f"its EXCLUDE list cannot be read ({exc.message})"
    if now.digest != digest:
        return (f"its EXCLUDE list {path} has other papers than when it was drawn (ids sha256 "
                f"{now.digest[:12]}..., recorded {digest[:12]}...)")
    return None


def share_in(ids: np.ndarray, papers: PaperList) -> tuple[int, int]:
    """(how many of the distinct `ids` are in `papers`, how many distinct ids)."""
    distinct = np.unique(ids)
    return int(np.isin(distinct, papers.ids).sum()), int(distinct.size)
