"""SLURM job arrays for the embed stage: the sbatch scripts and bad values (CPU only), the local
executor, and a real one-node cluster (Debian's munge, slurmctld and slurmd, started here) that
embeds two pools of the fixture corpus as a 4-task array and evaluates them in a job
after it."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.errors import InputError
from pipeline.encoding.store import load_vectors, stored_ids
from pipeline.layout import Place, store_dir
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.slurm import (
    Resources,
    check_executor,
    check_partition,
    check_time,
    embed_command,
    embed_script,
    follow_up_script,
    missing_per_shard,
    submit_after_embed,
    submit_embed,
)
from tests.conftest import CHILD_BOUND_S, N_QUERIES, POOL_SEED, apt_install, copy_corpus, pool_of

ROOT = Path(__file__).resolve().parents[1]
SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol")
# the data root's two nested pools (the session pools' queries, half their sizes): 817 papers
# to embed, not 1,617, each time a test embeds them (locally, as a 4-task array, again after
# the weights changed); still two pools to evaluate and about 200 papers a shard
POOL_SIZES = (400, 800)


# ---- the scripts, without a cluster ------------------------------------------------------------

def test_embed_script_is_one_array_task_per_shard(tmp_path):
    place = Place(tmp_path / "corpora" / "demo", tmp_path / "indexes", tmp_path / "runs")
    command = embed_command(place, "scincl", {
        "--pool": ["all-2k-r0", "all-5k-r0"], "--model-path": "/models/scincl",
        "--batch-size": None}, python="/opt/venv/bin/python")
    text = embed_script(command, 16, "embed-demo-scincl", tmp_path / "runs" / "slurm",
                        Resources(), tmp_path)
    assert "#SBATCH --array=0-15\n" in text
    assert f"#SBATCH --output={tmp_path}/runs/slurm/embed-demo-scincl-%A_%a.log\n" in text
    run = text.splitlines()[-1]
    assert run == (f"exec /opt/venv/bin/python -m pipeline --corpora-root {tmp_path}/corpora "
                   f"--index-root {tmp_path}/indexes --runs-root {tmp_path}/runs embed "
                   "--corpus demo --model scincl --pool all-2k-r0 --pool all-5k-r0 "
                   '--model-path /models/scincl --shard "$SLURM_ARRAY_TASK_ID" --shards 16')
    for option in ("partition", "gres", "time", "cpus-per-task", "dependency"):
        assert f"#SBATCH --{option}" not in text
    assert "OMP_NUM_THREADS" not in text
    one = embed_script(command, 1, "e", tmp_path, Resources(), tmp_path)
    assert "#SBATCH --array=0-0\n" in one and "--shards 1" in one
    full = embed_script(command, 4, "e", tmp_path, Resources("gpu,gpu-long", 2, "1-12:00:00",
                                                             8), tmp_path)
    for line in ("#SBATCH --partition=gpu,gpu-long", "#SBATCH --gres=gpu:2",
                 "#SBATCH --time=1-12:00:00", "#SBATCH --cpus-per-task=8",
                 "export OMP_NUM_THREADS=8"):
        assert line + "\n" in full
    script = tmp_path / "e.sbatch"
    script.write_text(full)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


def test_follow_up_script_waits_for_the_array(tmp_path):
    text = follow_up_script(["/bin/sh", "-c", "python -m pipeline search --corpus 'my demo' && "
                             "python -m pipeline eval"], "4242", "eval-demo-scincl", tmp_path,
                            Resources(time="30"), tmp_path)
    assert "#SBATCH --dependency=afterok:4242\n" in text
    assert "#SBATCH --kill-on-invalid-dep=yes\n" in text
    assert f"#SBATCH --output={tmp_path}/eval-demo-scincl-%j.log\n" in text
    assert "#SBATCH --time=30\n" in text and "--array" not in text and "--gres" not in text
    assert text.splitlines()[-1] == ("exec /bin/sh -c 'python -m pipeline search --corpus "
                                     "'\"'\"'my demo'\"'\"' && python -m pipeline eval'")


@pytest.mark.parametrize("check,value,message", [
    (check_time, "4h", "'4h': give a SLURM time limit"),
    (check_time, "1:2:3:4", "'1:2:3:4'"),
    (check_partition, "gpu a100", "'gpu a100': give a partition name"),
    (check_partition, "gpu;rm", "'gpu;rm'"),
    (check_executor, "pbs", "'pbs': use local"),
])
def test_bad_values_are_refused(check, value, message):
    with pytest.raises(InputError, match=re.escape(message)):
        check(value)


def test_good_values_pass():
    for limit in ("90", "90:30", "4:00:00", "2-0", "1-12:00:00", "UNLIMITED"):
        assert check_time(limit) == limit
    assert check_partition("gpu,gpu-long") == "gpu,gpu-long"


def test_without_sbatch_the_error_is_one_line(tmp_path, monkeypatch):
    env = {**os.environ, "PATH": str(tmp_path)}  # nothing on PATH: no sbatch
    for args, given in ((["check"], {"EXECUTOR": "slurm"}),  # as make passes it
                        (["--runs-root", str(tmp_path / "runs"), "submit-embed",
                          "--shards", "4"], {})):
        done = subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=ROOT,
                              env={**env, **given}, capture_output=True, text=True,
                              timeout=CHILD_BOUND_S)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (args, lines)
        assert "`sbatch`, which is not on PATH" in lines[0] and "EXECUTOR=local" in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing written
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError, match="sbatch"):
        submit_embed(Place(tmp_path / "demo", tmp_path, tmp_path), "minilm", 2, Resources())
    bad = subprocess.run([sys.executable, "-m", "pipeline", "submit-embed", "--slurm-time", "soon"],
                         cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert bad.returncode == 2 and "'soon': give a SLURM time limit" in bad.stderr


# ---- the local executor -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data_root(corpus_dir, tiny_bert, tmp_path_factory):
    """A fresh data root holding a copy of the fixture corpus with two pools of its own
    (POOL_SIZES: whatever pools other tests added do not change the work)."""
    def make_root() -> Path:
        root = tmp_path_factory.mktemp("slurm-data")
        corpus = copy_corpus(corpus_dir, root / "corpora" / "small")
        for size in POOL_SIZES:
            build_pool(corpus, PoolSpec(size=size, queries=N_QUERIES, seed=POOL_SEED))
        (root / "installed").touch()  # newer than pyproject.toml: make does not reinstall
        # the raw shards are not copied: ingest keeps the ingested corpus as it is
        return root
    return make_root


def make(data: Path, tiny_bert: Path, *args: str, env: dict | None = None,
         check: bool = True) -> subprocess.CompletedProcess:
    """`make` on the data root: MODEL=minilm with the tiny BERT's weights (MODEL_PATH), on
    the CPU (no GPU visible: the stores are compared bit for bit, which CPU batches give)."""
    cmd = ["make", "--no-print-directory", f"DATA={data}", "CORPUS=small", "THREADS=1",
           "MODEL=minilm", f"MODEL_PATH={tiny_bert}", f"PY={sys.executable}",
           f"STAMP={data / 'installed'}", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S,
                          env={**(env or os.environ), "MAKEFLAGS": "",
                               "CUDA_VISIBLE_DEVICES": ""})
    if check:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def store_of(data: Path) -> tuple[np.ndarray, np.ndarray]:
    store = store_dir(data / "indexes", "small", "minilm")
    ids = stored_ids(store)
    return ids, load_vectors(store, ids)


def assert_same_store(got: tuple[np.ndarray, np.ndarray],
                      expected: tuple[np.ndarray, np.ndarray]) -> None:
    """The same ids and the same vectors, bit for bit (on a CPU a batch holds papers of one
    token length, so a vector does not depend on which shard embedded it)."""
    assert np.array_equal(got[0], expected[0])
    assert np.array_equal(got[1], expected[1])


@pytest.fixture(scope="module")
def reference_root(data_root, tiny_bert) -> Path:
    """The data root of a local single-process run (`make embed`, one shard)."""
    data = data_root()
    make(data, tiny_bert, "embed")
    return data


@pytest.fixture(scope="module")
def reference(reference_root):
    """The store of the local single-process run."""
    return store_of(reference_root)


@pytest.fixture(scope="module")
def reference_means(reference_root, tiny_bert) -> dict[str, dict]:
    """The metric means of each pool evaluated locally (`make eval`) from that store."""
    make(reference_root, tiny_bert, "eval")
    runs = reference_root / "runs" / "small"
    return {pool: json.loads((runs / pool / "minilm.eval.json").read_text())["means"]
            for pool in map(pool_of, POOL_SIZES)}


@pytest.mark.slow
def test_local_executor_runs_every_shard_in_one_call(data_root, tiny_bert, reference):
    data = data_root()
    corpus = data / "corpora" / "small"
    entry = get_model("minilm")
    place = Place(corpus, data / "indexes", data / "runs")
    before = missing_per_shard(place, entry, None, 4)
    assert all(before) and sum(before) == len(reference[0])
    done = make(data, tiny_bert, "embed", "EXECUTOR=local", "SHARDS=4")
    assert done.stdout.count(" embed ") == 1  # one command ...
    for shard in range(4):  # ... embedding the 4 shards in turn
        assert re.search(rf"\[embed\] done .* shard={shard} embedded={before[shard]}\b",
                         done.stderr), done.stderr[-2000:]
    assert missing_per_shard(place, entry, None, 4) == [0, 0, 0, 0]
    assert_same_store(store_of(data), reference)
    # nothing missing and nothing submitted yet: the eval after the array cannot be planned
    assert submit_after_embed(place, entry, 4, Resources(), ["true"],
                              model_path=str(tiny_bert)) is None
    fresh = data_root() / "corpora" / "small"
    with pytest.raises(InputError, match="no embed array was submitted"):
        submit_after_embed(Place(fresh, fresh.parents[1] / "indexes", place.runs_root), entry,
                           4, Resources(), ["true"])


# ---- a real one-node SLURM cluster --------------------------------------------------------------

def install_slurm() -> None:
    """Debian's slurm-wlm and munge, unless their programs are found (`apt_install`)."""
    apt_install(("slurm-wlm", "munge"),
                lambda: all(shutil.which(tool, path=SBIN) for tool in DAEMONS))


