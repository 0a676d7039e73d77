"""The API's one validation layer (pipeline/options/arguments.py): every public function refuses a
wrong type or value of each argument with one InputError naming it, before anything is read
or written; and a current run or evaluation is kept as it is, as the command line keeps it."""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
from pathlib import Path
from typing import Annotated, Any

import pytest

import pipeline
from pipeline.core.annotations import Check
from pipeline.core.errors import InputError
from pipeline.options.arguments import hints, validated
from pipeline.options.declared import declaration
from pipeline.pools.build import PoolSpec
from tests.conftest import POOL_SEED, pool_of

POOL = pool_of(800)


def snapshot(*folders: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under `folders`: (inode, size, mtime in ns), so a file rewritten shows."""
    files = {}
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in names:
                path = Path(root) / name
                stat = path.stat()
                files[str(path)] = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    return files


@pytest.fixture(scope="module")
def data(corpus_dir, tmp_path_factory) -> pipeline.Data:
    """The fixture corpus with a BM25 run of one pool, evaluated, through the API."""
    root = tmp_path_factory.mktemp("arguments")
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes",
                         runs=root / "runs")
    pipeline.search(data, corpus_dir.name, POOL, "bm25", threads=1)
    pipeline.evaluate(data, corpus_dir.name, POOL, "bm25")
    return data


def wrong_calls(data: pipeline.Data, corpus: str) -> dict[str, tuple]:
    """A wrong argument of each public function -> (the call, what the one line must say)."""
    d, c, p = data, corpus, POOL
    return {
        "Data folder=3": (lambda: pipeline.Data(3), "folder=3: give a path"),
        "Data runs=''": (lambda: pipeline.Data(corpora="a", indexes="b", runs=""),
                         "runs: an empty path"),
        "build_corpus corpus=None": (lambda: pipeline.build_corpus(d, None), "corpus=None"),
        "build_corpus synthetic=-2": (lambda: pipeline.build_corpus(d, "new", synthetic=-2),
                                      "synthetic=-2: malformed SIZE"),
        "build_corpus shards=0": (lambda: pipeline.build_corpus(d, "new", synthetic=100,
                                                                shards=0), "shards=0"),
        "submit_embed shards=0": (lambda: pipeline.submit_embed(d, c, p, "bm25", shards=0),
                                  "shards=0: 0 is too small: use 1 to 1,000"),
        "build_corpus seed='x'": (lambda: pipeline.build_corpus(d, "new", synthetic=100,
                                                                seed="x"),
                                  "seed='x': give a whole number"),
        "build_corpus strict=1": (lambda: pipeline.build_corpus(d, "new", strict=1),
                                  "strict=1: give True or False"),
        "build_corpus citations": (lambda: pipeline.build_corpus(d, "new", citations="all"),
                                   "citations='all'.*use one of inbound"),
        "build_corpus threads=0": (lambda: pipeline.build_corpus(d, "new", threads=0),
                                   "threads=0: 0 is too small: use 1 or more$"),
        "build_pool queries='20'": (lambda: pipeline.build_pool(d, c, size=500, queries="20"),
                                    "queries='20': give a whole number \\(an int\\), not a str"),
        "build_pool size='big'": (lambda: pipeline.build_pool(d, c, size="big"), "size='big'"),
        "build_pool split": (lambda: pipeline.build_pool(d, c, size=500, split="train"),
                             "split='train': .*use .*test"),
        "build_pool unknown field": (lambda: pipeline.build_pool(d, c, size=500, querys=5),
                                     "unknown option querys for build_pool: did you mean "
                                     "queries\\?"),
        "build_pool spec": (lambda: pipeline.build_pool(d, c, "all-10k"), "spec='all-10k'"),
        "search k=0": (lambda: pipeline.search(d, c, p, "bm25", k=0), "k=0: 0 is too small"),
        "search k=-3": (lambda: pipeline.search(d, c, p, "bm25", k=-3), "k=-3"),
        "search k=2.5": (lambda: pipeline.search(d, c, p, "bm25", k=2.5), "k=2.5"),
        "search seed='x'": (lambda: pipeline.search(d, c, p, "bm25", seed="x"), "seed='x'"),
        "search model=None": (lambda: pipeline.search(d, c, p, None),
                              "model=None: give a model's name"),
        "search model unknown": (lambda: pipeline.search(d, c, p, "bm52"),
                                 "model='bm52': unknown MODEL"),
        "search query_variant": (lambda: pipeline.search(d, c, p, "bm25", query_variant="tilte"),
                           "query_variant='tilte': 'tilte': use one of full"),
        "search pool path": (lambda: pipeline.search(d, c, "../x", "bm25"), "pool='../x'"),
        "search corpus path": (lambda: pipeline.search(d, "/etc", p, "bm25"), "corpus='/etc'"),
        "search misspelt option": (lambda: pipeline.search(d, c, p, "bm25", bm25_engin="lucene"),
                                   "unknown option bm25_engin for bm25: did you mean "
                                   "bm25_engine\\?"),
        # a declared search option (BACKEND) is taken as make search takes it, and checked
        "search option of another kind": (lambda: pipeline.search(d, c, p, "bm25",
                                                                  backend="cuda"),
                                          "backend='cuda': 'cuda': use one of auto"),
        "search undeclared option": (lambda: pipeline.search(d, c, p, "bm25", pooling="cls"),
                                     "unknown option pooling for bm25"),
        "search bad engine": (lambda: pipeline.search(d, c, p, "bm25", bm25_engine="solr"),
                              "bm25_engine='solr': 'solr': use one of"),
        "search missing model": (lambda: pipeline.search(d, c, p), "search: missing model"),
        "evaluate models=[]": (lambda: pipeline.evaluate(d, c, p, []), "model=\\[\\]"),
        "evaluate metrics=[]": (lambda: pipeline.evaluate(d, c, p, "bm25", metrics=[]),
                                "metrics=\\[\\]"),
        "evaluate metrics unknown": (lambda: pipeline.evaluate(d, c, p, "bm25", metrics="mapp"),
                                     "metrics='mapp'"),
        "evaluate means='yes'": (lambda: pipeline.evaluate(d, c, p, "bm25", means="yes"),
                                 "means='yes': give True or False"),
        "build_report seed='0'": (lambda: pipeline.build_report(d, c, seed="0"),
                                  "seed='0': give a whole number"),
        "build_report collect=None": (lambda: pipeline.build_report(d, c, collect=None),
                                      "collect=None"),
        "build_report training_sets": (lambda: pipeline.build_report(d, c, training_sets=["x"]),
                                       "training_sets=\\['x'\\]"),
        "build_report unknown": (lambda: pipeline.build_report(d, c, seeds=1),
                                 "unknown option seeds for build_report: did you mean seed\\?"),
        "score run=5": (lambda: pipeline.score("q.txt", 5, "map"),
                        "score: run=5: give a TREC run file's path"),
        "score qrels=None": (lambda: pipeline.score(None, "r.trec", "map"), "qrels=None"),
        "score per_query=1": (lambda: pipeline.score("q.txt", "r.trec", "map", per_query=1),
                              "per_query=1: give True or False"),
        "score metrics unknown": (lambda: pipeline.score("q.txt", "r.trec", "precison@10"),
                                  "did you mean 'precision@10'"),
        "compare one run": (lambda: pipeline.compare("q.txt", {"a": "r.trec"}, "map"),
                            "two or more runs"),
        "variance results=3": (lambda: pipeline.variance(3), "variance: results=3: give"),
        "variance corpus=''": (lambda: pipeline.variance("r.parquet", corpus=""),
                               "corpus=''"),
        "topic_set_size power=1.5": (lambda: pipeline.topic_set_size("r.parquet", power=1.5),
                                     "power=1.5: give a power between 0 and 1"),
        "topic_set_size deltas=[0]": (lambda: pipeline.topic_set_size("r", deltas=[0]),
                                      "deltas=\\[0\\]: give a non-empty list"),
        "topic_set_size draws=[0]": (lambda: pipeline.topic_set_size("r", draws=[0]),
                                     "draws=\\[0\\]: give a non-empty list"),
        "compare test": (lambda: pipeline.compare("q", {"a": "r", "b": "s"}, "map", test="u"),
                         "unknown significance test 'u'"),
        "compare alpha": (lambda: pipeline.compare("q", {"a": "r", "b": "s"}, "map", alpha=0),
                          "alpha=0: give a significance level"),
        # a registered model written otherwise: the run would be bm25's under another name
        "search model='Bm25'": (lambda: pipeline.search(d, c, p, "Bm25"),
                                "'Bm25': write it as registered, 'bm25'"),
        "evaluate model=['Bm25']": (lambda: pipeline.evaluate(d, c, p, ["Bm25"]),
                                    "'Bm25': write it as registered, 'bm25'"),
        "evaluate model='BM25~title'": (lambda: pipeline.evaluate(d, c, None, "BM25~title"),
                                        "'BM25': write it as registered, 'bm25'"),
        "verify_data folder": (lambda: pipeline.verify_data(d, 3), "folders=3: give a path"),
        "verify_data deep": (lambda: pipeline.verify_data(d, deep="no"), "deep='no'"),
    }


def test_every_wrong_argument_is_one_line_and_writes_nothing(data, corpus_dir):
    before = snapshot(corpus_dir.parent, data.indexes, data.runs)
    for what, (call, says) in wrong_calls(data, corpus_dir.name).items():
        with pytest.raises(InputError, match=says) as refused:
            call()
        assert "\n" not in str(refused.value), what
    assert snapshot(corpus_dir.parent, data.indexes, data.runs) == before


def test_every_public_argument_has_its_rule():
    """A new public function's arguments are each checked: by a declaration in
    pipeline/options/declared.py, or by its annotation (a flag, a DataFrame; not `Any`, which
    takes anything); an argument with neither is refused at the call."""
    for name in pipeline.__all__:
        value = getattr(pipeline, name)
        if not inspect.isfunction(value):
            continue
        said = hints(value)
        for param in inspect.signature(value).parameters.values():
            if param.kind is not param.VAR_KEYWORD:
                assert declaration(name, param.name) is not None or said.get(
                    param.name, Any) is not Any, (name, param.name)
    assert declaration("search", "made_up_argument") is None

    def made_up(data, made_up_argument=1) -> int:  # no annotation, no declaration
        return made_up_argument

    with pytest.raises(InputError, match="unknown option made_up_argument for made_up"):
        validated(made_up)(".", made_up_argument=2)


def test_build_pool_takes_each_pool_spec_field_checked(data, corpus_dir):
    """build_pool's keywords are PoolSpec's fields, each checked by its declaration (a new
    field without one is refused here); `exclusion` is the pool's own (its list's digest)."""
    for field in dataclasses.fields(PoolSpec):
        with pytest.raises(InputError) as refused:
            pipeline.build_pool(data, corpus_dir.name, **{field.name: object()})
        said = ("unknown option exclusion for build_pool" if field.name == "exclusion"
                else f"build_pool: {field.name}=<object object at .*>: give ")
        assert re.match(said, refused.value.message), refused.value.message


def test_a_current_run_and_evaluation_are_kept(data, corpus_dir):
    """A second search and evaluate rewrite nothing and give the same; a k=0 search leaves the
    good run as it was (the command line refuses it too)."""
    corpus = corpus_dir.name
    first = pipeline.evaluate(data, corpus, POOL, "bm25", means=True)
    before = snapshot(data.indexes, data.runs)
    assert pipeline.search(data, corpus, POOL, "bm25", threads=1) == "bm25"
    assert pipeline.evaluate(data, corpus, POOL, "bm25", means=True).equals(first)
    with pytest.raises(InputError, match="k=0"):
        pipeline.search(data, corpus, POOL, "bm25", k=0)
    assert snapshot(data.indexes, data.runs) == before


def test_other_metrics_never_change_the_saved_evaluation(data, corpus_dir):
    """An exploratory evaluate (save=False, issue 72's one policy) with other metrics returns
    them and writes nothing: the report's tables keep the pool's own metrics."""
    corpus = corpus_dir.name
    report = pipeline.build_report(data, corpus, POOL_SEED).tables["dataset"].header
    before = snapshot(data.indexes, data.runs)
    other = pipeline.evaluate(data, corpus, POOL, "bm25",
                              metrics=["precision@10", "mrr@10", "ndcg@10"], means=True,
                              save=False)
    assert other.columns == ["model", "precision@10", "mrr@10", "ndcg@10"]
    # ir_measures' and trec_eval's names of the same measures: the same, named as ranx names them
    assert pipeline.evaluate(data, corpus, POOL, "bm25", metrics="P@10 RR@10 ndcg_cut_10",
                             means=True, save=False).equals(other)
    assert snapshot(data.indexes, data.runs) == before
    assert pipeline.build_report(data, corpus, POOL_SEED).tables["dataset"].header == report
    assert "P@10" not in " ".join(report)


def test_a_value_of_the_right_type_is_not_told_it_is_of_another(tmp_path):
    """A dict of one run given to compare is a dict: the line says what it must hold, not
    "not a dict"."""
    with pytest.raises(InputError) as refused:
        pipeline.compare(tmp_path / "qrels", {"a": tmp_path / "a.trec"}, "map")
    assert "give a dict of two or more runs" in refused.value.message
    assert "not a dict" not in refused.value.message


class BytesPath(os.PathLike):
    """An os.PathLike whose path is bytes (os.fspath gives them): the pipeline's paths are str."""

    def __fspath__(self) -> bytes:
        return b"/tmp/bytes-path"


# a value each required argument that takes no path is given, so that the path's is the
# first refusal (the arguments are checked in their order)
GOOD = {"corpus": "c", "pool": POOL, "model": "bm25", "models": "bm25", "metrics": "map",
        "run": "r.trec", "qrels": "q.txt", "runs": {"a": "a.trec", "b": "b.trec"},
        "results": "results.parquet", "a": "a", "b": "b", "judge": "standin:0",
        "dataset": "beir/scifact", "name": "mine"}


def path_arguments() -> list[tuple[str, str]]:
    """(function, argument) for every argument of a public function (and Data) whose
    annotation takes a path, read from the functions."""
    from pipeline.options.arguments import takes

    found = []
    for name in pipeline.__all__:
        function = getattr(pipeline, name)
        if name == "Data" or inspect.isfunction(function):
            init = function.__init__ if name == "Data" else function
            params, said = inspect.signature(init).parameters, hints(init)
            found += [(name, key) for key, hint in said.items() if takes(hint, Path("."))
                      and params[key].kind is not params[key].VAR_KEYWORD]
    return found


@pytest.mark.parametrize("function, argument", path_arguments(),
                         ids=lambda value: str(value))
def test_every_path_argument_refuses_a_path_of_bytes_in_one_line(function, argument, tmp_path):
    """A PathLike whose os.fspath is bytes was an AttributeError traceback (issue 88), where a
    bytes path was refused: the one check of a path (layout.check_path) refuses both, at
    every argument that takes a path."""
    called = getattr(pipeline, function)
    params = inspect.signature(called).parameters
    required = [p for p, v in params.items() if v.default is v.empty and p != "self"
                and v.kind is not v.VAR_KEYWORD]
    args = [BytesPath() if p == argument else GOOD.get(p, str(tmp_path)) for p in required
            if params[p].kind is not params[p].KEYWORD_ONLY]
    kwargs = {p: GOOD.get(p, str(tmp_path)) for p in required
              if params[p].kind is params[p].KEYWORD_ONLY}
    if argument not in required or params[argument].kind is params[argument].KEYWORD_ONLY:
        kwargs[argument] = BytesPath()
    with pytest.raises(InputError) as refused:
        called(*args, **kwargs)
    line = str(refused.value)
    assert line.startswith(f"{function}: {argument}: a path of bytes (b'/tmp/bytes-path'): "
                           "give it as a str"), line
    assert "\n" not in line
    assert list(tmp_path.iterdir()) == []


def test_the_paths_a_dict_holds_are_checked_as_paths(tmp_path):
    """compare's runs and build_report's training sets are dicts whose values are paths."""
    with pytest.raises(InputError, match="^compare: runs: a path of bytes"):
        pipeline.compare("q.txt", {"a": "a.trec", "b": BytesPath()}, "map")
    with pytest.raises(InputError, match="^build_report: training_sets: a path of bytes"):
        pipeline.build_report(tmp_path, "c", training_sets={"m": BytesPath()})
    assert list(tmp_path.iterdir()) == []


def test_a_refusal_names_the_type_given_and_quotes_a_long_value_bounded(tmp_path):
    """`save=np.bool_(False)` was refused as "not a bool", and `model=['x y'] * 200000` in a
    line of 1,400,139 characters (issue 88)."""
    import numpy as np

    with pytest.raises(InputError) as refused:
        pipeline.evaluate(tmp_path, "c", POOL, "bm25", save=np.bool_(False))
    assert refused.value.message == ("evaluate: save=np.False_: give True or False, not a "
                                     "numpy.bool")
    with pytest.raises(InputError) as refused:
        pipeline.evaluate(tmp_path, "c", POOL, ["x y"] * 200_000)
    line = refused.value.message
    assert line.startswith("evaluate: model=['x y', 'x y', ") and len(line) < 400, line
    assert "...] (200,000 items): 'x y': a model name is letters A-Z or a-z" in line
    assert list(tmp_path.iterdir()) == []


TAKEN: list[object] = []


def taking(value: object) -> object:
    """A check that keeps what it was given."""
    TAKEN.append(value)
    return value


def typed_door(data: str, *, depth: Annotated[int, Check(taking)] = 1,
               folder: Annotated[str | os.PathLike, Check(taking)] = ".",
               sets: Annotated[dict[str, str], Check(taking)] | None = None,
               replace: bool = False) -> None:
    """A public function's door, made here: each rule on its own parameter."""


def test_a_check_takes_the_value_as_the_api_is_given_it():
    """The API hands each check its typed value, never a text made of it: a number, a path, a
    dict; a switch's check (make's REPLACE) takes True and False as 1 and 0, an out-of-range
    number is refused by the number itself."""
    TAKEN.clear()
    door = validated(typed_door)
    door("d", depth=7, folder=Path("runs"), sets={"specter": "a.txt"}, replace=True)
    assert [7, Path("runs"), {"specter": "a.txt"}] == TAKEN
    assert [type(value) for value in TAKEN] == [int, type(Path("runs")), dict]
    from pipeline.options.checks import depth, flag

    assert (flag(True), flag(False), flag("1")) == ("1", "0", "1")
    assert depth(10_000) == 10_000
    with pytest.raises(InputError, match="10001 is too large"):
        depth(10_001)
