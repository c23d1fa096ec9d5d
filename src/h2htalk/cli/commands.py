"""Every command that is not a stage, made from its declaration (``@command`` at the function that does its work;
how a declaration becomes a command: ``h2htalk.commands``), collected from the modules that declare them."""

from __future__ import annotations

import argparse
import inspect
import os
import types
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from h2htalk.cli.options import OPTIONS, add_command, add_results, load_config
from h2htalk.commands import Command, CommandError, declared_in
from h2htalk.config import wrong_reads
from h2htalk.layout import Layout

# The modules that declare commands, in the order ``h2htalk --help`` lists them; importing them must stay cheap (every
# job builds the parser): their heavy libraries are imported inside the functions.
MODULES = ("h2htalk.config", "h2htalk.instance_schema", "h2htalk.scoring.upstream", "h2htalk.plan.rates",
           "h2htalk.review.desk", "h2htalk.evaluation")  # fmt: skip
TAKEN = ("verbose", "log", "command", "handler", "reads")  # what the h2htalk command and every sub-command set


def register(sub: Any) -> None:
    for command in (f.command for module in MODULES for f in declared_in(module, "command")):
        add(sub, command)


def add(sub: Any, command: Command) -> None:
    """The sub-command of ``command``: its settings' ``--config``, its option groups, an argument per parameter."""
    parser = add_command(sub, command.name, partial(run_command, command), command.help, command.reads)
    for group in command.options:
        OPTIONS[group](parser)
    made = {action.dest for action in parser._actions}  # by --config and the option groups
    try:
        hints, helps = get_type_hints(command.run), command.parameter_help
    except NameError as exc:  # a type imported for the type checker alone
        raise CommandError(f"command {command.name}: {exc}: its parameters' types are read when it runs") from None
    if any(wrong := wrong_reads(command.reads, f"command {command.name}")):
        raise CommandError(f"command {command.name}: {': '.join(wrong)}")
    for name, parameter in inspect.signature(command.run).parameters.items():
        if name not in hints or name in TAKEN or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            why = "a name the h2htalk command takes itself" if name in TAKEN else "no type, or *args or **kwargs"
            raise CommandError(f"command {command.name}: {name}: {why}: give each argument a name and a type")
        try:
            if hints[name] is Layout:
                add_results(parser)
            elif name not in command.sections and name not in made:
                if name not in helps:
                    raise CommandError(f"command {command.name}: {name}: no help (a docstring line '{name}: ...')")
                flags, spec = argument(command, parameter, hints[name], helps[name])
                parser.add_argument(*flags, **spec)
        except argparse.ArgumentError as exc:  # one flag made twice: --figures of the results tree and a parameter
            raise CommandError(f"command {command.name}: {name}: {exc}") from None


def argument(command: Command, parameter: inspect.Parameter, hint: Any, help: str) -> tuple[list[str], dict[str, Any]]:
    """The name or flags of ``parameter``'s argument, and its settings (``add_argument``'s keywords)."""
    name, default = parameter.name, parameter.default
    kind, many = _kind(command, name, hint)
    positional = parameter.kind is parameter.POSITIONAL_ONLY
    given = kind in (str, int, float, bool, Path) or get_origin(kind) is os.PathLike
    if not given or (kind is bool and positional):
        raise CommandError(f"command {command.name}: {name}: {hint} is no type the command line gives (str, int, float,"
                           " Path, a flag's bool, or a sequence of one)")  # fmt: skip
    if (name in command.each and not many) or (name in command.choices and kind is bool):
        raise CommandError(f"command {command.name}: {name}: each= is for a sequence, choices= for a value")
    # (by identity: 0 and 1 are defaults to show; a switch that is on says so itself)
    shown = not any(default is unsaid for unsaid in (None, False, True, parameter.empty)) and default != ()
    spec: dict[str, Any] = {"help": f"{help} (default: {default})" if shown else help}
    if kind is bool:  # a switch; one that is on by default is turned off by --no-NAME
        spec["action"] = argparse.BooleanOptionalAction if default is True else "store_true"
    elif kind in (int, float):
        spec["type"] = kind
    elif kind is Path or get_origin(kind) is os.PathLike:
        spec["type"] = Path
    if name in command.choices:
        spec["choices"] = list(command.choices[name])
    if name in command.metavar:
        spec["metavar"] = command.metavar[name]
    if name in command.each:
        return [command.each[name]], {**spec, "action": "append", "dest": name}
    if many:
        spec["nargs"] = "+"
    if positional:  # given always (``command`` refuses one with a default)
        return [name], spec
    flags = [*filter(None, [command.short.get(name)]), f"--{name.replace('_', '-')}"]  # argparse's dest: the name
    return flags, {**spec, "required": True} if default is parameter.empty else {**spec, "default": default}


def _kind(command: Command, name: str, hint: Any) -> tuple[Any, bool]:
    """The type of a parameter's values, and whether it takes several (``Sequence[Path] | None``: Path, True); a
    union of two types besides None is refused, as the command line gives one (``str | Path`` would take text)."""
    if get_origin(hint) in (Union, types.UnionType):
        members = [member for member in get_args(hint) if member is not type(None)]
        if len(members) > 1:
            raise CommandError(f"command {command.name}: {name}: {hint} is several types; give it one (or one | None)")
        hint = members[0]
    if get_origin(hint) in (list, tuple, Sequence):
        kind, nested = _kind(command, name, get_args(hint)[0])
        if nested:
            raise CommandError(f"command {command.name}: {name}: {hint} is a sequence of sequences; give it one")
        return kind, True
    return hint, False


def run_command(command: Command, args: argparse.Namespace) -> int:
    """Call the command's function with its arguments, its settings and its results tree; print what it returns."""
    settings = load_config(args) if command.reads else {}
    hints, parameters = get_type_hints(command.run), inspect.signature(command.run).parameters
    values = {name: args.results if hints[name] is Layout else settings if name == "config"
              else settings[name] if name in command.sections else getattr(args, name)
              for name in parameters}  # fmt: skip
    before = [values.pop(name) for name, parameter in parameters.items() if parameter.kind is parameter.POSITIONAL_ONLY]
    shown = command.run(*before, **values)
    for line in [shown] if isinstance(shown, str) else shown or ():
        print("\t".join(line) if isinstance(line, tuple) else line, flush=True)
    return 0
