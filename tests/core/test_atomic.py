"""Atomic writes honour the umask and leave no debris; manifests and readers name bad files."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.core import atomic, checksums, manifests
from pipeline.core.atomic import atomic_dir, atomic_path, stale_temporaries, sweep, temp_prefix
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, read_parquet, write_json, write_parquet
from pipeline.core.repair import Repair
from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[2]


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_written_files_follow_the_umask(tmp_path, umask):
    """Defect 9: mkstemp made every file 0600; a shared scratch disk needs the umask's mode."""
    code = (
        "import os, sys; from pathlib import Path;"
        f"os.umask({umask});"
        "from pipeline.core.files import write_json; from pipeline.core.atomic import atomic_dir;"
        "out = Path(sys.argv[1]); write_json({'a': 1}, out / 'x.json');"
        "ctx = atomic_dir(out / 'folder'); tmp = ctx.__enter__(); (tmp / 'f').write_text('1');"
        "ctx.__exit__(None, None, None)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    assert _mode(tmp_path / "x.json") == 0o666 & ~umask
    assert _mode(tmp_path / "folder") == 0o777 & ~umask
    assert _mode(tmp_path / "folder" / "f") == 0o666 & ~umask


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "a.txt") as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "old").write_text("old")
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "d") as tmp:
        (tmp / "new").write_text("new")
        raise RuntimeError("killed")
    assert [p.name for p in tmp_path.iterdir()] == ["d"]
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["old"]


def test_temporaries_of_dead_processes_are_swept(tmp_path):
    """Defect 10: a kill left `.papers.parquet.*.tmp` files and `.bm25-*` folders forever."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".papers.parquet.{atomic.HOST}-{dead}.abcd1234.tmp"
    stale.write_text("half")
    stale_dir = tmp_path / f".bm25.{atomic.HOST}-{dead}.x1y2z3.tmp"
    (stale_dir / "lucene").mkdir(parents=True)
    live = tmp_path / f"{temp_prefix('other.parquet')}live.tmp"  # this process: in progress
    live.write_text("busy")
    other_host = tmp_path / f".a.parquet.elsewhere-{dead}.abcd.tmp"  # maybe alive elsewhere
    other_host.write_text("busy")
    assert sorted(stale_temporaries(tmp_path)) == sorted([stale, stale_dir])
    write_json({"x": 1}, tmp_path / "next.json")  # the next write into the folder sweeps
    assert not stale.exists() and not stale_dir.exists()
    assert live.exists() and other_host.exists()
    assert sweep(tmp_path) == 0


def test_corrupt_json_and_parquet_are_named(tmp_path):
    """Defect 7: JSONDecodeError / ArrowInvalid tracebacks that did not name the file."""
    (tmp_path / "manifest.json").write_text('{"stage": "po')
    with pytest.raises(InputError, match=r"manifest\.json is corrupt"):
        read_json(tmp_path / "manifest.json")
    write_parquet(pa.table({"corpusid": list(range(1000))}), tmp_path / "c.parquet")
    data = (tmp_path / "c.parquet").read_bytes()
    (tmp_path / "c.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"c\.parquet cannot be read as parquet .*; repair: "
                       r"make verify"):
        read_parquet(tmp_path / "c.parquet")
    with pytest.raises(InputError, match=r"c\.parquet cannot be read as parquet .*; repair: "
                       r"draw it again$"):  # the caller's repair, where it knows one
        read_parquet(tmp_path / "c.parquet", repair=Repair("", note="draw it again"))
    with pytest.raises(InputError, match="is missing"):
        read_parquet(tmp_path / "nothing.parquet")


def test_manifest_records_versions_and_code():
    info = manifests.manifest("x", {"a": 1})
    assert info["libraries"]["polars"] and info["libraries"]["pyarrow"]
    assert info["code_version"] == manifests.code_version() and info["manifest_version"] == 2


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org",
                           "-c", "commit.gpgsign=false", *args], cwd=folder, check=True,
                          capture_output=True, text=True, timeout=CHILD_BOUND_S)
    return done.stdout.strip()


def repository(folder: Path, distribution: str | None) -> Path:
    """A git repository with one commit, whose pyproject.toml names `distribution` (None:
    no pyproject.toml)."""
    folder.mkdir(parents=True)
    if distribution:
        (folder / "pyproject.toml").write_text(f'[project]\nname = "{distribution}"\n')
    (folder / "README.md").write_text("a project\n")
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "first")
    return folder


def copy_package(to: Path) -> Path:
    shutil.copytree(ROOT / "pipeline", to, ignore=shutil.ignore_patterns("__pycache__"))
    return to


def code_version_of(package: Path) -> str:
    """`code_version()` in a fresh interpreter that imports the package folder `package`."""
    done = subprocess.run(
        [sys.executable, "-c", "import pipeline; from pipeline.core.manifests import code_version;"
         "print(pipeline.__file__); print(code_version())"], cwd=package.parent,
        env={**os.environ, "PYTHONPATH": str(package.parent)}, capture_output=True, text=True,
        timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    imported, version = done.stdout.splitlines()
    assert Path(imported).parent == package.resolve()  # the copy ran, not this checkout
    return version


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("where", ["pipeline", ".venv/lib/python3/site-packages/pipeline"])
def test_an_installed_copy_records_its_version_not_the_commit_around_it(tmp_path, where):
    """A copy of the package inside an unrelated repository (at its top, or in a virtual
    environment inside it) records the installed distribution's version, never that
    repository's commit (which `git describe` in the package folder gave)."""
    other = repository(tmp_path / "other", "another-project")
    version = code_version_of(copy_package(other / where))
    assert git(other, "rev-parse", "--short=7", "HEAD") not in version
    assert version == (manifests.package_version() or "unknown")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_checkout_records_its_commit_and_local_changes(tmp_path):
    """The package run from this project's checkout (its pyproject.toml names the
    distribution): the version and the commit, `+dirty` once a tracked file changes."""
    checkout = repository(tmp_path / "checkout", manifests.DISTRIBUTION)
    package = copy_package(checkout / "pipeline")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "the package")
    commit = git(checkout, "describe", "--always", "--abbrev=10")
    installed = manifests.package_version() or "not installed"
    assert code_version_of(package) == f"{installed} (git {commit})"
    layout = package / "layout.py"
    layout.write_text(layout.read_text() + "\n# a local change\n")
    assert code_version_of(package) == f"{installed} (git {commit}+dirty)"


