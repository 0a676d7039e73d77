"""Fault injection: every stage is killed with SIGKILL at seeded random moments, rerun, and
must end byte-identical to an uninterrupted run, with no debris and no orphaned child (Java,
ingest workers).

The reference and the faulted data roots run the same commands (`python -m pipeline ...`) on
the same small synthetic corpus; only the kills differ. Lucene's own index files carry a
random segment id, so for BM25 the index is checked by `verify` and by its search results.

Each command runs as its own process, forked from one that imported torch, transformers and
the other heavy libraries once (`Forks`): what the kills hit is the same code at the same
moments of writing, without the 3 to 10 s each of the 56 runs spent importing before it wrote
anything (the test took 184 s alone, 352 s under make test's load).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.core.inputs import Roots
from pipeline.verify import verify

SEED = 20261122
POOL = "all-1600-s1-r0"
# (label, stage arguments, kills)
STAGES: list[tuple[str, list[str], int]] = [
    ("ingest", ["ingest", "--corpus", "c", "--raw", "{raw}", "--threads", "2"], 4),
    ("prefilter", ["prefilter", "--corpus", "c"], 3),
    ("pool", ["pool", "--corpus", "c", "--size", "1600", "--queries", "20", "--seed", "1"], 3),
    # on the CPU (--device cpu, --backend *-cpu): byte-identical stores are a CPU promise
    ("embed", ["embed", "--corpus", "c", "--model", "scibert", "--model-path", "{model}",
               "--part-size", "200", "--batch-size", "32", "--device", "cpu"], 5),
    ("index", ["index", "--corpus", "c", "--model", "bm25", "--threads", "1",
               "--bm25-engine", "lucene"], 3),
    ("search-bm25", ["search", "--corpus", "c", "--model", "bm25", "--threads", "1",
                     "--bm25-engine", "lucene"], 2),
    # the arrays engine rewrites the same run, byte for byte (the same lists and scores)
    ("search-bm25-arrays", ["search", "--corpus", "c", "--model", "bm25", "--threads", "1",
                            "--bm25-engine", "arrays"], 2),
    ("search-dense", ["search", "--corpus", "c", "--model", "scibert", "--backend",
                      "faiss-cpu"], 3),
    ("embed-multi-vector", ["embed", "--corpus", "c", "--model", "aspire-cs", "--model-path",
                            "{model}", "--part-size", "200", "--device", "cpu"], 3),
    ("search-multi-vector", ["search", "--corpus", "c", "--model", "aspire-cs", "--backend",
                             "torch-cpu"], 2),
    ("eval", ["eval", "--corpus", "c", "--model", "bm25"], 4),
]
VOLATILE = ("manifest.json", ".eval.json", "stage-times.jsonl", ".lock", ".checksums.json",
            ".spec.json")
POLL = 0.02  # seconds between looks at a running stage (2 cores: the stage needs them)
STAGE_TIMEOUT = 600  # seconds a stage may take before the test fails instead of hanging


def _command(root: Path, args: list[str], raw: Path, model: Path) -> list[str]:
    filled = [a.format(raw=raw, model=model) for a in args]
    return [sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
            "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"), *filled]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}


# The process the stages are forked from: it imports PRELOAD and says ready (no stage's time
# includes the imports); then, for each command read from stdin (JSON: argv, stderr), it forks
# a child that runs `python -m pipeline <argv>` as the interpreter would (runpy; the exit
# status that of SystemExit; atexit handlers run), writes the child's pid, waits for it and
# writes its exit status (negative: the signal). Only libraries that start no thread at import
# are preloaded (polars and pyarrow start allocator threads, whose locks a fork could copy
# held): a zygote with a second thread refuses to fork. The imported objects are frozen
# (gc.freeze, before the first fork): a stage's own process holds none of the libraries it does
# not import, and the collector traversing them in every child (its full collections and the
# one at exit, copying each page it touches) took 1.2 to 1.5 s of CPU in each stage run to its
# end, most of the 1.8 to 2.3 s of prefilter, pool, eval and the dense searches (the test:
# 122 CPU s before the freeze, 68 to 70 after, with _writing's one pass over the root).
PRELOAD = ("numpy", "scipy", "numba", "torch", "transformers",
           "transformers.models.bert.modeling_bert", "faiss", "tokenizers", "safetensors",
           "pipeline.cli.main")
ZYGOTE = """
import gc, json, os, runpy, sys
for name in sys.argv[1:]:
    __import__(name)
