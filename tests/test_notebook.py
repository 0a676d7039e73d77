"""notebooks/results.ipynb runs top to bottom (nbclient, a real kernel) on the results.parquet
of real runs on the small corpus, and draws its figures."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from pipeline.evaluation.evaluate import collect_results, eval_run
from pipeline.layout import Place
from pipeline.models import get_model
from pipeline.retrieval.search import search_pool
from tests.conftest import POOL_SIZES, pool_of

ROOT = Path(__file__).resolve().parents[1]


def test_results_notebook_runs(corpus_dir, tmp_path):
    runs = tmp_path / "runs"
    place = Place(corpus_dir, tmp_path / "indexes", runs)
    for size in POOL_SIZES:
        for model in ("bm25", "random"):
            search_pool(place, pool_of(size), get_model(model),
                   threads=1)
            eval_run(place, pool_of(size), model)
    assert collect_results(corpus_dir.parent, tmp_path / "indexes", runs).height > 0
    (tmp_path / "notebooks").mkdir()
    # the notebook reads ../corpora, ../runs: the corpora its results were collected from
    (tmp_path / "corpora").symlink_to(corpus_dir.parent)
    shutil.copy(ROOT / "notebooks" / "results.ipynb", tmp_path / "notebooks")
    notebook = nbformat.read(tmp_path / "notebooks" / "results.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path / "notebooks")}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the MAP-vs-size plot
    assert any("bm25" in str(o.get("data", {})) for o in outputs)  # the summary table
