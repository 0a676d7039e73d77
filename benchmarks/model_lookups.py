"""How many times one `make search MODEL=bm25` looks MODEL up (issue 81: it was 6): every call
of `pipeline.models.get_model` counted by its caller, through a sitecustomize that wraps it
before the pipeline is imported, at each commit given (a git worktree each), on one small
corpus and pool built here.

    python benchmarks/model_lookups.py 4f144e1 HEAD   # writes benchmarks/results/model_lookups81.md
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "model_lookups81.md"
COUNTER = """
import os, traceback
import pipeline.models as models
_get_model = models.get_model


def counted(name, *args, **kwargs):
    caller = traceback.extract_stack()[-2]
    with open(os.environ["LOOKUPS_LOG"], "a") as log:
        log.write(f"{name}\\t{caller.filename.rpartition('pipeline/')[2]}:{caller.name}\\n")
    return _get_model(name, *args, **kwargs)


models.get_model = counted
"""


def data_folder(work: Path) -> Path:
    """A synthetic corpus `c` of 3,000 papers and one pool of 1,000 candidates, 20 queries."""
    sys.path.insert(0, str(ROOT))
    import pipeline

    data = work / "data"
    pipeline.build_corpus(data, "c", synthetic=3000)
    pipeline.build_pool(data, "c", size=1000, queries=20)
    return data


def lookups(checkout: Path, data: Path, work: Path) -> Counter:
    """(name looked up, caller) -> calls in `make search MODEL=bm25 CORPUS=c` at `checkout`."""
    site, log = work / "site", work / "lookups.log"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(COUNTER)
    log.unlink(missing_ok=True)
    stamp = work / "installed"
    stamp.touch()
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MODEL", "CORPUS")}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{checkout}", LOOKUPS_LOG=str(log))
    subprocess.run(["make", "--no-print-directory", f"DATA={data}", f"PY={sys.executable}",
                    f"STAMP={stamp}", "CORPUS=c", "search", "MODEL=bm25"], cwd=checkout,
                   env=env, check=True, capture_output=True)
    return Counter(tuple(line.split("\t")) for line in log.read_text().splitlines())


def main(revs: list[str]) -> None:
    lines = ["# MODEL's lookups in one `make search MODEL=bm25`", "",
             "Counted by `python benchmarks/model_lookups.py`: each call of "
             "`pipeline.models.get_model`, by the function calling it, on a synthetic corpus of "
             "3,000 papers and one pool (1,000 candidates, 20 queries). DEMO_MODELS' default "
             "(bm25, minilm, random) is checked too: its lookups are listed apart.", ""]
    with tempfile.TemporaryDirectory(prefix="lookups-") as tmp:
        work = Path(tmp)
        data = data_folder(work)
        for rev in revs:
            tree = work / f"tree-{rev}"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT,
                           check=True, capture_output=True)
            try:
                counts = lookups(tree, data, work)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                               check=True)
            commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True,
                                    capture_output=True, text=True).stdout.strip()
            model = sum(n for (name, _), n in counts.items() if name == "bm25")
            lines += [f"## {commit}: MODEL=bm25 looked up {model} times "
                      f"(one of them DEMO_MODELS' check)", "", "| name | caller | calls |",
                      "|---|---|---|"]
            lines += [f"| {name} | `{caller}` | {n} |" for (name, caller), n in sorted(
                counts.items())]
            lines.append("")
    OUT.write_text("\n".join(lines))
    print(OUT.read_text())


if __name__ == "__main__":
    main(sys.argv[1:] or ["HEAD"])
