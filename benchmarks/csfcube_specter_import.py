"""CSFCube's bundled SPECTER rankings imported as a run and scored through the public path:
the figures next to the published 53.28 (NDCG%20) and 34.23 (MAP), facet "all", test split.

Input: a CSFCube checkout (github.com/iesl/CSFCube), a folder or a bare git directory (read
with `git show`). Its files are extracted into a temporary folder, never into the repository
(the release is CC BY-NC). A release without `abstracts-csfcube-preds.jsonl` (the papers file,
which some copies lack) gets placeholder texts for every paper the annotations name: scoring
reads only the pools' candidates, qrels and folds, never a paper's text, so the figures do not
depend on them; BM25 (step 4) then searches the placeholders, so its figures are no measure
of BM25 on CSFCube: it stands beside the imported run to check the report's depth and tests.

Steps, each a public command or API call:
1. `python -m pipeline import-csfcube` (make import-csfcube): the corpus, one pool per facet;
2. each facet's `eval_scripts/sample_ranked_pools/test-pid2pool-csfcube-specter-<facet>-
   ranked.json` ({query paper: [[candidate, L2 distance], ...]}) written as a TREC file
   (query `<pid>_<facet>`, score = -distance) and imported by `python -m pipeline import-run`
   (make import-run);
3. `pipeline.evaluate(..., means=True)`: each facet's fold-averaged NDCG%20 and MAP (the
   pools' own `csfcube` metrics), and `pipeline.evaluate(..., means=False)`: the per-query
   values from which "all" is made as the official script makes it (the three facets'
   queries, the "all" folds of evaluation_splits.json, the mean of each fold's mean, then the
   mean of the two);
4. `pipeline.search` and `pipeline.evaluate` with BM25 on every facet pool (make eval
   MODEL=bm25), then `pipeline.build_report` (make report CORPUS=csfcube): the report's CSFCube
   row of the imported run, which ranks every candidate of each query's list (lists of
   several lengths), must equal the figures above and stand at one depth with BM25's, with
   its paired tests against BM25 (issue 78: it was split by its longest list per facet,
   "top 238", "top 253", "top 252", without an "all" column or a test).

Writes benchmarks/results/csfcube_specter_import.{md,json}.

Usage: .venv/bin/python benchmarks/csfcube_specter_import.py /path/to/CSFCube
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

import pipeline

log = logging.getLogger("csfcube_specter_import")
FACETS = ("background", "method", "result")
RELEASE_FILES = ("evaluation_splits.json", "queries-release.csv",
                 *(f"test-pid2anns-csfcube-{f}.json" for f in FACETS),
                 *(f"eval_scripts/sample_ranked_pools/test-pid2pool-csfcube-specter-{f}-ranked"
                   ".json" for f in FACETS))
PAPERS = "abstracts-csfcube-preds.jsonl"
PUBLISHED = {"ndcg%20": 53.28, "map_ranked-l2": 34.23}  # SPECTER, facet "all", test (x100)
MODEL = "specter-authors"
OUT = Path(__file__).parent / "results" / "csfcube_specter_import"


def extract(checkout: Path, dest: Path) -> tuple[str, bool]:
    """The release's files into `dest`; (its commit or 'folder', whether the papers file was
    present)."""
    bare = (checkout / "HEAD").is_file() and not (checkout / ".git").exists()
    commit = "folder"
    if bare:
        commit = subprocess.run(["git", f"--git-dir={checkout}", "rev-parse", "HEAD"],
                                check=True, capture_output=True, text=True).stdout.strip()
    present = True
    for name in (*RELEASE_FILES, PAPERS):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if bare:
            done = subprocess.run(["git", f"--git-dir={checkout}", "show", f"HEAD:{name}"],
                                  capture_output=True)
            ok = done.returncode == 0
            if ok:
                target.write_bytes(done.stdout)
        else:
            ok = (checkout / name).is_file()
            if ok:
                target.write_bytes((checkout / name).read_bytes())
        if not ok and name == PAPERS:
            present = False
        elif not ok:
            sys.exit(f"{checkout} has no {name}: is it the CSFCube release?")
    if not present:
        write_placeholder_papers(dest)
    return commit, present


def write_placeholder_papers(release: Path) -> None:
    """A papers file naming every query and candidate paper of the annotations, each with a
    placeholder title and one sentence per facet label (so each facet query has a sentence)."""
    ids = set()
    for facet in FACETS:
        annotations = json.loads((release / f"test-pid2anns-csfcube-{facet}.json").read_text())
        for pid, entry in annotations.items():
            ids.add(pid)
            ids.update(entry["cands"])
    with (release / PAPERS).open("w") as handle:
        for pid in sorted(ids):
            handle.write(json.dumps({
                "paper_id": pid, "title": f"placeholder {pid}",
                "abstract": [f"placeholder {facet} sentence of {pid}." for facet in FACETS],
                "pred_labels": [f"{facet}_label" for facet in FACETS]}) + "\n")
    log.info(f"placeholder texts written for {len(ids)} papers (scoring reads none)")


def cli(data: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root", str(data / "corpora"),
                    "--index-root", str(data / "indexes"), "--runs-root", str(data / "runs"),
                    *args], check=True)


def main(checkout: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        release, data = Path(tmp) / "release", Path(tmp) / "data"
        commit, papers_present = extract(checkout, release)
        cli(data, "import-csfcube", "--corpus", "csfcube", "--src", str(release))
        pools = {p.split("-")[1]: p for p in pipeline.Data(data).pools("csfcube")}
        imports, facets, per_query = {}, {}, {}
        for facet in FACETS:
            ranked = json.loads((release / "eval_scripts" / "sample_ranked_pools" /
                                 f"test-pid2pool-csfcube-specter-{facet}-ranked.json"
                                 ).read_text())
            trec = Path(tmp) / f"specter-{facet}.trec"
            with trec.open("w") as handle:
                for pid, pairs in ranked.items():
                    for rank, (doc, distance) in enumerate(pairs, 1):
                        handle.write(f"{pid}_{facet} Q0 {doc} {rank} {-distance!r} specter\n")
            cli(data, "import-run", "--corpus", "csfcube", "--pool", pools[facet],
                "--run", str(trec), "--model", MODEL)
            manifest = json.loads((data / "runs" / "csfcube" / pools[facet] /
                                   f"{MODEL}.manifest.json").read_text())
            imports[facet] = manifest["counts"]
            means = pipeline.evaluate(data, "csfcube", pools[facet], MODEL, means=True)
            facets[facet] = {m: round(100 * means[m][0], 2) for m in PUBLISHED}
            values = pipeline.evaluate(data, "csfcube", pools[facet], MODEL)
            values = values.filter(values["negatives"] == "all") if "negatives" in \
                values.columns else values
            for row in values.iter_rows(named=True):
                per_query[row["query"]] = {m: row[m] for m in PUBLISHED}
        splits = json.loads((release / "evaluation_splits.json").read_text())["all"]
        everything = {}
        for metric in PUBLISHED:
            fold_means = [sum(per_query[q][metric] for q in splits[fold]) / len(splits[fold])
                          for fold in ("fold1_test", "fold2_test")]
            everything[metric] = round(100 * sum(fold_means) / 2, 2)
        facets["all"] = everything
        report = report_row(pipeline.Data(data))
    return {"release_commit": commit, "papers_file_present": papers_present,
            "published": PUBLISHED, "scores": facets, "imported": imports,
            "equal_to_published": all(everything[m] == PUBLISHED[m] for m in PUBLISHED),
            "report": report}


def report_row(data: pipeline.Data) -> dict:
    """BM25 searched and scored on every facet pool, then the report: its CSFCube rows (model
    -> the cells as shown), the labels of runs of another depth, and the paired tests between
    the imported run and BM25 (pools, metric, the two p cells)."""
    pipeline.search(data, "csfcube", None, "bm25", threads=2)
    pipeline.evaluate(data, "csfcube", None, "bm25")
    report = pipeline.build_report(data, "csfcube")
    table = report.tables["csfcube"]
    rows = {row[0]: [cell.replace("**", "") for cell in row[1:]] for row in table.rows}
    other = report.tables.get("other-depths")
    tests = [line.strip("| ").split(" | ") for line in
             report.section("significance").markdown.splitlines() if line.startswith("| ")]
    pairs = [cells for cells in tests if len(cells) == 8 and {cells[2], cells[3]} == {
        MODEL, "bm25"}]
    shown = rows.get(MODEL, [])
    expected = [f"{a:.2f} / {b:.2f}" for a, b in [tuple(PUBLISHED.values())]]
    return {"header": table.header[1:], "rows": rows,
            "other_depths": [row[0] for row in other.rows] if other else [],
            "tests_against_bm25": [[c[0], c[1], c[6], c[7]] for c in pairs],
            "all_equal_to_published": shown[-1:] == expected}


def write(result: dict) -> None:
    OUT.with_suffix(".json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    rows = ["| | " + " | ".join((*FACETS, "all")) + " | published (all) |",
            "|---|" + "---|" * (len(FACETS) + 2)]
    for metric, name in (("ndcg%20", "NDCG%20"), ("map_ranked-l2", "MAP")):
        rows.append(f"| `{metric}` ({name}) | " + " | ".join(
            f"{result['scores'][f][metric]:.2f}" for f in (*FACETS, "all"))
            + f" | {PUBLISHED[metric]:.2f} |")
    counts = ["| | " + " | ".join(FACETS) + " |", "|---|" + "---|" * len(FACETS)]
    for key in result["imported"][FACETS[0]]:
        counts.append(f"| {key} | " + " | ".join(
            f"{result['imported'][f][key]:,}" for f in FACETS) + " |")
    papers = ("present" if result["papers_file_present"] else
              "absent from this copy: placeholder texts written for every paper the "
              "annotations name (scoring reads none)")
    row = result["report"]
    shown = ["| model | " + " | ".join(row["header"]) + " |",
             "|---|" + "---|" * len(row["header"])]
    shown += [f"| {model} | " + " | ".join(cells) + " |" for model, cells in row["rows"].items()]
    tests = ["| pools | metric | t-test p (Holm) | randomization p (Holm) |", "|---|---|---|---|"]
    tests += ["| " + " | ".join(cells) + " |" for cells in row["tests_against_bm25"]]
    bm25_texts = ("" if result["papers_file_present"] else
                  "\nBM25 searched the placeholder texts here: its figures are no measure of "
                  "BM25 on CSFCube.")
    text = f"""# CSFCube: SPECTER's bundled rankings imported as a run and scored

