"""`make training-ids` and the lists it writes (issue 39.9): an existing OUT is refused, never
replaced; a paper-ids record or a list entry that is not a CorpusID is one line naming its file
and line (exit 2), never a traceback."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.core.errors import InputError
from pipeline.glossary import parse_metrics
from pipeline.pools.exclusions import read_list

SHAS = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(3)]


def paper_ids(folder: Path, records: list[object]) -> Path:
    """A shard of S2AG's paper-ids dataset holding `records`, one JSON value a line."""
    folder.mkdir()
    with gzip.open(folder / "paper-ids-0.jsonl.gz", "wt") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)
    return folder


def training_ids(src: Path, ids: Path, out: Path, capsys) -> tuple[int, str]:
    """The command line's exit status and its error output."""
    status = main(["training-ids", "--src", str(src), "--paper-ids", str(ids), "--out",
                   str(out)])
    return status, capsys.readouterr().err


@pytest.fixture()
def specter(tmp_path) -> Path:
    src = tmp_path / "train.txt"
    src.write_text("".join(f"{sha}\n" for sha in SHAS))
    return src


def test_an_existing_out_is_refused_never_replaced(tmp_path, specter, capsys):
    ids = paper_ids(tmp_path / "paper-ids", [{"sha": sha, "corpusid": 10 + i, "primary": True}
                                             for i, sha in enumerate(SHAS)])
    mine = tmp_path / "mine.txt"  # a list of the user's
    mine.write_text("7\n8\n")
    for out, said in ((mine, "already exists:"), (specter, "already exists (it is SRC)")):
        before = out.read_bytes()
        status, err = training_ids(specter, ids, out, capsys)
        assert status == 2 and said in err and err.count("\n") == 1, err
        assert out.read_bytes() == before
    status, err = training_ids(specter, ids, tmp_path / "new.txt", capsys)
    assert status == 0, err
    assert (tmp_path / "new.txt").read_text() == "10\n11\n12\n"


@pytest.mark.parametrize("corpusid", ["abc", "²", "-3", 1.5, True, [1], 2**63, "9" * 5000])
def test_a_paper_ids_record_that_is_no_corpus_id_is_one_line(tmp_path, specter, capsys,
                                                             corpusid):
    ids = paper_ids(tmp_path / "paper-ids", [
        {"sha": SHAS[0], "corpusid": 10}, ["not", "a", "record"], {"sha": ["x"]},
        {"sha": SHAS[1], "corpusid": corpusid}])
    status, err = training_ids(specter, ids, tmp_path / "out.txt", capsys)
    assert status == 2 and err.count("\n") == 1, err
    assert f"{ids / 'paper-ids-0.jsonl.gz'}, line 4: corpusid" in err
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize("entry", ["²", "1²", "٣"])
def test_a_list_entry_in_other_digits_is_one_line(tmp_path, entry):
    """str.isdigit() takes '²' (int() then fails) and '٣': a CorpusID is ASCII digits."""
    listed = tmp_path / "exclude.txt"
    listed.write_text(f"12\n{entry}\n")
    with pytest.raises(InputError, match=rf"exclude.txt, line 2: '{entry}' is not a CorpusID"):
        read_list(listed)
    as_json = tmp_path / "exclude.json"
    as_json.write_text(json.dumps([12, entry]))
    with pytest.raises(InputError, match=r"exclude.json, item 2: .* is not a CorpusID"):
        read_list(as_json)


@pytest.mark.parametrize("metric", ["map@²", "ndcg-l²", "map_ranked-l²"])
def test_a_metric_cut_in_other_digits_is_refused_in_words(metric):
    with pytest.raises(InputError, match="unknown metric"):
        parse_metrics(metric)


@pytest.mark.parametrize("line", [1, 3])
def test_every_line_of_a_list_is_read_by_one_rule(tmp_path, capsys, line):
    """A SHA in capitals is the paper's SHA wherever it stands (the first line was taken for
    a header and its paper silently left out of the list); a mistyped one (39 hex digits) is
    refused naming its line, the first as the third."""
    ids = paper_ids(tmp_path / "paper-ids", [{"sha": sha, "corpusid": 10 + i}
                                             for i, sha in enumerate(SHAS)])
    capitals, short = list(SHAS), list(SHAS)
    capitals[line - 1] = SHAS[line - 1].upper()
    short[line - 1] = SHAS[line - 1][:39]
    src = tmp_path / "train.txt"
    src.write_text("".join(f"{sha}\n" for sha in capitals))
    status, err = training_ids(src, ids, tmp_path / "out.txt", capsys)
    assert status == 0, err
    assert (tmp_path / "out.txt").read_text() == "10\n11\n12\n"
    src.write_text("".join(f"{sha}\n" for sha in short))
    status, err = training_ids(src, ids, tmp_path / "short.txt", capsys)
    assert status == 2 and err.count("\n") == 1, err
    assert f"train.txt, line {line}: '{SHAS[line - 1][:39]}' is not an S2 paper SHA" in err
    assert not (tmp_path / "short.txt").exists()


def test_a_header_line_of_triples_is_skipped_in_the_log(tmp_path, capsys, caplog):
    ids = paper_ids(tmp_path / "paper-ids", [{"sha": sha, "corpusid": 10 + i}
                                             for i, sha in enumerate(SHAS)])
    src = tmp_path / "triples.csv"
    src.write_text("query_paper_id,positive_id,negative_id\n" + ",".join(SHAS) + "\n")
    with caplog.at_level("INFO"):
        status, err = training_ids(src, ids, tmp_path / "out.txt", capsys)
    assert status == 0, err
    assert (tmp_path / "out.txt").read_text() == "10\n11\n12\n"
    assert "line 1 read as a header, not ids: 'query_paper_id,positive_id" in caplog.text