gc.freeze()
print("ready", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        print(f"error: the zygote runs {threads} threads after its imports: forking is unsafe",
              flush=True)
        break
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for fd, to in ((0, null), (1, null), (2, err)):
            os.dup2(to, fd)
        sys.argv = ["-m", *request["argv"]]
        runpy.run_module("pipeline", run_name="__main__", alter_sys=True)
        raise SystemExit(0)
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class Forks:
    """The zygote process (ZYGOTE), started with ENV; `start` runs one command in it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE, *PRELOAD], env=ENV,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert self.line(STAGE_TIMEOUT) == "ready", "the zygote's imports hang"

    def line(self, timeout: float | None) -> str | None:
        """The zygote's next line, or None when none came within `timeout` seconds."""
        if not select.select([self.proc.stdout], [], [], timeout)[0]:
            return None
        line = self.proc.stdout.readline().decode()
        assert line and not line.startswith("error"), line or "the zygote died"
        return line.strip()

    def start(self, cmd: list[str], stderr: Path) -> Forked:
        """`cmd` (`python -m pipeline ...`) as a process forked from the zygote."""
        assert cmd[1:3] == ["-m", "pipeline"], cmd
        self.proc.stdin.write((json.dumps({"argv": cmd[3:], "stderr": str(stderr)}) + "\n")
                              .encode())
        return Forked(self, cmd, int(self.line(STAGE_TIMEOUT)))

    def close(self) -> None:
        """End the zygote: it leaves its loop at the end of its input."""
        self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        _stop(self.proc)


class Forked:
    """A stage forked from the zygote, with subprocess.Popen's poll, wait, kill, send_signal
    and returncode (the zygote, its parent, reports its exit status)."""

    def __init__(self, forks: Forks, args: list[str], pid: int) -> None:
        self.forks, self.args, self.pid = forks, args, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.wait(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            line = self.forks.line(timeout)
            if line is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = int(line)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


@pytest.fixture
def forks() -> Iterator[Forks]:
    zygote = Forks()
    try:
        yield zygote
    finally:
        zygote.close()


def _entries(root: Path) -> Iterator[os.DirEntry]:
    """Every entry under `root`, folders before what they hold (not into linked folders, as
    rglob; one that vanishes while it is read is skipped: the stage renames and removes)."""
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            yield entry
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    yield from _entries(Path(entry.path))


def _stat(entry: os.DirEntry) -> tuple[int, int] | None:
    """(mtime, size) of the file `entry`, or None: not a file, a lock or a hash cache (touched
    at start), or gone."""
    if entry.name.endswith((".lock", ".checksums.json")):
        return None
    with contextlib.suppress(OSError):
        if entry.is_file():
            stat = entry.stat()
            return stat.st_mtime_ns, stat.st_size
    return None


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """(mtime, size) of every file under `root` but locks and hash caches (touched at start)."""
    return {entry.path: stat for entry in _entries(root) if (stat := _stat(entry))}


def _writing(root: Path, before: dict[str, tuple[int, int]]) -> bool:
    """Whether the stage has begun to write: a temporary exists, or an output appeared or
    changed since `before` (a part is written and renamed in well under one POLL, so its
    temporary alone is mostly missed). One pass over `root`, every POLL while the stage starts:
    it stops at the first sign."""
    seen = 0
    for entry in _entries(root):
        if entry.name.endswith(".tmp"):
            return True
        if (stat := _stat(entry)) is not None:
            if before.get(entry.path) != stat:
                return True
            seen += 1
    return seen != len(before)  # an output removed


def _wait(proc: Forked, seconds: float) -> bool:
    """Wait up to `seconds` for `proc` to end; whether it has."""
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def _stop(proc: subprocess.Popen | Forked) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _run(forks: Forks, cmd: list[str], root: Path, log: Path) -> tuple[float, float]:
    """Run `cmd` to the end (its stderr into `log`, a file: a pipe nobody reads fills and
    stops the stage); return (seconds until it first wrote a temporary, seconds)."""
    before = _files(root)
    start = time.perf_counter()
    proc = forks.start(cmd, log)
    first = None
    try:
        while not _wait(proc, POLL):
            if first is None and _writing(root, before):
                first = time.perf_counter() - start
            assert time.perf_counter() - start < STAGE_TIMEOUT, f"{cmd} hangs"
    finally:
        _stop(proc)
    total = time.perf_counter() - start
    assert proc.returncode == 0, log.read_text()[-2000:]
    return (first if first is not None else total), total


def _descendants(pid: int) -> list[int]:
    """Pids of every living descendant of `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text() if proc.name.isdigit() else ""
        except OSError:
            continue
        if stat:
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(
                int(proc.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def _alive(pids: list[int]) -> list[str]:
    """Command lines of those of `pids` still running (not zombies)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if state != "Z":
            alive.append(cmdline.decode(errors="replace"))
    return alive


def _kill_while_writing(forks: Forks, cmd: list[str], root: Path,
                        delay: float) -> list[int] | None:
    """Start `cmd`; once it has a temporary under `root` (it is writing), wait `delay` more
    seconds and SIGKILL it. Returns the pids of its children at the kill, or None if it
    ended first."""
    before = _files(root)
    proc = forks.start(cmd, Path(os.devnull))
    deadline = time.perf_counter() + STAGE_TIMEOUT
    try:
        while not _wait(proc, POLL) and not _writing(root, before):
            assert time.perf_counter() < deadline, f"{cmd} never wrote anything"
        if _wait(proc, delay):
            return None
        children = _descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return children
    finally:
        _stop(proc)


def _gone(pids: list[int], timeout: float = 10) -> list[str]:
    """Wait until none of `pids` runs (the kernel delivers PDEATHSIG to the children), at
    most `timeout` seconds; the command lines of those still running, which are then killed
    (a failed test leaves no orphan behind either)."""
    deadline = time.perf_counter() + timeout
    while _alive(pids) and time.perf_counter() < deadline:
        time.sleep(0.1)
    left = _alive(pids)
    for pid in pids if left else []:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def _data_files(root: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if (path.is_dir() or rel.endswith(VOLATILE) or "/.params/" in rel
                or "/bm25/lucene/" in rel or "/reports/" in rel):
            continue
        files[rel] = path.read_bytes()
    return files


def test_stages_survive_kills_byte_identical(raw_corpus, tiny_bert, tmp_path, forks):
    rng = random.Random(SEED)
    ref, faulted = tmp_path / "reference", tmp_path / "faulted"
    kills = orphans = 0  # orphans: children the kills could have left behind
    report = []
    log = tmp_path / "stage.log"
    for label, args, n_kills in STAGES:
        first_write, seconds = _run(forks, _command(ref, args, raw_corpus, tiny_bert), ref,
                                    log)
        survived = 0
        for _ in range(2 * n_kills):  # a run that ended before its kill is tried again
            if survived == n_kills:
                break
            # a random moment after its first write, early enough that a stage which resumes
            # (embed) still has work left for the next kill, as the reference timed it
            window = (seconds - first_write) / n_kills
            children = _kill_while_writing(forks, _command(faulted, args, raw_corpus,
                                                           tiny_bert),
                                           faulted, rng.uniform(0.0, 0.9) * window)
            if children is not None:
                survived += 1
                left = _gone(children)
                assert not left, f"{label}: {left} outlived the stage"
                orphans += len(children)
        _run(forks, _command(faulted, args, raw_corpus, tiny_bert), faulted, log)
        kills += survived
        report.append(f"{label}: {survived} kills, reference {seconds:.1f}s")
    print("\n".join(report))
    assert kills >= 20, report
    assert orphans > 0  # some kills did hit a stage with children (ingest workers, Java)
    reference, after = _data_files(ref), _data_files(faulted)
    assert sorted(after) == sorted(reference)
    different = [name for name in reference if reference[name] != after[name]]
    assert not different, different
    assert not [p for p in faulted.rglob("*.tmp")], "debris left behind"
    assert verify(Roots(faulted / "corpora", faulted / "indexes", faulted / "runs")) == []
