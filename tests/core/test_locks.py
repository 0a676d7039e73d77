"""A process waiting for a lock says whose it is, at once and at a bounded interval, and gives
up on a holder that is stopped (issue 46: a second `make pool` waited on a stopped
`make corpus` without a word)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.core.locks import file_lock, holder

REPO = Path(__file__).resolve().parents[2]
# takes the lock of argv[1], says so, and keeps it until its stdin closes
HOLDER = """import sys
from pathlib import Path
from pipeline.core.locks import file_lock
with file_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def held(tmp_path):
    """A second process holding the lock of tmp_path/artifact: (its Popen, the target)."""
    target, script = tmp_path / "artifact", tmp_path / "holder.py"
    script.write_text(HOLDER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(script), str(target), "make-corpus-stand-in"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc, target
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=30)


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]


def test_a_stopped_holder_is_named_every_interval_then_given_up_on(held, caplog):
    proc, target = held
    proc.send_signal(signal.SIGSTOP)
    caplog.set_level(logging.WARNING, logger="pipeline.core.locks")
    with pytest.raises(InputError) as raised, file_lock(target, interval=0.1,
                                                        stopped_limit=0.5):
        pytest.fail("the lock of a stopped holder was taken")
    lines = _lines(caplog)
    assert len(lines) >= 3, lines  # one at once, then one every 0.1 s over about 0.5 s
    for line in lines:
        assert f"pid {proc.pid} on {socket.gethostname()}" in line
        assert "holder.py" in line and "make-corpus-stand-in" in line and "stopped" in line
    message = str(raised.value)
    assert f"kill -CONT {proc.pid}" in message and f"kill {proc.pid}" in message
    assert "\n" not in message


def test_a_running_holder_is_named_and_waited_for(held, caplog):
    proc, target = held
    caplog.set_level(logging.WARNING, logger="pipeline.core.locks")
    release = threading.Timer(1.0, proc.stdin.close)  # the holder ends its work
    release.start()
    try:
        with file_lock(target, interval=0.2, stopped_limit=0.1):
            assert holder(target)["pid"] == os.getpid()  # the new holder says who it is
    finally:
        release.cancel()
    lines = _lines(caplog)
    assert len(lines) >= 2, lines
    assert all(f"pid {proc.pid}" in line and "stopped" not in line for line in lines)


def test_a_free_lock_is_taken_without_a_line_or_a_write(tmp_path, caplog):
    """Taking a lock writes nothing (its holder is found in /proc/locks, not in the file): a
    current artifact kept as it is leaves every file under the data folder as it was."""
    caplog.set_level(logging.WARNING, logger="pipeline.core.locks")
    with file_lock(tmp_path / "artifact", interval=0.01):
        pass
    before = (tmp_path / ".artifact.lock").stat()
    time.sleep(0.01)
    with file_lock(tmp_path / "artifact", interval=0.01):
        assert holder(tmp_path / "artifact")["pid"] == os.getpid()
    after = (tmp_path / ".artifact.lock").stat()
    assert after.st_size == 0 and after.st_mtime_ns == before.st_mtime_ns
    assert _lines(caplog) == []
