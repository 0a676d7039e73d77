"""Several devices for one embed: a worker process per device, the parts split among them.

`DEVICE=cuda` on a node with two GPUs or more (or nothing asked there: "cuda if available")
embeds on every visible one, cuda:0 to cuda:N-1; a list such as `cuda:0,cuda:2` names them,
and `cpu,cpu` runs the same mechanics on a CPU (the tests', docs/encoders.md). As
sentence-transformers' multi-process pool does: one process per device, started with
multiprocessing's "spawn" (CUDA cannot be used in a forked child), each loading the model once,
then taking parts (index k, the part's ids) and sending back (k, vectors, text digests, tokens).
Each worker reads and tokenizes its own parts (a thread beside its model, as the in-process
loop does). This process writes the parts strictly in the order k = 0, 1, 2, ... (holding those
that come back early), so the store's parts and manifest are those one device writes, and a
kill leaves a prefix of them: a rerun resumes at the same part boundaries.

Bounded and safe: each worker has a pipe of its own each way (one that dies mid-message ends
its pipe, it cannot leave another's half-read), this process waits on the pipes and the
processes' sentinels with a timeout, at most two parts per worker are out at once (memory:
those parts' vectors), and a worker that dies (killed, out of memory, an exception) ends the
stage with one line naming its device and what happened; the workers are stopped and joined on
every way out, Ctrl-C included (they ignore SIGINT: this process stops them). Every wait is
bounded: a worker alive but silent (stopped, deadlocked in a driver) longer than its stall
bound (`Stall`: a start allowance for spawning, loading the model and the first part, at
least 900 s whatever the floor, then max(a floor, 10 x the slowest part seen)) ends the stage
the same way, and is killed.

Standard library only at import; torch where devices are counted or a worker runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing import connection, get_context
from pathlib import Path
from typing import Any

from pipeline.core.errors import InputError, OptionError, first_line, quoted
from pipeline.core.numbers import number_in
from pipeline.core.processes import quiet_tracker

log = logging.getLogger(__name__)

# The kinds whose encoder runs on a device of this machine (`encoder.device` means something):
# local models, dense, st: and multi-vector; served models and objects run in this process
POOLED_KINDS = ("dense", "st", "multi-vector", "sparse", "late-interaction")
PER_WORKER = 2  # parts out at once per worker: one encoded, one read and tokenized beside it
POLL_S = 1.0  # how often this process looks at the workers while none has sent anything
STOP_S = 10.0  # how long a worker is given to end after it is told to (then terminated)
LISTED_DEVICE = re.compile(r"cpu|cuda:\d+")
# A worker with parts out that sends nothing for its stall bound is taken as hung (Stall)
STALL_ENV = "PIPELINE_WORKER_STALL"  # seconds: the floor of the bound (tests set a short one)
STALL_FLOOR_S = 300.0  # the least any part is given, however fast the parts before it were
FIRST_PART_TIMES = 3  # a worker's first part: 3 x the floor, and at least START_S
START_S = 900.0  # the least a worker's start (spawn, imports, weights) and first part are
# given, whatever the floor: a short floor tunes how soon a stuck part is seen, not start-up
SLOWEST_TIMES = 10  # a later part: 10 x the slowest part any worker took so far
STALL_SECONDS = number_in(0, 7 * 86_400, "the seconds a worker may send nothing before it is "
                          "taken as hung", open_ends=True)  # a week: no part takes longer


SINGLE_DEVICE = re.compile(r"cpu|cuda(?::(\d+))?")


def _nvml_count() -> int | None:
    """The GPUs the NVIDIA driver counts (NVML, by ctypes: no torch, a few milliseconds);
    None where there is no driver library or it does not answer."""
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None
        try:
            count = ctypes.c_uint(0)
            return int(count.value) if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0 \
                else None
        finally:
            nvml.nvmlShutdown()
    except (OSError, AttributeError):
        return None


def visible_of(count: int | None, visible: str | None) -> int | None:
    """The GPUs CUDA shows this process, from the driver's `count` and CUDA_VISIBLE_DEVICES
    (`visible`), as CUDA reads it: indices up to the first one absent or repeated. None
    where the driver did not answer or the variable names GPUs otherwise (UUIDs, MIG): then
    torch counts them."""
    if count is None or visible is None:
        return count
    shown: list[int] = []
    for word in visible.split(","):
        if not word.strip():
            break
        if not word.strip().isdigit():
            return None
        index = int(word)
        if index >= count or index in shown:
            break
        shown.append(index)
    return len(shown)


def _driver_gpus() -> int | None:
    """The GPUs this process sees by the driver's count (NVML) and CUDA_VISIBLE_DEVICES; None
    where that cannot be told without torch."""
    return visible_of(_nvml_count(), os.environ.get("CUDA_VISIBLE_DEVICES"))


def _visible_gpus() -> int:
    """The GPUs this process sees: by NVML where it answers (no torch: a no-op stage on a GPU
    node stays fast), else torch's count."""
    count = _driver_gpus()
    if count is not None:
        return count
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def worker_devices(device: str | None) -> list[str]:
    """The devices of the workers one embed starts; [] where it runs in this process (one
    device: `device` as given). `cuda` (or None: cuda if available) with N >= 2 visible GPUs:
    cuda:0 .. cuda:N-1; a comma-separated list: its devices, one kind (GPUs by index, or CPU
    workers: cpu,cpu), each GPU visible here. A bad value is one line (OptionError: each door
    words DEVICE its own way)."""
    if device is not None and "," in device:
        return _listed(device)
    if device in (None, "", "cuda") and (count := _visible_gpus()) >= 2:
        return [f"cuda:{i}" for i in range(count)]
    return []  # one device: the encoder checks it (encoders.pick_device)


