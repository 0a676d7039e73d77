"""Where the lines of the hall (pipeline/cli, pipeline/options and the API's argument types,
core/kinds.py or core/annotations.py) and of pipeline/ lie, at two commits (issue 81's
line targets): each file's lines split into the declaration tables (DECLARED, TARGETS,
GROUPS: what the hall declares), docstrings and comments, and the code around them; and
pipeline/'s lines by package, to say which packages grew between the commits.

    python benchmarks/hall_lines.py 6e21d34 HEAD   # writes benchmarks/results/hall81_lines.*
"""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import tokenize
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "hall81_lines"
HALL = ("pipeline/cli/", "pipeline/options/", "pipeline/core/kinds.py",
        "pipeline/core/annotations.py")
TABLES = ("DECLARED", "TARGETS", "GROUPS")  # the hall's declarations


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def files(rev: str) -> dict[str, str]:
    """Each Python file under pipeline/ at `rev` -> its text."""
    names = [n for n in git("ls-tree", "-r", "--name-only", rev, "pipeline").split()
             if n.endswith(".py")]
    return {name: git("show", f"{rev}:{name}") for name in names}


def split(text: str) -> Counter:
    """A module's lines: `tables` (the declaration tables' statements), `words` (lines that
    are only a docstring or a comment), `code` (the rest, blank lines left out)."""
    lines = text.splitlines()
    kinds = ["code" if line.strip() else "" for line in lines]
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(
                body[0].value.value, str):
            for at in range(body[0].lineno - 1, body[0].end_lineno):
                kinds[at] = "words"
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT and not lines[token.start[0] - 1][
                :token.start[1]].strip():
            kinds[token.start[0] - 1] = "words"
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [
            node.target] if isinstance(node, ast.AnnAssign) else []
        if any(getattr(t, "id", "") in TABLES for t in targets):
            for at in range(node.lineno - 1, node.end_lineno):
                if kinds[at]:
                    kinds[at] = "tables"
    return Counter(kind for kind in kinds if kind)


def measure(rev: str) -> dict:
    texts = files(rev)
    hall = {name: dict(split(text)) | {"lines": len(text.splitlines())}
            for name, text in texts.items() if name.startswith(HALL)}
    packages: Counter = Counter()
    for name, text in texts.items():
        packages[name.split("/")[1]] += len(text.splitlines())
    total = {key: sum(part.get(key, 0) for part in hall.values())
             for key in ("lines", "tables", "words", "code")}
    return {"commit": git("rev-parse", "--short", rev).strip(), "hall": total,
            "hall_files": hall, "pipeline": sum(packages.values()),
            "packages": dict(sorted(packages.items()))}


def report(before: dict, after: dict) -> str:
    b, a = before["hall"], after["hall"]
    lines = [f"# The hall's lines, {before['commit']} and {after['commit']}", "",
             "Counted by `python benchmarks/hall_lines.py` from git: the hall is pipeline/cli, "
             "pipeline/options and the API's argument types (core/kinds.py, then "
             "core/annotations.py). `tables` are the declaration tables (DECLARED, TARGETS, "
             "GROUPS), `words` the lines that are only a docstring or a comment, `code` the "
             "rest; blank lines count in `lines` alone.", "",
             "| | lines | tables | words | code |", "|---|---|---|---|---|"]
    for label, part in ((before["commit"], b), (after["commit"], a)):
        lines.append(f"| {label} | {part['lines']:,} | {part['tables']:,} | "
                     f"{part['words']:,} | {part['code']:,} |")
    lines += ["", "pipeline/ by package (lines), the packages that changed:", "",
              f"| package | {before['commit']} | {after['commit']} | change |",
              "|---|---|---|---|"]
    for name in sorted(set(before["packages"]) | set(after["packages"])):
        x, y = before["packages"].get(name, 0), after["packages"].get(name, 0)
        if x != y:
            lines.append(f"| {name} | {x:,} | {y:,} | {y - x:+,} |")
    lines.append(f"| **pipeline/** | {before['pipeline']:,} | {after['pipeline']:,} | "
                 f"{after['pipeline'] - before['pipeline']:+,} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    before, after = (measure(rev) for rev in (argv or ["6e21d34", "HEAD"]))
    OUT.with_suffix(".json").write_text(json.dumps({"before": before, "after": after},
                                                   indent=1) + "\n")
    OUT.with_suffix(".md").write_text(report(before, after))
    print(OUT.with_suffix(".md").read_text())


if __name__ == "__main__":
    main(sys.argv[1:])
