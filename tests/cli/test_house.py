"""The house commands that are API functions (issue 72): `models` is api.list_models, `sweep`
api.sweep (`warm`, api.warm: tests/evaluation/test_warm.py, tests/evaluation/test_kernels.py)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import pipeline
from pipeline.cli.main import main
from pipeline.core.atomic import HOST
from pipeline.models import REGISTRY, family


def test_models_prints_the_entries_list_models_returns(capsys):
    assert pipeline.list_models() == list(REGISTRY.values())
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [re.split(r" {2,}", line) for line in lines]
    assert [row[0] for row in rows] == list(REGISTRY)
    assert [row[2] for row in rows] == [family(entry) for entry in REGISTRY.values()]
    assert rows[0] == ["bm25", "bm25", "lexical", "-", REGISTRY["bm25"].similarity]
    assert {"dense", "multi-vector", "lexical"} <= {row[2] for row in rows}


def test_sweep_removes_the_temporaries_of_stopped_processes_only(tmp_path, caplog):
    """A dead process's temporaries under each root are removed and returned (one inside a
    removed folder not named); a living process's are kept."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    data = pipeline.Data(tmp_path)
    gone = []
    for folder in (data.corpora / "c" / "pools" / "p", data.indexes / "c", data.runs):
        folder.mkdir(parents=True)
        (folder / f".x.{HOST}-{dead}.ab.tmp").write_text("x")
        inside = folder / f".y.{HOST}-{dead}.cd.tmp"
        inside.mkdir()
        (inside / f".z.{HOST}-{dead}.ef.tmp").write_text("z")
        gone += [folder / f".x.{HOST}-{dead}.ab.tmp", inside]
    alive = data.runs / f".w.{HOST}-{os.getpid()}.gh.tmp"
    alive.write_text("w")
    with caplog.at_level(logging.INFO, logger="pipeline"):
        assert pipeline.sweep(data) == sorted(gone)
    assert "[sweep] 6 temporaries of stopped processes removed" in caplog.messages
    assert not any(path.exists() for path in gone) and alive.exists()
    assert pipeline.sweep(tmp_path) == []