FAKE_APT = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
[ "$1" = update ] && exit 0
echo "$APT_SAYS" >&2
exit 100
"""


@pytest.mark.parametrize("says, outcome, installs", [
    ("E: Failed to fetch http://deb.debian.org/pool/slurm.deb  404  Not Found [IP: 1.2.3.4 80]",
     pytest.fail.Exception, 2),
    ("E: Failed to fetch http://deb.debian.org/pool/slurm.deb  Temporary failure resolving "
     "'deb.debian.org'", pytest.skip.Exception, 1),
    ("E: Unable to locate package slurm-wlm", pytest.fail.Exception, 1),
], ids=["404-fails-after-an-update", "offline-skips", "other-fails"])
def test_apt_failures_skip_only_without_network(tmp_path, monkeypatch, says, outcome, installs):
    """A 404 from a mirror (stale lists) is updated and tried again, then fails; only a
    network that cannot be reached skips the cluster test."""
    apt = tmp_path / "apt-get"
    apt.write_text(FAKE_APT)
    apt.chmod(0o755)
    monkeypatch.setattr(sys.modules[__name__], "SBIN", str(tmp_path))  # no SLURM installed
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("APT_SAYS", says)
    with pytest.raises(outcome):
        install_slurm()
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["update", "install"] * installs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_line(host: str) -> str:
    """This machine's node definition, as slurmd detects it (CPUs, sockets, cores)."""
    done = subprocess.run([shutil.which("slurmd", path=SBIN), "-C"], capture_output=True,
                          text=True)
    found = re.search(r"^NodeName=\S+ (.*)$", done.stdout, re.M)
    hardware = (" ".join(f for f in found.group(1).split() if not f.startswith("RealMemory"))
                if found else f"CPUs={os.cpu_count()}")
    return f"NodeName={host} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN"


