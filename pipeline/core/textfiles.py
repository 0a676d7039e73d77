"""Users' text files (collections in BEIR's, CSFCube's and the MDCR release's layouts): UTF-8,
with or without a byte-order mark (as Windows tools and Excel write it). A file that cannot be
read is refused in one line naming the file, the line (and column) and what is wrong there; a
JSON object that names a key twice is refused when the two values differ and counted when they
are the same (a JSON parser would silently keep the last).

A path is read only when it names a regular file (after links): one that is missing, a folder,
a FIFO, a device or a socket is refused in one line naming it and what to give instead
(`open_text`), and nothing blocks: a FIFO is opened without waiting for a writer and refused
(`open_regular`, which the labels door and verify share).

A file of lines read a line at a time holds one line in memory, up to a bound the reader states
(`bounded_lines`: a labels file's MAX_LINE, a corpus shard's MAX_RECORD): a longer line, or a
file of no line break at all, is refused at that line without being read whole."""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import polars as pl

from pipeline.core.errors import InputError

log = logging.getLogger(__name__)
BOM = b"\xef\xbb\xbf"


class SpecialFile(OSError):
    """A path that names no regular file (a device, a FIFO, a socket)."""


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading in binary, when it is a regular file (after links). Opened
    without blocking (a FIFO's open would wait for a writer) and checked on the open file
    (what was opened is what is read): a folder is IsADirectoryError, a device, FIFO or
    socket SpecialFile (a socket cannot be opened: ENXIO); a missing file FileNotFoundError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise SpecialFile(str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(str(path))
        if not stat.S_ISREG(mode):
            raise SpecialFile(str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_text(path: Path, kind: str) -> BinaryIO:
    """`path` opened as open_regular does; a path that is missing, a folder, a FIFO, a device
    or a socket, or that cannot be read, is refused in one line naming it and `kind`, what to
    give there ("a JSON-lines file")."""
    try:
        return open_regular(path)
    except FileNotFoundError:
        why = "does not exist"
    except IsADirectoryError:
        why = "is a folder"
    except SpecialFile:
        why = "is not a regular file (a FIFO, a device or a socket)"
    except OSError as exc:
        why = f"cannot be read ({exc.strerror or exc})"
    raise InputError(f"{path} {why}: give {kind}")


TEXT = "a UTF-8 text file"
JSON = "a JSON file"
JSON_LINES = "a JSON-lines file (a JSON object per line)"


def read_bytes(path: Path, kind: str) -> bytes:
    """The whole of the regular file `path` (`open_text`: anything else is refused, naming
    `kind`, what to give there)."""
    with open_text(path, kind) as handle:
        return handle.read()


def _without_bom(data: bytes) -> bytes:
    return data[len(BOM):] if data.startswith(BOM) else data


def _not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    """Where in `data` the decoding failed: 'line L, column C: byte 0xNN is not UTF-8'."""
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return (f"line {line}, column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 "
            "(save the file as UTF-8)")


def _lines(path: Path, kind: str = TEXT):
    """(number, text or None, the problem in words or None) of each line of a UTF-8 file
    (a byte-order mark allowed); `kind`: what to give where `path` is no regular file."""
    with open_text(path, kind) as handle:
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
    data = _without_bom(read_bytes(path, TEXT))
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
    for number, text, problem in _lines(path, JSON_LINES):
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
    """A JSON-lines file as a frame of `schema` (polars; a byte-order mark is skipped), each
    record read as a JSON reader reads it (`_record_problem`): a key of the schema given twice
    with different values, or a value of a String column that is no JSON string or null (a
    number, a boolean, a list, an object, which polars would write as text), is refused naming
    the line; a key given twice with the same value is read once, counted and logged. A file
    polars cannot read is looked at line by line to say where and why; `fix`: what to do."""
    data = _without_bom(read_bytes(path, JSON_LINES))
    try:
        lines = pl.Series("line", data.split(b"\n")).cast(pl.String)
    except pl.exceptions.PolarsError:  # bytes that are not UTF-8: jsonl_problem says where
        raise InputError(f"{path}: {jsonl_problem(path)}; {fix}") from None
    repeats = 0
    for index in lines.to_frame().select(_suspect(schema)).to_series().arg_true():
        problem, repeated = _record_problem(lines[index], schema)
        if problem:
            raise InputError(f"{path}: line {index + 1}: {problem}; {fix}")
        repeats += repeated
    if repeats:
        log.info(f"{path}: {repeats} keys repeated in a record with the same value, read once")
    try:
        return pl.read_ndjson(io.BytesIO(data), schema=schema, ignore_errors=False)
    except pl.exceptions.PolarsError as exc:
        problem = jsonl_problem(path) or (
            f"unreadable as JSON lines with {', '.join(schema)} ({str(exc).splitlines()[0]})")
        raise InputError(f"{path}: {problem}; {fix}") from None


def _suspect(schema: dict[str, pl.DataType]) -> pl.Expr:
    """Which lines (the column `line`) may break `_record_problem`'s rule, found by polars
    without parsing them, so that only these are parsed in Python (the cost: docs/
    collections.md): a line naming a key of `schema` twice; a key spelled with a \\u escape
    (the only other spelling of a key of letters, digits and underscores); a String column's
    key followed by a value that is neither a string nor null."""
    line, space = pl.col("line"), "[ \\t\\r\\n]*"
    keys = {key: json.dumps(key, ensure_ascii=False) for key in schema}
    return pl.any_horizontal(
        *(line.str.count_matches(quoted, literal=True) > 1 for quoted in keys.values()),
        *(line.str.contains(f"{re.escape(keys[key])}{space}:{space}[^ \\t\\r\\n\"n]")
          for key, dtype in schema.items() if dtype == pl.String),
        line.str.contains(f'[{{,]{space}"[^"]*\\\\u'))


class _Object(list):
    """A JSON object as its (key, value) pairs, in order, repeats kept."""


def _record_problem(line: bytes, schema: dict[str, pl.DataType]) -> tuple[str | None, int]:
    """Why a JSON-lines record (`line`) is not read alike by every JSON reader, in words, or
    None; and how many keys of `schema` it repeats with the same value (read once). A line
    that is no JSON object is left to the reader of the file, which names it."""
    try:
        record = json.loads(line, object_pairs_hook=_Object)
    except ValueError:  # not UTF-8 or not JSON: jsonl_problem says where
        return None, 0
    if not isinstance(record, _Object):
        return None, 0
    seen: dict[str, object] = {}
    repeats = 0
    for key, value in record:
        if key not in schema:
            continue
        if schema[key] == pl.String and not (value is None or isinstance(value, str)):
            return (f"its {key} is {_json_words(value)}, not a string (each reader would make "
                    "it text its own way): write it as one JSON string"), 0
        if key in seen:
            if seen[key] != value:
                return (f"the key {key!r} appears twice with different values "
                        f"({_json_words(seen[key])} and {_json_words(value)}): a JSON reader "
                        "keeps either silently; keep one"), 0
            repeats += 1
        seen[key] = value
    return None, repeats


def _json_words(value: object) -> str:
    """A parsed JSON value in words, cut to 40 characters: 'an object', 'true', '"d9"'."""
    if isinstance(value, _Object):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"the number {value!r}"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


class _Repeated(Exception):
    def __init__(self, key: str):
        self.key = key


def read_json(path: Path, fix: str) -> tuple[object, int]:
    """A JSON file's value and how many keys its objects repeat with the same value (kept
    once). A repeated key with another value, bytes that are not UTF-8 or text that is not
    JSON are refused with the line and column; `fix`: what to do."""
    data = _without_bom(read_bytes(path, JSON))
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
