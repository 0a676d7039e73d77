"""Users' text files (collections in BEIR's, CSFCube's and the MDCR release's layouts): UTF-8,
with or without a byte-order mark (as Windows tools and Excel write it). A file that cannot be
read is refused in one line naming the file, the line (and column) and what is wrong there; a
JSON object that names a key twice is refused when the two values differ and counted when they
are the same (a JSON parser would silently keep the last).

A file of lines read a line at a time holds one line in memory, up to a bound the reader states
(`bounded_lines`: a labels file's MAX_LINE, a corpus shard's MAX_RECORD): a longer line, or a
file of no line break at all, is refused at that line without being read whole."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import polars as pl

from pipeline.core.errors import InputError

BOM = b"\xef\xbb\xbf"


def _without_bom(data: bytes) -> bytes:
    return data[len(BOM):] if data.startswith(BOM) else data


def _not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    """Where in `data` the decoding failed: 'line L, column C: byte 0xNN is not UTF-8'."""
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return (f"line {line}, column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 "
            "(save the file as UTF-8)")


def _lines(path: Path):
    """(number, text or None, the problem in words or None) of each line of a UTF-8 file
    (a byte-order mark allowed)."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            raw = _without_bom(raw) if number == 1 else raw
            try:
                yield number, raw.decode("utf-8"), None
            except UnicodeDecodeError as exc:
                yield number, None, (f"line {number}, column {exc.start + 1}: byte "
                                     f"0x{raw[exc.start]:02x} is not UTF-8 (save the file as "
                                     "UTF-8)")


def text_lines(path: Path, fix: str):
    """(number, text) of each line of a UTF-8 text file (a byte-order mark allowed); a line
    that is not UTF-8 is refused with its number and column; `fix`: what to do."""
    for number, text, problem in _lines(path):
        if problem:
            raise InputError(f"{path}: {problem}; {fix}")
        yield number, text


def read_text(path: Path, fix: str) -> str:
    """A whole UTF-8 text file (a byte-order mark skipped); bytes that are not UTF-8 are
    refused with their line and column; `fix`: what to do."""
    data = _without_bom(path.read_bytes())
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: {_not_utf8(data, exc)}; {fix}") from None


def utf8_problem(path: Path) -> str | None:
    """The first line of a text file that is not UTF-8, in words ('line 7, column 3: ...')."""
    return next((problem for _, _, problem in _lines(path) if problem), None)


def jsonl_problem(path: Path) -> str | None:
    """The first line of a JSON-lines file that is not UTF-8 or not a JSON object, in words
    ('line 7: ...'), or None. Blank lines and a byte-order mark are allowed."""
    for number, text, problem in _lines(path):
        if problem:
            return problem
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return f"line {number}, column {exc.colno}: not JSON ({exc.msg})"
        if not isinstance(value, dict):
            return f"line {number}: not a JSON object"
    return None


def read_jsonl(path: Path, schema: dict[str, pl.DataType], fix: str) -> pl.DataFrame:
    """A JSON-lines file as a frame of `schema` (polars; a byte-order mark is skipped). A file
    polars cannot read is looked at line by line to say where and why; `fix`: what to do."""
    with path.open("rb") as handle:
        source: Path | io.BytesIO = path
        if handle.read(len(BOM)) == BOM:  # polars reads no BOM: the rest, from memory
            source = io.BytesIO(handle.read())
    try:
        return pl.read_ndjson(source, schema=schema, ignore_errors=False)
    except pl.exceptions.PolarsError as exc:
        problem = jsonl_problem(path) or (
            f"unreadable as JSON lines with {', '.join(schema)} ({str(exc).splitlines()[0]})")
        raise InputError(f"{path}: {problem}; {fix}") from None


class _Repeated(Exception):
    def __init__(self, key: str):
        self.key = key


def read_json(path: Path, fix: str) -> tuple[object, int]:
    """A JSON file's value and how many keys its objects repeat with the same value (kept
    once). A repeated key with another value, bytes that are not UTF-8 or text that is not
    JSON are refused with the line and column; `fix`: what to do."""
    data = _without_bom(path.read_bytes())
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: {_not_utf8(data, exc)}; {fix}") from None
    repeats = 0

    def pairs(items: list[tuple[str, object]]) -> dict:
        nonlocal repeats
        out: dict = {}
        for key, value in items:
            if key in out:
                if out[key] != value:
                    raise _Repeated(key)
                repeats += 1
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=pairs), repeats
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line {exc.lineno}, column {exc.colno}: not valid JSON "
                         f"({exc.msg}); {fix}") from None
    except _Repeated as exc:
        raise InputError(f"{path}: the key {exc.key!r} appears twice in one object with "
                         f"different values (a JSON reader keeps either silently): keep one; "
                         f"{fix}") from None


class LineTooLong(ValueError):
    """A line longer than its bound: `number` names it."""

    def __init__(self, number: int, most: int) -> None:
        super().__init__(f"line {number} is longer than {most} bytes")
        self.number, self.most = number, most


def bounded_lines(handle: BinaryIO, most: int, seen: Callable[[bytes], object] | None = None
                  ) -> Iterator[tuple[int, bytes]]:
    """(number from 1, line) for each line of `handle`, without its line end (`\\n`,
    `\\r\\n`), each read with at most `most` bytes held: a longer one raises LineTooLong.
    `seen` is given every byte read, in order (a digest's update)."""
    number = 1
    while line := handle.readline(most + 2):  # room for the line end
        if seen is not None:
            seen(line)
        if not line.endswith(b"\n") and len(line) > most:
            raise LineTooLong(number, most)
        body = line.removesuffix(b"\n").removesuffix(b"\r")
        if len(body) > most:
            raise LineTooLong(number, most)
        yield number, body
        number += 1
