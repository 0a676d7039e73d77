"""Users' text files (pipeline/core/textfiles.py): every reader opens only a regular file,
refusing anything else in one line without blocking; a JSON-lines record is read as every JSON
reader reads it, or refused naming its line."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.core.textfiles import (
    jsonl_problem,
    read_bytes,
    read_json,
    read_jsonl,
    read_text,
    text_lines,
    utf8_problem,
)

SCHEMA = {"_id": pl.String, "title": pl.String, "text": pl.String}
BOUND_S = 120  # only a reader that blocks (the failure) waits this long

READERS: dict[str, Callable[[Path], object]] = {
    "read_jsonl": lambda path: read_jsonl(path, SCHEMA, "fix it"),
    "read_json": lambda path: read_json(path, "fix it"),
    "read_text": lambda path: read_text(path, "fix it"),
    "text_lines": lambda path: list(text_lines(path, "fix it")),
    "jsonl_problem": jsonl_problem,
    "utf8_problem": utf8_problem,
    "read_bytes": lambda path: read_bytes(path, "a file of judgments"),
}


def _not_regular(kind: str, folder: Path) -> Path:
    """A path of `kind` under `folder`: missing, a folder, a FIFO, a link to a device, a
    socket."""
    path = folder / "input"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/null")  # reads as an empty file
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(os.path.relpath(path))  # relative: a socket's path is short
        server.close()
    return path


def refusal(read: Callable[[Path], object], path: Path) -> BaseException | None:
    """What `read(path)` raised (None if it returned), read in a thread so that a reader that
    blocks fails the test instead of hanging it."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            read(path)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(BOUND_S)
    assert outcome, f"reading {path} blocked"
    return outcome[0]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind, why", [
    ("missing", "does not exist"), ("folder", "is a folder"),
    ("fifo", "is not a regular file"), ("device", "is not a regular file"),
    ("socket", "is not a regular file")])
def test_a_path_that_is_no_regular_file_is_refused_in_one_line(reader, kind, why, tmp_path,
                                                               monkeypatch):
    """A FIFO blocked for ever, a device read as an empty file, a folder was a traceback:
    each is one line naming the path, what it is, and what to give there."""
    monkeypatch.chdir(tmp_path)
    path = _not_regular(kind, tmp_path)
    error = refusal(READERS[reader], path)
    assert isinstance(error, InputError), repr(error)
    message = str(error)
    assert message.startswith(f"{path} {why}") and ": give a" in message
    assert "\n" not in message


def _jsonl(tmp_path: Path, *records: str) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(f"{record}\n" for record in records))
    return path


GOOD = '{"_id": "d2", "title": "t2", "text": "gamma"}'


@pytest.mark.parametrize("record, said", [
    ('{"_id": "d1", "_id": "d9", "title": "t", "text": "alpha"}',
     """the key '_id' appears twice with different values ("d1" and "d9")"""),
    ('{"_id": "d1", "title": "t", "text": "alpha", "text" : "beta"}',
     """the key 'text' appears twice with different values ("alpha" and "beta")"""),
    ('{"\\u005fid": "d1", "title": "t", "_id": "d9", "text": "alpha"}',
     """the key '_id' appears twice with different values ("d1" and "d9")"""),
])
def test_a_key_repeated_with_another_value_is_refused_naming_the_line(record, said, tmp_path):
    """polars kept the first value, a JSON parser (BEIR's loader) the last: two readings of
    one record, so neither is taken."""
    path = _jsonl(tmp_path, GOOD, record)
    with pytest.raises(InputError) as error:
        read_jsonl(path, SCHEMA, "keep one")
    assert str(error.value) == (f"{path}: line 2: {said}: a JSON reader keeps either "
                                "silently; keep one; keep one")


def test_a_key_repeated_with_the_same_value_is_read_once_and_counted(tmp_path, caplog):
    """Read once, counted and logged. Not refused either: a null title, keys outside the
    schema (of any type, repeated), a schema key inside a nested object or inside a text,
    escaped text, blank lines."""
    path = _jsonl(tmp_path, '{"_id": "d1", "_id": "d1", "title": "t", "text": "alpha"}',
                  '{"_id": "d3", "title": "t", "text": "x", "title": "t"}',
                  json.dumps({"_id": "d4", "title": None, "text": "caf\u00e9 \"_id\": 7"}),
                  '{"_id": "d5", "n": 1, "n": 2, "title": "t", "text": "y"}',
                  json.dumps({"_id": "d6", "title": "t", "text": "x",
                              "meta": {"_id": 5, "text": [1]}}),
                  json.dumps({"_id": "_id", "title": "text", "text": "title"}), "")
    with caplog.at_level("INFO", logger="pipeline.core.textfiles"):
        frame = read_jsonl(path, SCHEMA, "fix it")
    assert frame.rows() == [("d1", "t", "alpha"), ("d3", "t", "x"),
                            ("d4", None, 'café "_id": 7'), ("d5", "t", "y"), ("d6", "t", "x"),
                            ("_id", "text", "title")]
    assert f"{path}: 2 keys repeated in a record with the same value, read once" in caplog.text


@pytest.mark.parametrize("key, value, said", [
    ("_id", "7.0", "the number 7.0"), ("_id", "1e2", "the number 100.0"),
    ("_id", "true", "true"), ("_id", '{"id": "d1"}', "an object"),
    ("title", '["a", "b"]', "a list"), ("text", '{"p": "x"}', "an object"),
])
def test_a_value_that_is_no_string_is_refused_naming_the_line(key, value, said, tmp_path):
    """polars wrote 7.0 as "7", true as "true", a list as its JSON text: an id or a text that
    BEIR's loader would not read so. A null is no text (read as missing)."""
    fields = {"_id": '"d1"', "title": '"t"', "text": '"alpha"', key: value}
    path = _jsonl(tmp_path, GOOD, "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items())
                  + "}")
    with pytest.raises(InputError, match=rf"^{path}: line 2: its {key} is {said}, not a "
                                         "string"):
        read_jsonl(path, SCHEMA, "fix it")