def _listed(device: str) -> list[str]:
    words = device.split(",")
    bad = next((w for w in words if not LISTED_DEVICE.fullmatch(w)), None)
    if bad is not None:
        raise OptionError("{DEVICE=}: " + f"{bad!r} in a list; name each device as cpu or "
                          "cuda:<index>, e.g. cuda:0,cuda:1", {"DEVICE": device})
    if len({w.partition(":")[0] for w in words}) > 1:
        raise OptionError("{DEVICE=}: one kind of device, GPUs (cuda:0,cuda:1) or CPU workers "
                          "(cpu,cpu), not both: their vectors differ in the last bits",
                          {"DEVICE": device})
    cores = os.cpu_count() or 1
    if words[0] == "cpu" and len(words) > cores:  # refused before any process is started
        raise OptionError("{DEVICE=}: " + f"{len(words)} CPU workers on {cores} cores; give at "
                          f"most {cores} (each worker runs the whole model)", {"DEVICE": device})
    if words[0].startswith("cuda"):
        count = _visible_gpus()
        if not count:
            raise OptionError("{DEVICE=}: no CUDA GPU is visible here (torch.cuda.is_available()"
                              " is False); use cpu or run on a GPU node", {"DEVICE": device})
        absent = next((w for w in words if int(w.partition(":")[2]) >= count), None)
        if absent is not None:
            raise OptionError("{DEVICE=}: " + f"{absent} is not visible here: {count} CUDA "
                              f"GPU(s), cuda:0 to cuda:{count - 1}", {"DEVICE": device})
    return words


def check_devices(device: str | None) -> None:
    """Refuse up front a DEVICE that is not here (encoders.check_device for one device; each
    of a list's), whatever is left to embed."""
    if device and "," in device:
        worker_devices(device)
    elif device and not _plainly_here(device):
        from pipeline.encoding.encoders import check_device

        check_device(device)


def _plainly_here(device: str) -> bool:
    """`cpu`, or `cuda` / `cuda:<i>` with a GPU i the driver shows this process (NVML): here,
    known without importing torch (a second). Anything else is left to torch's check, which
    words the refusal."""
    match = SINGLE_DEVICE.fullmatch(device)
    if match is None:
        return False
    if device == "cpu":
        return True
    count = _driver_gpus()
    return bool(count) and int(match.group(1) or 0) < count