Written by `benchmarks/csfcube_specter_import.py` from the CSFCube release
(`iesl/CSFCube` at {result['release_commit'][:7]}; the papers file
`{PAPERS}`: {papers}). The collection is imported with `python -m pipeline
import-csfcube` (make import-csfcube), each facet's
`eval_scripts/sample_ranked_pools/test-pid2pool-csfcube-specter-<facet>-ranked.json` is written
as a TREC file (score = -L2 distance) and imported with `python -m pipeline import-run` (make
import-run), and `pipeline.evaluate` scores it with the pools' own `csfcube` metrics: test
split, two folds (the mean of each fold's mean, then the mean of the two); "all" from the
per-query values and the "all" folds of evaluation_splits.json, as the official script makes
it. Values x100. The published figures are SPECTER's on facet "all"
(docs/collections.md, benchmarks/results/csfcube_official.md).

{chr(10).join(rows)}

Equal to the published figures: {'yes' if result['equal_to_published'] else 'NO'}.

What the import counted, per facet (the run's manifest):

{chr(10).join(counts)}

The report (`pipeline.build_report`, make report CORPUS=csfcube) beside BM25 searched on the
same pools (`pipeline.search`; make eval MODEL=bm25): both runs rank every candidate of each
query's list (complete: one depth, whatever each facet's longest list), so the imported run
has its own row, its "all" column and its paired tests against BM25.{bm25_texts}

- runs of another depth: {', '.join(row['other_depths']) or 'none'};
- the row's "all" equals the published figures: {'yes' if row['all_equal_to_published']
                                                  else 'NO'}.

{chr(10).join(shown)}

Its paired tests against BM25 (the significance section, {MODEL} against bm25, per facet
pool and metric):

{chr(10).join(tests)}
"""
    OUT.with_suffix(".md").write_text(text)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if len(sys.argv) != 2:
        sys.exit(__doc__.rsplit("Usage: ", 1)[1])
    outcome = main(Path(sys.argv[1]))
    write(outcome)
    print(json.dumps({"scores": outcome["scores"], "report": outcome["report"]}, sort_keys=True))
