"""One door (issue 59): a command registered by `command_of` IS its API function, its parser
built from the function's signature and the declarations (pipeline/cli/registry.py)."""

from __future__ import annotations

import argparse
import inspect

import pytest

from pipeline import api
from pipeline.cli import registry
from pipeline.cli.main import build_parser, main
from pipeline.cli.variables import FROM_MAKE, OneLineParser
from pipeline.core.errors import OptionError
from pipeline.options import declared
from pipeline.options.checks import choice

MOVED = {"judge": api.judge, "judge-page": api.judge_page, "judge-agreement": api.judge_agreement,
         "import-run": api.import_run, "import-vectors": api.import_vectors,
         "export-beir": api.export_beir, "import-irds": api.import_collection,
         "import-beir": api.import_beir, "import-csfcube": api.import_csfcube,
         "import-mdcr": api.import_mdcr, "export-mdcr": api.export_mdcr,
         "export-mteb": api.export_mteb, "verify": api.verify_data, "search": api.search,
         "embed": api.embed, "synth": api.generate_corpus, "ingest": api.ingest_corpus,
         "prefilter": api.prefilter_corpus, "corpus": api.build_corpus,
         "download": api.download, "pool": api.build_pools,
         "pools-paper": api.build_paper_pools, "retire-pool": api.retire_pool,
         "training-ids": api.training_ids}
# the parameters a registration gives its own option (not a declared one's)
OWN = {"judge": {"models"}, "judge-page": {"models"}, "export-mteb": {"model"},
       "verify": {"deep"}, "search": {"model"}, "embed": {"model"},
       "synth": {"papers", "shards", "repair", "seed", "threads"},
       "ingest": {"raw", "source", "threads"}, "prefilter": {"min_citations"},
       "corpus": {"raw", "source", "threads", "min_citations"},
       "download": {"raw", "retries", "backoff"},
       "pool": {"query_year", "split", "rebuild", "repair"}}
# issue 72: the scoring, index, SLURM and MDCR stages
MOVED |= {"eval": api.evaluate, "collect": api.collect, "report": api.build_report,
          "index": api.index, "submit-embed": api.submit_embed, "after-embed": api.after_embed,
          "mdcr": api.build_mdcr, "mdcr-jaccard": api.mdcr_jaccard,
          "mdcr-scores": api.mdcr_scores, "mdcr-evaluate": api.mdcr_evaluate}
OWN |= {"eval": {"model"}, "index": {"model"}, "submit-embed": {"model", "cpus_per_task"},
        "after-embed": {"model", "cpus_per_task", "command"},
        "mdcr": {"models", "out", "positives", "per_type", "top"},
        "mdcr-jaccard": {"models", "depth"}, "mdcr-scores": {"model"},
        "mdcr-evaluate": {"benchmark", "scores"}}
SHOWN = {"report": {"times"}}  # options of the registration's `show` alone (what it prints)


def test_a_command_of_an_api_function_has_exactly_the_declared_options_of_its_parameters():
    """Each moved command runs its API function, and its options are its parameters (but
    `data`: the global root options), each the declared option naming it among its keywords,
    with that declaration's flag, help, default (its check's reading) and `required`; or the
    argument `from_args` names (verify's path, the command line's own program; '' none: a
    parameter Python alone gives, build_corpus's shards)."""
    top = build_parser()._defaults  # what the command line gives every command
    for name, function in MOVED.items():
        entry = registry.COMMANDS[name]
        assert entry.api is function, name
        parser = entry.add_to(OneLineParser(prog=name))
        actions = {a.dest: a for a in parser._actions
                   if a.dest != "help" and a.help != argparse.SUPPRESS}
        params = [p for p, v in inspect.signature(function).parameters.items()
                  if p != "data" and p not in entry.from_args and v.kind is not v.VAR_KEYWORD]
        spread = registry.spread(name, params)  # a **keywords': the stage's other options
        given = set(entry.from_args.values()) - {""}
        assert sorted(actions) == sorted(params + list(spread) + [*SHOWN.get(name, ())] + [
            dest for dest in given if dest not in top]), name
        assert given <= set(actions) | set(top), name
        for param in (p for p in params if p not in OWN.get(name, ())):
            [var] = [v for v in registry.staged(name) if param == v.keyword] or [
                v for v in declared.VARIABLES if param == v.keyword]  # --corpus
            action = actions[param]
            assert action.option_strings == [var.option], (name, param)
            assert action.help == var.help.replace("%", "%%")
            assert action.required == (name in var.required), (name, param)
            if var.switch:
                assert action.default is False
            elif not action.required:  # none where make passes its own (pool --size)
                text = "" if name in var.no_default or callable(var.default) else var.text()
                assert action.default == (text or None), (name, param)  # as make writes it:
                # argparse reads it by its check (`type`) when the command runs without it


