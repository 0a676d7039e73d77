"""Messages and progress: `logging` under the logger "pipeline", and progress a batch log can read.

`setup(verbosity)` (the command line calls it; `-q` is -1, `-v` is 1) gives the "pipeline"
logger one handler on stderr: INFO lines as they are ("[embed] done in 3.1s ..."), WARNING
and above prefixed with the level ("warning: ..."); the level is INFO, WARNING with -q, DEBUG
with -v. Modules log with `logging.getLogger(__name__)`.

`progress(total, what, unit)` follows a long stage: on a terminal a tqdm bar; elsewhere (a
SLURM log, a pipe) an INFO line every `interval` seconds (PIPELINE_PROGRESS_INTERVAL, default
30), e.g. "[embed] 120000/2000000 papers (6.0%), 850 papers/s, ETA 36m51s", and a last one at
the end when any was logged. Lines are written when the work advances (`update`), so a stage
that never advances between two lines logs none. Neither bar nor lines below INFO (-q).
A `Sampler` reads a figure every half second on a daemon thread while the work runs (the
embed stage's GPU busy share); `Progress.follow(sampler)` shows its mean so far after the rate
(`..., gpu_busy=87%`) and stops it when the progress closes.
A Python session that configured no logging (`pipeline.search(...)` in a script or a
notebook) gets the command line's lines at its first progress (`setup()`): otherwise its
INFO lines, progress among them, would be dropped by logging's defaults.
Standard library only at import time (the `check` command runs before the environment
exists); tqdm is imported when a bar is shown.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pipeline.core.errors import InputError, quoted
from pipeline.core.numbers import number_in

ROOT = "pipeline"
INTERVAL_ENV = "PIPELINE_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 30.0  # seconds between two progress lines in a log
T = TypeVar("T")


class _Format(logging.Formatter):
    """The message as it is; WARNING and above prefixed with the level: 'warning: ...'."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return f"{record.levelname.lower()}: {text}" if record.levelno >= logging.WARNING else text


