"""pipeline/core/numba_cache.py: a private numba cache where numba would keep none (a
read-only install and a home that is not writable), nothing set otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core import numba_cache as nc

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """numba's own places all unwritable (as a read-only install and home make them); the
    fallback folder under tmp_path."""
    monkeypatch.setattr(nc, "_writable", lambda folder: False)
    monkeypatch.setattr(nc, "fallback_folder", lambda: tmp_path / "numba-cache")
    return tmp_path / "numba-cache"


def test_nothing_is_set_where_numba_can_cache(monkeypatch):
    """A writable user cache (or kernel folders), or NUMBA_CACHE_DIR given: numba's choice."""
    environ: dict[str, str] = {}
    monkeypatch.setattr(nc, "_writable", lambda folder: True)
    assert nc.numba_cache(environ) is None and environ == {}
    given = {nc.CACHE_VARIABLE: "/somewhere"}
    monkeypatch.setattr(nc, "_writable", lambda folder: False)
    assert nc.numba_cache(given) is None and given == {nc.CACHE_VARIABLE: "/somewhere"}


def test_a_private_folder_where_numba_could_cache_nowhere(nowhere):
    """Every kernel folder named, the fallback made with mode 0700 and set."""
    environ: dict[str, str] = {"HOME": "/nonexistent"}
    assert {p.parent.name for p in nc.uncached_kernels(environ)} == {
        "pipeline", "bm25", "typed", "metrics"}
    assert nc.numba_cache(environ) == nowhere
    assert environ[nc.CACHE_VARIABLE] == str(nowhere)
    assert nowhere.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("how", ["group-writable", "another user's", "a link"])
def test_a_folder_others_could_write_is_never_used(nowhere, tmp_path, how):
    """The cache holds code numba runs: a fallback folder that another user could have made or
    written is refused, nothing set (numba then fails as it would have)."""
    if how == "a link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        nowhere.symlink_to(tmp_path / "elsewhere")
    else:
        nowhere.mkdir(mode=0o700)
        if how == "group-writable":
            nowhere.chmod(0o770)
        elif os.getuid() == 0:
            os.chown(nowhere, 65534, 65534)
        else:
            pytest.skip("only root can give a folder to another user")
    environ: dict[str, str] = {}
    assert nc.numba_cache(environ) is None and environ == {}


def test_writable_follows_the_nearest_existing_folder(tmp_path):
    assert nc._writable(tmp_path / "a" / "b" / "c")
    (tmp_path / "file").write_text("")
    assert not nc._writable(tmp_path / "file" / "below")


READ_ONLY = """
import os, sys
from pipeline.cli.main import main
assert main(["models"]) == 0
print(os.environ.get("NUMBA_CACHE_DIR"))
from pipeline import metrics
import numba
print(numba.config.CACHE_DIR)
metrics.ranx_kernels()  # ranx's kernels defined: each with a cache
print("ok")
"""


def test_a_read_only_install_without_a_writable_home_gets_a_private_cache(tmp_path):
    """The venv's site-packages and HOME mounted read-only (a private mount namespace): the
    command line sets NUMBA_CACHE_DIR to the user's private folder in TMPDIR, and ranx's
    kernels are defined (without it numba refuses: "cannot cache function ...: no locator
    available")."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no private mount namespace here (unshare -m)")
    mounts = " && ".join(f"mount --bind {p} {p} && mount -o remount,ro,bind {p}"
                         for p in (site, home))
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", f'{mounts} && exec "$0" -c "$1"', sys.executable,
         READ_ONLY], env={**{k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"},
                          "HOME": str(home), "TMPDIR": str(tmp)},
        cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = str(tmp / f"mdcr-numba-cache-{os.getuid()}")
    assert done.stdout.split()[-3:] == [folder, folder, "ok"]