@pytest.fixture
def made_up(monkeypatch):
    """A throwaway declaration of the command `toy`'s parameter `made_up`, and the registry
    left as it was afterwards."""
    var = declared.Variable("MADE_UP", "plain", choice(("plain", "fancy", "odd")),
                            "a made-up option of toy", "search", stages=("toy",))
    monkeypatch.setattr(registry, "VARIABLES", (*registry.VARIABLES, var))
    monkeypatch.setitem(declared.BY_NAME, var.name, var)
    monkeypatch.setitem(registry.COMMANDS, "toy", None)  # removed again afterwards
    return var


def toy(data: api.Data, corpus: str, made_up: str = "plain") -> str:
    """A toy API function: its arguments back, or a refusal naming its option."""
    if made_up == "odd":
        raise OptionError("{MADE_UP=} is refused by the toy", {"MADE_UP": made_up})
    return f"{corpus} {made_up} {data.runs.name}"


def test_a_registered_function_is_called_by_the_command_line_and_refuses_in_its_words(
        made_up, tmp_path, capsys, monkeypatch):
    """The throwaway declaration is all `toy` needs: --help offers it, a value reaches the
    function, the declaration's check refuses a bad one (exit 2), and a refusal from inside the
    function names the option in the command line's words (make's when make ran it)."""
    registry.command_of(toy, "toy", "a toy command", writes=(),
                        show=lambda value, data, values: print(f"shown: {value}"))
    roots = ["--corpora-root", str(tmp_path / "c"), "--index-root", str(tmp_path / "i"),
             "--runs-root", str(tmp_path / "r")]
    with pytest.raises(SystemExit):
        main([*roots, "toy", "--help"])
    assert "--made-up MADE_UP  a made-up option of toy" in capsys.readouterr().out
    assert main([*roots, "toy", "--corpus", "x", "--made-up", "fancy"]) == 0
    assert capsys.readouterr().out == "shown: x fancy r\n"
    with pytest.raises(SystemExit) as refused:
        main([*roots, "toy", "--made-up", "wild"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.endswith("--made-up: 'wild': use one of plain, fancy, odd\n")
    assert main([*roots, "toy", "--made-up", "odd"]) == 2
    assert capsys.readouterr().err == "error: --made-up odd is refused by the toy\n"
    monkeypatch.setenv(FROM_MAKE, "1")
    assert main([*roots, "toy", "--made-up", "odd"]) == 2
    assert capsys.readouterr().err == "error: MADE_UP=odd is refused by the toy\n"


def test_a_parameter_or_a_declaration_without_its_counterpart_is_refused_at_registration(
        made_up, monkeypatch):
    """A parameter no declaration names, or a declaration naming the command whose function
    takes no such parameter (make would pass it on), stops the registration."""
    def bare(data: api.Data, corpus: str, unheard: int = 1) -> None:
        """A parameter without a declaration."""

    with pytest.raises(ValueError, match="parameter unheard of api.bare is no declared option"):
        registry.command_of(bare, "toy", "a toy command", writes=())

    def fewer(data: api.Data, corpus: str) -> None:
        """No parameter for MADE_UP, which names toy among its stages."""

    with pytest.raises(ValueError, match="MADE_UP name it among their stages"):
        registry.command_of(fewer, "toy", "a toy command", writes=())


def test_a_functions_keywords_take_the_commands_other_declared_options(made_up, tmp_path,
                                                                       capsys):
    """A function with **keywords (api.search: the BM25 engine, the backend) takes the declared
    options of its command that no parameter is, each by its keyword: offered by --help,
    checked by its declaration, and handed over."""
    def keywords(data: api.Data, corpus: str, **options: object) -> list:
        """Its keywords back."""
        return sorted(options.items())

    registry.command_of(keywords, "toy", "a toy command", writes=(),
                        show=lambda value, data, values: print(value))
    roots = ["--corpora-root", str(tmp_path / "c"), "--index-root", str(tmp_path / "i"),
             "--runs-root", str(tmp_path / "r")]
    assert main([*roots, "toy", "--corpus", "x", "--made-up", "fancy"]) == 0
    assert capsys.readouterr().out == "[('made_up', 'fancy')]\n"
    assert main([*roots, "toy", "--corpus", "x"]) == 0  # the declared default, as make's
    assert capsys.readouterr().out == "[('made_up', 'plain')]\n"
    with pytest.raises(SystemExit) as refused:
        main([*roots, "toy", "--made-up", "wild"])
    assert refused.value.code == 2


def test_a_commands_own_declared_option_is_in_every_stage_it_names(capsys):
    """The options make passes itself (--pool, --stale-only, the store's), declared on their
    API function's parameters (a Check and a Help), are offered with their help and check by
    that function's command; a bad value is refused by the parameter's check, naming the
    flag."""
    parsers = {name: entry.add_to(OneLineParser(prog=name))
               for name, entry in registry.COMMANDS.items()}
    own = [v for name in registry.COMMANDS for v in registry.staged(name) if not v.variable]
    assert {v.name for v in own} >= {"pool", "stale_only", "batch_size", "dtype", "part_size"}
    for var in own:
        for stage in var.stages:
            [action] = [a for a in parsers[stage]._actions if var.option in a.option_strings]
            assert (action.dest, action.help) == (var.keyword, var.help), (stage, var.name)
    assert parsers["index"].parse_args(["--pool", "a-1", "--pool", "b-2"]).pool == ["a-1", "b-2"]
    assert parsers["eval"].parse_args(["--stale-only"]).stale_only is True
    assert parsers["submit-embed"].parse_args([]).dtype == "float32"
    for stage, argv in (("index", ["--dtype", "float8"]), ("eval", ["--pool", "a-1", "--pool",
                                                                  "../x"])):
        with pytest.raises(SystemExit):
            parsers[stage].parse_args(argv)
        [line] = capsys.readouterr().err.splitlines()  # the check's line, in the flag's words
        assert line.startswith(f"error: {stage}: {argv[-2]}: '{argv[-1]}': "), line


def test_every_command_but_makes_own_is_a_command_of_a_public_api_function():
    """One door finished (issue 72): every registered command of `python -m pipeline` but
    make's own (registry.MAKE_OWN_COMMANDS: they read make's variables, which the library never
    sees) is a `command_of` registration of a public function of pipeline.api (its
    Command.api, a name of that module without a leading underscore), its run that function's
    call; make's own are registered, and are no API function's."""
    call = f"{registry.command_of.__qualname__}.<locals>.call"  # command_of's run of the call
    assert set(registry.MAKE_OWN_COMMANDS) <= set(registry.COMMANDS)
    others = {}
    for name, entry in registry.COMMANDS.items():
        if name in registry.MAKE_OWN_COMMANDS:
            assert entry.api is None, name
            continue
        function = entry.api
        if function is None:
            others[name] = "a hand-written command, no API function's"
        elif (function.__module__, getattr(api, function.__name__, None)) != (
                api.__name__, function) or function.__name__.startswith("_"):
            others[name] = f"{function.__module__}.{function.__name__}: no public name of " \
                           "pipeline.api"
        elif (entry.func.__module__, entry.func.__qualname__) != (registry.__name__, call):
            others[name] = f"api.{function.__name__} given, but a hand-written run"
    assert not others, others
