"""The options below the command line (pipeline/options): the library and its API check their
arguments without importing pipeline.cli, with the checks make and the command line use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_api_checks_its_arguments_without_the_command_line(tmp_path):
    """`import pipeline`, a checked call refused and a Data made load no module of
    pipeline.cli: the API's checks are the library's own (a library user's program never
    loads the command line)."""
    code = (
        "import sys, pipeline\n"
        "from pipeline.core.errors import InputError\n"
        f"data = pipeline.Data({str(tmp_path)!r})\n"
        "try:\n"
        "    pipeline.search(data, 'c', 'p', 'bm25', bm25_engine='solr')\n"
        "except InputError as exc:\n"
        "    print(exc)\n"
        "print(sorted(m for m in sys.modules if m.startswith('pipeline.cli')))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    refusal, loaded = done.stdout.splitlines()
    assert "bm25_engine='solr'" in refusal and "lucene, arrays" in refusal
    assert loaded == "[]"
