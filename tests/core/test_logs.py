"""pipeline.core.logs: levels from -q / -v, and progress lines that a batch log can read."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core import logs
from pipeline.core.errors import InputError
from pipeline.core.logs import Progress, duration, progress, setup, track

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^\[embed\] (\d+)/(\d+) papers \((\d+\.\d)%\), (\S+) papers/s, "
                  r"(ETA \S+|in \S+)$")


class Clock:
    """A fake monotonic clock: `tick(s)` moves it on."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def _level():
    """Each test starts at the default level (INFO) and leaves it so."""
    setup(0)
    yield
    setup(0)


def lines_of(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_a_line_every_interval_with_done_total_rate_and_eta(capsys):
    clock = Clock()
    with Progress(2_000_000, "embed", interval=30, clock=clock, terminal=False) as bar:
        for _ in range(10):  # 10 s per step: a line every third step
            clock.tick(10)
            bar.update(40_000)
    lines = lines_of(capsys)
    assert lines[:3] == [
        "[embed] 120000/2000000 papers (6.0%), 4000 papers/s, ETA 7m50s",
        "[embed] 240000/2000000 papers (12.0%), 4000 papers/s, ETA 7m20s",
        "[embed] 360000/2000000 papers (18.0%), 4000 papers/s, ETA 6m50s",
    ]
    # the last one at the end: what was done since the last line
    assert lines[3] == "[embed] 400000/2000000 papers (20.0%), 4000 papers/s, ETA 6m40s"
    assert len(lines) == 4 and all(LINE.match(line) for line in lines)


def test_an_eta_by_parts_leaves_out_the_start_and_the_order_within_a_part(capsys):
    """Issue 88: the first ETA was 24m30s for a step that took 6m59s: the rate from the start
    counted loading the model, and a part's longest papers come first. Here 60 s of loading,
    then 8 parts of 4 batches of 100 papers, each part 40 s, its batches 16, 12, 8 and 4 s:
    the whole takes 60 + 8 x 40 = 380 s. From the start the first lines' ETAs are far off;
    by parts there is none ('?') before two parts are done, and then the true one."""
    clock = Clock()
    start = clock.now
    with progress(3200, "embed", interval=10, clock=clock, terminal=False, laps=True) as bar:
        old = Progress(3200, "embed", interval=10, clock=clock, terminal=False, show=False)
        clock.tick(60)  # the model loading: nothing done
        etas = []  # (seconds since the start, ETA by parts, ETA from the start)
        for _ in range(8):
            for seconds in (16, 12, 8, 4):
                clock.tick(seconds)
                bar.update(100)
                old.update(100)
                if seconds == 12:  # within a part: its longer half done
                    etas.append((clock.now - start, bar.line().rpartition("ETA ")[2],
                                 old.line().rpartition("ETA ")[2]))
            bar.lap()
    assert clock.now - start == 380
    seconds = {"?": None} | {duration(s): s for s in range(2000)}  # an ETA's seconds
    for at, by_parts, from_start in etas[:2]:  # within the first two parts
        assert by_parts == "?" and seconds[from_start] > 2 * (380 - at)  # 22m00s for 4m52s
    assert [eta for _, eta, _ in etas[2:]] == [duration(380 - at) for at, _, _ in etas[2:]]
    lines = lines_of(capsys)
    assert lines[-1] == "[embed] 3200/3200 papers (100.0%), 8.42 papers/s, in 6m20s"
    early = [line for line in lines if int(LINE.match(line).group(1)) < 800]  # 2 parts
    assert early and all(line.endswith("ETA ?") for line in early)


def test_the_last_line_says_how_long_it_took(capsys):
    clock = Clock()
    with progress(90, "embed", interval=30, clock=clock, terminal=False) as bar:
        for _ in range(3):
            clock.tick(31)
            bar.update(30)
    assert lines_of(capsys)[-1] == "[embed] 90/90 papers (100.0%), 0.968 papers/s, in 1m33s"


def test_work_shorter_than_the_interval_logs_nothing(capsys):
    clock = Clock()
    with progress(100, "embed", interval=30, clock=clock, terminal=False) as bar:
        clock.tick(5)
        bar.update(100)
    assert lines_of(capsys) == []


def test_nothing_at_quiet(capsys):
    setup(-1)
    clock = Clock()
    with progress(100, "embed", interval=0, clock=clock, terminal=False) as bar:
        for _ in range(10):
            clock.tick(1)
            bar.update(10)
    logging.getLogger("pipeline.x").info("[x] done in 1.0s")
    assert lines_of(capsys) == []
    logging.getLogger("pipeline.x").warning("[x] something to know")
    assert lines_of(capsys) == ["warning: [x] something to know"]


def test_levels_and_format(capsys):
    log = logging.getLogger("pipeline.test")
    log.debug("[x] hidden by default")
    log.info("[x] done in 3.1s papers=5")
    log.warning("[x] odd")
    assert lines_of(capsys) == ["[x] done in 3.1s papers=5", "warning: [x] odd"]
    setup(1)
    log.debug("[x] shown with -v")
    assert lines_of(capsys) == ["[x] shown with -v"]
    setup(0)
    setup(0)  # one handler, however often it is set up
    log.info("once")
    assert lines_of(capsys) == ["once"]


def test_interval_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv(logs.INTERVAL_ENV, "0")
    assert logs.progress_interval() == 0
    clock = Clock()
    items = list(track(range(3), "embed", "papers", clock=clock, terminal=False))
    assert items == [0, 1, 2]
    assert [line.split(",")[0] for line in lines_of(capsys)] == [
        "[embed] 1/3 papers (33.3%)", "[embed] 2/3 papers (66.7%)", "[embed] 3/3 papers (100.0%)"]
    monkeypatch.delenv(logs.INTERVAL_ENV)
    assert logs.progress_interval() == logs.DEFAULT_INTERVAL


@pytest.mark.parametrize("value", ["soon", "-1", "1e9", "nan", "٣"])
def test_a_bad_interval_is_one_line_naming_the_variable_and_its_range(monkeypatch, value):
    monkeypatch.setenv(logs.INTERVAL_ENV, value)
    with pytest.raises(InputError) as caught:
        logs.progress_interval()
    message = caught.value.message
    assert message.startswith(f"{logs.INTERVAL_ENV}=") and "from 0 to 86400" in message
    assert "\n" not in message and "leave it unset" in message


def test_show_false_is_silent_and_postfix_is_logged(capsys):
    clock = Clock()
    with progress(10, "embed", interval=0, show=False, clock=clock, terminal=False) as bar:
        clock.tick(1)
        bar.update(5)
    assert lines_of(capsys) == []
    with progress(10, "embed", interval=0, clock=clock, terminal=False) as bar:
        bar.set_postfix(tokens_per_s=900)
        clock.tick(1)
        bar.update(5)
    assert lines_of(capsys) == ["[embed] 5/10 papers (50.0%), 5 papers/s, ETA 1s, "
                                "tokens_per_s=900"]


def test_a_terminal_gets_a_bar_not_lines(capsys):
    clock = Clock()
    with progress(10, "embed", interval=0, clock=clock, terminal=True) as bar:
        clock.tick(1)
        bar.update(10)
        assert bar.bar is not None
    err = capsys.readouterr().err
    assert "[embed]" not in err and "10/10" in err


def test_duration():
    assert [duration(s) for s in (0, 45, 2211, 7509, None)] == [
        "0s", "45s", "36m51s", "2h05m09s", "?"]


def test_a_command_logs_progress_in_a_batch_log():
    """A stage run with stderr not a terminal (a SLURM log): progress lines, no bar; -q
    leaves the command's output alone and logs nothing."""
    code = ("import sys, time; from pipeline.core import logs; logs.setup(int(sys.argv[1]));\n"
            "with logs.progress(4, 'embed') as bar:\n"
            "    for _ in range(4): time.sleep(0.05); bar.update(1)\n"
            "print('output')")
    env = {"PIPELINE_PROGRESS_INTERVAL": "0", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code, "0"], cwd=ROOT, capture_output=True,
                          text=True, env=env, check=True)
    lines = done.stderr.splitlines()
    assert done.stdout == "output\n" and len(lines) == 4, lines
    assert all(LINE.match(line) for line in lines), lines
    quiet = subprocess.run([sys.executable, "-c", code, "-1"], cwd=ROOT, capture_output=True,
                           text=True, env=env, check=True)
    assert quiet.stdout == "output\n" and quiet.stderr == ""


