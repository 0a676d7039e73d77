"""The documentation: no reference to material users do not have, links that resolve, and a
Python example in the README that runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# Reference files of the project's authors that users do not have: never named in what ships.
# Built from pieces, so that this file does not name them either.
FORBIDDEN = ("SPEC" + ".md", "DESIGN" + ".md", ".." + "/shared")
CHECKED = (README, DOCS, ROOT / "pipeline", ROOT / "tests", ROOT / "benchmarks",
           ROOT / "Makefile")
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints"}

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target) and ![alt](target), text over lines too
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, ...


def _files(paths: tuple[Path, ...]) -> list[Path]:
    found = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [p for p in sorted(path.rglob("*")) if p.is_file()
                      and not SKIPPED_PARTS & set(p.relative_to(ROOT).parts)
                      and p.suffix not in (".pyc", ".png")]
    return found


def _markdown_pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> str:
    """Markdown without its fenced code blocks (code may hold brackets that are not links)."""
    return _FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens (a
    `_` inside a word or code stays: QUERY_PROMPT; one that marks emphasis goes)."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = re.sub(r"(?<!\w)_(\S(?:.*?\S)?)_(?!\w)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _prose(page.read_text()), flags=re.M)
    return {_slug(h) for h in headings}


def test_no_reference_to_material_users_do_not_have():
    hits = []
    for path in _files(CHECKED):
        text = path.read_text(errors="ignore")
        hits += [f"{path.relative_to(ROOT)}: {word}" for word in FORBIDDEN if word in text]
    assert not hits, "restate the facts in docs/ instead of citing: " + "; ".join(hits)


def test_docs_exist():
    assert DOCS.is_dir()
    assert {"architecture.md", "ingest.md", "pools.md", "encoders.md", "retrieval.md",
            "evaluation.md", "mdcr.md", "collections.md", "cluster.md", "errors.md",
            "benchmarks.md", "extending.md", "choices.md"} <= {p.name for p in DOCS.glob("*.md")}


@pytest.mark.parametrize("page", _markdown_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path):
    """Every relative link of the README and the docs names a file that exists (and, for a
    markdown page with an anchor, a heading of that page)."""
    broken = []
    for target in _LINK.findall(_prose(page.read_text())):
        if _EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


_DOC_PATH = re.compile(r"\bdocs/([A-Za-z0-9_.-]+\.md)\b")


def test_every_docs_page_named_exists():
    """A page cited as `docs/<page>.md` anywhere (README, the docs, the package, the tests,
    benchmarks, the Makefile: code comments and messages too, which no link check reads)
    exists: a Makefile comment once sent readers to a page that never did."""
    pages = {page.name for page in DOCS.glob("*.md")}
    missing = [f"{path.relative_to(ROOT)}:{number}: docs/{name}"
               for path in _files(CHECKED)
               for number, line in enumerate(path.read_text(errors="ignore").splitlines(), 1)
               for name in _DOC_PATH.findall(line) if name not in pages]
    assert not missing, "pages that do not exist: " + "; ".join(missing)
    absent = "external" + ".md"  # built from pieces, so that this file does not cite it
    assert _DOC_PATH.findall(f"see docs/{absent}, not docs/ingest.md.") == [absent, "ingest.md"]


def test_slug_matches_github():
    assert _slug("Staleness: one rule") == "staleness-one-rule"
    assert _slug("The paper's setups") == "the-papers-setups"
    assert _slug("`make verify`") == "make-verify"
    assert _slug("Models without a registry entry: `hf:`") == "models-without-a-registry-entry-hf"


def _readme_example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.M | re.S)
    assert len(blocks) == 1, f"README.md should hold one ```python block, found {len(blocks)}"
    return blocks[0]


@pytest.mark.slow
def test_readme_python_example_runs(tmp_path: Path):
    """The README's Python example, as written, in a fresh folder: it exits 0 and scores the
    three models (BM25 well above the random floor, the imported run no better than the BM25
    run it was cut from), compares two of them, and the report shows the imported one."""
    script = tmp_path / "example.py"
    script.write_text(_readme_example())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-3000:]
    maps = dict(re.findall(r"^(\w+) \{'map': ([0-9.]+)", done.stdout, flags=re.M))
    assert set(maps) == {"bm25", "random", "theirs"}, done.stdout
    assert float(maps["bm25"]) > float(maps["random"]) + 0.1, done.stdout
    # the imported run (BM25's top 100) ranks as BM25 does, so its MAP is at most BM25's
    assert 0 < float(maps["theirs"]) <= float(maps["bm25"]), done.stdout
    assert re.search(r"^\| theirs \| [0-9.]+†? \|", done.stdout, flags=re.M), done.stdout
    assert "theirs" in (tmp_path / "data" / "runs" / "reports" / "tiny.md").read_text()


def test_every_keyword_of_an_example_is_one_the_function_takes():
    """The README's and docs' examples call the API by keywords it takes (its parameters, and
    for a **parameter the keywords it takes: cli/docs.public_arguments), never by one it
    refuses (a keyword renamed on 2026-11-28 and no longer taken among them)."""
    from pipeline.cli.docs import public_arguments

    arguments = public_arguments()
    call = re.compile(r"pipeline\.(\w+)\(([^()]*(?:\([^()]*\)[^()]*)*)\)", re.S)
    calls = [(page.name, found.group(1), key, page.read_text()[found.end():found.end() + 200])
             for page in _markdown_pages() for found in call.finditer(page.read_text())
             if found.group(1) in arguments for key in re.findall(r"\b(\w+)=", found.group(2))]
    wrong = [found[:3] for found in calls if found[2] not in arguments[found[1]]
             and f"unknown option {found[2]} " not in found[3]]  # an example of the refusal
    assert not wrong, wrong
    assert len(calls) > 20 and "sample_size" not in arguments["judge"]
    assert call.findall('pipeline.judge(d, "c", ["a", "b"], "s",\n   sample=2)') == [
        ("judge", 'd, "c", ["a", "b"], "s",\n   sample=2')]
