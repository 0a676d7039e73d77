"""A corpus written whole (an import, a benchmark) is replaced or repaired only where the import
wrote it (issue 56, bad 4): a user's file in the corpus folder, hidden or not, in the corpus
or in a pool folder, blocks REPLACE=1 and the repair of its pool, named (relative path) in the
one-line refusal, with or without REPLACE=1, and nothing is removed."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.corpus.install import foreign_files
from pipeline.external.beir import import_beir
from pipeline.layout import pool_dir
from pipeline.mdcr.benchmark import write_benchmark
from tests.conftest import make_ok, refusal
from tests.test_data_safety import beir, snapshot
from tests.test_deletes import make, plant, untouched
from tests.test_errors import cli
from tests.test_errors_inputs import refused

DOCS = {"a": "protein folding", "b": "soil", "c": "graphs"}
OTHER = {"a": "protein folding", "b": "soil", "d": "sand"}
# the three files: beside the corpus's own, hidden, and in its pools/ folder
MINE = ("my_notes.txt", ".my_hidden", "pools/my_pool_notes.txt")


def _imported(tmp_path: Path, judged: bool = False) -> tuple[Path, Path]:
    """A collection imported as `corpora/c` (its judged-only pool too with `judged`), and a
    second collection with other documents."""
    qrels = "q1\ta\t1\nq1\tb\t0\n"
    corpus = tmp_path / "data" / "corpora" / "c"
    import_beir(beir(tmp_path / "a", DOCS, qrels), corpus, judged=judged)
    return corpus, beir(tmp_path / "b", OTHER, qrels)


@pytest.mark.parametrize("judged", [False, True])
def test_replace_refuses_a_users_files_and_removes_nothing(tmp_path, judged):
    corpus, other = _imported(tmp_path, judged)
    planted = plant(*(corpus / name for name in MINE))
    assert foreign_files(corpus, "collection") == sorted(MINE)
    before = snapshot(corpus)
    for replace in (False, True):  # either way the refusal names the first of them
        with pytest.raises(InputError, match=r"holds \.my_hidden \(and 2 more\), which no "
                                             r"import wrote: replacing its corpus \(REPLACE=1\)"
                                             r" would remove it; move it out of c/") as caught:
            import_beir(other, corpus, replace=replace, judged=judged)
        assert "\n" not in str(caught.value)
    untouched(planted)
    assert snapshot(corpus) == before
    for path in planted:  # moved away: the replace goes ahead, and removes only its own
        path.unlink()
    info = import_beir(other, corpus, replace=True, judged=judged)
    assert info["collection"]["installed"] == "replaced"
    assert foreign_files(corpus, "collection") == []


def test_a_users_file_in_a_pool_folder_blocks_its_repair(tmp_path):
    """Importing the same collection again puts back a damaged pool by replacing its folder:
    a user's file there would go with it."""
    corpus, _ = _imported(tmp_path)
    pool = pool_dir(corpus, "beir-3-r0")
    planted = plant(pool / "notes.md")
    (pool / "qrels.parquet").write_bytes(b"damaged")
    with pytest.raises(InputError, match="holds pools/beir-3-r0/notes.md, which no import "
                                         "wrote: writing pool beir-3-r0 would remove it"):
        import_beir(tmp_path / "a", corpus)
    untouched(planted)
    (pool / "notes.md").unlink()
    assert import_beir(tmp_path / "a", corpus)["collection"]["installed"] == "repaired"


def test_a_folder_of_a_users_where_a_new_pool_goes_is_kept(tmp_path):
    """Another split is added as a new pool folder: a user's folder of that name is refused."""
    corpus, _ = _imported(tmp_path)
    planted = plant(pool_dir(corpus, "beir-3-r0-val") / "mine.txt")
    with pytest.raises(InputError, match="holds pools/beir-3-r0-val/, which no import wrote: "
                                         "writing pool beir-3-r0-val would remove it"):
        import_beir(tmp_path / "a", corpus, "dev")
    untouched(planted)


def test_other_contents_name_the_file_that_differs(tmp_path):
    corpus, _ = _imported(tmp_path)
    regraded = beir(tmp_path / "regraded", DOCS, "q1\ta\t2\nq1\tb\t0\n")
    with pytest.raises(InputError, match=r"other contents in pools/beir-3-r0/qrels\.parquet: "
                                         "add REPLACE=1"):
        import_beir(regraded, corpus)


def test_the_command_line_refuses_in_one_line(tmp_path):
    corpus, other = _imported(tmp_path)
    plant(corpus / "my_notes.txt")
    refused(tmp_path / "data", cli(tmp_path / "data", "import-beir", "--corpus", "c", "--src",
                                   str(other), "--replace"),
            r"^error: .*/c holds my_notes\.txt, which no import wrote: replacing its corpus "
            r"\(REPLACE=1\) would remove it")


@pytest.mark.slow
def test_make_import_beir_replace_keeps_a_users_files(tmp_path):
    """The issue's steps through make: import a, plant three files, import b with REPLACE=1."""
    root = tmp_path / "data"
    stamp = root / "installed"  # the stamp tests.test_deletes.make names: nothing installed
    stamp.parent.mkdir()
    stamp.touch()
    make_ok(root, stamp, "import-beir", f"SRC={beir(tmp_path / 'a', DOCS)}", "CORPUS=c")
    corpus = root / "corpora" / "c"
    planted = plant(*(corpus / name for name in MINE))
    line = refusal(make(root, "import-beir", f"SRC={beir(tmp_path / 'b', OTHER)}", "CORPUS=c",
                        "REPLACE=1"))
    assert "holds .my_hidden (and 2 more), which no import wrote" in line
    untouched(planted)


def test_a_benchmark_replaced_keeps_a_users_files(tmp_path):
    """make mdcr and make import-mdcr write their corpus through `write_benchmark`: the same
    refusal (the `benchmark` section's pools are what it wrote)."""
    papers = pl.DataFrame({"corpusid": ["q", "a", "b"], "title": ["t"] * 3,
                           "abstract": ["x", "y", "z"]})
    table = pl.DataFrame({"field": ["Art"] * 2, "query": ["q"] * 2, "doc": ["a", "b"],
                          "type": ["cited", "random"]})
    corpus = tmp_path / "corpora" / "m"
    write_benchmark(corpus, papers, table, "import-mdcr", {"source": "one"})
    planted = plant(corpus / "pools" / "art-65-r0" / "notes.txt")
    other = papers.with_columns(abstract=pl.lit("other"))
    with pytest.raises(InputError, match="holds pools/art-65-r0/notes.txt, which no import"):
        write_benchmark(corpus, other, table, "import-mdcr", {"source": "two"}, replace=True)
    untouched(planted)
