"""A model folder's links (identity.model_files, issue 69): a link to a file is followed
wherever it points (the hub cache's snapshot files link to its blobs, outside the snapshot);
a link to a folder only within the folder and to a folder the walk reaches once: a cycle
(`a -> .`), a second way to a folder, or a folder outside is refused in one line naming the
link, and the walk ends. Folders of a few bytes built here: an identity reads bytes, never
loads them; one test refuses a MODEL_PATH through the command line."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.core.errors import InputError
from pipeline.encoding.identity import DigestCache, folder_identity, model_files, model_identity
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool
from tests.conftest import POOL_SEED, copy_corpus
from tests.encoding.test_identity_hub import FIRST, publish

ENTRY = "st:local/m"


def model_folder(path: Path) -> Path:
    """A folder of the files a loader reads (bytes only), with a module's subfolder."""
    (path / "1_Pooling").mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "bert"}')
    (path / "model.safetensors").write_bytes(bytes(range(256)) * 8)
    (path / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    return path


def refusal(folder: Path) -> str:
    """The one line refusing `folder`'s identity."""
    with pytest.raises(InputError) as raised:
        model_identity(get_model(ENTRY), folder)
    line = str(raised.value)
    assert "\n" not in line
    return line


@pytest.mark.parametrize("link, target", [("a", "."), ("1_Pooling/up", ".."),
                                          ("1_Pooling/self", ".")])
def test_a_link_back_into_the_folder_is_refused_naming_it(tmp_path, link, target):
    """`a -> .` (the issue's), a subfolder's link to its parent or to itself: a cycle, which
    a walk following links goes round until the path is too long (40 levels of every file
    on Linux; with two such links, 2^40 paths)."""
    folder = model_folder(tmp_path / "m")
    (folder / link).symlink_to(target, target_is_directory=True)
    line = refusal(folder)
    assert line.startswith(f"{folder / link} links to "), line
    assert "reaches already" in line and "remove the link" in line, line
    (folder / link).unlink()
    (folder / "b").symlink_to(".", target_is_directory=True)  # two: 2^40 paths before
    (folder / "c").symlink_to(".", target_is_directory=True)
    assert refusal(folder).startswith(f"{folder / 'b'} links to '.'")


def test_a_second_way_to_a_folder_of_the_model_is_refused(tmp_path):
    """A link to a sibling folder: its files would count under two names, and links to
    links multiply the walk; the link is named, whichever the walk meets first."""
    folder = model_folder(tmp_path / "m")
    (folder / "0_alias").symlink_to("1_Pooling", target_is_directory=True)
    assert refusal(folder).startswith(f"{folder / '0_alias'} links to '1_Pooling'")
    (folder / "0_alias").unlink()
    (folder / "2_alias").symlink_to("1_Pooling", target_is_directory=True)
    assert refusal(folder).startswith(f"{folder / '2_alias'} links to '1_Pooling'")


def test_a_link_to_a_folder_outside_is_refused_naming_it(tmp_path):
    """A link to a folder elsewhere (`/`, another model's folder): refused, the link and its
    target named; the same folder with a copy in the link's place has an identity."""
    folder = model_folder(tmp_path / "m")
    elsewhere = model_folder(tmp_path / "other")
    for target in (elsewhere, Path("/")):
        link = folder / "adapter"
        link.symlink_to(target, target_is_directory=True)
        line = refusal(folder)
        assert line.startswith(f"{link} links to {target.resolve()}, a folder outside"), line
        link.unlink()
    shutil.copytree(elsewhere, folder / "adapter")
    assert "adapter/model.safetensors" in model_identity(get_model(ENTRY), folder)["files"]


def test_file_links_are_followed_wherever_they_point(tmp_path):
    """A file link out of the folder is its target's bytes (the identity of a copy); a
    folder link within the folder is walked; a hub snapshot (files linking to ../../blobs)
    has its plain folder's digest; a dangling link and a special file are no file of it."""
    plain = model_folder(tmp_path / "plain")
    linked = tmp_path / "linked"
    linked.mkdir()
    for name in ("config.json", "model.safetensors"):
        (linked / name).symlink_to(plain / name)
    (linked / "modules").mkdir()
    (linked / "modules" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (linked / "1_Pooling").symlink_to("modules", target_is_directory=True)
    with pytest.raises(InputError, match="1_Pooling links to 'modules'"):
        model_files(linked)  # the module's folder under two names
    (linked / "1_Pooling").unlink()
    (linked / "modules").rename(linked / "1_Pooling")
    (linked / "gone.bin").symlink_to(tmp_path / "nowhere")
    os.mkfifo(linked / "pipe")
    digest = folder_identity(plain, DigestCache(None))
    assert folder_identity(linked, DigestCache(None)) == digest
    snapshot = publish(tmp_path / "hub", "org/m", FIRST, plain)
    assert all(path.is_symlink() for path in snapshot.rglob("*") if path.is_file())
    assert folder_identity(snapshot, DigestCache(None)) == digest


@pytest.mark.slow  # the session corpus and the tiny BERT
def test_make_search_refuses_a_model_path_holding_a_cycle(corpus_dir, tiny_bert, tmp_path,
                                                          capsys):
    """`make search MODEL=minilm MODEL_PATH=<folder holding a -> .>`: exit 2, one line
    naming the link, nothing embedded."""
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    pool = build_pool(corpus, PoolSpec(size=100, queries=5, seed=POOL_SEED))["name"]
    folder = Path(shutil.copytree(tiny_bert, tmp_path / "model"))
    (folder / "a").symlink_to(".", target_is_directory=True)
    code = main(["--corpora-root", str(corpus.parent), "--index-root", str(tmp_path / "indexes"),
                 "--runs-root", str(tmp_path / "runs"), "search", "--corpus", corpus.name,
                 "--model", "minilm", "--pool", pool, "--threads", "1", "--index",
                 "--stale-only", "--model-path", str(folder)])
    errors = [line for line in capsys.readouterr().err.splitlines()
              if line.startswith("error:")]
    assert code == 2 and len(errors) == 1, errors
    assert errors[0].startswith(f"error: {folder / 'a'} links to '.'"), errors
    assert not list((tmp_path / "indexes").rglob("*.arrow"))
