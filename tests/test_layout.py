from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from pipeline.core.errors import InputError
from pipeline.fields import MAG_FIELDS, resolve_field, resolve_fields
from pipeline.layout import format_size, group_name, parse_pool_name, parse_size, pool_name
from pipeline.models import REGISTRY, get_model
from tests.conftest import CHILD_BOUND_S


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
                          text=True, timeout=CHILD_BOUND_S, env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 2
    assert "CORPUS: 'results.parquet': a corpus name that is the name of what the pipeline " \
        "writes beside" in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()


# ---- the pool-name grammar the docs state, against the names the pipeline makes ------------
ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
# what each placeholder of a documented grammar stands for (a grammar naming another fails)
PLACEHOLDERS = {"scope": r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*", "size": r"[0-9]+[kM]?",
                "seed": r"[0-9]+", "tag": r"[0-9a-f]{8}", "exclusion": r"[0-9a-f]{8}",
                "repeat": r"[0-9]+", "n": r"[0-9]+"}
_GRAMMAR = re.compile(r"`([^`]*<scope>-<size>[^`]*)`")
_TOKEN = re.compile(r"<(\w+)>|\[|\]|\*|[^<\[\]*]+")


def documented_grammars() -> dict[str, list[str]]:
    """Every pool-name grammar the docs and layout's own error message state (a `<scope>-<size>`
    pattern in backticks: `<scope>-<size>[-s<seed>]-r<repeat>[-val]`), the file name only
    (what follows its last `/`), -> where it is stated."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for match in _GRAMMAR.finditer(page.read_text()):
            grammar = " ".join(match.group(1).split()).rsplit("/", 1)[-1]
            found.setdefault(grammar, []).append(page.relative_to(ROOT).as_posix())
    with pytest.raises(InputError) as caught:
        parse_pool_name("not a pool")
    found.setdefault(str(caught.value).rsplit("expected ", 1)[1], []).append(
        "layout.parse_pool_name")
    return found


def grammar_regex(grammar: str) -> re.Pattern:
    """`[...]` optional, `<name>` a placeholder (PLACEHOLDERS), `*` any number, the rest as
    written."""
    parts = []
    for match in _TOKEN.finditer(grammar):
        token = match.group()
        if match.group(1):
            assert match.group(1) in PLACEHOLDERS, f"{grammar}: unknown {token}"
            parts.append(f"(?:{PLACEHOLDERS[match.group(1)]})")
        else:
            parts.append({"[": "(?:", "]": ")?", "*": "[0-9]+"}.get(token) or re.escape(token))
    return re.compile("".join(parts))


def grammar_names(grammar: str, samples: dict[str, tuple[str, ...]]) -> set[str]:
    """Every name the grammar writes with the samples' values: each optional part left out
    and kept, each placeholder each of its samples, `*` as 1."""
    names = {""}
    stack: list[set[str]] = []
    for match in _TOKEN.finditer(grammar):
        token = match.group()
        if token == "[":
            stack.append(names)
            names = {""}
        elif token == "]":
            before = stack.pop()
            names = {head + tail for head in before for tail in names | {""}}
        else:
            values = (samples[match.group(1)] if match.group(1)
                      else ("1",) if token == "*" else (token,))
            names = {name + value for name in names for value in values}
    return names


@pytest.fixture(scope="module")
def made_names(tmp_path_factory) -> dict[str, set[str]]:
    """Pool names as the pipeline makes them: make pool's (PoolSpec, with an exclusion list
    read as EXCLUDE reads one: its real tag), a collection's, CSFCube's facets', and the BM25
    tuning files' names (tuning_path), by split."""
    from pipeline.external.beir import JUDGED_SCOPE
    from pipeline.external.csfcube import FACETS, LEVEL
    from pipeline.layout import tuning_path
    from pipeline.pools.build import PoolSpec, with_exclusion

    listed = tmp_path_factory.mktemp("lists") / "training.txt"
    listed.write_text("".join(f"{i}\n" for i in (204, 17, 99)))
    names: dict[str, set[str]] = {"test": set(), "validation": set()}
    for field in (None, "Computer Science", "Medicine"):
        for size in (1500, 20_000, 2_000_000):
            for seed, repeat, split, exclude in itertools.product(
                    (0, 3), (0, 2), ("test", "validation"), (None, str(listed))):
                spec, _ = with_exclusion(PoolSpec(size, field, repeat, seed=seed, split=split,
                                                  exclude=exclude))
                names[split].add(spec.name)
    for scope in ("beir", JUDGED_SCOPE, *(f"{LEVEL}-{facet}" for facet in FACETS)):
        names["test"].add(pool_name(scope, 25_000, 0))
        names["validation"].add(pool_name(scope, 25_000, 0, split="validation"))
    names["tuning"] = {tuning_path(Path("indexes"), "c", name).name for name in names["test"]}
    assert any("-x" in name for name in names["test"]) and any(
        "-x" in name for name in names["tuning"])
    return names


