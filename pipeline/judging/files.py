"""The judging files read as data (docs/judging.md): an assessor's log and a person's labels
file. One home for the rules that the stages reading them and `make verify` share, so that
verify passes a file exactly when `make judge` reads it.

- A grade is a JSON integer 0-3 (GRADES), or null where the format allows no grade (a log's
  pair left ungraded after its replies): `true` is not 1, `2.0` and `1e0` are not 2, `"2"` is
  not 2 (`grade_problem`). Each other field of a log line is of the type its judgments' columns
  hold (`record_problem`): anything else, and a line that is not UTF-8 or not JSON, is one
  line naming the file and the line, with its repair (`line_repair`: delete that line, and the
  next `make judge` asks its pair again; or move the log away, and every pair is asked again).
- A log's lines end at `\\n` only (`log_lines`): a reply may hold U+2028 or U+0085, which
  `str.splitlines` would take for line ends.
- A labels file is a regular file, opened without blocking and refused otherwise (a device
  such as /dev/zero, a FIFO, a socket: core/textfiles.open_regular), then read a line at a
  time, each at most MAX_LINE bytes (core/textfiles.bounded_lines), so that reading it takes
  memory for the labels it keeps, not for its size.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from pipeline.core.repair import Repair

GRADES = (0, 1, 2, 3)
MAX_LINE = 64 * 1024  # bytes per line of a labels file (the page writes ids, a name, a time)
INT16 = 2 ** 15 - 1  # the judgments' `asked` and `not_grades` columns (int16)
MOVE_LOG = Repair("", note="move it away and judge again: its pairs are asked again")
BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, which spreadsheet programs write first
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def grade_problem(value: object) -> str | None:
    """Why `value` (a log line's grade, read from JSON) is not a grade, or None when it is
    one: an int 0-3 (not a bool, not a float), or None (no grade: a pair left ungraded)."""
    if value is None or (type(value) is int and value in GRADES):
        return None
    return f"its grade is {json.dumps(value)[:20]}, not an integer 0-3 or null"


def frame_grade_problem(frame: pl.DataFrame) -> str | None:
    """Why a judgments frame's grades are not grades (grade_problem's rule over a column: an
    integer type, not a bool or a float, every value 0-3, none missing), or None."""
    if not {"query", "doc", "grade"} <= set(frame.columns):
        return "it has no query, doc and grade columns"
    grades = frame["grade"]
    if not grades.dtype.is_integer():
        return f"its grades are of type {grades.dtype}, not integers 0-3"
    wrong = frame.filter(pl.col("grade").is_null() | ~pl.col("grade").is_in(GRADES))
    if wrong.height:
        return (f"{wrong.height} of its grades are not 0, 1, 2 or 3 (first: query "
                f"{wrong['query'][0]}, candidate {wrong['doc'][0]}: {wrong['grade'][0]})")
    return None


def record_problem(record: object) -> str | None:
    """Why a log line's parsed JSON is not a judgment (as the log's reader and verify take
    one), or None: an object with the pair's ids (text), a grade (grade_problem), the replies
    (a list of text), the requests and the replies that were no grade (integers 0-32767), the
    time (text, or null) and the assessor (text)."""
    if not isinstance(record, dict):
        return "it is not a JSON object"
    for key in ("query", "doc", "assessor"):
        if not isinstance(record.get(key), str):
            return f"it has no {key} (text)"
    if (problem := grade_problem(record.get("grade"))) is not None:
        return problem
    replies = record.get("replies")
    if not (isinstance(replies, list) and all(isinstance(r, str) for r in replies)):
        return "it has no list of replies (text)"
    for key in ("asked", "not_grades"):
        value = record.get(key)
        if not (type(value) is int and 0 <= value <= INT16):
            return f"it has no {key} count (an integer 0-{INT16})"
    if record.get("time") is not None and not isinstance(record.get("time"), str):
        return "its time is not text"
    return None


def parse_record(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A log line (without its `\\n`) as (its judgment record, None), or (None, why it is not
    one)."""
    try:
        record = json.loads(line.decode())
    except UnicodeDecodeError:
        return None, "it is not UTF-8 text"
    except ValueError:
        return None, "it is not JSON"
    problem = record_problem(record)
    return (None, problem) if problem else (record, None)


def described_assessor(line: bytes, version: int) -> dict[str, Any] | None:
    """The assessor a log's first line describes (its `assessor` object, in a log of format
    `version`), or None when the line is not such a description."""
    try:
        head = json.loads(line.decode())
    except ValueError:  # UnicodeDecodeError is one
        return None
    if not (isinstance(head, dict) and type(head.get("judging_log")) is int
            and head.get("judging_log") == version and isinstance(head.get("assessor"), dict)):
        return None
    return head["assessor"]


def line_repair(number: int) -> Repair:
    """What repairs a log whose line `number` is not a judgment: that line deleted (its pair
    is asked again), or the whole log moved away (every pair is)."""
    return Repair("", note=f"delete line {number} of it, and the next make judge asks that "
                  "pair again; or move it away, and every pair is asked again")


def head_problem(line: bytes) -> str:
    """Why a log's first line (`line`, which described_assessor refused) describes no assessor,
    in words: a byte-order mark before it (an editor saved the log) named, with its repair."""
    why = "its first line does not describe an assessor"
    if line.startswith(BOM):
        return (f"{why}: it starts with a UTF-8 byte-order mark (an editor saved the log so); "
                "remove those 3 bytes, and every judgment of it counts again")
    return why


def log_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """A log's whole lines (each without its `\\n`) and what follows the last `\\n` (a line
    cut short by a kill while it was written; b"" when none)."""
    whole, _, cut = data.rpartition(b"\n")
    return (whole.split(b"\n") if whole else []), cut
