"""Load the workflow configuration and validate it against the JSON schema before anything runs."""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import yaml

from h2htalk.cells import RunCells
from h2htalk.commands import command
from h2htalk.errors import ConfigError, H2HTalkError
from h2htalk.io import parse_yaml, write_text_atomic
from h2htalk.llm.engines import engine_of, registry_schema, require_environment
from h2htalk.prefetch import embedder_downloads, pinned_embedder, pinned_model, read_records
from h2htalk.settings import JUDGE_SECTION_NAMES, JudgeMode
from h2htalk.subtasks import SUBTASK_KEYS, SUBTASKS

if TYPE_CHECKING:
    from h2htalk.layout import Layout

SCHEMA_FILE = "config.schema.yaml"
REGISTRY_SCHEMA_FILE = "models.schema.yaml"


@functools.cache
def _schema_file(name: str) -> dict[str, Any]:
    return parse_yaml(resources.files("h2htalk.schemas").joinpath(name).read_text(encoding="utf-8"))


def load_schema(name: str = SCHEMA_FILE) -> dict[str, Any]:
    """A schema from ``h2htalk/schemas``; the config schema gets its subtask parts from the definitions, the
    registry schema its engines from the engines registered now."""
    schema = copy.deepcopy(_schema_file(name))  # read once a process; completed on every call
    if name == REGISTRY_SCHEMA_FILE:
        return registry_schema(schema)
    if name == SCHEMA_FILE:
        schema["$defs"]["subtask_key"]["enum"] = list(SUBTASK_KEYS)
        schema["properties"]["subtasks"]["default"] = list(SUBTASK_KEYS)
        limits = schema["properties"]["generation"]["properties"]["max_new_tokens"]
        limits["properties"] = {s.key: {"type": "integer", "minimum": 1, "default": s.max_new_tokens} for s in SUBTASKS}
        weights = schema["properties"]["tables"]["properties"]["overall_weights"]
        weights["properties"] = {
            s.key: {"type": "number", "exclusiveMinimum": 0, "default": s.released} for s in SUBTASKS
        }
    return schema


def _validator_class(schema: dict[str, Any]) -> type:
    """The validator of ``schema``'s draft that fills in ``default`` values of missing properties while it validates,
    and takes only an integer as one: the draft's own check takes 2.0, which would reach the code as a float."""
    return _filling_strict(jsonschema.validators.validator_for(schema))


@functools.cache  # one class per draft: the validation and its messages' type checks share it
def _filling_strict(base: type[jsonschema.protocols.Validator]) -> type:
    validate_properties = base.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # type: ignore[no-untyped-def]
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    def is_integer(checker, value):  # type: ignore[no-untyped-def]
        return isinstance(value, int) and not isinstance(value, bool)

    types = base.TYPE_CHECKER.redefine("integer", is_integer)
    return jsonschema.validators.extend(base, {"properties": set_defaults}, type_checker=types)


def _key_path(path: Iterator[Any] | Any) -> str:
    parts = [str(p) if not isinstance(p, int) else f"[{p}]" for p in path]
    text = ".".join(parts).replace(".[", "[")
    return text or "<top level>"


