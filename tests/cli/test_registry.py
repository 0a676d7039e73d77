"""One door (issue 59): a command registered by `command_of` IS its API function, its parser
built from the function's signature and the declarations (pipeline/cli/registry.py)."""

from __future__ import annotations

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
         "embed": api.embed}
# the parameters a registration gives its own option (not a declared one's)
OWN = {"judge": {"models"}, "judge-page": {"models"}, "export-mteb": {"model"},
       "verify": {"deep"}, "search": {"model"}, "embed": {"model"}}


def test_a_command_of_an_api_function_has_exactly_the_declared_options_of_its_parameters():
    """Each moved command runs its API function, and its options are its parameters (but
    `data`: the global root options), each the declared option naming it among its keywords,
    with that declaration's flag, help, default (its check's reading) and `required`; or the
    argument `from_args` names (verify's path, the command line's own program)."""
    top = build_parser()._defaults  # what the command line gives every command
    for name, function in MOVED.items():
        entry = registry.COMMANDS[name]
        assert entry.api is function, name
        parser = entry.add_to(OneLineParser(prog=name))
        actions = {a.dest: a for a in parser._actions if a.dest != "help"}
        params = [p for p, v in inspect.signature(function).parameters.items()
                  if p != "data" and p not in entry.from_args and v.kind is not v.VAR_KEYWORD]
        spread = registry.spread(name, params)  # a **keywords': the stage's other options
        assert sorted(actions) == sorted(params + list(spread) + [
            dest for dest in entry.from_args.values() if dest not in top]), name
        assert set(entry.from_args.values()) <= set(actions) | set(top), name
        for param in (p for p in params if p not in OWN.get(name, ())):
            [var] = [v for v in registry.staged(name) if param in v.keywords] or [
                v for v in declared.VARIABLES if param in v.keywords]  # --corpus
            action = actions[param]
            assert action.option_strings == [var.option], (name, param)
            assert action.help == var.help.replace("%", "%%")
            assert action.required == (name in var.required), (name, param)
            if var.switch:
                assert action.default is False
            elif not action.required:
                text = var.default
                assert action.default == (var.check(text) if text else None), (name, param)


@pytest.fixture
def made_up(monkeypatch):
    """A throwaway declaration of the command `toy`'s parameter `made_up`, and the registry
    left as it was afterwards."""
    var = declared.Variable("MADE_UP", "plain", choice(("plain", "fancy", "odd")),
                            "a made-up option of toy", "search", stages=("toy",),
                            keywords=("made_up",))
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
                        show=lambda value, args: print(f"shown: {value}"))
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
                        show=lambda value, args: print(value))
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
    """The options make passes itself (keyword() with stages: --pool, --stale-only, the
    store's) are declared once and offered, with their help and check, by each command their
    declaration names, whether or not it is an API function's; a bad value is refused by
    the declaration's check, naming the flag."""
    parsers = {name: entry.add_to(OneLineParser(prog=name))
               for name, entry in registry.COMMANDS.items()}
    own = [v for v in declared.KEYWORD_ONLY if v.stages]
    assert {v.name for v in own} >= {"pool", "stale_only", "batch_size", "dtype", "part_size"}
    for var in own:
        for stage in var.stages:
            [action] = [a for a in parsers[stage]._actions if var.option in a.option_strings]
            assert (action.dest, action.help) == (var.dest, var.help), (stage, var.name)
    assert parsers["index"].parse_args(["--pool", "a-1", "--pool", "b-2"]).pool == ["a-1", "b-2"]
    assert parsers["eval"].parse_args(["--stale-only"]).stale_only is True
    assert parsers["submit-embed"].parse_args([]).dtype == "float32"
    for stage, argv in (("index", ["--dtype", "float8"]), ("eval", ["--pool", "a-1", "--pool",
                                                                  "../x"])):
        with pytest.raises(SystemExit):
            parsers[stage].parse_args(argv)
        [line] = capsys.readouterr().err.splitlines()  # the check's line, in the flag's words
        assert line.startswith(f"error: {stage}: {argv[-2]}: '{argv[-1]}': "), line
