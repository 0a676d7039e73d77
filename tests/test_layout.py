from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.fields import MAG_FIELDS, resolve_field, resolve_fields
from pipeline.layout import format_size, group_name, parse_pool_name, parse_size, pool_name
from pipeline.models import REGISTRY, get_model


@pytest.mark.parametrize("text,value", [("20000", 20000), ("20k", 20000), ("2M", 2_000_000),
                                        ("1.5M", 1_500_000), ("100K", 100_000)])
def test_sizes(text, value):
    assert parse_size(text) == value
    assert parse_size(format_size(value)) == value


@pytest.mark.parametrize("text", ["", "2G", "k", "-5", "1.5", "0", "20 k"])
def test_malformed_sizes(text):
    with pytest.raises(InputError, match="malformed SIZE"):
        parse_size(text)


def test_pool_names_round_trip():
    assert pool_name("medicine", 20000, 2) == "medicine-20k-r2"
    assert parse_pool_name("computer-science-1500-r0") == (
        "computer-science", 1500, 0, 0, "test", "")
    assert pool_name("all", 10000, 1, seed=3) == "all-10k-s3-r1"
    assert parse_pool_name("all-10k-s3-r1") == ("all", 10000, 1, 3, "test", "")
    assert pool_name("all", 10000, 1, seed=3, split="validation") == "all-10k-s3-r1-val"
    assert parse_pool_name("medicine-100k-r2-val") == ("medicine", 100000, 2, 0, "validation", "")
    digest = "3fa2b1c9" + "0" * 56  # an exclusion list's ids sha256: its first 8 hex name pools
    name = pool_name("all", 200000, 1, seed=2, split="validation", exclusion=digest)
    assert name == "all-200k-s2-x3fa2b1c9-r1-val"
    assert parse_pool_name(name) == ("all", 200000, 1, 2, "validation", "3fa2b1c9")
    assert group_name(name) == "all-200k-s2-x3fa2b1c9" != group_name("all-200k-s2-r0")
    with pytest.raises(InputError, match="malformed pool name"):
        parse_pool_name("all-200k-xZZ-r0")


def test_fields_are_case_insensitive_and_exact():
    assert len(MAG_FIELDS) == 19
    assert resolve_field("computer science") == "Computer Science"
    assert resolve_field("materials-science") == "Materials Science"
    with pytest.raises(InputError, match="unknown FIELD"):
        resolve_field("Medicin")


def test_several_fields_are_separated_by_spaces_or_commas():
    assert resolve_fields("Computer Science") == ["Computer Science"]
    assert resolve_fields("medicine, computer-science biology medicine") == [
        "Medicine", "Computer Science", "Biology"]
    assert len(resolve_fields("ALL")) == 19
    with pytest.raises(InputError, match="unknown FIELD 'Computer'"):
        resolve_fields("Medicine Computer Science")  # a name's own space must be '-' here


def test_registry_holds_the_papers_encoders():
    for name in ("bm25", "minilm", "scibert", "specter", "scincl", "specter2", "aspire-cs",
                 "aspire-bio", "e5-base-v2"):
        assert name in REGISTRY
    assert get_model("SciNCL").hf_id == "malteos/scincl"
    assert get_model("specter").similarity == "l2"  # SPECTER-family ranks by L2 distance
    assert get_model("specter2").adapter == "allenai/specter2"
    with pytest.raises(InputError, match="unknown MODEL"):
        get_model("bert-large")


def _names_beside(root: Path) -> dict[str, set[str]]:
    """What the layout writes beside a corpus's folders (in the runs root) and beside a pool's
    (in a corpus's index and runs folders), from its own functions."""
    from pipeline import layout

    runs, indexes, corpora = root / "runs", root / "indexes", root / "corpora"
    corpus = {p.relative_to(runs).parts[0] for p in (
        runs / layout.RESULTS_FILE, runs / layout.RESULTS_MANIFEST,
        layout.report_file(layout.reports_dir(runs), "c"), layout.sbatch_path(runs, "embed"))}
    pool = {p.relative_to(base / "c").parts[0] for base, p in (
        (indexes, layout.store_dir(indexes, "c", "bm25")),
        (indexes, layout.analysed_dir(indexes, "c", "anserini-english")),
        (indexes, layout.tuning_path(indexes, "c", "all-800-r0")),
        (runs, layout.stage_times_path(runs, "c")),
        (runs, layout.retired_dir(runs / "c", "all-800-r0")),
        (corpora, layout.pool_dir(corpora / "c", "all-800-r0")))}
    return {"corpus": corpus, "pool": pool}


def test_a_name_the_layout_writes_beside_its_folders_is_refused(tmp_path):
    """A corpus named results.parquet made runs/results.parquet a folder: every make eval of
    that DATA then failed (IsADirectoryError). Every name the layout writes beside a corpus's
    or a pool's folders is refused as such a name (in any case, as macOS compares), and a model
    `<m>.metrics` whose table would be run <m>'s evaluation."""
    from pipeline.layout import check_name, run_paths

    beside = _names_beside(tmp_path)
    assert "results.parquet" in beside["corpus"] and "retired" in beside["pool"]
    for kind, names in beside.items():
        for name in names:
            for spelt in (name, name.upper()):
                with pytest.raises(InputError, match="what the pipeline writes beside"):
                    check_name(kind, spelt)
    clash = run_paths(tmp_path, "c", "all-800-r0", "x.metrics").parquet
    assert clash == run_paths(tmp_path, "c", "all-800-r0", "x").metrics
    with pytest.raises(InputError, match="its table would be x's evaluation"):
        check_name("model", "x.metrics")
    for name in ("demo", "results", "reports2", "my.corpus"):
        assert check_name("corpus", name) == name
    assert check_name("model", "x.metric") == "x.metric"


def test_make_refuses_a_corpus_named_as_the_results_file(tmp_path):
    import os
    import subprocess
    import sys

    done = subprocess.run(["make", "--no-print-directory", "eval", "CORPUS=results.parquet",
                           "MODEL=bm25", f"DATA={tmp_path}", f"PY={sys.executable}",
                           f"STAMP={tmp_path / 'installed'}"],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 2
    assert "CORPUS: 'results.parquet': a corpus name that is the name of what the pipeline " \
        "writes beside" in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()
