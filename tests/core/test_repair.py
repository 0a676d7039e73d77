"""A repair is a value (issue 30.3): the library names the make target and the variables that
pick the artifact; the command a user types is made in one place, with the variables that
locate the data they gave (DATA=..., or each root), so it never acts on the checkout's own."""

from __future__ import annotations

import os
import pickle
import shlex
from pathlib import Path

from pipeline.core.errors import InputError
from pipeline.core.repair import PIPELINE, Repair, Where
from pipeline.roots import CHECKOUT, where


def test_a_repair_is_shown_with_the_variables_that_locate_the_data(tmp_path):
    repair = Repair("eval", "demo", "bm25", variables=(("QUERY_VARIANT", "title"),))
    assert repair.command() == "make eval CORPUS=demo MODEL=bm25 QUERY_VARIANT=title"
    scratch = where(tmp_path / "corpora", tmp_path / "indexes", tmp_path / "runs")
    assert scratch.variables == (("DATA", str(tmp_path)),)
    assert repair.command(scratch) == (f"make eval CORPUS=demo MODEL=bm25 QUERY_VARIANT=title "
                                       f"DATA={tmp_path}")
    noted = Repair("pools", "c", note="rebuilds all-1k-r0 from its recorded parameters")
    assert noted.command(scratch) == (f"make pools CORPUS=c DATA={tmp_path} (rebuilds all-1k-r0 "
                                      "from its recorded parameters)")


def test_the_checkout_data_folder_needs_no_variable_and_roots_apart_each_need_one(tmp_path):
    here = where(CHECKOUT / "corpora", CHECKOUT / "indexes", CHECKOUT / "runs")
    assert here.variables == ()
    assert Repair("embed", "c", "minilm").command(here) == "make embed CORPUS=c MODEL=minilm"
    relative = Path(os.path.relpath(tmp_path / "data"))  # as --corpora-root was given
    apart = where(relative / "corpora", tmp_path / "idx", tmp_path / "data" / "runs")
    assert apart.variables == (("CORPORA_DIR", str(tmp_path / "data" / "corpora")),
                               ("INDEX_DIR", str(tmp_path / "idx")),
                               ("RUNS_DIR", str(tmp_path / "data" / "runs")))


def test_a_pipeline_command_gets_the_roots_as_options_and_values_are_quoted(tmp_path):
    place = where(tmp_path / "corpora", tmp_path / "indexes", tmp_path / "runs",
                  program="mdcr-pipeline")
    synth = Repair("synth", "c", variables=(("--repair", ""),), program=PIPELINE)
    assert synth.command(place) == (f"mdcr-pipeline --corpora-root {tmp_path}/corpora "
                                    f"--index-root {tmp_path}/indexes --runs-root "
                                    f"{tmp_path}/runs synth --corpus c --repair")
    odd = Repair("import-beir", "b", variables=(("SRC", "/data/my beir"), ("REPLACE", "1")))
    words = shlex.split(odd.command(Where((("DATA", "/scratch/x"),))))
    assert words == ["make", "import-beir", "CORPUS=b", "SRC=/data/my beir", "REPLACE=1",
                     "DATA=/scratch/x"]
    assert Repair("", note="download it again").command(place) == "download it again"


def test_an_input_error_carries_its_repair_as_a_value():
    repair = Repair("index", "c", "bm25")
    exc = InputError("/x/part-1.arrow: bytes differ", repair)
    assert exc.message == "/x/part-1.arrow: bytes differ" and exc.repair is repair
    assert str(exc) == "/x/part-1.arrow: bytes differ; repair: make index CORPUS=c MODEL=bm25"
    back = pickle.loads(pickle.dumps(exc))  # from a worker process
    assert type(back) is InputError and back.repair == repair and back.message == exc.message
    assert str(InputError("no repair")) == "no repair"
