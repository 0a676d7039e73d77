"""The GPU's busy share in the embed stage's progress (issue 70): a sampler on a daemon thread
(pipeline.core.logs.Sampler) read from NVML or nvidia-smi (busy_reader, smi_reader), shown
after the rate (`gpu_busy=87%`) and put in the embed summary; nothing on a CPU. Tested with
fake sources: CI has no GPU."""

from __future__ import annotations

import logging
import stat
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
import torch

from pipeline.core.logs import Progress, Sampler, progress
from pipeline.encoding import encoders
from pipeline.encoding.encoders import Encoder, busy_reader, smi_reader
from pipeline.models import ModelEntry


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def wait_for(condition, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_a_sampler_averages_its_readings_on_a_thread_until_stopped():
    values = iter([0.5, None, 1.0, 0.75, 0.75, 0.75, 0.75] + [0.75] * 10_000)
    stopped: list[float | None] = []
    sampler = Sampler("gpu_busy", lambda: next(values), period=0.001)
    sampler.on_stop(lambda s: stopped.append(s.mean()))
    assert sampler.mean() is None and sampler.text() is None
    sampler.start()
    wait_for(lambda: len(sampler.samples) >= 3)
    sampler.stop()
    assert not sampler._thread.is_alive()
    assert sampler.samples[:3] == [0.5, 1.0, 0.75]  # None: skipped
    assert stopped == [sampler.mean()]
    count = len(sampler.samples)
    time.sleep(0.01)
    assert len(sampler.samples) == count  # stopped for good
    sampler.stop()
    assert len(stopped) == 1  # once


def test_a_sampler_whose_readings_keep_failing_gives_up():
    calls = []

    def broken() -> float:
        calls.append(1)
        raise RuntimeError("the monitor went away")

    sampler = Sampler("gpu_busy", broken, period=0.001, misses=3)
    sampler.start()
    wait_for(lambda: not sampler._thread.is_alive())
    assert len(calls) == 3 and sampler.mean() is None
    sampler.stop()


def test_progress_shows_a_followed_samplers_mean_and_stops_it_at_close(caplog):
    caplog.set_level(logging.INFO, logger="pipeline")
    clock = Clock()
    sampler = Sampler("gpu_busy", lambda: 0.87, period=0.001)
    with progress(10, "embed", interval=0, clock=clock, terminal=False) as bar:
        assert bar.follow(sampler) is sampler
        assert bar.follow(Sampler("gpu_busy", lambda: 0.1)) is sampler  # one per name
        wait_for(lambda: sampler.samples)
        clock.now = 1
        bar.update(5)
    assert not sampler._thread.is_alive()
    late = Sampler("other", lambda: 0.5, period=0.001)
    assert bar.follow(late) is late and late._thread is None  # closed: never started
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[embed]")]
    assert lines[0] == "[embed] 5/10 papers (50.0%), 5 papers/s, ETA 1s, gpu_busy=87%"
    assert bar.line().endswith("gpu_busy=87%")


def test_progress_shows_nothing_before_a_first_reading(caplog):
    caplog.set_level(logging.INFO, logger="pipeline")
    with progress(10, "embed", interval=0, clock=Clock(), terminal=False) as bar:
        bar.follow(Sampler("gpu_busy", lambda: 0.5, period=3600))
        bar.update(5)
    assert "gpu_busy" not in caplog.text


def fake_smi(tmp_path: Path, body: str) -> str:
    """An executable standing in for nvidia-smi: `body` as a shell script; its arguments are
    written to args.txt."""
    path = tmp_path / "nvidia-smi"
    path.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args.txt\n{body}\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_nvidia_smi_is_asked_for_one_gpus_utilization(tmp_path):
    read = smi_reader("GPU-1234", fake_smi(tmp_path, "echo 87"))
    assert read() == pytest.approx(0.87)
    assert (tmp_path / "args.txt").read_text().split() == [
        "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", "GPU-1234"]
    assert smi_reader("0", fake_smi(tmp_path, "echo '[N/A]'"))() is None
    assert smi_reader("0", fake_smi(tmp_path, "echo 'No devices were found'; exit 6"))() is None


def test_a_hanging_nvidia_smi_is_cut_off_and_the_sampler_gives_up(tmp_path, monkeypatch):
    monkeypatch.setattr(encoders, "SMI_TIMEOUT", 0.2)
    read = smi_reader("0", fake_smi(tmp_path, "exec sleep 30"))
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        read()
    assert time.monotonic() - start < 15  # cut off, not the 30 s it sleeps
    assert not encoders._reads(read)  # the probe: this reader does not serve
    sampler = Sampler("gpu_busy", read, period=0.001, misses=2)
    sampler.start()
    wait_for(lambda: not sampler._thread.is_alive())
    assert sampler.mean() is None


def test_no_nvidia_smi_no_reader(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert smi_reader("0") is None


def test_nothing_is_sampled_on_a_cpu():
    assert busy_reader(torch.device("cpu")) is None


@pytest.fixture(scope="module")
def gpu_like(tiny_bert) -> Encoder:
    encoder = Encoder(ModelEntry("tiny-cls", "dense", str(tiny_bert), "cls", "l2",
                                 max_length=128), device="cpu")
    encoder.pad_step = None  # the GPU's loop
    return encoder


@pytest.fixture(scope="module")
def texts(corpus_dir) -> list[str]:
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(64)
    return [f"{t} {a}" for t, a in zip(papers["title"], papers["abstract"], strict=True)]


@pytest.mark.slow
def test_the_encoder_samples_the_gpu_under_the_stages_bar_and_records_the_share(
        gpu_like, texts, monkeypatch, caplog):
    """A stage encodes its parts under one bar: one sampler follows it (probed once per
    encoder), shown after the rate and, once the bar closes, in the summary's counts."""
    caplog.set_level(logging.INFO, logger="pipeline")
    probes = []

    def reader(device):
        probes.append(device)
        return lambda: 0.87

    monkeypatch.setattr(encoders, "busy_reader", reader)
    monkeypatch.setattr(encoders, "BUSY_PERIOD", 0.001)
    monkeypatch.delattr(gpu_like, "counts", raising=False)
    monkeypatch.delattr(gpu_like, "_busy_read", raising=False)
    ids = gpu_like.tokenize(texts)
    with Progress(2 * len(ids), "embed", interval=0, terminal=False) as bar:
        gpu_like.encode_ids(ids[:32], progress=bar)
        sampler = bar.samplers["gpu_busy"]
        gpu_like.encode_ids(ids[32:], progress=bar)
        gpu_like.encode_ids(ids, progress=bar)
        assert bar.samplers == {"gpu_busy": sampler}  # the same one, all along
        wait_for(lambda: sampler.samples)
        bar.update(0)
    assert len(probes) == 1
    assert gpu_like.counts == {"gpu_busy": 0.87}
    assert "gpu_busy=87%" in caplog.records[-1].getMessage()
    assert not sampler._thread.is_alive()


@pytest.mark.slow
def test_without_a_reader_nothing_is_sampled_or_recorded(gpu_like, texts, monkeypatch):
    monkeypatch.delattr(gpu_like, "counts", raising=False)
    monkeypatch.delattr(gpu_like, "_busy_read", raising=False)
    with Progress(16, "embed", interval=0, terminal=False) as bar:
        gpu_like.encode(texts[:16], progress=False)
        gpu_like.encode_ids(gpu_like.tokenize(texts[:16]), progress=bar)
    assert bar.samplers == {} and not hasattr(gpu_like, "counts")


@pytest.mark.gpu
def test_on_a_gpu_its_busy_share_is_read():
    """NVML (torch.cuda.utilization) or nvidia-smi for the GPU torch uses, a share 0-1."""
    read = busy_reader(torch.device("cuda"))
    assert read is not None  # a GPU node has nvidia-smi at least
    assert 0 <= read() <= 1
