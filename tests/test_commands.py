"""A command that is not a stage is declared at its function (``@command``): its sub-command is made from the
function's signature and docstring, and every command keeps the arguments users' scripts give it."""

from __future__ import annotations

import argparse
import inspect
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h2htalk.cli import build_parser, main
from h2htalk.cli.commands import add, run_command
from h2htalk.cli.options import OVERRIDES
from h2htalk.commands import CommandError, command
from h2htalk.layout import Layout

from .conftest import REPO_ROOT


@command("toy", choices={"colour": ("red", "blue")}, metavar={"files": "FILE"}, each={"tags": "--tag"},
         short={"dry_run": "-n"})  # fmt: skip
def toy(
    files: Sequence[Path],
    /,
    *,
    count: int,
    colour: str = "red",
    tags: Sequence[str] | None = None,
    scale: float | None = None,
    dry_run: bool = False,
) -> list[tuple[str, str]]:
    """Say what the ``toy`` was given.

    More prose, not the help.

    files: the files to name
    count: how many
    colour: its colour
    tags: a tag
    scale: a scale
    dry_run: only say it,
        on two lines
    """
    return [(f"{type(f).__name__} {f}", f"{count} {colour} {tags} {scale} {dry_run}") for f in files]


def parser_of(declared: Any) -> argparse.ArgumentParser:
    sub = argparse.ArgumentParser(prog="h2htalk").add_subparsers(dest="command")
    add(sub, declared.command)
    return sub.choices[declared.command.name]


def test_a_commands_arguments_are_its_parameters_and_what_it_returns_is_printed(capsys):
    parser = parser_of(toy)
    args = parser.parse_args(["a", "b", "--count", "2", "--tag", "x", "--tag", "y", "-n", "--scale", "0.5"])
    assert run_command(toy.command, args) == 0
    assert capsys.readouterr().out.splitlines() == [
        "PosixPath a\t2 red ['x', 'y'] 0.5 True",
        "PosixPath b\t2 red ['x', 'y'] 0.5 True",
    ]
    assert vars(parser.parse_args(["a", "--count", "1"])) | {"handler": None} == {
        "files": [Path("a")], "count": 1, "colour": "red", "tags": None, "scale": None, "dry_run": False,
        "handler": None, "reads": (),
    }  # fmt: skip
    for wrong in (["a"], ["--count", "1"], ["a", "--count", "1", "--colour", "green"], ["a", "--count", "x"]):
        with pytest.raises(SystemExit) as exit:  # argparse's usage error
            parser.parse_args(wrong)
        assert exit.value.code == 2
    text = parser.format_help()
    assert "say what the toy was given" in text and "More prose" not in text
    assert "its colour (default: red)" in text and "only say it, on two lines" in text and "FILE [FILE ...]" in text


@command("where", reads=("review.store",))
def where(review: Mapping[str, Any]) -> str:
    """Where the store is."""
    return review["store"]


def test_a_section_the_command_reads_is_given_from_its_config_files(tmp_path, capsys):
    config = tmp_path / "mine.yaml"
    config.write_text("review:\n  store: elsewhere.sqlite\n", encoding="utf-8")
    parser = parser_of(where)
    assert run_command(where.command, parser.parse_args(["--config", str(config)])) == 0
    assert capsys.readouterr().out == "elsewhere.sqlite\n"
    assert "--review" not in parser.format_help()


