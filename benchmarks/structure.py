"""The package's shape, measured: modules per sub-package, the largest module, artifact names
spelled outside pipeline/layout.py, naming rules in the Makefile, references to files outside
the repository, README lines, and the time of `make test-fast` (timed here, `--no-fast` skips).

    python benchmarks/structure.py            # writes benchmarks/results/structure.md
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pipeline"
# artifact names and the Makefile's old naming rules: none may appear where they do not belong
ARTIFACT_NAMES = ('"prefiltered.parquet"', '"papers.parquet"', '"citations.parquet"',
                  '"queries.parquet"', '"candidates.parquet"', '"qrels.parquet"',
                  '"results.parquet"', '/ "bm25-tuning"', '/ "embeddings"', '/ "pools"',
                  '"stage-times')
MAKE_NAMING = ("hf--", "fuse--", "~", "manifest.json", "pools/")
OUTSIDE = ("SPEC" + ".md", "DESIGN" + ".md", "../" + "shared")


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def fast_tests() -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not slow",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
    summary = (done.stdout.strip().splitlines() or ["?"])[-1]
    return time.perf_counter() - start, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-fast", action="store_true", help="do not time make test-fast")
    args = parser.parse_args()
    found = modules()
    per_package = Counter(p.relative_to(PACKAGE).parts[0] if len(p.relative_to(PACKAGE).parts) > 1
                          else "(top level)" for p in found)
    largest = max(found, key=lines)
    outside_layout = [f"{p.relative_to(ROOT)}: {n}" for p in found if p.name != "layout.py"
                      for n in ARTIFACT_NAMES if n in p.read_text()]
    makefile = [line for line in (ROOT / "Makefile").read_text().splitlines()
                if not line.lstrip().startswith(("#", "@echo"))]
    make_rules = [f"{n}: {line.strip()}" for line in makefile for n in MAKE_NAMING if n in line]
    texts = [ROOT / "README.md", ROOT / "Makefile", *(ROOT / "docs").glob("*.md"), *found,
             *(ROOT / "tests").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    outside = [f"{p.relative_to(ROOT)}" for p in texts for n in OUTSIDE if n in p.read_text()]
    rows = [("modules", str(len(found))),
            *((f"modules in {k}", str(v)) for k, v in sorted(per_package.items())),
            ("largest module", f"{largest.relative_to(ROOT)} ({lines(largest)} lines)"),
            ("artifact names spelled outside layout.py", str(len(outside_layout))),
            ("naming rules in the Makefile", str(len(make_rules))),
            ("references to files outside the repository", str(len(outside))),
            ("README lines", str(lines(ROOT / "README.md")))]
    if not args.no_fast:
        seconds, summary = fast_tests()
        rows.append(("make test-fast", f"{seconds:.0f} s ({summary})"))
    cores = os.cpu_count()
    text = ["# Structure of the package", "",
            f"Measured by `benchmarks/structure.py` on {platform.machine()}, {cores} cores, "
            f"Python {platform.python_version()}.", "",
            "| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    text += [f"- outside layout: `{x}`" for x in outside_layout]
    text += [f"- Makefile: `{x}`" for x in make_rules] + [f"- outside: `{x}`" for x in outside]
    out = ROOT / "benchmarks" / "results" / "structure.md"
    out.write_text("\n".join(text).rstrip() + "\n")
    print(out.read_text())
    return 0 if not (outside_layout or make_rules or outside) else 1


if __name__ == "__main__":
    sys.exit(main())
