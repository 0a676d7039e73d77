"""A refusal leaves no lock file behind (issue 46: `build_pool(field="Nope")` and a pool too
large for its corpus left `pools/.<name>.lock`, an ingest of a missing folder
`corpora/.<name>.lock` and an empty corpus folder), and removing one never lets two holders in
at once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.locks import file_lock, lock_path

WAIT = 60  # seconds: a bound on every wait of these tests (none is timed)


def test_a_refusal_removes_the_lock_file_it_made(tmp_path):
    target = tmp_path / "artifact"
    with pytest.raises(InputError), file_lock(target):
        assert lock_path(target).exists()
        raise InputError("refused")
    assert not lock_path(target).exists()
    with file_lock(target):  # work done: its lock file stays, as before
        pass
    assert lock_path(target).exists()
    with pytest.raises(InputError), file_lock(target):
        raise InputError("refused")
    assert lock_path(target).exists()  # one it did not make is kept


def test_a_waiter_on_a_removed_lock_file_locks_the_new_one(tmp_path):
    """B waits on the file A made; A refuses and removes it; B then holds a lock on a file
    no one else can open: it must lock the file at the path instead, so that C, coming
    after, waits for B (without the check C would hold the lock beside B)."""
    target = tmp_path / "artifact"
    a_holds, b_waits, a_done, b_holds, c_waits, b_release = (threading.Event()
                                                              for _ in range(6))
    errors: list[BaseException] = []

    def a() -> None:
        try:
            with file_lock(target):
                a_holds.set()
                assert b_waits.wait(WAIT)
                raise InputError("refused")
        except InputError:
            a_done.set()

    def b() -> None:
        try:
            with file_lock(target, waiting=b_waits.set):
                b_holds.set()
                assert b_release.wait(WAIT)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def c() -> None:
        with file_lock(target, waiting=c_waits.set):
            pass

    first = threading.Thread(target=a)
    first.start()
    assert a_holds.wait(WAIT)
    second = threading.Thread(target=b)
    second.start()
    assert a_done.wait(WAIT) and b_holds.wait(WAIT)
    third = threading.Thread(target=c)
    third.start()
    assert c_waits.wait(WAIT)  # C found the lock held by B
    b_release.set()
    for thread in (first, second, third):
        thread.join(WAIT)
    assert errors == [] and lock_path(target).exists()


def test_a_refused_ingest_leaves_no_lock_file(tmp_path):
    with pytest.raises(InputError, match="nope does not exist: give RAW="):
        pipeline.build_corpus(tmp_path, "x", raw=tmp_path / "nope")
    assert not lock_path(tmp_path / "corpora" / "x").exists()
    assert not (tmp_path / "corpora" / "x").exists()  # nor an empty corpus folder


def test_every_refused_pool_leaves_no_lock_file(corpus_dir: Path, tmp_path):
    from pipeline.pools.build import PoolSpec, build_pool
    from tests.conftest import copy_corpus

    corpus = copy_corpus(corpus_dir, tmp_path / "small")
    for spec, refused in ((PoolSpec(size=10, queries=5), "cannot hold"),
                          (PoolSpec(size=10**8, queries=5), "exceeds the papers"),
                          (PoolSpec(size=800, field="Nope"), "pool field 'Nope'"),
                          (PoolSpec(size=800, query_year=1800), "no query candidates")):
        with pytest.raises(InputError, match=refused):
            build_pool(corpus, spec)
    pools = corpus / "pools"
    assert not pools.exists() or sorted(p.name for p in pools.iterdir()) == []