def device_label(devices: Sequence[str]) -> str:
    """What a store's manifest records as the device of parts made by several workers: their
    kind (cpu, cuda), as one process given DEVICE=cpu or DEVICE=cuda records it."""
    return devices[0].partition(":")[0]


def threads_each(workers: int, total: int | None = None) -> int:
    """Torch threads per worker: this process's (OMP_NUM_THREADS, else the cores) split among
    the workers, at least 1."""
    if total is None:
        import torch

        total = torch.get_num_threads()
    return max(1, total // max(workers, 1))


def release(encoder) -> None:
    """Free the GPU memory of this process's copy of the model (loaded for the store's
    settings), the workers' devices being the ones that encode."""
    if getattr(encoder, "device", None) is not None and encoder.device.type == "cuda":
        import torch

        encoder.model.to("cpu")
        torch.cuda.empty_cache()


@dataclass(frozen=True)
class Stall:
    """How long a worker with parts out may send nothing before it is taken as hung: until
    its first message and its first part, the start allowance, the longer of START_S and
    FIRST_PART_TIMES x `floor` (spawning it, importing torch and loading the weights take as
    long as the machine is busy: a floor shortened to catch a stuck part sooner does not
    shorten them); after, the longer of `floor` and SLOWEST_TIMES x the slowest part seen so
    far (a pace, not a guess: a part 10 times slower than any before is no slow part)."""

    floor: float = STALL_FLOOR_S

    @classmethod
    def from_environment(cls) -> Stall:
        """The floor from PIPELINE_WORKER_STALL (seconds, STALL_SECONDS' range), else
        STALL_FLOOR_S; a bad value is one line naming the variable and the range."""
        text = os.environ.get(STALL_ENV, "")
        if not text:
            return cls()
        try:
            floor = STALL_SECONDS(text)
        except InputError as exc:
            raise InputError(f"{STALL_ENV}={quoted(text)}: {exc.message} (default "
                             f"{STALL_FLOOR_S:g}), or leave it unset") from None
        return cls(floor)

    @property
    def start(self) -> float:
        """The start allowance: a worker's seconds until its first message, and again until
        its first part."""
        return max(START_S, FIRST_PART_TIMES * self.floor)

    def bound(self, slowest: float | None, first: bool) -> float:
        """The seconds a worker may be silent: the start allowance until its `first` part is
        back, else the floor or SLOWEST_TIMES x the `slowest` part seen (None: none seen yet,
        the start allowance)."""
        if first or slowest is None:
            return self.start
        return max(self.floor, SLOWEST_TIMES * slowest)


@dataclass(frozen=True)
class Work:
    """What every worker needs, sent to it once (picklable: classes and functions by name)."""

    encoder_class: Any  # the entry's encoder class (encoder_kinds.encoder_class)
    entry: Any  # the ModelEntry
    model_path: str | None
    read: Callable  # read(corpus_dir, encoder, chunk, columns) -> (token ids, digests)
    corpus_dir: Path
    columns: list[str]
    budget: int  # padded tokens per batch
    max_batch: int
    threads: int  # torch threads of each worker


@dataclass
class Outcome:
    """What the workers did: tokens encoded, seconds from the first worker ready to the last
    part written, the encoders' counts (whole numbers summed: multi-vector's sentences; shares
    averaged over the parts' papers: a GPU's busy share), the order the parts came back in,
    and the seconds the workers took to start (spawn, imports, the model)."""

    tokens: int = 0
    seconds: float = 0.0
    counts: dict[str, int | float] = field(default_factory=dict)
    arrived: list[int] = field(default_factory=list)
    start_seconds: float = 0.0
    _shares: dict[str, tuple[float, int]] = field(default_factory=dict)

    def add(self, counts: dict[str, int | float], papers: int) -> None:
        """A part's counts (`_part_counts`) into the whole's."""
        for key, value in counts.items():
            if isinstance(value, float):
                total, weight = self._shares.get(key, (0.0, 0))
                self._shares[key] = (total + value * papers, weight + papers)
                self.counts[key] = round(self._shares[key][0] / max(self._shares[key][1], 1), 3)
            else:
                self.counts[key] = self.counts.get(key, 0) + value


def _part_counts(before: dict, after: dict) -> dict[str, int | float]:
    """What one part added to an encoder's counts: a whole number's increase (multi-vector's
    sentences), a share as it is after the part (the GPU's busy share over its encoding)."""
    return {key: value if isinstance(value, float) else value - before.get(key, 0)
            for key, value in after.items()}


def _serve(device: str, work: Work, tasks, results) -> None:
    """A worker: the model loaded on `device`, then each part received from `tasks` read and
    tokenized (a thread beside the model, one part ahead) and encoded, sent back on `results`;
    None ends it. A thread of its own takes the parts off the pipe as they come, so that the
    main process never waits to send one. An error is sent back as ("error", (the InputError,
    or "Type: first line"; the traceback))."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the main process stops the workers
    _untracked()
    try:
        import torch

        torch.set_num_threads(work.threads)
        encoder = work.encoder_class(work.entry, model_path=work.model_path, device=device)
        results.send(("ready", None))
        received: queue.Queue = queue.Queue()
        ready: queue.Queue = queue.Queue(maxsize=1)

        def receive() -> None:
            while True:
                try:
                    task = tasks.recv()
                except (EOFError, OSError):  # the main process is gone
                    task = None
                received.put(task)
                if task is None:
                    return

        def read() -> None:
            while (task := received.get()) is not None:
                k, chunk = task
                try:
                    ready.put((k, chunk, work.read(work.corpus_dir, encoder, chunk,
                                                   work.columns)))
                except BaseException as exc:  # noqa: BLE001 - raised by the model's loop
                    ready.put(exc)
                    return
            ready.put(None)

        for target in (receive, read):
            threading.Thread(target=target, daemon=True, name=target.__name__).start()
        while (item := ready.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            k, chunk, (ids, digests) = item
            before = dict(getattr(encoder, "counts", {}))
            vectors, tokens = encoder.encode_ids(ids, work.budget, work.max_batch, False)
            counts = _part_counts(before, dict(getattr(encoder, "counts", {})))
            results.send(("part", (k, vectors, digests, tokens, counts)))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back as one line
        told = exc if isinstance(exc, InputError) else \
            f"{type(exc).__name__}: {first_line(exc)}"
        with contextlib.suppress(OSError, ValueError):  # the main process is gone
            results.send(("error", (told, traceback.format_exc())))


def _untracked() -> None:
    """In a worker: nothing that needs multiprocessing's resource tracker (a process of its
    own, shared by the stage's processes, which a user may kill): the progress bars' lock (the
    only named semaphore a worker made: tqdm's, for bars shared across processes, which a
    worker's own bars are not) is a thread lock, and the tracker's 'died unexpectedly,
    relaunching' warning, should anything else register, is a debug line, not two lines of
    library text on the user's terminal."""
    quiet_tracker()
    try:
        from tqdm import tqdm
    except ImportError:  # no bars, no lock
        return
    tqdm.set_lock(threading.RLock())


@dataclass
class _Worker:
    device: str
    process: Any
    tasks: Any  # this process's end of the pipe of parts to encode
    results: Any  # ... and of the pipe of what comes back
    out: int = 0  # parts sent and not yet back
    since: float = field(default_factory=time.monotonic)  # its last message, or work given
    back: int = 0  # parts it sent back
    hung: bool = False  # taken as hung: killed at once (a stopped one ignores SIGTERM)


def encode_parts(work: Work, devices: Sequence[str], chunks: Sequence[Any],
                 write: Callable[[int, Any, Any], None], bar: Any = None,
                 stall: Stall | None = None) -> Outcome:
    """Encode `chunks` (one part each) on a worker per device and `write(k, vectors,
    digests)` each, in the order of k; `bar` (a Progress) advances as parts come back, and
    is given a chance to log a line at each poll while none does. A worker's failure is an
    InputError of one line naming its device, the parts written kept (an InputError raised
    in a worker, such as a model that does not load, is its own line); so is a worker silent
    beyond `stall`'s bound (default: Stall.from_environment), which is killed."""
    stall = stall or Stall.from_environment()
    ctx = get_context("spawn")
    workers: list[_Worker] = []
    outcome, held, started = Outcome(), {}, time.perf_counter()
    first_ready: float | None = None
    slowest: float | None = None  # seconds of the slowest part so far, any worker's
    sent = written = 0
    done = False
    try:
        for device in devices:
            tasks_read, tasks_write = ctx.Pipe(duplex=False)
            results_read, results_write = ctx.Pipe(duplex=False)
            process = ctx.Process(target=_serve, args=(device, work, tasks_read, results_write),
                                  name=f"embed-{device}", daemon=True)
            workers.append(_Worker(device, process, tasks_write, results_read))
            _start(process)
            tasks_read.close()  # the worker's ends: this process keeps its own only, so that
            results_write.close()  # a worker's death ends its pipes (EOF, a broken pipe)
        log.info(f"[embed] {len(chunks)} parts on {len(workers)} workers "
                 f"({', '.join(devices)}), {work.threads} torch thread(s) each")
        while written < len(chunks):
            fed = True
            while fed:  # a part to each worker in turn, at most PER_WORKER out each, and as
                fed = False  # many held or out in all: what is held waits for an earlier one
                for worker in workers:
                    if (sent < len(chunks) and worker.out < PER_WORKER
                            and sent < written + PER_WORKER * len(workers)):
                        _send(worker, (sent, chunks[sent]), written, len(chunks))
                        if worker.out == 0 and worker.back:  # idle until now: its clock
                            worker.since = time.monotonic()  # starts with this part
                        worker.out, sent, fed = worker.out + 1, sent + 1, True
            waited = {w.results: w for w in workers} | {w.process.sentinel: w for w in workers}
            for ready in connection.wait(list(waited), timeout=POLL_S):
                worker = waited[ready]
                kind, body = _receive(worker, written, len(chunks))
                now = time.monotonic()
                if kind == "part":  # a part's seconds: since its worker's last message or
                    took = now - worker.since  # since it was given work while idle
                    slowest = took if slowest is None else max(slowest, took)
                    worker.back += 1
                worker.since = now
                if kind == "ready":
                    if first_ready is None:
                        first_ready = time.perf_counter()
                        outcome.start_seconds = round(first_ready - started, 2)
                    continue
                k, vectors, digests, tokens, counts = body
                worker.out -= 1
                held[k] = (vectors, digests)
                outcome.arrived.append(k)
                outcome.tokens += tokens
                outcome.add(counts, len(chunks[k]))
                if bar is not None:
                    bar.update(len(chunks[k]))
                    bar.lap()  # a whole part back: the ETA's pace
                    elapsed = time.perf_counter() - (first_ready or started)
                    bar.set_postfix(workers=len(workers),
                                    tokens_per_s=f"{outcome.tokens / max(elapsed, 1e-9):.0f}")
            while written in held:  # strictly in order: the store one device writes
                write(written, *held.pop(written))
                written += 1
            for worker in workers:  # one killed may not have been seen ending yet
                if written < len(chunks) and not worker.process.is_alive():
                    raise _died(worker, written, len(chunks))
            _check_stalls(workers, stall, slowest, written, len(chunks))
            if bar is not None:
                bar.update(0)  # a progress line every interval, also while none comes back
        for worker in workers:
            _send(worker, None, written, len(chunks))
        outcome.seconds = time.perf_counter() - (first_ready or started)
        done = True
        return outcome
    finally:
        _stop(workers, done)


def _check_stalls(workers: list[_Worker], stall: Stall, slowest: float | None,
                  written: int, total: int) -> None:
    """Refuse to wait on past its bound a worker that has parts out and has sent nothing (a
    stopped process, a deadlocked driver: alive, so its pipe and sentinel never wake this
    process): one line naming its device and the bound, the worker marked to be killed."""
    now = time.monotonic()
    for worker in workers:
        if worker.out == 0:
            continue
        bound = stall.bound(slowest, first=worker.back == 0)
        silent = now - worker.since
        if silent > bound:
            worker.hung = True
            why = (f"its start allowance, the longer of {START_S:g} s and {FIRST_PART_TIMES}"
                   f" x {STALL_ENV}={stall.floor:g} s, for starting, loading the model and its"
                   " first part"
                   if worker.back == 0 or slowest is None else
                   f"the longer of {STALL_ENV}={stall.floor:g} s and {SLOWEST_TIMES} x the "
                   f"slowest part so far, {slowest:.1f} s")
            raise InputError(f"the embed worker on {worker.device} sent nothing for "
                             f"{silent:.0f} s, longer than its bound of {bound:.0f} s ({why}), "
                             "and was killed as hung (stopped, or stuck in its device's "
                             f"driver): {_kept(written, total)}")


def _start(process) -> None:
    """Start a worker with SIGINT ignored from its first instruction (a disposition kept
    across exec): Ctrl-C reaches the whole process group, and this process, not a worker
    half-way through importing torch, answers it (stopping them all)."""
    handler = signal.getsignal(signal.SIGINT)
    quiet_tracker()  # spawn relaunches a tracker a user killed: no library text, now or later
    if threading.current_thread() is not threading.main_thread() or handler is None:
        process.start()  # a handler only the main thread may set, or one not set from Python
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process.start()
    finally:
        signal.signal(signal.SIGINT, handler)


def _send(worker: _Worker, task: Any, written: int, total: int) -> None:
    try:
        worker.tasks.send(task)
    except OSError:  # a broken pipe: the worker is gone
        if task is None:  # the stage is done: its end changes nothing
            return
        raise _died(worker, written, total) from None


def _receive(worker: _Worker, written: int, total: int) -> tuple[str, Any]:
    """The worker's next message; its error, or its end (the pipe closed), as one line."""
    try:
        kind, body = worker.results.recv()
    except (EOFError, OSError):
        raise _died(worker, written, total) from None
    if kind == "error":
        raise _failure(worker, body, written, total)
    return kind, body


def _failure(worker: _Worker, body: tuple[Any, str], written: int, total: int
             ) -> InputError:
    """The line of an error a worker sent: an InputError as it is (the line this process
    would give: a model that does not load), any other its type and first line."""
    told, trace = body
    log.debug(f"[embed] the worker on {worker.device} failed:\n{trace}")
    if isinstance(told, InputError):
        return told
    return InputError(f"the embed worker on {worker.device} failed ({told}): "
                      + _kept(written, total))


def _died(worker: _Worker, written: int, total: int) -> InputError:
    """The line of a worker that ended: the error it sent before it did, if any, else its exit
    status or the signal that killed it."""
    try:
        while worker.results.poll(0.2):
            kind, body = worker.results.recv()
            if kind == "error":
                return _failure(worker, body, written, total)
    except (EOFError, OSError):
        pass
    worker.process.join(STOP_S)
    code = worker.process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        why = f"was killed by {name}" + (" (as the kernel's out-of-memory killer does)"
                                         if -code == signal.SIGKILL else "")
    else:
        why = "stopped answering" if code is None else f"exited with status {code}"
    return InputError(f"the embed worker on {worker.device} {why} before the stage was done: "
                      + _kept(written, total))


def _kept(written: int, total: int) -> str:
    return (f"{written} of {total} parts were written and are kept; run the same command "
            "again to embed the rest")


def _stop(workers: list[_Worker], done: bool) -> None:
    """Every worker ended and joined, whatever happened: where the stage is `done` (each told
    to end) given STOP_S to, else at once terminated (SIGTERM, and SIGCONT: a stopped worker
    acts on it then); one taken as hung killed (SIGKILL) at once; killed where SIGTERM does
    not end it in STOP_S. Their pipes closed."""
    if done:
        deadline = time.monotonic() + STOP_S
        for worker in workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
    for worker in workers:
        if worker.process.pid is not None and worker.process.is_alive():
            if worker.hung:  # SIGKILL: a stopped process acts on nothing else
                worker.process.kill()
                continue
            worker.process.terminate()
            with contextlib.suppress(OSError):  # a stopped one acts on SIGTERM once continued
                os.kill(worker.process.pid, signal.SIGCONT)
    for worker in workers:
        if worker.process.pid is not None:
            worker.process.join(STOP_S)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        for end in (worker.tasks, worker.results):
            end.close()