def test_a_positional_list_limited_to_some_values_takes_them_and_says_which_value_is_none(capsys):
    @command("rounds", choices={"rounds": (1, 2, 3)})
    def rounds(rounds: Sequence[int], /) -> str:
        """Rounds.

        rounds: the rounds
        """
        return " ".join(map(str, rounds))

    parser = parser_of(rounds)
    assert parser.parse_args(["3", "2"]).rounds == [3, 2]
    for argv, said in (
        (["x"], "invalid int value: 'x'"),
        (["4"], "invalid choice: 4 (choose from 1, 2, 3)"),
        ([], "required: rounds"),
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert said in capsys.readouterr().err, argv


def test_a_command_declared_wrong_is_named_with_its_parameter():
    def unhelped(tasks: Sequence[str]) -> None:
        """No line for its parameter."""

    with pytest.raises(CommandError, match=r"command bad: colour: not a parameter of .*unhelped"):
        command("bad", choices={"colour": ("red",)})(unhelped)
    with pytest.raises(CommandError, match=r"command bad: options: no option group 'scorin' \(there are engine,"):
        command("bad", options=("scorin",))(unhelped)
    with pytest.raises(CommandError, match=r"command bad: read: no field of a Command \(did you mean 'reads'\?\)"):
        command("bad", read=("review.store",))(unhelped)
    sub = build_parser()._subparsers._group_actions[0]  # every command's, as h2htalk makes them
    for name, first in (("table1", r"h2htalk\.tables\.table1\.write_table1"), ("desk-verify", r"h2htalk\.review\.")):
        with pytest.raises(CommandError, match=rf"^command {name}: declared twice: at {first}"):
            add(sub, command(name)(unhelped).command)  # a stage's command, or another @command's
    for flag in ("H", "--head", "-", "-hh"):  # argparse's error would come from every command, naming none
        with pytest.raises(CommandError, match=rf"command bad: short: '{flag}' of tasks is no short flag \(as '-n'\)"):
            command("bad", short={"tasks": flag})(unhelped)
    for name in ("count_answers", "Count", "count--answers", "count-"):  # a stage's command: table2-pairs
        with pytest.raises(CommandError, match=rf"command {name}: a command's name is lower-case words joined by"):
            command(name)(unhelped)

    def defaulted(tasks: Sequence[str] = ("a",), /) -> None:
        """A positional argument the command line may leave out: argparse would take its default as given."""

    with pytest.raises(CommandError, match=r"command bad: tasks: positional, with a default \(make it a flag\)"):
        command("bad")(defaulted)
    with pytest.raises(CommandError, match=r"command quiet: tasks: no help \(a docstring line 'tasks: \.\.\.'\)"):
        parser_of(command("quiet")(unhelped))

    def typed_for_the_checker(results: Unknown) -> None:  # noqa: F821 - a name imported under TYPE_CHECKING alone
        """No type at run time."""

    with pytest.raises(CommandError, match=r"command typed: name 'Unknown' is not defined: its parameters' types"):
        parser_of(command("typed")(typed_for_the_checker))


def test_a_parameter_of_two_types_or_a_sequence_of_sequences_is_refused_and_a_path_is_a_path():
    def two_types(out: str | os.PathLike[str], files: Sequence[str | Path] = ()) -> None:
        """Which one would the command line give?

        out: where
        files: which
        """

    with pytest.raises(CommandError, match=r"command either: out: str \| os.PathLike\[str\] is several types"):
        parser_of(command("either")(two_types))
    two_types.__annotations__["out"] = "os.PathLike[str] | None"
    with pytest.raises(CommandError, match=r"command either: files: str \| pathlib.Path is several types"):
        parser_of(command("either")(two_types))
    two_types.__annotations__["files"] = "Sequence[Sequence[Path]] | None"  # the command line gives one list
    with pytest.raises(CommandError, match=r"command nested: files: .*Sequence\[.*Path\]\] is a sequence of sequences"):
        parser_of(command("nested")(two_types))
    two_types.__annotations__["files"] = "Sequence[Path]"
    given = parser_of(command("paths")(two_types)).parse_args(["--out", "a.txt", "--files", "b", "c"])
    assert (given.out, given.files) == (Path("a.txt"), [Path("b"), Path("c")])


@pytest.mark.parametrize(
    ("annotations", "declared", "error"),
    [
        ({"mode": "dict[str, str]"}, {}, r"mode: dict\[str, str\] is no type the command line gives"),
        ({"mode": Literal["a", "b"]}, {}, r"mode: typing.Literal\['a', 'b'\] is no type the command line gives"),
        ({"first": "bool"}, {}, r"first: <class 'bool'> is no type the command line gives"),
        ({"first": "str"}, {"each": {"first": "--first"}}, r"first: each= is for a sequence, choices= for a value"),
        ({"log": "str"}, {}, r"log: a name the h2htalk command takes itself"),
        ({"mode": None}, {}, r"mode: no type, or \*args or \*\*kwargs"),
        ({}, {"reads": ("review.stor",)}, r"reads 'review\.stor': not a key of the config schema"),
        ({}, {"reads": ("review.mode", "-review.seed")},
         r"reads '-review\.seed': a -key leaves a key out of a section read whole, and no section above it"),
    ],
)  # fmt: skip
def test_a_parameter_the_command_line_cannot_give_as_declared_is_refused_naming_it(annotations, declared, error):
    """A ``dict`` or ``Literal`` would be given the text as typed, a positional ``bool`` always True, ``log`` would
    take the place of the ``--log`` every command has, and an unread key would fail the command when it runs."""

    def toy(first: str, /, mode: str = "a", log: str = "") -> None:
        """Toy.

        first: the first
        mode: the mode
        log: a log
        """

    for name, hint in annotations.items():
        if hint is None:
            del toy.__annotations__[name]
        else:
            toy.__annotations__[name] = hint
    with pytest.raises(CommandError, match=rf"command toy: {error}"):
        parser_of(command("toy", **declared)(toy))


def test_a_parameter_whose_flag_another_part_of_the_command_makes_is_refused_naming_it():
    def toy(results: Layout, figures: str = "") -> None:
        """Toy (``results`` makes --figures too).

        figures: the figures
        """

    def toy_too(figures: str, results: Layout) -> None:
        """Toy.

        figures: the figures
        """

    with pytest.raises(CommandError, match=r"command toy: figures: argument --figures: conflicting option string"):
        parser_of(command("toy")(toy))
    with pytest.raises(CommandError, match=r"command toy: results: argument --figures: conflicting option string"):
        parser_of(command("toy")(toy_too))


def test_args_or_kwargs_are_refused():
    def toy(*names: str) -> None:
        """Toy.

        names: the names
        """

    with pytest.raises(CommandError, match=r"command toy: names: no type, or \*args or \*\*kwargs"):
        parser_of(command("toy")(toy))


def test_every_module_that_declares_a_command_is_one_the_command_line_reads():
    """A module the list leaves out would leave its commands out of ``h2htalk``, and no other test would fail."""
    import ast

    from h2htalk.cli.commands import MODULES

    package = REPO_ROOT / "src" / "h2htalk"
    declaring = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        decorators = [d for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for d in node.decorator_list]
        if any(isinstance(d, ast.Call) and getattr(d.func, "id", None) == "command" for d in decorators):
            declaring.add(".".join(path.relative_to(package.parent).with_suffix("").parts))
    assert declaring == set(MODULES)


# Each command's flags (! where required) and positional arguments, as they were when the commands were hand-wired
KEPT = {
    "desk-load": ("--config --results --instance-set --figures --task", ""),
    "desk-token": ("--config", "raters"),
    "desk-serve": ("--config --host --port --certfile --keyfile --public-url --insecure-http", ""),
    "desk-status": ("--config", ""),
    "desk-export": ("--config --rater! --task! --out!", ""),
    "desk-import": ("--config --task!", "files"),
    "desk-verify": ("--config --head", ""),
    "validate-config": ("", "configfiles"),
    "validate-instances": ("", "files"),
    "score-upstream": (
        "--config --resamples --bootstrap-seed --confidence --tokenizer --cache-dir --no-cache --subtasks"
        " --references! --embedder --out! --items",
        "outputs_dir",
    ),
    "rates": ("--reset", ""),
    "eval": (
        "--base-url! --model! --api-key-env --limit --subtasks --variants --embedder --judge --results --name"
        " --display-name --size-group --config --upstream-dir --concurrency --cores --targets --judge-reading"
        " -n/--dry-run",
        "",
    ),
}


def test_every_command_keeps_its_flags_and_positional_arguments():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, (flags, positional) in KEPT.items():
        actions = [a for a in sub.choices[name]._actions if a.dest != "help"]
        made = ["/".join(a.option_strings) + ("!" if a.required else "") for a in actions if a.option_strings]
        assert (sorted(made), sorted(a.dest for a in actions if not a.option_strings)) == (
            sorted(flags.split()),
            sorted(positional.split()),
        ), name
    serve = sub.choices["desk-serve"].parse_args([])
    assert (serve.host, serve.port, serve.insecure_http) == ("127.0.0.1", 8765, False)
    evaluation = sub.choices["eval"].parse_args(["--base-url", "u", "--model", "m", "--config", "a", "--config", "b"])
    assert (evaluation.size_group, evaluation.configs, evaluation.targets) == ("local", ["a", "b"], ())


def test_rates_and_validate_instances_print_what_their_functions_return(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["rates"]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'h2htalk' / 'llamacpp_rates.json'}: no rates kept\n"
    from h2htalk.instances.sources import write_instances

    demo = tmp_path / "demo.jsonl"
    write_instances("dialogue_emotion", [], str(demo), {"instances": {"limit": 2}})
    assert main(["validate-instances", str(demo), str(tmp_path / "none.jsonl")]) == 2  # each file's line as it goes
    assert capsys.readouterr().out == f"{demo}: 2 valid instances\n"


def test_every_stage_given_the_bootstrap_settings_takes_their_flags():
    from h2htalk.stages.table import STAGES

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    keys = {f"scoring.bootstrap.{key}" for key in ("resamples", "seed", "confidence")}
    for stage in STAGES:
        given = any(p.annotation == "BootstrapSettings" for p in inspect.signature(stage.run).parameters.values())
        if given:  # a job's intervals come from them: its command overrides them as every other such command does
            overridden = sub.choices[stage.command_name].get_default(OVERRIDES) or {}
            assert keys <= set(overridden.values()), stage.name


def test_every_option_group_a_declaration_may_name_makes_flags():
    """The names ``@stage`` and ``@command`` check ``options=`` against are the groups the command line makes."""
    from h2htalk.cli.options import OPTIONS
    from h2htalk.commands import OptionGroup

    assert list(OPTIONS) == list(get_args(OptionGroup))
    for group, add_group in OPTIONS.items():
        parser = argparse.ArgumentParser()
        add_group(parser)
        assert len(parser._actions) > 1, group  # more than --help


KINDS = {  # a parameter's type -> the values it may be given (none starts with "-": argparse reads that as a flag)
    str: st.text(st.characters(categories=("L", "N")), min_size=1, max_size=6),
    int: st.integers(0, 10**6),
    float: st.floats(0, 1e6, allow_nan=False),
    bool: st.booleans(),
    Path: st.text("abc/._中", min_size=1, max_size=8).filter(lambda s: not s.startswith("-")).map(Path),
    Sequence[str]: st.lists(st.text("xyz字", min_size=1, max_size=4), min_size=1, max_size=3),
    Sequence[int]: st.lists(st.integers(0, 99), min_size=1, max_size=3),
}


@st.composite
def signatures(draw: Any) -> tuple[list[inspect.Parameter], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Parameters (at most one positional), the values given on the command line, those left at their default, and
    the values some of them are limited to (``choices``: what is given, the default and one more)."""
    names = draw(st.lists(st.sampled_from(("alpha", "beta_two", "gamma", "delta")), min_size=1, max_size=4,
                          unique=True))  # fmt: skip
    positional = draw(st.sampled_from([None, *names]))
    parameters, given, defaults, choices = [], {}, {}, {}
    for name in sorted(names, key=lambda n: n != positional):
        kind = draw(st.sampled_from([k for k in KINDS if k is not bool or name != positional]))
        value = draw(KINDS[kind])
        default = draw(st.one_of(st.just(inspect.Parameter.empty), KINDS[kind]))
        if name == positional:  # always given
            default = inspect.Parameter.empty
        if kind is bool and default is inspect.Parameter.empty:
            default = False
        how = inspect.Parameter.POSITIONAL_ONLY if name == positional else inspect.Parameter.KEYWORD_ONLY
        parameters.append(inspect.Parameter(name, how, default=default, annotation=kind))
        left_out = default is not inspect.Parameter.empty and draw(st.booleans())
        (defaults if left_out else given)[name] = default if left_out else value
        if kind is not bool and draw(st.booleans()):
            listed = [v for v in (value, default, draw(KINDS[kind])) if v is not inspect.Parameter.empty]
            choices[name] = tuple(dict.fromkeys(item for v in listed for item in (v if isinstance(v, list) else [v])))
    return parameters, given, defaults, choices


def argv_of(parameters: list[inspect.Parameter], given: dict[str, Any]) -> list[str]:
    argv = []
    for p in parameters:
        if p.name not in given:
            continue
        value, flag = given[p.name], f"--{p.name.replace('_', '-')}"
        words = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        if p.annotation is bool:
            words = [] if value == p.default else [flag if value else f"--no-{p.name.replace('_', '-')}"]
        elif p.kind is not p.POSITIONAL_ONLY:
            words = [flag, *words]
        argv += words
    return argv


@settings(max_examples=200, deadline=None)
@given(signatures())
def test_every_signature_the_builder_takes_reads_back_what_the_command_line_says(signature):
    """Any mix of types, a positional argument or flags, given or left at their default, limited to some values or
    not: the function is called with what the command line says (a sequence as a list, a path as a Path, a switch on
    by default turned off)."""
    parameters, given, defaults, choices = signature

    def run(*args: Any, **kwargs: Any) -> None: ...

    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    run.__doc__ = "A command.\n\n" + "".join(f"{p.name}: its {p.name}\n" for p in parameters)
    called = vars(parser_of(command("any", choices=choices)(run)).parse_args(argv_of(parameters, given)))
    for name, value in {**given, **defaults}.items():
        expected = list(value) if isinstance(value, (list, tuple)) and name in given else value
        assert called[name] == expected, (name, argv_of(parameters, given))


def test_the_top_level_help_says_what_the_command_is_in_a_whole_sentence(capsys):
    from h2htalk.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    said = " ".join(capsys.readouterr().out.split("\n\n")[1].split())
    assert said.endswith("."), said  # not the package docstring's first line, cut mid-sentence
    assert "without Snakemake" in said


def test_every_command_the_code_and_the_docs_name_is_one():
    """A message or a page that says to run ``h2htalk NAME`` names a command there is (a message said ``h2htalk
    prefetch``, which is none: the commands are prefetch-model and prefetch-embedder)."""
    commands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    said = re.compile(r"""[`("']h2htalk\s+([a-z][a-z0-9-]*)""")  # two spaces or a line break too
    source, docs = REPO_ROOT / "src", REPO_ROOT / "docs"
    files = [*source.rglob("*.py"), *source.rglob("*.yaml"), *docs.glob("*.md"), REPO_ROOT / "README.md",
             REPO_ROOT / "Snakefile", *(REPO_ROOT / "workflow").rglob("*.smk")]  # fmt: skip
    named = {(path.relative_to(REPO_ROOT).as_posix(), name) for path in files
             for name in said.findall(path.read_text(encoding="utf-8"))}  # fmt: skip
    example = {("docs/extending.md", "count")}  # a command the guide to declaring one makes up
    assert {(path, name) for path, name in named if name not in commands} == example