def _kind(grammar: str) -> tuple[str, ...]:
    """The names a grammar states: tuning files, test or validation pools, or both."""
    if grammar.endswith(".json"):
        return ("tuning",)
    if "[-val]" in grammar:
        return ("test", "validation")
    return ("validation",) if grammar.endswith("-val") else ("test",)


def test_the_documented_pool_names_are_the_names_made(made_names):
    """Each pool-name grammar the docs state (and layout's message) matches every name the
    pipeline makes of its kind, `-x<tag>` ones included, and no other; and every name it
    writes is one the pipeline reads back and would make itself."""
    grammars = documented_grammars()
    assert {"docs/architecture.md", "docs/pools.md", "layout.parse_pool_name"} <= {
        where for pages in grammars.values() for where in pages}, grammars
    tag = next(name for name in made_names["test"] if "-x" in name).split("-x")[1][:8]
    samples = {"scope": ("all", "computer-science"), "size": ("1500", "20k", "2M"),
               "seed": ("3",), "tag": (tag,), "exclusion": (tag,), "repeat": ("0", "2"),
               "n": ("2",)}
    for grammar, where in grammars.items():
        pattern, kinds = grammar_regex(grammar), _kind(grammar)
        for kind, names in made_names.items():
            matched = {name for name in names if pattern.fullmatch(name)}
            expected = names if kind in kinds else set()
            assert matched == expected, (where, grammar, kind, sorted(names - matched)[:3],
                                         sorted(matched - expected)[:3])
        for name in grammar_names(grammar, samples):
            if kinds == ("tuning",):
                assert group_name(name.removesuffix(".json") + "-r0") + ".json" == name
                continue
            parsed = parse_pool_name(name)
            assert parsed.split in kinds, (where, grammar, name)
            assert pool_name(parsed.scope, parsed.size, parsed.repeat, parsed.seed,
                             parsed.split, parsed.exclusion) == name, (where, grammar, name)


def test_the_grammar_reader_sees_what_a_grammar_says():
    """The reader on grammars of its own: optional parts, placeholders, `*`."""
    grammar = "<scope>-<size>[-s<seed>]-r*-val"
    assert grammar_names(grammar, {"scope": ("all",), "size": ("2k", "3M"), "seed": ("5",)}) == {
        "all-2k-r1-val", "all-3M-r1-val", "all-2k-s5-r1-val", "all-3M-s5-r1-val"}
    pattern = grammar_regex(grammar)
    assert pattern.fullmatch("medicine-20k-s3-r2-val") and pattern.fullmatch("all-2M-r0-val")
    assert not pattern.fullmatch("all-2M-r0") and not pattern.fullmatch("all-2M-x3fa2b1c9-r0-val")
    assert _kind(grammar) == ("validation",) and _kind("<scope>-<size>.json") == ("tuning",)


@pytest.mark.parametrize("name", ["xключ", "x漢字", "xابجد", "café", "x٣"])
def test_a_name_no_output_can_set_is_refused_at_every_door_it_enters(name):
    """Issue 88: an imported run named `xключ` was accepted, then every LaTeX table of the
    report failed pdflatex. A model's or run's name is ASCII (layout.NAME_RULES), whichever
    door it enters by: the declared checks of every option naming a model or a run (make,
    the command line, the API), a ModelEntry's name, hf:, st:, api: and vectors: models, and
    fused ones."""
    from pipeline.api import _entry
    from pipeline.layout import check_name
    from pipeline.models import ModelEntry
    from pipeline.options import checks
    from pipeline.options.declared import VARIABLES
    from tests.rules import api_rules

    doors = {checks.model_name, checks.scored_runs}
    declared = [var for var in (*VARIABLES, *api_rules()) if var.check in doors]
    assert {var.check for var in declared} == doors  # each kind of name declared somewhere
    forms = [check for var in declared for check in (
        var.check, *(var.check_for(where) for where in var.forms))]
    assert len(forms) > len(checks.MODEL_FORMS)  # MODEL's every form
    for check in forms:
        for text in (name, f"hf:org/{name}", f"st:org/{name}", f"api:org/{name}",
                     f"vectors:{name}", f"fuse--rrf--bm25--{name}"):
            with pytest.raises(InputError) as refused:
                check(text)
            assert "\n" not in str(refused.value)
    for kind in ("model", "corpus", "pool"):
        with pytest.raises(InputError, match="letters A-Z or a-z, digits 0-9"):
            check_name(kind, name)
    with pytest.raises(InputError, match="letters A-Z or a-z, digits 0-9"):
        _entry(ModelEntry(name, "dense", "org/model"))
