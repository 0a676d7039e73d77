"""docs/api.md's table of the arguments is generated from the declarations and the public
functions' signatures (pipeline/cli/docs.py: api_table), between its two markers: an
argument added to a public function, or an option added to a command whose function takes its
options, without its row makes the docs stale (tests/cli/test_variables.py
test_generated_files_are_current fails), and `python -m pipeline variables --write` writes the
row, leaving the rest of docs/api.md as written."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Annotated

import pytest

import pipeline
from pipeline.cli.docs import (
    BLOCK_END,
    BLOCK_START,
    argument_words,
    check_words,
    public_arguments,
    stale,
    write,
)
from pipeline.core.annotations import Check
from pipeline.core.errors import InputError
from pipeline.layout import API_DOC
from pipeline.options import declared
from pipeline.options.checks import choice, int_at_least, positive, worker_count

ROOT = Path(__file__).resolve().parents[1]
DOCS = (Path("docs/variables.md"), Path(API_DOC))


def block(text: str) -> str:
    """The generated block of docs/api.md's text: what lies between its markers."""
    return text.split(f"\n{BLOCK_START}\n", 1)[1].split(f"\n{BLOCK_END}\n", 1)[0]


def rows(text: str) -> dict[str, tuple[set[str], str]]:
    """The table's rows: each argument named -> ({the functions named beside it}, the words),
    one entry per argument and row ('name' and 'name (f, g)' apart)."""
    found = {}
    for line in block(text).splitlines():
        cells = re.fullmatch(r"\| (.+?) \| (.+) \|", line)
        if not cells or cells.group(1) in ("argument", "---"):
            continue
        names, _, functions = cells.group(1).partition(" (")
        named = set(re.findall(r"`(\w+)`", functions))
        for name in re.findall(r"`(\w+)`", names):
            found[f"{name} {sorted(named)}"] = (named, cells.group(2))
    return found


@pytest.fixture
def root(tmp_path) -> Path:
    """A copy of the generated docs, current (written again as the declarations give them)."""
    for path in DOCS:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / path, tmp_path / path)
    write(tmp_path)
    assert stale(tmp_path) == []
    return tmp_path


def made_up(data: pipeline.Data | str | os.PathLike, corpus: str, *,
            made_up_depth: Annotated[int, Check(positive)] = 1) -> None:
    """A public function added at run time, with an argument of its own."""


def test_every_public_argument_has_its_row():
    """Each argument of each public function (pipeline.__all__'s functions, Data's
    constructor; build_pool's and search's keywords too) has its row in the committed docs,
    the one naming the function, else the one naming none, saying what its declaration takes."""
    table = rows((ROOT / API_DOC).read_text())
    arguments = public_arguments()
    assert {"Data", "search", "build_pool", "score", "verify_data"} <= set(arguments)
    assert {"size", "min_positives", "max_year"} <= set(arguments["build_pool"])  # PoolSpec's
    assert {"bm25_engine", "backend"} <= set(arguments["search"])  # its command's options
    for function, names in arguments.items():
        for name in names:
            its = [(named, words) for key, (named, words) in table.items()
                   if key.split()[0] == name]
            naming = [words for named, words in its if function in named]
            assert (naming or [words for named, words in its if not named]) == [
                argument_words(function, name)], f"docs/api.md: no row for {name} of {function}"


def test_an_argument_of_a_public_function_without_its_row_makes_the_docs_stale(
        root, monkeypatch):
    """A public function with an argument of its own (its rule a Check on its parameter, one
    line): docs/api.md is stale until written again, then its row says what to give; the
    rest of docs/api.md is as it was."""
    before = (root / API_DOC).read_text()
    monkeypatch.setattr(pipeline, "__all__", [*pipeline.__all__, "made_up"])
    monkeypatch.setattr(pipeline, "made_up", made_up, raising=False)
    assert stale(root) == [Path(API_DOC)]
    assert write(root) == [Path(API_DOC)] and stale(root) == []
    after = (root / API_DOC).read_text()
    assert rows(after)["made_up_depth []"] == (set(), "a whole number (an int): 1 or more")
    assert after.replace(block(after), "") == before.replace(block(before), "")


def test_an_option_a_public_function_takes_without_its_row_makes_the_docs_stale(
        root, monkeypatch):
    """A new option of the search (as BM25_K1 was: a make variable whose keyword `search`
    takes among its **options): both generated docs are stale, and docs/api.md's row names its
    make variable."""
    option = declared.Variable("MADE_UP_K1", "0.9", None, "a made-up BM25 k1", "search",
                               stages=("search",), type=float,
                               changes_run=True)
    monkeypatch.setattr(declared, "VARIABLES", (*declared.VARIABLES, option))
    assert "made_up_k1" in public_arguments()["search"]
    assert sorted(stale(root)) == sorted(DOCS)
    write(root)
    assert rows((root / API_DOC).read_text())["made_up_k1 []"] == (
        set(), "a number (an int or a float), as `MADE_UP_K1`")


def test_an_undeclared_public_argument_is_refused_by_the_generator(root, monkeypatch):
    """An argument that neither a declaration names nor an annotation gives a kind has no row
    to write: the generator says which to annotate or declare, and writes nothing."""
    def unsaid(data: pipeline.Data | str | os.PathLike, corpus: str, *, made_up_depth=1):
        """A public function added at run time, its argument of no kind."""

    unsaid.__name__ = "made_up"
    monkeypatch.setattr(pipeline, "__all__", [*pipeline.__all__, "made_up"])
    monkeypatch.setattr(pipeline, "made_up", unsaid, raising=False)
    before = (root / API_DOC).read_text()
    with pytest.raises(InputError, match="argument made_up_depth of made_up has neither an "
                                         "annotation nor a make variable"):
        write(root)
    assert (root / API_DOC).read_text() == before


def test_the_notes_under_the_table_say_the_limit_the_code_applies():
    """The prose after the table, written by hand, states the path limit the API checks."""
    from pipeline.layout import MAX_GIVEN_PATH

    notes = (ROOT / API_DOC).read_text().split(f"\n{BLOCK_END}\n", 1)[1]
    assert f"at most {MAX_GIVEN_PATH:,} bytes" in " ".join(notes.split())


def test_the_block_is_the_only_generated_part_of_api_md(root):
    """A hand edit inside the block is stale and written over; one outside it is kept; a file
    without its markers is refused, saying where the table goes."""
    text = (root / API_DOC).read_text()
    row = next(line for line in block(text).splitlines() if line.startswith("| `k` |"))
    edited = text.replace(row + "\n", "").replace("## Names\n", "## Names (edited)\n", 1)
    (root / API_DOC).write_text(edited)
    assert stale(root) == [Path(API_DOC)]
    write(root)
    written = (root / API_DOC).read_text()
    assert row in written and "## Names (edited)\n" in written
    (root / API_DOC).write_text(written.replace(BLOCK_END, ""))
    with pytest.raises(InputError, match="one line <!-- generated from the declarations"):
        stale(root)


def test_the_words_come_from_the_checks():
    """A check's values, in words, from checks.py's factories (the same on every machine:
    per core, not this machine's count)."""
    assert check_words(positive) == "1 or more"
    assert check_words(int_at_least(1, 256)) == "1 to 256"
    assert check_words(worker_count) == "1 to 4 per CPU core of this machine"
    assert check_words(choice(("a", "b", "c"))) == "`a`, `b` or `c`"
    assert check_words(choice(("", "0", "1"))) == "`0` or `1`"
    assert check_words(None) == "" and check_words(str.strip) == ""
