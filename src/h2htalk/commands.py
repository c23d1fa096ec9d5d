"""``@command(...)``: a command that is not a stage (the review desk's, validate-config, score-upstream, rates)
declared at the function that does its work. The ``h2htalk`` command makes its sub-command from the function's
signature and docstring (``h2htalk.cli.commands``):

- the command's help is the docstring's first paragraph; a parameter's is its line ``name: help`` in the
  docstring (continued on lines indented deeper), with its default after it where that is not None, False, True or ();
- ``config`` is given the config sections the command ``reads`` (from ``--config``, validated), and a parameter
  named as a section it reads (``review``) that section; a ``Layout`` is the results tree (``--results``,
  ``--instance-set``, ``--figures``); a parameter an option group of ``options`` makes (``--no-cache``) its value;
- any other is an argument: positional where it is positional-only (before ``/``, and then without a default),
  else the flag of its name (``public_url``: ``--public-url``), required where it has no default; ``bool``
  is a switch (one on by default: ``--no-NAME``); ``int``, ``float`` and paths are converted; a sequence takes one
  or more values (``each``: one per flag, ``--task a --task b``); ``choices``, ``metavar`` and a ``short`` flag are
  declared per parameter;
- a parameter the command line cannot give as declared (no type, a mapping or a ``Literal``, ``*args``, a positional
  ``bool``, a name the ``h2htalk`` command takes itself such as ``log``), or a read key the schema lacks, fails the
  building of the parser, naming the command and the parameter;
- what it returns is printed: a ``str``, or lines (a row of several fields: tab separated); None prints nothing.
  The exit status is 0, or 2 for an ``H2HTalkError`` (a line naming the problem).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from h2htalk.errors import H2HTalkError

# The option groups a command may share with the stages' commands (``cli.options.OPTIONS`` makes each): the engine's,
# the judges' --judge, the bootstrap's, scoring's, the figures' --font, --root (provenance), --upstream-dir (fetch)
OptionGroup = Literal["engine", "rubric_judge", "study_judge", "bootstrap", "scoring", "font", "root", "upstream"]


def unknown_fields(kind: type, given: Iterable[str]) -> str:
    """What is wrong with the keywords ``given`` to the dataclass ``kind`` (a declaration): those none of its fields,
    each with the field it most likely meant (empty: nothing)."""
    names = [field.name for field in fields(kind)]
    return "; ".join(f"{word}: no field of a {kind.__name__}" + "".join(f" (did you mean {near!r}?)" for near in
                     difflib.get_close_matches(word, names, 1)) for word in given if word not in names)  # fmt: skip


def unknown_options(groups: Sequence[str]) -> str:
    """What is wrong with option groups ``groups``: the names that are none of ``OptionGroup`` (empty: nothing)."""
    unknown = ", ".join(repr(group) for group in groups if group not in get_args(OptionGroup))
    return f"no option group {unknown} (there are {', '.join(get_args(OptionGroup))})" if unknown else ""


class CommandError(H2HTalkError):
    """A command declared wrong."""


@dataclass(frozen=True)
class Command:
    """A command, declared at ``run``, the function that does its work."""

    name: str
    run: Callable[..., Any]
    reads: tuple[str, ...] = ()  # the config sections (dotted keys) its settings come from
    options: tuple[OptionGroup, ...] = ()  # option groups it shares with the stages' commands
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)  # parameter -> the values it takes
    metavar: Mapping[str, str] = field(default_factory=dict)  # parameter -> its value's name in the help
    each: Mapping[str, str] = field(default_factory=dict)  # a sequence parameter -> its flag, given once per value
    short: Mapping[str, str] = field(default_factory=dict)  # parameter -> its short flag besides (``-n``)

    @property
    def help(self) -> str:
        """The docstring's first paragraph, as argparse's helps read: lower case first, no closing period."""
        first = " ".join(inspect.cleandoc(self.run.__doc__ or "").split("\n\n")[0].split()).replace("``", "")
        return (first[:1].lower() + first[1:]).removesuffix(".")

    @property
    def parameter_help(self) -> dict[str, str]:
        """Each parameter's help: its docstring line ``name: help`` and the lines indented below it."""
        doc, parameters = inspect.cleandoc(self.run.__doc__ or ""), inspect.signature(self.run).parameters
        described = re.finditer(r"^(\w+): (.*(?:\n .*)*)", doc, re.MULTILINE)
        return {line[1]: " ".join(line[2].split()).replace("``", "") for line in described if line[1] in parameters}

    @property
    def sections(self) -> set[str]:
        """The parameters given a config section: ``config`` (every section read), and each section read."""
        return {"config", *(key.split(".")[0] for key in self.reads)}


def command(name: str, **declared: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the function below as the command ``name`` (the fields of ``Command``)."""

    def declare(function: Callable[..., Any]) -> Callable[..., Any]:
        if wrong := unknown_fields(Command, declared):
            raise CommandError(f"command {name}: {wrong}")
        found = Command(name, function, **declared)
        if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):  # as the stages' commands: table2-pairs
            raise CommandError(f"command {name}: a command's name is lower-case words joined by dashes")
        parameters = inspect.signature(function).parameters
        for named in (*found.choices, *found.metavar, *found.each, *found.short):
            if named not in parameters:
                raise CommandError(f"command {name}: {named}: not a parameter of {function.__qualname__}")
        if wrong := unknown_options(found.options):
            raise CommandError(f"command {name}: options: {wrong}")
        for named, flag in found.short.items():  # argparse's own error would come from every command, unnamed
            if not re.fullmatch(r"-[A-Za-z]", flag):
                raise CommandError(f"command {name}: short: {flag!r} of {named} is no short flag (as '-n')")
        for parameter in parameters.values():  # a positional argument is always given: one with a default is a flag
            if parameter.kind is parameter.POSITIONAL_ONLY and parameter.default is not parameter.empty:
                raise CommandError(f"command {name}: {parameter.name}: positional, with a default (make it a flag)")
        function.command = found  # type: ignore[attr-defined]
        return function

    return declare


def declared_in(module: str, marker: str) -> list[Any]:
    """The functions module ``module`` defines (not those it imports) that a decorator marked with ``marker``
    (``command``, ``stages``), in the order it defines them. A module that fails to load (a declaration built wrong,
    ``Product(shwon=...)``) is an error naming it and its line, as a declaration checked wrong is."""
    try:
        functions = vars(importlib.import_module(module)).values()
    except H2HTalkError:
        raise
    except Exception as exc:
        lines = [f"{frame.filename}:{frame.lineno}" for frame in traceback.extract_tb(exc.__traceback__)]
        at = next((line for line in reversed(lines) if module.replace(".", "/") in line), lines[-1])
        raise H2HTalkError(f"module {module}: {type(exc).__name__}: {exc} (at {at})") from exc
    return [f for f in functions if getattr(f, "__module__", None) == module and hasattr(f, marker)]
