"""Several devices for one embed (pipeline/encoding/workers.py), its mechanics on a CPU: two
CPU workers (DEVICE=cpu,cpu) write the store one process writes, byte for byte; parts are
written in order however they come back; a worker killed or failing ends the stage with one
line, the parts written kept, and a rerun completes the same store; the device lists.

Each worker is a spawned process importing torch (about 2 s here): the stores are made once
for the module (`stores`), the failures on one worker each."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.errors import InputError, OptionError
from pipeline.encoding import embed as embed_module
from pipeline.encoding import workers
from pipeline.encoding.coverage import missing_ids, pool_ids
from pipeline.encoding.embed import embed
from pipeline.encoding.encoders import Encoder
from pipeline.encoding.workers import Work, encode_parts, worker_devices
from pipeline.layout import Place, store_dir
from pipeline.models import REGISTRY, ModelEntry
from pipeline.options.checks import device as device_check
from tests.conftest import POOL_SIZES, pool_of

POOL = pool_of(POOL_SIZES[0])
PART = 100  # papers per part: 9 parts of the pool's papers
REAL_TOKENIZED = embed_module._tokenized  # as imported, before a test replaces it
SLOW = "PIPELINE_TEST_SLOW_PART"  # the first id of the part a worker reads late
BACK = "PIPELINE_TEST_PART_BACK"  # a file the main process makes when a part is back


def late_first_part(corpus_dir, encoder, chunk, columns):
    """embed._tokenized (in a worker: this function is sent by name), the part that starts
    at $PIPELINE_TEST_SLOW_PART read only once another part is back in the main process
    ($PIPELINE_TEST_PART_BACK exists; a minute at most): a later part always comes first."""
    if str(chunk[0]) == os.environ.get(SLOW):
        deadline = time.monotonic() + 60
        while not Path(os.environ[BACK]).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return REAL_TOKENIZED(corpus_dir, encoder, chunk, columns)


class MarkingBar:
    """The progress bar of a stage, making the file $PIPELINE_TEST_PART_BACK as a part comes
    back."""

    def __init__(self, bar):
        self.bar = bar

    def update(self, n: int) -> None:
        if n:  # update(0): a poll with nothing back (a progress line's chance)
            Path(os.environ[BACK]).touch()
        self.bar.update(n)

    def set_postfix(self, **values) -> None:
        self.bar.set_postfix(**values)

    def lap(self) -> None:
        self.bar.lap()


def fails_on_second_part(corpus_dir, encoder, chunk, columns):
    """embed._tokenized, but a library's error of two lines on the part starting at $SLOW."""
    if str(chunk[0]) == os.environ.get(SLOW):
        raise RuntimeError("the disk went away\nsecond line of its message")
    return REAL_TOKENIZED(corpus_dir, encoder, chunk, columns)


def stops_on_a_part(corpus_dir, encoder, chunk, columns):
    """embed._tokenized, but the worker that reads the part starting at $SLOW stops itself
    (SIGSTOP, as `kill -STOP` does) once $PIPELINE_TEST_PART_BACK exists (every part before
    it written; a minute at most): alive, silent, that part never back."""
    if str(chunk[0]) == os.environ.get(SLOW):
        deadline = time.monotonic() + 60
        while not Path(os.environ[BACK]).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGSTOP)
    return REAL_TOKENIZED(corpus_dir, encoder, chunk, columns)


def store_files(store: Path) -> dict[str, bytes]:
    """Every file of a store (parts, manifest, pool markers; not the hidden stat cache and
    locks) by its path in the store, the manifest's time of writing and its digest of itself
    blanked (what two runs cannot share)."""
    files = {}
    for path in sorted(p for p in store.rglob("*") if p.is_file()
                       and not p.name.startswith(".")):
        data = path.read_bytes()
        if path.name == "manifest.json":
            data = re.sub(rb'"(created|self_sha256)": "[^"]*"', rb'"\1": ""', data)
        files[path.relative_to(store).as_posix()] = data
    return files