def test_a_python_session_gets_progress_lines_unless_it_configured_logging():
    """Progress in a script that configured no logging: the command line's lines on stderr
    (logging's defaults would drop them); in one that configured logging, its own choice
    (WARNING here: none), and no handler added (issue 49)."""
    code = ("import logging, sys; from pipeline.core import logs\n"
            "if sys.argv[1] == 'configured': logging.basicConfig(level=logging.WARNING)\n"
            "with logs.progress(4, 'embed') as bar:\n"
            "    for _ in range(4): bar.update(1)\n"
            "print(len(logging.getLogger('pipeline').handlers))")
    env = {"PIPELINE_PROGRESS_INTERVAL": "0", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code, "plain"], cwd=ROOT, capture_output=True,
                          text=True, env=env, check=True)
    lines = done.stderr.splitlines()
    assert len(lines) == 4 and all(LINE.match(line) for line in lines), lines
    configured = subprocess.run([sys.executable, "-c", code, "configured"], cwd=ROOT,
                                capture_output=True, text=True, env=env, check=True)
    assert configured.stdout == "0\n" and configured.stderr == ""


def test_cli_quiet_and_verbose_are_global_options():
    from pipeline.cli.main import build_parser

    parser = build_parser()
    assert parser.parse_args(["-q", "models"]).verbosity == -1
    assert parser.parse_args(["--verbose", "models"]).verbosity == 1
    assert parser.parse_args(["models"]).verbosity == 0
    done = subprocess.run([sys.executable, "-m", "pipeline", "-q", "-v", "models"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("error: ")
