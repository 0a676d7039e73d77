"""Ctrl-C during a command (the hostile trial of issue 69, D6: a 35-line KeyboardInterrupt
traceback after `make judge` was stopped): one line, and a shell's exit status for it."""

from __future__ import annotations

import pytest

import pipeline.verify
from pipeline.cli.main import INTERRUPTED, main


def test_ctrl_c_is_one_line_and_exit_status_130(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline.verify, "verify", interrupted)
    for kind in ("corpora", "indexes", "runs"):
        (tmp_path / kind).mkdir()
    code = main(["--corpora-root", str(tmp_path / "corpora"), "--index-root",
                 str(tmp_path / "indexes"), "--runs-root", str(tmp_path / "runs"), "verify"])
    err = capsys.readouterr().err
    assert code == INTERRUPTED == 130
    assert err.count("\n") == 1 and err.startswith("error: stopped by Ctrl-C"), err
    assert "Traceback" not in err


def test_any_other_exception_is_not_taken_for_ctrl_c(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(pipeline.verify, "verify", broken)
    for kind in ("corpora", "indexes", "runs"):
        (tmp_path / kind).mkdir()
    with pytest.raises(RuntimeError, match="a bug"):
        main(["--corpora-root", str(tmp_path / "corpora"), "--index-root",
              str(tmp_path / "indexes"), "--runs-root", str(tmp_path / "runs"), "verify"])