def test_manifest_records_the_faiss_module_loaded_not_a_distribution():
    """make setup-gpu replaces faiss-cpu with faiss-gpu-cu12 (same module): the manifest names
    the module's own version and build, whichever distribution installed it."""
    import faiss

    libraries = manifests.manifest("x", {})["libraries"]
    build = "gpu" if hasattr(faiss, "StandardGpuResources") else "cpu"
    assert libraries["faiss"] == f"{faiss.__version__}+{build}"
    assert not [name for name in libraries if name.startswith("faiss-")]


def test_every_folder_made_is_readable_as_the_umask_allows(tmp_path):
    """scratch_dir (the imports' working folder, installed as the corpus) and atomic_dir made
    mkdtemp's 700 folders: a colleague on a shared disk could not read an imported corpus.
    Under umask 022 every folder is 755, a new one or one replacing another."""
    script = """
import os, stat, sys
from pathlib import Path
os.umask(0o022)
from pipeline.core.atomic import atomic_dir, scratch_dir
root = Path(sys.argv[1])
modes = []
with scratch_dir(root, "import") as tmp:
    modes.append(stat.S_IMODE(tmp.stat().st_mode))
for _ in range(2):  # made, then replaced
    with atomic_dir(root / "made") as tmp:
        (tmp / "x").write_text("x")
    modes.append(stat.S_IMODE((root / "made").stat().st_mode))
print(" ".join(oct(m) for m in modes))
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["0o755"] * 3


def test_damage_with_its_times_put_back_is_hashed_again(tmp_path):
    """Issue 30.2: bytes rewritten in place at the same size, then the mtime put back (`touch
    -r`): a stage trusting the kept hash read the damage as intact, so verify's repair never
    repaired it. The ctime, which no user can set, is part of what a kept hash holds for."""
    import os

    from pipeline.core.checksums import file_problem, fingerprint

    path = tmp_path / "part.arrow"
    path.write_bytes(b"a" * 4096)
    recorded = fingerprint(path)  # kept in .checksums.json beside it
    before = path.stat()
    with path.open("r+b") as handle:  # in place: the same inode
        handle.seek(2048)
        handle.write(b"b" * 64)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (
        before.st_size, before.st_mtime_ns, before.st_ino)
    checksums._checked.clear()  # a later process: only the folder's .checksums.json is kept
    assert file_problem(path, recorded, deep=False) == ("bytes differ from the manifest's "
                                                        "checksum (corrupt)")