def _describe(error: jsonschema.ValidationError, schema: dict[str, Any], quoted: str) -> str:
    """``error`` in words, naming its key; ``quoted``: how a value of the wrong type that is text reading as the
    right one came to be text."""
    where = _key_path(error.absolute_path)
    if error.validator in ("oneOf", "anyOf") and error.context:  # what each allowed form says of it
        return f"key {where!r}: {error.instance!r} is none of what it may be: " + "; ".join(
            sub.message for sub in error.context
        )
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unexpected = sorted(set(error.instance) - set(allowed))
        parts = []
        for key in unexpected:
            full = key if where == "<top level>" else f"{where}.{key}"
            hint = difflib.get_close_matches(key, allowed, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            parts.append(f"unknown key {full!r}{suggestion}; allowed here: {', '.join(allowed)}")
        return "; ".join(parts)
    condition = _asked_by(error, schema)
    asked = f" (where {condition})" if condition else ""
    if error.validator == "required":
        return f"{where}: {error.message}{asked}"
    return f"key {where!r}: {error.message}{asked}{_as_text(error, schema, quoted)}"


def _as_text(error: jsonschema.ValidationError, schema: dict[str, Any], quoted: str) -> str:
    """Where a value of the wrong type is text that reads as the right one (by the validator's types: '2.0' is no
    integer): how it came to be text (``quoted``)."""
    if error.validator != "type" or not isinstance(error.instance, str):
        return ""
    try:
        read = yaml.safe_load(error.instance)
    except yaml.YAMLError:
        return ""
    wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    types = _validator_class(schema).TYPE_CHECKER
    return f" (text that reads as one: {quoted})" if any(types.is_type(read, kind) for kind in wanted) else ""


def _asked_by(error: jsonschema.ValidationError, schema: dict[str, Any]) -> str:
    """Where ``error`` comes from an ``if``/``then`` of ``schema`` (a key another key's value asks for): that value,
    in words (``rubric_judge.sample_per_cell is 'auto'``); else nothing."""
    path = list(error.schema_path)
    if "then" not in path:
        return ""
    try:
        clause = functools.reduce(lambda node, part: node[part], path[: path.index("then")], schema)["if"]
        below = path[path.index("then") + 1 :].count("properties")  # how deep under the clause's object the key is
        section = list(error.absolute_path)[: len(error.absolute_path) - below]
        asked = [
            f"{_key_path([*section, k])} is {c['const']!r}" for k, c in clause["properties"].items() if "const" in c
        ]
    except (KeyError, TypeError, IndexError):  # a clause this does not read (through a $ref, or without properties)
        return ""
    return " and ".join(asked)


def validate_config(config: Mapping[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return a validated copy of ``config`` with defaults filled in, or raise ``ConfigError``.

    Every problem is reported at once, each naming its key. Model names are checked against the registry when
    the configuration states its models (a study configuration); a partial one, such as the sections a
    workflow rule passes to a command, is checked by the command when it looks its model up.
    """
    checked = copy.deepcopy(dict(config))
    problems = _checked(checked, schema if schema is not None else load_schema(), CONFIG_TEXT)
    if not problems:
        problems = _cross_checks(checked, registry_names="models" in config)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(f"invalid configuration:\n{lines}")
    return checked


# How a config value came to be text that reads as the value it should be; a registry's only from its file
CONFIG_TEXT = ("quoted in a file, or inside a mapping or list given to Snakemake's --config, which passes it as text;"
               " write it unquoted in an overlay file")  # fmt: skip
REGISTRY_TEXT = "write it unquoted"


def _checked(instance: Any, schema: dict[str, Any], quoted: str) -> list[str]:
    """Validate ``instance`` in place, filling in schema defaults; the problems found, each naming its key
    (``quoted``: how a wrong value of text came to be text)."""
    validator = _validator_class(schema)(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return [_describe(e, schema, quoted) for e in errors]


Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def registry_files(config: Mapping[str, Any]) -> list[str]:
    """The registry's files: ``model_registry`` (the tracked one) and the ``model_registry_overlays`` over it."""
    return [config["model_registry"], *config["model_registry_overlays"]]


def registry_name(config: Mapping[str, Any]) -> str:
    """How messages name the registry: its file, with its overlays after a +."""
    return " + ".join(map(str, registry_files(config)))


def load_registry(paths: Paths) -> dict[str, dict[str, Any]]:
    """Read and validate the model registry: one file, or a file and its overlays (later files overlay earlier
    ones: a new name adds an entry, an entry of a name already there merges over it key by key, as config overlays
    do, except that one naming another ``engine`` keeps only what describes the model). The merged registry is
    validated against the registry schema, registry-wide defaults (the schema's) are filled in, and every entry gets
    its registry name as ``name``."""
    files = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    stamps = tuple((str(f), *_stamp(f)) for f in files)  # read again only when a file changed
    return copy.deepcopy(_registry(stamps))


def _stamp(path: str | os.PathLike[str]) -> tuple[int, int]:
    try:
        status = os.stat(path)
    except OSError:
        return (-1, -1)  # missing: reading it reports that
    return (status.st_mtime_ns, status.st_size)


@functools.cache
def describes_the_model() -> tuple[str, ...]:
    """The keys of a registry entry that say what the model is (the schema marks them ``x-describes-model``), which
    an overlay that runs it with another engine keeps."""
    keys = load_schema(REGISTRY_SCHEMA_FILE)["additionalProperties"]["properties"]
    return tuple(key for key, schema in keys.items() if schema.get("x-describes-model"))


@functools.lru_cache(maxsize=8)
def _registry(stamps: tuple[tuple[str, int, int], ...]) -> dict[str, dict[str, Any]]:
    files = [stamp[0] for stamp in stamps]
    merged: dict[str, Any] = {}
    defined: dict[str, list[str]] = {}  # entry -> the files that define or change it
    for path in files:
        raw = _read_yaml(path, "model registry")
        if raw is None and merged:  # an empty overlay adds nothing
            continue
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: a model registry is a mapping of names to entries")
        for name, entry in raw.items():
            defined.setdefault(str(name), []).append(str(path))
            before = merged.get(name)
            engine = before.get("engine") if isinstance(before, dict) else None
            if engine and isinstance(entry, dict) and entry.get("engine", engine) != engine:
                # another engine: how the model ran before (its weights, GPUs, the engine's keys) is not merged over
                merged[name] = {key: value for key, value in before.items() if key in describes_the_model()}
        deep_update(merged, raw)
    problems = _checked(merged, load_schema(REGISTRY_SCHEMA_FILE), REGISTRY_TEXT)
    if problems:
        if len(files) > 1:  # say which files an entry with a problem comes from
            problems = [_with_files(p, defined) for p in problems]
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(f"{' + '.join(map(str, files))}: invalid model registry:\n{lines}")
    return {name: {**entry, "name": name} for name, entry in merged.items()}


def _with_files(problem: str, defined: Mapping[str, list[str]]) -> str:
    """A registry problem ("key 'my-model.api': ...") with the files its entry comes from."""
    for name in sorted(defined, key=len, reverse=True):
        if problem.startswith((f"key '{name}.", f"key '{name}'", f"{name}:", f"{name}.")):
            return f"{problem} (entry {name!r}: {', '.join(defined[name])})"
    return problem


def runnable_problem(spec: dict[str, Any]) -> str | None:
    """Why a registry entry cannot be run as configured, or None."""
    return engine_of(spec).runnable_problem(spec)


def models_in_use(config: dict[str, Any]) -> list[str]:
    """The models a run of the validated ``config`` calls (registry names): the models under test and the studies',
    the judges the run has work for (``RunCells.ladder_judges``: a role's own and cheap judge, the panel's), and
    the reconstruction models when the instances are reconstructed."""
    run = RunCells(config)
    names = [*run.models, *run.study_models, *run.ladder_judges]
    if config["instances"]["source"] == "reconstructed":
        names += run.reconstruction_models
    return list(dict.fromkeys(names))


def check_environment(config: dict[str, Any], names: Iterable[str] | None = None) -> None:
    """Fail, before anything starts, when the environment lacks what models need (an API key): every problem
    at once. ``names``: the models to check (registry names; default: every model ``config`` uses)."""
    registry = load_registry(registry_files(config))
    wanted = models_in_use(config) if names is None else names
    require_environment(registry[name] for name in wanted)


# The keys that name files of one's own (filled-in copies of the run's review files among them)
NAMED_FILES = ("paper.table2", "paper.table3", "studies.safety_scenarios", "studies.instruction_following",
               "studies.human_ratings", "review.imports", "instances.review_imports")  # fmt: skip
FILLED_IN = ("review.imports", "instances.review_imports")


def check_named_files(config: Mapping[str, Any], results: str = "results") -> None:
    """Fail, naming each key, where a file the validated ``config`` names is not there (the run would stop at the
    first job that reads it), or where a filled-in review file or the review store is in the ``results`` tree, which
    the run remakes."""
    named = []
    for key in NAMED_FILES:
        section, name = key.split(".")
        value = config[section][name]
        named += [(key, value)] if isinstance(value, str) else [(f"{key}[{i}]", v) for i, v in enumerate(value or ())]
    if config["instances"]["source"] == "file":
        named += [(f"instances.files.{s}", config["instances"]["files"][s]) for s in config["subtasks"]]
    problems, tree = [], Path(results).resolve()
    for key, path in named:
        if not os.path.isfile(path):
            problems.append(f"key {key!r}: {path}: no such file")
        elif key.startswith(FILLED_IN) and Path(path).resolve().is_relative_to(tree):
            problems.append(f"key {key!r}: {path} is in the results tree, which a run remakes: keep a copy outside")
    if Path(store := config["review"]["store"]).resolve().is_relative_to(tree):
        problems.append(f"key 'review.store': {store} is in the results tree, which a run remakes: people's ratings"
                        " belong outside it")  # fmt: skip
    if problems:
        raise ConfigError("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


@command("validate-config", metavar={"configfiles": "FILE"})
def validate_files(configfiles: Sequence[str], /) -> str:
    """Check config files against the schema, that the files they name are there, and that the environment holds the
    API keys of the models they use.

    configfiles: later files overlay earlier ones
    """
    config = load_config(configfiles)
    check_named_files(config)
    check_environment(config)
    return f"{' + '.join(configfiles)}: valid"


def registry_entry(config: Mapping[str, Any], name: str, results: Layout | None = None) -> dict[str, Any]:
    """A runnable registry entry, or an error naming the model and what is missing; with ``results``, at the
    commit its prefetch record (in the results tree) names, and this process then works offline."""
    registry = load_registry(registry_files(config))
    if name not in registry:
        raise ConfigError(f"model {name!r} is not in the registry {registry_name(config)}")
    spec = registry[name]
    if problem := runnable_problem(spec):
        raise ConfigError(problem)
    return pinned_entry(spec, results)


def pinned_entry(spec: dict[str, Any], results: Layout | None) -> dict[str, Any]:
    """Registry entry ``spec`` at the commit its prefetch record in ``results`` names, where its engine downloads
    weights (a record left from another engine, before an overlay moved the model to an API, pins nothing)."""
    if results is None or not engine_of(spec).downloads(spec):
        return spec
    record = read_records([results.path("prefetched_model", model=spec["name"])])
    return pinned_model(spec, record[("models", spec["name"])])


def embedder_settings(config: Mapping[str, Any], name: str, prefetched: Sequence[str] = ()) -> dict[str, Any]:
    """An embedder definition; with its prefetch record (``prefetched``), at the commit the record names (then
    offline)."""
    if name not in config["embedders"]:
        defined = ", ".join(config["embedders"])
        raise ConfigError(f"embedder {name!r} is not defined under 'embedders' (defined: {defined})")
    settings = config["embedders"][name]
    if not prefetched or not embedder_downloads(settings):
        return settings
    return pinned_embedder(settings, read_records(list(prefetched))[("embedders", name)])


def _cross_checks(config: dict[str, Any], registry_names: bool) -> list[str]:
    """Rules a JSON schema cannot state: names that must refer to entries defined elsewhere."""
    problems = []
    if registry_names:
        try:
            registry = load_registry(registry_files(config))
        except ConfigError as exc:
            return [str(exc)]
        where = registry_name(config)
        named = [
            (f"{mode.section}.{key}", getattr(mode, key))
            for mode in (JudgeMode.from_config(config, section) for section in JUDGE_SECTION_NAMES)
            for key in ("model", *(("cheap_model",) if mode.cascade else ()))
        ]
        panel = config.get("judge_reliability", {}).get("panel", [])
        named += [(f"judge_reliability.panel[{i}]", n) for i, n in enumerate(panel)]
        reconstruct = config.get("instances", {}).get("reconstruct", {})
        named.append(("instances.reconstruct.generator", reconstruct.get("generator")))
        named += [(f"instances.reconstruct.voters[{i}]", n) for i, n in enumerate(reconstruct.get("voters", []))]
        studies = config.get("studies", {}).get("models") or []
        named += [(f"studies.models[{i}]", n) for i, n in enumerate(studies)]
        for key, name in named:
            if name and name not in registry:
                problems.append(f"key {key!r}: {name!r} is not in {where}")
            elif name and engine_of(registry[name]).answers_without_model:  # it answers from the instances alone
                problems.append(f"key {key!r}: {name!r} is a baseline: it cannot judge, answer a study or reconstruct")
            elif name and (problem := runnable_problem(registry[name])) is not None:
                problems.append(f"key {key!r}: {problem}")
        for index, name in enumerate(config.get("baselines", [])):
            if name not in registry or not engine_of(registry[name]).answers_without_model:
                problems.append(f"key 'baselines[{index}]': {name!r} is not a baseline in {where}")
        if not config["models"] and not config.get("baselines"):
            problems.append("keys 'models' and 'baselines': both empty, nothing answers the benchmark")
        shown: dict[str, set[str]] = {}  # Table 2's row names
        for name in (n for n in [*config["models"], *config.get("baselines", [])] if n in registry):
            shown.setdefault(registry[name]["display_name"], set()).add(name)
        for display, names in shown.items():
            if len(names) > 1:
                problems.append(f"keys 'models', 'baselines': {', '.join(sorted(names))} are all shown as {display!r}")
        for index, name in enumerate(config["models"]):
            if name not in registry:
                close = difflib.get_close_matches(name, list(registry), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(f"key 'models[{index}]': {name!r} is not in {where}{hint}")
            elif engine_of(registry[name]).answers_without_model:  # its answers would be made by two stages
                problems.append(f"key 'models[{index}]': {name!r} is a baseline: list it under 'baselines'")
            elif (problem := runnable_problem(registry[name])) is not None:
                problems.append(f"key 'models[{index}]': {problem}")
    defined = sorted(config.get("embedders", {}))
    for index, name in enumerate(config.get("scoring", {}).get("embedders", [])):
        if name not in defined:
            problems.append(
                f"key 'scoring.embedders[{index}]': {name!r} is not defined under 'embedders' "
                f"(defined: {', '.join(defined)})"
            )
    instances = config.get("instances", {})
    if instances.get("source") == "file":
        missing = [key for key in config.get("subtasks", []) if key not in instances.get("files", {})]
        if missing:
            problems.append(f"key 'instances.files': source is file, but no file is given for {', '.join(missing)}")
    for name, spec in config.get("embedders", {}).items():
        if spec["kind"] == "bge-m3" and "model" not in spec:
            problems.append(f"key 'embedders.{name}': kind bge-m3 needs 'model' (a folder or a Hugging Face id)")
    return problems


def settings_hash(config: Mapping[str, Any], sections: Sequence[str], entries: Sequence[Mapping[str, Any]] = ()) -> str:
    """What reruns a job when it changes: the config ``sections`` its command reads and the registry ``entries``
    of the models it runs, without what only places a job (``cluster``, an embedder's ``gpus``)."""
    sections = [*config, *(s for s in sections if s.startswith("-"))] if "*" in sections else sections
    chosen = settings_view(config, [key for key in sections if key.removeprefix("-").split(".")[0] != "cluster"])
    for spec in dict.get(chosen, "embedders", {}).values():  # the embedders' definitions, where it reads them
        spec.pop("gpus", None)
    payload = json.dumps([chosen, list(entries)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


# Set by the workflow in its jobs' environment: the SHA-256 of the run's configuration file (``write_resolved``), which
# it validated before any job; a job whose ``--config`` is that file, unchanged, reads it without validating it again.
VALIDATED_DIGEST = "H2HTALK_VALIDATED_CONFIG"


def _resolved_text(config: Mapping[str, Any]) -> str:
    return json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def resolved_digest(config: Mapping[str, Any]) -> str:
    """The SHA-256 of the file ``write_resolved`` writes for the validated ``config``."""
    return hashlib.sha256(_resolved_text(config).encode("utf-8")).hexdigest()


def write_resolved(config: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """The validated configuration as the file every command of a run reads; rewritten only when it changes."""
    text = _resolved_text(config)
    target = Path(path)
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        write_text_atomic(target, text)


def read_validated(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run's configuration as the workflow validated it, when ``path`` is its file unchanged (the digest in
    ``VALIDATED_DIGEST``); None otherwise (a command run by hand, a file edited since), which is validated."""
    digest = os.environ.get(VALIDATED_DIGEST)
    if not digest or not Path(path).is_file():
        return None  # a missing file is reported by the reading that validates
    data = Path(path).read_bytes()
    return json.loads(data) if hashlib.sha256(data).hexdigest() == digest else None


class UndeclaredSetting(H2HTalkError, KeyError):
    """A config key read by a stage or command that does not declare it (``reads``): it would change without
    rerunning what read it."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0])


class SettingsView(dict):  # type: ignore[type-arg]
    """The part of the config a reader declares: ``view[key]``, ``view.get(key)`` or ``key in view`` of a key it does
    not declare is an ``UndeclaredSetting`` naming it. ``whole``: a section read whole, less the keys ``left_out``: a
    key it lacks besides those is declared, is not ``in`` it, and ``get`` gives its default."""

    reader, path, whole, left_out = "it", "", False, frozenset[str]()

    def __missing__(self, key: str) -> Any:
        if self.whole and key not in self.left_out:
            raise KeyError(key)
        raise UndeclaredSetting(
            f"{self.reader} reads config key {self.path + key!r}, which it does not declare (reads=)"
        )

    def __contains__(self, key: object) -> bool:
        found = dict.__contains__(self, key)
        if not found and not (self.whole and key not in self.left_out):
            self.__missing__(key)  # type: ignore[arg-type]
        return found

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 - dict.get would not check the key

    def __deepcopy__(self, memo: dict[int, Any]) -> SettingsView:
        return _view(self.reader, self.path, copy.deepcopy(dict(self), memo), self.whole, self.left_out)


def _view(
    reader: str, path: str, items: Mapping[str, Any] | None = None, whole: bool = False,
    left_out: frozenset[str] = frozenset(),
) -> SettingsView:  # fmt: skip
    view = SettingsView(items or {})
    view.reader, view.path, view.whole, view.left_out = reader, path, whole, left_out
    return view


yaml.SafeDumper.add_representer(SettingsView, yaml.SafeDumper.represent_dict)


def settings_view(config: Mapping[str, Any], sections: Sequence[str], reader: str = "it") -> dict[str, Any]:
    """Only the ``sections`` a stage declares it reads (top-level keys, or dotted paths to keys inside one; ``*``:
    everything; ``-key``: a key of a section read whole left out): reading anything else is an error naming
    ``reader`` (an ``UndeclaredSetting``), never a setting that changes without rerunning the stage's jobs. A key
    added to a section read whole is read."""
    view = _view(reader, "", whole="*" in sections)
    if view.whole:  # every section, less the keys left out
        sections = [*config, *(s for s in sections if s.startswith("-"))]
    for section in (s for s in sections if not s.startswith("-")):
        *parents, leaf = section.split(".")
        source, target = config, view
        for index, part in enumerate(parents):
            made = _view(reader, ".".join(parents[: index + 1]) + ".")
            source, target = source[part], target.setdefault(part, made)
        target[leaf] = copy.deepcopy(source[leaf])
    for left_out in (s[1:] for s in sections if s.startswith("-")):
        *parents, leaf = left_out.split(".")
        node = view
        for index, part in enumerate(parents):  # a section read whole, less this key: reading it names it too
            if not isinstance(node[part], SettingsView):
                node[part] = _view(reader, ".".join(parents[: index + 1]) + ".", node[part], whole=True)
            node = node[part]
        node.pop(leaf) if leaf in node else node[leaf]  # one not there is named, as any key not read
        node.left_out |= {leaf}
    return view


def in_schema(key: str) -> bool:
    """Whether a dotted config key (``-key``: one left out of a section read whole) is one the schema defines (under
    a mapping of free names and no fixed ones, such as ``generation.rate_limits``, a key its values' schema
    defines)."""
    node = _config_schema()
    for part in key.removeprefix("-").split("."):
        node = _config_schema()["$defs"][node["$ref"].split("/")[-1]] if "$ref" in node else node
        properties, free = node.get("properties", {}), node.get("additionalProperties")
        if part in properties:
            node = properties[part]
        elif isinstance(free, dict) and not properties:
            node = free
        else:
            return bool(free) and not properties
    return True


def wrong_reads(reads: Sequence[str], reader: str) -> tuple[str, str]:
    """What is wrong with the config keys a stage or command declares it reads (``-key``, ``*`` too): (the field, why),
    or two empty strings: a key the schema lacks (with the key it has that is closest), or a ``-key`` of a section
    not read whole."""
    for key in reads:
        if key != "*" and not in_schema(key):
            dash, close = "-" * key.startswith("-"), difflib.get_close_matches(key.lstrip("-"), schema_keys(), n=1)
            why = "not a key of the config schema" + "".join(f" (did you mean {dash + found!r}?)" for found in close)
            return f"reads {key!r}", why
    whole = {*reads, ""} if "*" in reads else set(reads)  # "": everything, the section above a top-level key
    for key in (key for key in reads if key.startswith("-")):
        sections = key[1:].split(".")[:-1]
        if not any(".".join(sections[:end]) in whole for end in range(len(sections) + 1)):
            return f"reads {key!r}", "a -key leaves a key out of a section read whole, and no section above it is read"
    try:
        settings_view(schema_defaults(), reads, reader)
    except KeyError as exc:  # a name of a free mapping the default lacks
        return "reads", f"{exc} (in the schema's default run)"
    return "", ""


def schema_keys(node: Mapping[str, Any] | None = None, prefix: str = "") -> list[str]:
    """Every dotted key the config schema names (to suggest one for a misspelt key)."""
    properties = (_config_schema() if node is None else node).get("properties", {})
    return [k for name, sub in properties.items() for k in (prefix + name, *schema_keys(sub, f"{prefix}{name}."))]


_config_schema = functools.cache(load_schema)  # read once: every key every stage and command reads is looked up


def deep_update(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``update`` into ``base`` recursively (mappings merge, everything else replaces)."""
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _read_yaml(path: str | os.PathLike[str], what: str) -> Any:
    try:
        return parse_yaml(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


def merge_layers(paths: Sequence[str | os.PathLike[str]], overrides: Sequence[Mapping[str, Any]] = ()) -> dict:
    """Config files merged in order (each an overlay of the ones before), then ``overrides`` on top."""
    merged: dict[str, Any] = {}
    for path in paths:
        raw = _read_yaml(path, "config file") or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of keys")
        deep_update(merged, raw)
    for layer in overrides:
        deep_update(merged, layer)
    return merged


def load_config(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Read config files (later ones overlay earlier ones, as Snakemake's --configfiles), apply ``overrides``
    and validate: the result has every default of the schema filled in."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    raw = merge_layers(paths, [overrides] if overrides else [])
    try:
        return validate_config(raw)
    except ConfigError as exc:
        raise ConfigError(f"{', '.join(map(str, paths)) or 'configuration'}: {exc}") from None


def command_config(files: Sequence[str | os.PathLike[str]], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A command's validated configuration: its config ``files``, then ``overrides`` (dotted key -> value; None:
    not given); a workflow job's (its one file, the run's resolved configuration), as the workflow validated it."""
    flagged: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is not None:
            node = flagged
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
    if not flagged and len(files) == 1 and (validated := read_validated(files[0])) is not None:
        return validated  # a workflow job: the Snakefile validated the run's configuration before any job
    return validate_config(merge_layers(files, [flagged]))


def default_config(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The schema's defaults (with ``overrides`` applied), validated: what settings fall back to."""
    return validate_config(deep_update({}, overrides or {}))


schema_defaults = functools.cache(default_config)  # what a declared reading is tried on (never changed: views copy)
