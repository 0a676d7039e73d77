"""Lists of training papers published with Semantic Scholar paper SHAs, turned into CorpusIDs
(`python -m pipeline training-ids`), so that EXCLUDE and TRAINING_SETS can read them.

SPECTER's training data names papers by their 40-hex S2 SHA: `train.txt` / `val.txt` (one id
per line), `data.json` (a nested dict: each query paper -> {paper: {"count": 5 or 1}}, whose
keys at both levels are papers of the training set), and its training triples as a CSV of
(query, positive, negative) SHAs (as SciNCL extracts them from SPECTER's `train.pkl`). S2AG's
`paper-ids` dataset maps each SHA to its CorpusID (`{"sha", "corpusid", "primary"}` per line).
The output is a text file of the distinct CorpusIDs, sorted; SHAs the dataset does not know
are counted and reported, never dropped without a word.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import orjson

from pipeline.core.atomic import atomic_path
from pipeline.core.errors import InputError
from pipeline.glossary import S2_SHA
from pipeline.ingest.shards import BadLine, list_shards, open_shard, read_id, shard_lines

log = logging.getLogger(__name__)

HEX = re.compile(r"[0-9a-fA-F]+")  # a word that is a hex number: an id (mistyped or not)


def read_shas(path: Path) -> set[str]:
    """The SHAs of a SPECTER list, lowered (glossary.S2_SHA: any case, as S2AG writes them):
    `data.json` (both levels' keys), one SHA per line, or training triples as CSV (every SHA
    of every row). The first line is a header only when none of its words is a hex number, so
    a first id in capitals, or mistyped, is read (or refused) as on any other line; a header
    skipped is logged."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"SRC {path}: unreadable ({exc.__class__.__name__}); give SPECTER's "
                         "data.json or train.txt") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InputError(f"SRC {path}: not valid JSON ({exc})") from None
        ids = {key: f"SRC {path}" for key in data}
        for related in data.values():
            if not isinstance(related, dict):
                raise InputError(f"SRC {path}: not SPECTER's data.json (each query paper maps "
                                 "to a dict of papers)")
            ids.update((key, f"SRC {path}") for key in related if key not in ids)
    else:  # train.txt (one SHA a line), or triples (query, positive, negative) as CSV/TSV
        rows = [(number, re.split(r"[,\t ]+", line.strip()))
                for number, line in enumerate(text.splitlines(), 1) if line.strip()]
        if rows and not any(HEX.fullmatch(word) for word in rows[0][1]):
            log.info(f"[training-ids] SRC {path}: line {rows[0][0]} read as a header, not ids: "
                     f"{','.join(rows[0][1])[:80]!r}")
            rows = rows[1:]  # a header line (query_paper_id,positive_id,...)
        ids = {}
        for number, words in rows:
            ids.update((word, f"SRC {path}, line {number}") for word in words
                       if word and word not in ids)
    bad = [(word, where) for word, where in ids.items() if not S2_SHA.fullmatch(word)]
    if bad:
        word, where = bad[0]
        raise InputError(f"{where}: {word[:50]!r} is not an S2 paper SHA (40 hex digits, in "
                         f"any case; {len(bad)} of its {len(ids)} ids are not): a list of "
                         "CorpusIDs needs no conversion")
    if not ids:
        raise InputError(f"SRC {path}: holds no paper id")
    return {word.lower() for word in ids}


def _corpus_id(value: object, shard: Path, number: int) -> int:
    """A paper-ids record's corpusid, read as ingest reads ids (`shards.read_id`: a JSON
    number, or its ASCII digits), or a one-line error naming the shard and line."""
    try:
        return read_id({"corpusid": value}, "corpusid", required=True)  # never None: required
    except BadLine:
        raise InputError(f"PAPER_IDS shard {shard}, line {number}: corpusid "
                         f"{str(value)[:40]!r} is not a CorpusID (a whole number); is it "
                         "S2AG's paper-ids dataset? Download it again (make download "
                         "DATASETS=paper-ids)") from None


def check_out(out: Path, src: Path) -> None:
    """Refuse an OUT that exists (a list of the user's, or SRC itself: training-ids writes a
    new file and never replaces one), or whose folder does not, before any work."""
    if out.exists() or out.is_symlink():
        same = " (it is SRC)" if src.exists() and out.resolve() == src.resolve() else ""
        raise InputError(f"OUT {out} already exists{same}: training-ids writes a new file and "
                         "never replaces one; give another OUT, or move that file away first")
    if not out.absolute().parent.is_dir():
        raise InputError(f"OUT {out}: the folder {out.absolute().parent} does not exist: "
                         "create it first, or give OUT in an existing folder")


def corpus_ids(shas: set[str], paper_ids: Path) -> tuple[list[int], int]:
    """(distinct CorpusIDs of `shas`, sorted; how many SHAs the paper-ids shards lack)."""
    shards = list_shards(paper_ids)
    if not shards:
        raise InputError(f"PAPER_IDS {paper_ids}: no *.jsonl.gz shards of S2AG's paper-ids "
                         "dataset; download them (make download DATASETS=paper-ids)")
    found: dict[str, int] = {}
    for shard in shards:
        number = 0
        try:
            with open_shard(shard) as handle:
                for number, line in shard_lines(handle, shard):  # noqa: B007 (the error names it)
                    if b'"sha"' not in line:
                        continue
                    record = orjson.loads(line)
                    sha = record.get("sha") if isinstance(record, dict) else None
                    if isinstance(sha, str) and sha in shas \
                            and record.get("corpusid") is not None:
                        found.setdefault(sha, _corpus_id(record["corpusid"], shard, number))
        except (OSError, EOFError, orjson.JSONDecodeError) as exc:
            raise InputError(f"PAPER_IDS shard {shard}: unreadable near line {number} "
                             f"({exc.__class__.__name__}); download it again") from None
    return sorted(set(found.values())), len(shas) - len(found)


def convert(src: Path, paper_ids: Path, out: Path) -> dict:
    """Write the CorpusIDs of SPECTER's list `src` to `out` (one per line), a file that does
    not exist yet; return counts."""
    check_out(out, src)
    shas = read_shas(src)
    ids, missing = corpus_ids(shas, paper_ids)
    if not ids:
        raise InputError(f"none of the {len(shas)} SHAs of {src} is in the paper-ids shards "
                         f"under {paper_ids}: is it S2AG's paper-ids dataset?")
    with atomic_path(out) as tmp:
        tmp.write_text("".join(f"{i}\n" for i in ids))
    counts = {"shas": len(shas), "corpus_ids": len(ids), "shas_not_found": missing}
    if missing:
        log.warning(f"[training-ids] {missing} of {len(shas)} SHAs of {src} have no CorpusID "
                    f"in {paper_ids} (papers S2 no longer lists): left out of {out}")
    return counts
