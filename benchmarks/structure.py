"""The package's shape, measured: modules per sub-package, the largest modules, the layout's
names and the artifact names spelled outside pipeline/layout.py, naming rules in the
Makefile, references to files outside the repository, the Makefile's and the README's lines,
the import contracts and the public API. The output depends on the checkout alone (no time,
no machine): figures to read, which no test holds to (a file's length is no behaviour).

    python benchmarks/structure.py            # writes benchmarks/results/structure.md
"""

from __future__ import annotations

import configparser
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.test_architecture import layout_names, literals_outside_layout  # noqa: E402

PACKAGE = ROOT / "pipeline"
OUT = ROOT / "benchmarks" / "results" / "structure.md"
LARGEST = 5  # modules listed by size
MAKE_NAMING = ("hf--", "fuse--", "~", "manifest.json", "pools/")  # the Makefile's old naming
OUTSIDE = ("SPEC" + ".md", "DESIGN" + ".md", "../" + "shared")


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def contracts() -> int:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return sum(section.startswith("importlinter:contract:") for section in config.sections())


def public_api() -> list[str] | None:
    """pipeline.__all__, when the package defines one (it may be computed: imported)."""
    import pipeline

    api = getattr(pipeline, "__all__", None)
    return None if api is None else list(api)


def render() -> str:
    """The text of benchmarks/results/structure.md."""
    found = modules()
    relative = [p.relative_to(PACKAGE) for p in found]
    per_package = Counter(r.parts[0] if len(r.parts) > 1 else "(top level)" for r in relative)
    largest = sorted(found, key=lambda p: (-lines(p), p))[:LARGEST]
    outside_layout = literals_outside_layout()
    makefile = [line for line in (ROOT / "Makefile").read_text().splitlines()
                if not line.lstrip().startswith(("#", "@echo"))]
    make_rules = [f"{n}: {line.strip()}" for line in makefile for n in MAKE_NAMING if n in line]
    texts = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md")),
             *found, *sorted((ROOT / "tests").rglob("*.py")),
             *sorted((ROOT / "benchmarks").glob("*.py"))]
    outside = [f"{p.relative_to(ROOT)}" for p in texts for n in OUTSIDE if n in p.read_text()]
    api = public_api()
    rows = [("modules", str(len(found))),
            *((f"modules in {k}", str(v)) for k, v in sorted(per_package.items())),
            *((f"largest module {i}", f"{p.relative_to(ROOT)} ({lines(p)} lines)")
              for i, p in enumerate(largest, 1)),
            ("names of files and folders in layout.py", str(len(layout_names()))),
            ("artifact names spelled outside layout.py", str(len(outside_layout))),
            ("import contracts (.importlinter)", str(contracts())),
            ("public API names (pipeline.__all__)",
             str(len(api)) if api is not None else "no __all__"),
            ("naming rules in the Makefile", str(len(make_rules))),
            ("references to files outside the repository", str(len(outside))),
            ("Makefile lines", str(lines(ROOT / "Makefile"))),
            ("README lines", str(lines(ROOT / "README.md")))]
    text = ["# Structure of the package", "",
            "Measured by `python benchmarks/structure.py` from the checkout alone.", "",
            "| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    text += [f"- outside layout: `{x}`" for x in outside_layout]
    text += [f"- Makefile: `{x}`" for x in make_rules] + [f"- outside: `{x}`" for x in outside]
    return "\n".join(text).rstrip() + "\n"


def main() -> int:
    text = render()
    OUT.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
