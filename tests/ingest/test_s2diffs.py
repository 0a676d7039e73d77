"""The diffs' keys are read as ingest reads ids (issue 56's sibling): a record whose key is
written as digits (an older release's) is found and replaced, and a key out of int64's range
is one line, not a traceback. The whole update against a server: test_download.py."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.ingest import s2diffs


def shard(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines)))
    return path


def test_a_diff_finds_keys_written_as_digits(tmp_path):
    lines = [b'{"corpusid": "1", "title": "kept"}', b'{"corpusid": "2", "title": "old"}',
             b'{"corpusid": 3, "title": "old"}', b'{"corpusid": "x"}']
    update = shard(tmp_path / "update.jsonl.gz", [b'{"corpusid": "2", "title": "new"}'])
    delete = shard(tmp_path / "delete.jsonl.gz", [b'{"corpusid": 3}'])
    keys = s2diffs._keys([update, delete], "corpusid")
    assert keys.tolist() == [2, 3]
    counts = {"unkeyed_kept": 0}
    out = tmp_path / "out.jsonl.gz"
    removed = s2diffs._filter(shard(tmp_path / "part-0.jsonl.gz", lines), out, keys,
                              "corpusid", counts)
    assert (removed, counts) == (2, {"unkeyed_kept": 1})
    assert gzip.decompress(out.read_bytes()).splitlines() == [lines[0], lines[3]]


def test_a_diff_key_beyond_int64_is_one_line(tmp_path):
    """2**63: orjson reads it (up to 2**64 - 1), numpy's int64 does not."""
    delete = shard(tmp_path / "delete.jsonl.gz", [b'{"corpusid": 9223372036854775808}'])
    with pytest.raises(InputError, match=r"delete\.jsonl\.gz:1: a diff record without an "
                                         r"integer corpusid"):
        s2diffs._keys([delete], "corpusid")