def differing(store: Path, expected: Path) -> list[str]:
    """The files of `store` that are not those of `expected` (store_files), by name."""
    have, want = store_files(store), store_files(expected)
    return sorted(name for name in have.keys() | want.keys() if have.get(name) != want.get(name))


@pytest.fixture(scope="module")
def entry(tiny_bert):
    made = ModelEntry("tiny-bert", "dense", str(tiny_bert), "cls", "l2", max_length=128)
    REGISTRY[made.name] = made
    yield made
    del REGISTRY[made.name]


@pytest.fixture(scope="module")
def data(corpus_dir, tmp_path_factory) -> Path:
    """A DATA folder whose corpora/ holds the session's corpus (a link)."""
    root = tmp_path_factory.mktemp("workers")
    (root / "corpora").mkdir()
    (root / "corpora" / corpus_dir.name).symlink_to(corpus_dir)
    return root


def place_of(data: Path, name: str) -> Place:
    return Place(data / "corpora" / "small", data / name, data / "runs")


@pytest.fixture(scope="module")
def stores(data, entry):
    """The pool embedded by one process (`one`) and by two CPU workers (`two`), the first
    part read by its worker once another is back: their stores and summaries, the order the
    parts came back in (`arrived`), the first id of each part in the order written, the
    number of parts."""
    one = embed(place_of(data, "one"), entry, [POOL], device="cpu", part_size=PART)
    assert one["devices"] == ["cpu"]
    outcomes, written = [], []
    real_encode, real_add = embed_module.encode_parts, embed_module.add_part

    def recorded(work, devices, chunks, write, bar):
        outcomes.append(real_encode(work, devices, chunks, write, MarkingBar(bar)))
        return outcomes[-1]

    def add_part(store, config, ids, *args, **kwargs):
        written.append(int(ids[0]))
        return real_add(store, config, ids, *args, **kwargs)

    place = place_of(data, "two")
    first = missing_ids(place.corpus_dir, store_dir(place.index_root, "small", entry.name),
                        [POOL])[1][0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SLOW, str(first))
        patch.setenv(BACK, str(data / "a-part-is-back"))
        patch.setattr(embed_module, "_tokenized", late_first_part)
        patch.setattr(embed_module, "encode_parts", recorded)
        patch.setattr(embed_module, "add_part", add_part)
        two = embed(place, entry, [POOL], device="cpu,cpu", part_size=PART)
    return {"one": store_dir(data / "one", "small", entry.name), "one_summary": one,
            "two": store_dir(data / "two", "small", entry.name), "two_summary": two,
            "arrived": outcomes[0].arrived, "written": written,
            "parts": -(-one["embedded"] // PART)}


@pytest.mark.slow
def test_two_cpu_workers_write_the_store_of_one_process_byte_for_byte(stores):
    summary = stores["two_summary"]
    assert summary["devices"] == ["cpu", "cpu"] and summary["device"] == "cpu"
    assert summary["embedded"] == stores["one_summary"]["embedded"] > 4 * PART
    assert summary["covered_pools"] == [POOL]
    names = store_files(stores["one"])
    assert len([name for name in names if name.startswith("part-")]) == stores["parts"]
    assert {"manifest.json", f"pools/{POOL}.json"} <= names.keys()
    assert differing(stores["two"], stores["one"]) == []
    assert not multiprocessing.active_children()  # every worker ended and joined


@pytest.mark.slow
def test_parts_are_written_in_order_when_a_later_part_comes_back_first(stores):
    arrived, written = stores["arrived"], stores["written"]
    assert sorted(arrived) == list(range(stores["parts"]))
    assert arrived[0] != 0  # the first part came back late, after others ...
    assert written == sorted(written) and len(written) == stores["parts"]  # ... written first


@pytest.mark.slow
def test_a_killed_worker_ends_the_stage_in_one_line_and_a_rerun_resumes(
        data, entry, stores, monkeypatch, capsys):
    """SIGKILL to a worker while the first part is written: exit status 2, one line naming the
    device and the signal (its death seen, not waited out as a stall); the parts written are
    kept, and the same command again completes the store of one process."""
    from pipeline.cli.main import main

    real_add, killed = embed_module.add_part, []

    def add_then_kill(*args, **kwargs):
        real_add(*args, **kwargs)
        if not killed:
            victim = next(p for p in multiprocessing.active_children()
                          if p.name.startswith("embed-"))
            os.kill(victim.pid, signal.SIGKILL)
            killed.append(victim.pid)

    monkeypatch.setattr(embed_module, "add_part", add_then_kill)
    command = ["-q", "--corpora-root", str(data / "corpora"), "--index-root",
               str(data / "killed"), "embed", "--corpus", "small", "--model", entry.name,
               "--pool", POOL, "--part-size", str(PART), "--device", "cpu,cpu"]
    assert main(command) == 2 and killed  # seen as a death (the line below), not a stall
    store = store_dir(data / "killed", "small", entry.name)
    kept = len(list(store.glob("part-*.arrow")))  # the first, and those already back after it
    assert 1 <= kept < stores["parts"]
    lines = capsys.readouterr().err.strip().splitlines()  # and transformers' loading bar
    assert [line for line in lines if "error" in line] == lines[-1:] == [
        "error: the embed worker on cpu was killed by SIGKILL (as the kernel's out-of-memory "
        f"killer does) before the stage was done: {kept} of {stores['parts']} parts were "
        "written and are kept; run the same command again to embed the rest"]
    assert not multiprocessing.active_children()
    monkeypatch.setattr(embed_module, "add_part", real_add)
    assert main(command) == 0
    assert differing(store, stores["one"]) == []


@pytest.mark.slow
def test_an_error_in_a_worker_is_one_line_naming_its_device(corpus_dir, entry, monkeypatch):
    """An exception of a library (not an InputError) in a worker: its device, its type and
    first line; the part before it written, the worker ended."""
    ids = pool_ids(corpus_dir, POOL)[:60]
    chunks = [ids[:30], ids[30:]]
    monkeypatch.setenv(SLOW, str(chunks[1][0]))
    work = Work(Encoder, entry, None, fails_on_second_part, corpus_dir, [], 2048, 512, 1)
    written = []
    with pytest.raises(InputError) as caught:
        encode_parts(work, ["cpu"], chunks, lambda k, vectors, digests: written.append(k))
    assert str(caught.value) == (
        "the embed worker on cpu failed (RuntimeError: the disk went away): 1 of 2 parts "
        "were written and are kept; run the same command again to embed the rest")
    assert written == [0]
    assert not multiprocessing.active_children()


@pytest.mark.slow
def test_a_model_that_does_not_load_in_a_worker_is_the_line_of_this_process(
        corpus_dir, tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")
    broken = ModelEntry("broken", "dense", str(folder), "cls", "l2")
    with pytest.raises(InputError) as here:
        Encoder(broken, device="cpu")
    work = Work(Encoder, broken, None, REAL_TOKENIZED, corpus_dir, [], 2048, 512, 1)
    with pytest.raises(InputError) as there:
        encode_parts(work, ["cpu"], [np.arange(3)], lambda *_: None)
    assert str(there.value) == str(here.value)
    line = str(there.value)
    assert "\n" not in line and line.startswith(f"{folder / 'config.json'} cannot be read as JSON")
    assert line.endswith("save or download it again")


def test_device_lists(monkeypatch):
    """cuda on two visible GPUs: a worker each; lists as given; one device: this process;
    bad lists refused in one line, by the make check and by the stage."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert worker_devices("cuda") == ["cuda:0", "cuda:1"]
    assert worker_devices(None) == ["cuda:0", "cuda:1"]  # unset: cuda if available, all of it
    assert worker_devices("cuda:1,cuda:0") == ["cuda:1", "cuda:0"]
    assert worker_devices("cpu,cpu") == ["cpu", "cpu"]
    for one in ("cpu", "cuda:1"):
        assert worker_devices(one) == []
    refused = {"cuda:0,cuda:2": "--device cuda:0,cuda:2: cuda:2 is not visible here: 2 CUDA "
                                "GPU(s), cuda:0 to cuda:1",
               "cpu,cuda:0": "--device cpu,cuda:0: one kind of device, GPUs (cuda:0,cuda:1) "
                             "or CPU workers (cpu,cpu), not both",
               "cuda,cuda": "--device cuda,cuda: 'cuda' in a list; name each device as cpu or "
                            "cuda:<index>, e.g. cuda:0,cuda:1",
               "cpu,": "--device cpu,: '' in a list"}
    for value, line in refused.items():
        with pytest.raises(OptionError) as caught:
            worker_devices(value)
        assert str(caught.value).startswith(line) and "\n" not in str(caught.value)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert worker_devices("cuda") == []  # one GPU: in this process, as before
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(OptionError, match="no CUDA GPU is visible here"):
        worker_devices("cuda:0,cuda:1")
    # the make check (standard library only): the same forms
    for good in ("cpu", "cuda", "cuda:3", "cpu,cpu", "cuda:0,cuda:1"):
        assert device_check(good) == good
    for bad in ("gpu", "cuda,cuda", "cpu,cuda:0", "cpu,", "cuda:0;cuda:1"):
        with pytest.raises(InputError):
            device_check(bad)
    assert workers.threads_each(2, 8) == 4 and workers.threads_each(3, 2) == 1
    assert workers.device_label(["cuda:0", "cuda:1"]) == "cuda"


def test_the_parts_counts_add_up_across_workers():
    """Whole numbers (multi-vector's sentences) are summed over the parts; a share (a GPU's
    busy share, each part's own) is averaged over the parts' papers."""
    from pipeline.encoding.workers import Outcome, _part_counts

    outcome = Outcome()
    outcome.add(_part_counts({"sentences": 5}, {"sentences": 9, "gpu_busy": 0.5}), 100)
    outcome.add(_part_counts({"sentences": 9, "gpu_busy": 0.5},
                             {"sentences": 12, "gpu_busy": 0.8}), 300)
    assert outcome.counts == {"sentences": 7, "gpu_busy": 0.725}


def test_more_cpu_workers_than_cores_are_refused_before_any_starts(monkeypatch):
    """An absurd count of CPU workers is one line, before any process is started."""
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    assert worker_devices("cpu,cpu") == ["cpu", "cpu"]
    with pytest.raises(OptionError, match="3 CPU workers on 2 cores; give at most 2"):
        worker_devices("cpu,cpu,cpu")


def test_gpus_are_counted_by_the_driver_as_cuda_shows_them_and_torch_where_it_cannot(
        monkeypatch):
    """The driver's count (NVML, no torch) cut by CUDA_VISIBLE_DEVICES as CUDA reads it; a
    device the driver shows passes the stages' check without torch's, anything else goes to
    torch's check (which words the refusal)."""
    assert workers.visible_of(4, None) == 4 and workers.visible_of(None, "0") is None
    assert workers.visible_of(4, "2,0") == 2 and workers.visible_of(4, "") == 0
    assert workers.visible_of(4, "1,7,2") == 1  # CUDA stops at the first absent index
    assert workers.visible_of(4, "1,1") == 1 and workers.visible_of(4, "0,,1") == 1
    assert workers.visible_of(2, "GPU-8f3a,0") is None  # UUIDs: torch counts them
    from pipeline.encoding import encoders

    asked: list[str] = []
    monkeypatch.setattr(encoders, "check_device", asked.append)
    monkeypatch.setattr(workers, "_nvml_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    for here in ("cpu", "cuda", "cuda:0"):
        workers.check_devices(here)
    assert asked == []
    for elsewhere in ("cuda:1", "gpu", "cpu:0"):
        workers.check_devices(elsewhere)
    assert asked == ["cuda:1", "gpu", "cpu:0"]
    monkeypatch.setattr(workers, "_nvml_count", lambda: None)  # no driver: torch decides
    workers.check_devices("cuda")
    assert asked[-1] == "cuda"
    workers.check_devices("cpu")
    assert asked[-1] == "cuda"


@pytest.mark.slow
def test_a_stopped_worker_ends_the_stage_in_one_line_and_a_rerun_completes(
        corpus_dir, data, entry, stores, monkeypatch, capsys):
    """Issue 78: a worker stopped (`kill -STOP`) with parts out kept the stage waiting without
    end, no line. Now, with a floor of 6 s (PIPELINE_WORKER_STALL), it is taken as hung once
    silent past max(6 s, 10 x the slowest part), a bound of the parts' pace however busy the
    machine (start-up has 900 s whatever the floor, issue 88): exit status 2, one error line
    naming the device and the bound, progress lines while it waited, the worker killed, the
    parts written kept; the same command again completes the store of one process. The
    worker stops on the last part once every other part is written: the rest is that one
    part, which the rerun encodes in this process (no workers to start again: the killed
    worker's test reruns on two)."""
    from pipeline.cli.main import main

    store = store_dir(data / "stopped", "small", entry.name)
    ids = missing_ids(corpus_dir, store, [POOL])[1]  # the parts: PART of these ids each
    last = stores["parts"] - 1
    monkeypatch.setenv(SLOW, str(ids[last * PART]))  # stops once the others are written
    monkeypatch.setenv(BACK, str(data / "stopped-all-but-one"))
    monkeypatch.setenv(workers.STALL_ENV, "6")
    monkeypatch.setenv("PIPELINE_PROGRESS_INTERVAL", "1")
    monkeypatch.setattr(embed_module, "_tokenized", stops_on_a_part)
    real_add = embed_module.add_part

    def add_part(store, config, part_ids, *args, **kwargs):
        real_add(store, config, part_ids, *args, **kwargs)
        if int(ids[(last - 1) * PART]) in set(part_ids.tolist()):  # the part before the last
            Path(os.environ[BACK]).touch()
            safety.start()

    monkeypatch.setattr(embed_module, "add_part", add_part)
    # never a wait without end, were the bound absent: the workers killed 5 min after the
    # worker stops (its bound, 10 x the slowest part, is less unless a part took 30 s)
    safety = threading.Timer(300, lambda: [os.kill(p.pid, signal.SIGKILL) for p in
                                           multiprocessing.active_children()])
    command = ["--corpora-root", str(data / "corpora"), "--index-root", str(data / "stopped"),
               "embed", "--corpus", "small", "--model", entry.name, "--pool", POOL,
               "--part-size", str(PART), "--device", "cpu,cpu"]
    try:
        assert main(command) == 2
    finally:
        safety.cancel()
    kept = len(list(store.glob("part-*.arrow")))
    assert kept == last < stores["parts"]  # every part but the one the stopped worker held
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if "error" in line]
    assert errors == lines[-1:] and re.fullmatch(
        r"error: the embed worker on cpu sent nothing for \d+ s, longer than its bound of "
        r"\d+ s \(the longer of PIPELINE_WORKER_STALL=6 s and 10 x the slowest part so far, "
        r"[\d.]+ s\), and was killed as hung \(stopped, or stuck in its device's driver\): "
        rf"{kept} of {stores['parts']} parts were written and are kept; run the same command "
        "again to embed the rest", errors[0]), errors
    counts = [re.match(r"\[embed\] (\d+)/", line) for line in lines]
    counts = [int(found.group(1)) for found in counts if found]
    assert len(counts) >= 3 and counts[-1] == counts[-2] == counts[-3]  # lines while waiting
    assert not multiprocessing.active_children()  # the stopped worker killed, all joined
    monkeypatch.setattr(embed_module, "_tokenized", REAL_TOKENIZED)
    monkeypatch.setattr(embed_module, "add_part", real_add)
    assert main(command) == 0
    assert differing(store, stores["one"]) == []


def test_the_stall_bound_follows_the_parts_pace(monkeypatch):
    """The start allowance (spawn, imports, the weights, the first part) until a worker's
    first part, then the longer of the floor and 10 x the slowest part; the floor from
    PIPELINE_WORKER_STALL, a bad one refused in one line. Issue 88: a short floor (the
    tests' 6 s) gave start-up 18 s, and a busy machine's worker was killed as hung while it
    loaded the model: start-up is given 900 s whatever the floor, more where 3 x the floor
    is more."""
    from pipeline.encoding.workers import Stall

    monkeypatch.delenv(workers.STALL_ENV, raising=False)
    stall = Stall.from_environment()
    assert stall.floor == 300.0
    assert stall.bound(None, first=False) == stall.bound(2.0, first=True) == 900.0
    assert stall.bound(2.0, first=False) == 300.0 and stall.bound(45.0, first=False) == 450.0
    monkeypatch.setenv(workers.STALL_ENV, "2.5")
    short = Stall.from_environment()
    assert short.bound(0.1, first=False) == 2.5 and short.bound(3.0, first=False) == 30.0
    assert short.bound(None, first=False) == short.bound(0.1, first=True) == 900.0
    assert Stall(600.0).bound(None, first=False) == 1800.0
    for bad in ("0", "-1", "nan", "inf", "soon", "1e9", "٣", " 5"):  # the range said
        monkeypatch.setenv(workers.STALL_ENV, bad)
        with pytest.raises(InputError) as refused:
            Stall.from_environment()
        line = str(refused.value)
        assert line.startswith(f"PIPELINE_WORKER_STALL={bad!r}: "), line
        assert "give the seconds" in line and "between 0 and 604800 (default 300)" in line


def _children(pid: int) -> dict[int, str]:
    """The child processes of `pid` (Linux's /proc): pid -> command line."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                found[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_resource_tracker_prints_no_library_text(data, tiny_bert, sig, tmp_path):
    """Issue 78: killing multiprocessing's resource tracker during an embed on two workers
    printed two library tracebacks ('resource_tracker: process died unexpectedly,
    relaunching'), the store right. The workers hold nothing it tracks (their bars' lock is a
    thread lock) and its relaunch warning reaches no one: stderr is the stage's lines only."""
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "pipeline", "--corpora-root", str(data / "corpora"),
               "--index-root", str(tmp_path / "indexes"), "embed", "--corpus", "small",
               "--model", "minilm", "--model-path", str(tiny_bert), "--pool", POOL,
               "--part-size", "20", "--device", "cpu,cpu"]
    parts = store_dir(tmp_path / "indexes", "small", "minilm")
    stage = subprocess.Popen(command, cwd=root, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(root)})
    killed = None
    try:
        while killed is None and stage.poll() is None:  # the tracker, once both workers run
            children = _children(stage.pid)
            tracker = [pid for pid, line in children.items() if "resource_tracker" in line]
            if (tracker and sum("spawn_main" in line for line in children.values()) >= 2
                    and any(parts.glob("part-*.arrow"))):  # the workers encoding
                os.kill(tracker[0], sig)
                killed = tracker[0]
            time.sleep(0.1)
        err = stage.communicate(timeout=600)[1]
    finally:
        if stage.poll() is None:
            stage.kill()
    assert killed is not None and stage.returncode == 0, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()
             and not line.lstrip().startswith("Loading weights")]  # transformers' bar
    assert all(line.startswith("[embed] ") for line in lines), lines
    assert re.search(r"\[embed\] done in .* embedded=\d+ reused=0 ", err), err[-3000:]
