"""What judging writes and reads back (pipeline/judging/judgments.py): the judgments
artifact refused in one line, with what remakes it, where it cannot be used. The log and the
judging run are tested against a served assessor in test_assessor.py and
test_judging_files.py."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core.checksums import fingerprint
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.judging.assessor import StandinAssessor
from pipeline.judging.judgments import Judged, read_judgments, write_judgments
from pipeline.layout import judgments_manifest


def test_judgments_whose_file_is_no_parquet_are_refused_with_what_remakes_them(tmp_path):
    """A judgments file its manifest vouches for whose bytes are no parquet (written over,
    the manifest rewritten to match) is one line naming it, the parquet reader's words and
    the repair; the same file written whole reads back as written."""
    pairs = pl.DataFrame({"query": [1, 1, 2], "doc": [10, 11, 12]})
    graded = pairs.with_columns(grade=pl.Series([0, 2, 3], dtype=pl.Int8),
                                assessor=pl.lit("standin:0"))
    path = tmp_path / "judged.parquet"
    write_judgments(Judged(graded), path, StandinAssessor(0), pairs)
    assert read_judgments(path).select("query", "doc", "grade").equals(
        graded.select("query", "doc", "grade"))
    path.write_text("query\tdoc\tgrade\n1\t10\t0\n")
    record = judgments_manifest(path)
    made = read_json(record)
    made["outputs"][path.name] = fingerprint(path)
    write_json(made, record)
    with pytest.raises(InputError) as refused:
        read_judgments(path)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{path} cannot be read as parquet (")
    assert line.endswith("; repair: judge again: the log's pairs are not asked again")