SLURM_CONF = """\
ClusterName=pipeline-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
MinJobAge=3600
# a queued job starts within a second (the default main and backfill passes: 60 s and 30 s)
SchedulerParameters=sched_interval=1,bf_interval=1
{node}
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """munged, slurmctld and slurmd in the foreground, all state under one temporary folder."""

    def __init__(self) -> None:
        # a short path: munge's and slurmd's unix sockets live here (108 bytes at most)
        self.dir = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        self.procs: list[subprocess.Popen] = []
        self.env = {**os.environ, "SLURM_CONF": str(self.dir / "slurm.conf"), "PATH": SBIN}
        self.host = subprocess.run(["hostname", "-s"], capture_output=True, text=True,
                                   check=True).stdout.strip()

    def start(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.dir / sub).mkdir()
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self._spawn("munged", "--foreground", "--force", f"--key-file={key}",
                    f"--socket={self.dir}/munge.sock", f"--pid-file={self.dir}/munged.pid",
                    f"--log-file={self.dir}/log/munged.log",
                    f"--seed-file={self.dir}/munged.seed")
        self._wait(lambda: (self.dir / "munge.sock").exists(), "munged's socket")
        (self.dir / "slurm.conf").write_text(SLURM_CONF.format(
            host=self.host, dir=self.dir, ctld_port=_free_port(), slurmd_port=_free_port(),
            node=_node_line(self.host)))
        conf = str(self.dir / "slurm.conf")
        self._spawn("slurmctld", "-D", "-f", conf)
        self._spawn("slurmd", "-D", "-f", conf, "-N", self.host)
        self._wait(lambda: self.run("sinfo", "--noheader", "--format=%t",
                                    check=False).stdout.strip() == "idle", "an idle node")

    def _spawn(self, name: str, *args: str) -> None:
        out = (self.dir / "log" / f"{name}.out").open("w")
        self.procs.append(subprocess.Popen([shutil.which(name, path=SBIN), *args], stdout=out,
                                           stderr=subprocess.STDOUT, env=self.env))

    def _wait(self, ready, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                pytest.fail(f"no {what} after {timeout}s (exited: {dead}):\n{self.logs()}")
            time.sleep(0.5)

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(cmd, capture_output=True, text=True, env=self.env,
                              timeout=CHILD_BOUND_S)
        assert not check or done.returncode == 0, done.stderr
        return done

    def wait_gone(self, jobs: list[str], timeout: float = 420) -> None:
        """Poll squeue until no task of `jobs` is pending or running."""
        self._wait(lambda: not self.run("squeue", "--noheader", "--format=%i", "--jobs",
                                        ",".join(jobs), check=False).stdout.strip(),
                   f"end of jobs {jobs}", timeout)

    def states(self, job: str) -> list[str]:
        """JobState of each task of `job` (scontrol keeps ended jobs for MinJobAge)."""
        return re.findall(r"JobState=(\S+)", self.run("scontrol", "show", "job", job).stdout)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text()[-2000:]
                         for p in sorted((self.dir / "log").glob("*")))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    install_slurm()
    if os.geteuid() != 0:
        pytest.skip("a one-node SLURM cluster (slurmd, SlurmUser=root) needs root")
    cluster = Cluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.slow
def test_embed_array_on_a_one_node_cluster(cluster, data_root, tiny_bert, reference,
                                           reference_means):
    data = data_root()
    slurm = data / "runs" / "slurm"
    # a DOWN partition queues jobs without starting them: `make eval` surely finds shards
    # missing, so it must submit a job that waits for the array (afterok), not evaluate here
    cluster.run("scontrol", "update", "PartitionName=test", "State=DOWN")
    started = time.monotonic()
    submit = make(data, tiny_bert, "embed", "EXECUTOR=slurm", "SHARDS=4", "GPUS_PER_TASK=0",
                  env=cluster.env)
    record = json.loads((slurm / "embed-small-minilm.json").read_text())
    array = record["job_id"]
    assert submit.stdout.strip().endswith(array) and record["num_shards"] == 4
    script = (slurm / "embed-small-minilm.sbatch").read_text()
    assert "#SBATCH --array=0-3\n" in script and "--gres" not in script
    follow = make(data, tiny_bert, "eval", "EXECUTOR=slurm", "SHARDS=4", "GPUS_PER_TASK=0",
                  env=cluster.env)
    after = follow.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+", after) and after != array, follow.stdout
    eval_script = (slurm / "eval-small-minilm.sbatch").read_text()
    assert f"#SBATCH --dependency=afterok:{array}\n" in eval_script
    # the stages make eval runs after embed, run by Python (no make on the compute node)
    assert re.search(r" search --corpus small .*--model-path .* --repair-pools && .* eval "
                     r"--corpus small ", eval_script) and str(tiny_bert) in eval_script
    assert "make" not in eval_script.split("\n", 1)[1].replace("mdcr-pipeline", "")
    cluster.run("scontrol", "update", "PartitionName=test", "State=UP")
    cluster.wait_gone([array, after])
    seconds = time.monotonic() - started

    logs = sorted(slurm.glob(f"embed-small-minilm-{array}_*.log"))
    assert [p.name for p in logs] == [f"embed-small-minilm-{array}_{i}.log" for i in range(4)]
    states = cluster.states(array)
    assert states == ["COMPLETED"] * 4, (states, [p.read_text()[-1500:] for p in logs],
                                         cluster.logs())
    for shard, log in enumerate(logs):
        assert re.search(rf"\[embed\] done .* shard={shard} embedded=\d+", log.read_text())
    eval_log = slurm / f"eval-small-minilm-{after}.log"
    assert cluster.states(after) == ["COMPLETED"], eval_log.read_text()[-3000:]

    # every shard is in, and the store equals the local single-process run's
    corpus = data / "corpora" / "small"
    place = Place(corpus, data / "indexes", data / "runs")
    assert missing_per_shard(place, get_model("minilm"), None, 4) == [0] * 4
    assert_same_store(store_of(data), reference)
    # the eval job ran after the array: it found every paper embedded, and scored every pool
    text = eval_log.read_text()
    assert " embedded=0 " in text and "[search]" in text, text[-3000:]
    # ... with the numbers the same evaluation gives locally, from the local store
    assert sorted(p.name for p in (corpus / "pools").iterdir()
                    if not p.name.startswith(".")) == sorted(reference_means)
    for pool, means in reference_means.items():
        assert json.loads((data / "runs" / "small" / pool / "minilm.eval.json")
                          .read_text())["means"] == means, pool
    assert all(0 < means["map"] <= 1 for means in reference_means.values())
    assert (data / "runs" / "results.parquet").exists()
    # now every shard is in: `make eval EXECUTOR=slurm` evaluates here, submitting nothing
    again = make(data, tiny_bert, "eval", "EXECUTOR=slurm", "SHARDS=4", "GPUS_PER_TASK=0",
                 env=cluster.env)
    assert "every embed shard of minilm is in" in again.stderr
    assert not cluster.run("squeue", "--noheader").stdout.strip()
    print(f"\n[slurm test] array + eval job: {seconds:.1f}s")


def _nudged(folder: Path) -> None:
    """Other weights under the same files' names (every JSON file as it was): another model.
    The word embeddings moved by seeded noise, not by a constant: a constant added to every
    component is what the embeddings' LayerNorm subtracts again, leaving the vectors equal
    up to rounding."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    key = next(k for k in sorted(tensors) if "word_embeddings" in k)
    noise = np.random.default_rng(59).normal(0, 0.05, tensors[key].shape).astype(np.float32)
    tensors[key] = tensors[key] + noise
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.slow
def test_replace_removes_a_stale_store_once_before_the_array(cluster, data_root, tiny_bert,
                                                             tmp_path):
    """REPLACE=1 with EXECUTOR=slurm, on a store embedded by another model (the weights under
    MODEL_PATH changed since): without it the submission is refused in one line naming the
    cluster's repair, nothing submitted or removed; with it the submitting process removes
    the store and the runs searched from it, once, before any task runs (the tasks are not
    given --replace, so none of them removes anything), and the array fills a new store,
    bit for bit the one a local `make embed` of the new weights makes. An array of the model
    still queued, which would write into the store removed, is refused first."""
    from pipeline.core.files import read_json
    from pipeline.layout import run_paths

    data, folder = data_root(), Path(shutil.copytree(tiny_bert, tmp_path / "model"))
    slurm, store = data / "runs" / "slurm", store_dir(data / "indexes", "small", "minilm")
    make(data, folder, "eval")  # here: the store and the runs of the first weights
    made = read_json(store / "manifest.json")["config"]["model_identity"]
    first_store = store_of(data)
    runs = [p for size in POOL_SIZES for p in run_paths(data / "runs", "small", pool_of(size),
                                                         "minilm")]
    assert all(p.exists() for p in runs)
    planted = [store.parent / "minilm-notes.txt", runs[0].parent / "minilm.notes"]
    for path in planted:
        path.write_text("a user's own notes\n")
    args = ("EXECUTOR=slurm", "SHARDS=4", "GPUS_PER_TASK=0")
    # a DOWN partition queues an array without starting it: one of the first weights, waiting
    cluster.run("scontrol", "update", "PartitionName=test", "State=DOWN")
    earlier = make(data, folder, "embed", *args, env=cluster.env).stdout.strip().splitlines()[-1]
    submitted = sorted(slurm.iterdir())
    _nudged(folder)
    before = {p: p.read_bytes() for p in runs}
    # make eval and make embed: the store holds every paper, but not this model's vectors
    for goal in ("eval", "embed"):
        refused = make(data, folder, goal, *args, env=cluster.env, check=False)
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert refused.returncode == 2 and len(errors) == 1, refused.stderr[-3000:]
        line = errors[0]  # (after the corpus and pools stages' lines: make's prerequisites)
        assert f"{store} was embedded by another model named minilm" in line, line
        assert "files changed: model.safetensors" in line and "Traceback" not in refused.stderr
        assert (f"repair: make embed CORPUS=small MODEL=minilm MODEL_PATH={folder} "
                f"EXECUTOR=slurm REPLACE=1 DATA={data}") in line, line
        assert sorted(slurm.iterdir()) == submitted  # nothing submitted, nothing searched
        assert {p: p.read_bytes() for p in runs} == before, goal
        assert read_json(store / "manifest.json")["config"]["model_identity"] == made

    refused = make(data, folder, "embed", *args, "REPLACE=1", env=cluster.env, check=False)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert (f"REPLACE=1 would remove {store}, which embed array {earlier} (still queued or "
            f"running) writes into") in refused.stderr and f"scancel {earlier}" in refused.stderr
    assert {p: p.read_bytes() for p in runs} == before and sorted(slurm.iterdir()) == submitted
    cluster.run("scancel", earlier)
    cluster.wait_gone([earlier])
    # the partition still DOWN: what is gone when sbatch has returned was removed by the
    # submitting process, before any task
    submit = make(data, folder, "embed", *args, "REPLACE=1", env=cluster.env)
    array = json.loads((slurm / "embed-small-minilm.json").read_text())["job_id"]
    assert submit.stdout.strip().endswith(array)
    assert f"{store} was embedded by another model named minilm" in submit.stderr
    assert f"removed with the {len(POOL_SIZES)} runs made from it" in submit.stderr
    assert not store.exists() and not any(p.exists() for p in runs)
    assert all(p.read_text() == "a user's own notes\n" for p in planted)
    script = (slurm / "embed-small-minilm.sbatch").read_text()
    assert "--replace" not in script and f"--model-path {folder}" in script
    cluster.run("scontrol", "update", "PartitionName=test", "State=UP")
    cluster.wait_gone([array])
    logs = sorted(slurm.glob(f"embed-small-minilm-{array}_*.log"))
    assert cluster.states(array) == ["COMPLETED"] * 4, [p.read_text()[-1500:] for p in logs]
    for shard, log in enumerate(logs):  # each task embedded its shard; none removed a store
        text = log.read_text()
        assert re.search(rf"\[embed\] done .* shard={shard} embedded=[1-9]\d*\b", text), text
        assert "REPLACE=1" not in text and "removed" not in text, text
    assert read_json(store / "manifest.json")["config"]["model_identity"]["sha256"] != \
        made["sha256"]
    local = data_root()  # the same replacement made here, from scratch
    make(local, folder, "embed")
    assert_same_store(store_of(data), store_of(local))
    # ... of other weights: the same papers, other vectors (far beyond rounding)
    assert np.array_equal(store_of(data)[0], first_store[0])
    assert not np.allclose(store_of(data)[1], first_store[1], atol=1e-3)
    # every shard in: make eval searches and scores here, from the new store
    again = make(data, folder, "eval", *args, env=cluster.env)
    assert "every embed shard of minilm is in" in again.stderr
    assert all(p.exists() for p in runs) and {p: p.read_bytes() for p in runs} != before
    assert all(p.read_text() == "a user's own notes\n" for p in planted)