class _Stderr(logging.StreamHandler):
    """A handler on sys.stderr as it is when a record comes, not when it was made (a stream
    replaced later, as pytest's capture does, still gets the lines)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(_Format("%(message)s"))

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ sets it: ignored
        pass


def level_of(verbosity: int) -> int:
    return logging.WARNING if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO


def setup(verbosity: int = 0) -> logging.Logger:
    """The "pipeline" logger on stderr at the level of `verbosity` (-1 quiet, 0, 1 verbose).
    Called again, it sets the level only (one handler, never two)."""
    logger = logging.getLogger(ROOT)
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        logger.addHandler(_Stderr())
    logger.setLevel(level_of(verbosity))
    return logger


def unconfigured() -> bool:
    """Whether no one configured logging: no handler on the root or "pipeline" logger and
    their levels as Python leaves them (the root WARNING, "pipeline" unset)."""
    root, ours = logging.getLogger(), logging.getLogger(ROOT)
    return (not root.handlers and not ours.handlers and root.level == logging.WARNING
            and ours.level == logging.NOTSET)


def progress_interval() -> float:
    """Seconds between progress lines: PIPELINE_PROGRESS_INTERVAL (0 to a day), else
    DEFAULT_INTERVAL; a bad value is one line naming the variable and its range, as for every
    number a user gives (core/numbers)."""
    text = os.environ.get(INTERVAL_ENV, "")
    if not text:
        return DEFAULT_INTERVAL
    try:
        return number_in(0, 86_400, "the seconds between progress lines")(text)
    except InputError as exc:
        raise InputError(f"{INTERVAL_ENV}={quoted(text)}: {exc.message} (default "
                         f"{DEFAULT_INTERVAL:g}), or leave it unset") from None


def duration(seconds: float | None) -> str:
    """45s, 36m51s, 2h05m09s; '?' when unknown."""
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def counted(n: int, noun: str) -> str:
    """`n` and its noun, singular for one: "1 problem", "3 problems", "1,204 manifests"."""
    return f"{n:,} {noun if n == 1 else f'{noun}s'}"


def _rate(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.3g}"


class Progress:
    """Work done of `total`: a bar on a terminal, INFO lines every `interval` seconds
    elsewhere. Use as a context manager; `update(n)` when n more units are done.

    The ETA is the rest at the pace so far, from the start; with `laps`, the work is done in
    whole parts (`lap()` at the end of each) whose inside is no sample of the whole (embed:
    the longest papers of a part first, after the model's loading), and the ETA is the rest
    at the pace between the first part's end and the last's: none ('?') before two parts are
    done."""

    def __init__(self, total: int, what: str, unit: str = "papers",
                 interval: float | None = None, show: bool = True,
                 logger: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic, terminal: bool | None = None,
                 laps: bool = False):
        self.total, self.what, self.unit, self.done = int(total), what, unit, 0
        self.by_laps = laps
        self.laps: list[tuple[float, int]] = []  # (clock, done) at each part's end
        self.log = logger or logging.getLogger(f"{ROOT}.progress")
        self.interval = progress_interval() if interval is None else interval
        self.clock = clock
        self.start = self.last = clock()
        self.logged: int | None = None  # units done at the last line logged
        self.postfix: dict[str, Any] = {}
        self.samplers: dict[str, Sampler] = {}
        self.closed = False
        if show and unconfigured():  # a Python session's: the command line's lines
            setup()
        self.enabled = show and self.log.isEnabledFor(logging.INFO)
        self.bar = None
        if terminal is None:
            terminal = _isatty()
        if self.enabled and terminal:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc=what, unit=unit, file=sys.stderr)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self._sampled()
            self.bar.update(n)
        elif self.enabled:
            now = self.clock()
            if now - self.last >= self.interval:
                self._sampled()
                self._line(now)

    def lap(self) -> None:
        """A whole part of the work is done (its units given to `update`): a point of the
        pace the ETA is measured by (`laps`)."""
        self.laps.append((self.clock(), self.done))

    def follow(self, sampler: Sampler) -> Sampler:
        """Show `sampler`'s mean so far after the rate (started here if it is not yet), and
        stop it when this progress closes; the sampler already followed under its name is
        kept and returned instead. A closed progress starts none."""
        if sampler.name in self.samplers:
            return self.samplers[sampler.name]
        if self.closed:
            return sampler
        self.samplers[sampler.name] = sampler
        sampler.start()
        return sampler

    def _sampled(self) -> None:
        """The followed samplers' means into the postfix (none shown before a first sample)."""
        for name, sampler in self.samplers.items():
            if (text := sampler.text()) is not None:
                self.set_postfix(**{name: text})

    def set_postfix(self, **values: Any) -> None:
        """Figures shown after the rate (on a bar, and in the next line logged)."""
        self.postfix.update(values)
        if self.bar is not None:
            self.bar.set_postfix(values, refresh=False)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for sampler in self.samplers.values():
            sampler.stop()
        self._sampled()
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.logged is not None and self.logged != self.done:
            self._line(self.clock())

    def line(self, now: float | None = None) -> str:
        """'[embed] 120000/2000000 papers (6.0%), 850 papers/s, ETA 36m51s' (at the end: 'in
        39m12s' instead of the ETA)."""
        now = self.clock() if now is None else now
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        share = f" ({100 * self.done / self.total:.1f}%)" if self.total > 0 else ""
        if self.done >= self.total:
            when = f"in {duration(elapsed)}"
        else:
            when = f"ETA {duration(self._left(now, rate))}"
        extra = "".join(f", {k}={v}" for k, v in self.postfix.items())
        return (f"[{self.what}] {self.done}/{self.total} {self.unit}{share}, "
                f"{_rate(rate)} {self.unit}/s, {when}{extra}")

    def _left(self, now: float, rate: float) -> float | None:
        """Seconds to the end: the rest at `rate` (from the start), or with `laps` at the
        pace between the first and the last part's end, counted from that last end; None
        where not enough is measured."""
        if not self.by_laps:
            return (self.total - self.done) / rate if rate > 0 else None
        if len(self.laps) < 2:
            return None
        (first, at_first), (last, at_last) = self.laps[0], self.laps[-1]
        if last <= first or at_last <= at_first:
            return None
        pace = (at_last - at_first) / (last - first)
        return max(0.0, last + (self.total - at_last) / pace - now)

    def _line(self, now: float) -> None:
        self.log.info(self.line(now))
        self.last, self.logged = now, self.done


class Sampler:
    """A figure (a share, 0 to 1) read every `period` seconds on a daemon thread from `start`
    to `stop`: `mean()` of what was read (None before a first reading). A reading that raises
    or gives None is skipped; `misses` of them in a row end the sampling (a GPU monitor that
    went away is not asked twice a second for the rest of the job)."""

    def __init__(self, name: str, read: Callable[[], float | None], period: float = 0.5,
                 misses: int = 3):
        self.name, self.read, self.period, self.misses = name, read, period, misses
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_stop: list[Callable[[Sampler], None]] = []

    def start(self) -> None:
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name=f"sampler-{self.name}",
                                            daemon=True)
            self._thread.start()

    def on_stop(self, callback: Callable[[Sampler], None]) -> None:
        """Call `callback(self)` once the sampling has stopped (its mean is final)."""
        self._on_stop.append(callback)

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:  # a reading in flight is bounded by its reader
            self._thread.join(timeout=self.period + 5)
        for callback in self._on_stop:
            callback(self)

    def _run(self) -> None:
        missed = 0
        while not self._stop.wait(self.period):
            try:
                value = self.read()
            except Exception:  # a monitor's failure never fails the work
                value = None
            if value is None:
                missed += 1
                if missed >= self.misses:
                    return
                continue
            missed = 0
            self.samples.append(float(value))

    def mean(self) -> float | None:
        samples = list(self.samples)
        return sum(samples) / len(samples) if samples else None

    def text(self) -> str | None:
        """The mean as a percentage ('87%'), None before a first reading."""
        mean = self.mean()
        return None if mean is None else f"{100 * mean:.0f}%"


def _isatty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


def progress(total: int, what: str, unit: str = "papers", interval: float | None = None,
             show: bool = True, **options: Any) -> Progress:
    """A Progress: `with progress(n, "embed") as bar: ... bar.update(k)`. `show=False`:
    nothing at all (work too small to follow)."""
    return Progress(total, what, unit, interval, show, **options)


def track(items: Iterable[T], what: str, unit: str, total: int | None = None,
          show: bool = True, **options: Any) -> Iterator[T]:
    """The items, one unit of progress each, counted when the next one is asked for: after
    the loop's body has done its work with it (or, for results made as they are asked for,
    after both)."""
    if total is None:
        total = len(items)  # type: ignore[arg-type]
    with progress(total, what, unit, show=show, **options) as bar:
        for item in items:
            yield item
            bar.update(1)
