"""What Snakemake's rules take from the stage table for one run: each stage's files as rule inputs and output
patterns, its logs, resources, threads, the params that rerun its jobs when what they read changes, and its
command line, which names the code it runs (a changed module reruns the stages that run it).
``workflow/rules/stages.smk`` makes one rule of each stage from these; ``workflow/rules/common.smk`` has them set
what every shell runs first and do what a run does before its first job."""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.cluster import cpu_job, embedder_job, model_job
from h2htalk.config import VALIDATED_DIGEST, check_environment, resolved_digest, settings_hash, write_resolved
from h2htalk.desk_store.store import ratings_digest
from h2htalk.io import remove_paths
from h2htalk.layout import Layout
from h2htalk.llm.engines import engine_of
from h2htalk.stages.declare import check_one_writer
from h2htalk.stages.spec import Scope, Stage, StageError
from h2htalk.stages.table import BY_NAME, STAGES

if TYPE_CHECKING:
    from h2htalk.plan.timing import SaidTime

DISK_MB = 1000  # no job writes more than a few hundred MB besides the caches and the models' own folders
CAPTIONS = Path("workflow", "report")  # the report's captions, in the checkout
CAPTIONS_FROM_RULES = "../report"  # the same, as the rules name it: Snakemake reads it from their folder
PLACED_BY = ("slurm_partition", "slurm_account", "slurm_extra", "gpu", "gpu_model", "cpus_per_gpu", "mem_mb", "runtime")


def files_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """12 hex digits of the SHA-256 of ``files`` (name and contents, in the order given)."""
    digest = hashlib.sha256()
    for name, contents in files:
        digest.update(name.encode() + b"\0" + contents)
    return digest.hexdigest()[:12]


def resource_digest(folders: tuple[str, ...]) -> str:
    """A digest of the package's resource files in ``folders`` (a changed prompt or known-answer set reruns the
    stages that read it); empty for none."""
    if not folders:
        return ""
    root = resources.files("h2htalk.resources")
    found = (path for folder in folders for path in sorted(Path(str(root.joinpath(folder))).rglob("*")))
    return "-" + files_digest((p.name, p.read_bytes()) for p in found if p.is_file() and "__pycache__" not in p.parts)


PACKAGE = Path(__file__).resolve().parents[1]  # the h2htalk package whose code the jobs run (the checkout's)
IMPORTS = re.compile(  # from h2htalk.a import b, from h2htalk.a import (b, c) over lines, import h2htalk.a
    r"^[ \t]*(?:from[ \t]+(h2htalk[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|import[ \t]+(h2htalk[\w.]*))", re.M
)


def package_imports(source: str) -> set[str]:
    """The package's names a module's source imports, inside its functions too (a name may be a module's function)."""
    found = set()
    for base, names, plain in IMPORTS.findall(source):
        found.add(plain or base)
        words = (name.split() for name in re.sub(r"#.*", "", names).strip("()\\ \n").split(","))
        found.update(f"{base}.{word[0]}" for word in words if word and not plain)
    return found


@functools.cache  # a workflow's load reads each file once
def module_source(module: str, package: Path) -> tuple[str, bytes, frozenset[str]]:
    """A module's file (relative to ``package``; empty for a name that is no module) and its source and imports."""
    here = package.parent.joinpath(*module.split("."))
    path = next((p for p in (here.with_suffix(".py"), here / "__init__.py") if p.is_file()), None)
    if path is None:
        return "", b"", frozenset()
    source = path.read_bytes()
    return path.relative_to(package).as_posix(), source, frozenset(package_imports(source.decode("utf-8")))


def code_digest(module: str, package: Path = PACKAGE) -> str:
    """A digest of the code a stage's ``module`` runs: its file, the package's modules it imports and theirs, and
    the packages above each (a changed metric reruns the stages that compute with it, not the others)."""
    files: dict[str, bytes] = {}
    todo = [module]
    while todo:
        parts = todo.pop().split(".")
        for depth in range(1, len(parts) + 1):  # h2htalk, h2htalk.scoring, h2htalk.scoring.cells
            path, source, imports = module_source(".".join(parts[:depth]), package)
            if path and path not in files:
                files[path] = source
                todo += imports
    return files_digest((path, files[path]) for path in sorted(files))


class Rules:
    """The rules of one run: ``config`` validated, ``results`` its results tree, ``registry`` the model registry."""

    def __init__(
        self, config: Mapping[str, Any], results: Layout, registry: Mapping[str, Any], checkout: str | Path = "."
    ) -> None:
        self.config, self.results, self.registry = config, results, registry
        self.scope = Scope(config, results)
        self.checkout = Path(checkout)  # the workflow's folder (its Snakefile's): the report's captions are under it
        # the registry checked the default run as it loaded; Snakemake resolves the run's inputs, naming the rule
        check_one_writer(STAGES, self.scope, "this run", inputs=False)
        for stage in STAGES if (self.checkout / "envs").is_dir() else ():  # else missed until conda deploys it
            if not (self.checkout / "envs" / f"{stage.env}.yaml").is_file():
                raise StageError(f"stage {stage.name}: env: {stage.env!r} is no file envs/{stage.env}.yaml")

    # --- files ----------------------------------------------------------------------------------------

    def inputs(self, stage: Stage) -> Callable[[Any], dict[str, list[str]]]:
        """An input function (for ``unpack``): the job's declared inputs, and the files of the models it starts."""

        def files(wildcards: Any) -> dict[str, list[str]]:
            labels = dict(wildcards.items())
            found = stage.files("inputs", self.scope, labels)
            if started := stage.starts(self.scope, labels):
                if unknown := [name for name in started if name not in self.registry]:  # a declaration's mistake
                    raise StageError(f"stage {stage.name}: starts: {unknown[0]!r} is no model of the registry")
                found["models"] = self.model_files(started)
            return found

        return files

    def model_files(self, names: list[str]) -> list[str]:
        """What a job that starts the models ``names`` needs besides its data: their provisioned GGUF files and the
        prefetch records of those whose weights come from the Hugging Face hub."""
        engine = {name: engine_of(self.registry[name]) for name in names}  # each model once, in their order
        gguf = [self.results.path("model_file", model=n) for n in engine if engine[n].needs_model_file]
        hub = [self.results.path("prefetched_model", model=n) for n in engine if engine[n].downloads(self.registry[n])]
        return [*gguf, *hub]

    def rule_outputs(self, stage: Stage, directory: Callable[[str], Any], report: Callable[..., Any]) -> dict[str, Any]:
        """The output patterns (labels as wildcards; a single file as a string) as the rule takes them: a bundle
        through Snakemake's ``directory``, and a file its product shows through ``report``, with its caption and its
        category (Tables, Figures)."""
        found = stage.files("outputs", self.scope, {label: f"{{{label}}}" for label in stage.labels})
        outputs: dict[str, Any] = {name: paths[0] if len(paths) == 1 else paths for name, paths in found.items()}
        for name, spec in stage.outputs.items():
            if getattr(spec, "directory", False):
                outputs[name] = directory(outputs[name])
            elif stage.product and name in stage.product.shown:  # its own caption (NAME.rst) where the checkout has one
                own = stage.name if (self.checkout / CAPTIONS / f"{stage.name}.rst").is_file() else "product"
                caption, category = f"{CAPTIONS_FROM_RULES}/{own}.rst", f"{stage.product.kind.capitalize()}s"
                outputs[name] = report(outputs[name], caption=caption, category=category)
        return outputs

    def logs(self, stage: Stage) -> dict[str, str]:
        where = self._job_path("logs", stage)
        logs = {"main": f"{where}.log"}
        if stage.where == "model":
            logs["server"] = f"{where}.server.log"
        return logs

    def benchmark(self, stage: Stage) -> str:
        return self._job_path("benchmarks", stage) + ".tsv"

    def _job_path(self, folder: str, stage: Stage) -> str:
        """A job's file in the results' ``folder`` (logs, benchmarks), by its stage and labels, without a suffix."""
        return "/".join([self.results.path(folder), stage.name, *(f"{{{label}}}" for label in stage.labels)])

    def constraints(self, stage: Stage) -> dict[str, str]:
        """Each label matches exactly the run's values of it (two stages may make the same files for different
        models, as generate and baseline_answers do)."""
        jobs = stage.jobs(self.scope.run)
        values = {label: list(dict.fromkeys(job[label] for job in jobs)) for label in stage.labels}
        return {label: "|".join(map(re.escape, found)) or "(?!)" for label, found in values.items()}

    # --- where it runs --------------------------------------------------------------------------------

    def threads(self, stage: Stage) -> Callable[[Any], int]:
        def threads(wildcards: Any) -> int:
            started = stage.starts(self.scope, dict(wildcards.items()))
            return max((engine_of(self.registry[m]).threads(self.registry[m]) for m in started), default=1)

        return threads

    def resources(self, stage: Stage) -> dict[str, Any]:
        """What a job asks SLURM for: its models' GPUs, memory and time, or its embedder's, or a CPU job's."""
        cluster = self.config["cluster"]
        # a job's scratch space, declared: Snakemake's default reads the size of every input (thousands, for a table)
        disk = {"disk_mb": DISK_MB}
        if stage.where == "local":
            return {"mem_mb": stage.memory_mb, "runtime": stage.minutes, **disk}
        if stage.where == "cpu":
            return {**cpu_job(cluster, stage.memory_mb, stage.minutes), **disk}

        @functools.cache  # Snakemake asks once per resource
        def placed(labels: tuple[tuple[str, str], ...]) -> dict[str, Any]:
            if stage.where == "embedder":
                embedder = self.config["embedders"][dict(labels)["embedder"]]
                return embedder_job(cluster, embedder, stage.memory_mb, stage.minutes)
            return model_job(cluster, [self.registry[m] for m in stage.starts(self.scope, dict(labels))])

        return {**{key: (lambda wc, key=key: placed(tuple(wc.items()))[key]) for key in PLACED_BY}, **disk}

    # --- what reruns it -------------------------------------------------------------------------------

    def params(self, stage: Stage) -> dict[str, str | Callable[[Any], str]]:
        """``settings``: a hash of the config keys the stage reads and the registry entries of its models;
        ``ratings``: a digest of the review store's ratings it reads (a job with a ``model`` label: its model's
        only)."""

        used = resource_digest(stage.uses)

        def settings(wildcards: Any) -> str:
            entries = (stage.entries or stage.starts)(self.scope, dict(wildcards.items()))
            return settings_hash(self.config, stage.reads, [self.registry[name] for name in entries]) + used

        params: dict[str, str | Callable[[Any], str]] = {"settings": settings, "command": self.command(stage)}
        if stage.ratings:

            def ratings(wildcards: Any) -> str:
                model = wildcards.model if "model" in stage.labels else None
                return " ".join(ratings_digest(self.config["review"]["store"], sheet, model) for sheet in stage.ratings)

            params["ratings"] = ratings
        return params

    SHELL = "python -m h2htalk --log {log.main} {params.command}"  # every rule's; its own words are a param

    def shell(self, stage: Stage) -> str:
        """The rule's shell: ``SHELL``, and a comment with the digest of the code its stage runs, which Snakemake's
        code trigger compares with the one its outputs were made by (``--rerun-triggers`` without ``code``: not).
        Snakemake records this string as the rule is made; a job evaluates the directive again when the loop has
        moved on, so the comment it runs may be another stage's: only a comment, its words are the params'."""
        return f"{self.SHELL}  # code {code_digest(stage.run.__module__)}"

    def command(self, stage: Stage) -> str:
        """The job's command line after ``h2htalk --log LOG``: the stage's command with the run's config file, results
        tree and the job's labels (as wildcards, which Snakemake fills in a param). A param, not the shell directive:
        a rule made in a loop reads its shell directive when its job runs, when the loop has moved on."""
        # the config even where the stage reads no setting: its files (the run's subtasks, say) come from it
        words = [stage.command_name, f"--config {self.results.path('config')}"]
        words.append(f"--results {self.results.root} --instance-set {self.results.instance_set}")
        words += [f"--{label} {{{label}}}" for label in stage.labels]
        if stage.where == "model":
            words.append(f"--server-log {self.logs(stage)['server']}")
        return " ".join(words)

    def shell_prefix(self, conda: bool) -> str:
        """What every rule's shell runs first: ``python -m h2htalk`` from the checkout's package, in the rule's conda
        env (``conda``: ``--software-deployment-method conda``) or else with the interpreter that runs Snakemake; its
        commands read the run's configuration file as the Snakefile validated it, by its digest, without validating
        it again (``h2htalk.config.VALIDATED_DIGEST``)."""
        source, python = shlex.quote(str(self.checkout / "src")), shlex.quote(str(Path(sys.executable).parent))
        env = f"export PYTHONPATH={source} {VALIDATED_DIGEST}={resolved_digest(self.config)}; "
        return env if conda else f'{env}export PATH={python}:"$PATH"; '

    # --- targets --------------------------------------------------------------------------------------

    def default_target(self) -> list[str]:
        """``all``: every file of every job of the stages the run puts in it (its products, as they say)."""
        return [path for stage in STAGES if stage.in_default_target(self.config) for _, path in self._made(stage)]

    def named_targets(self) -> dict[str, list[str]]:
        """Each named target (``snakemake scores``, ``fig4``) -> the files of the jobs of the stages that name it."""
        found: dict[str, list[str]] = {}
        for stage in (stage for stage in STAGES if stage.targets):
            targets = stage.targets
            for labels, path in self._made(stage):
                found.setdefault(targets if isinstance(targets, str) else targets(labels), []).append(path)
        return found

    def _made(self, stage: Stage) -> list[tuple[dict[str, str], str]]:
        """(labels, file) of every file every job of ``stage`` in this run makes."""
        return [(labels, path) for labels in stage.jobs(self.scope.run)
                for paths in stage.files("outputs", self.scope, labels).values() for path in paths]  # fmt: skip

    def tables_of(self, jobs: Any) -> list[str]:
        """The files of the tables and figures among Snakemake's ``jobs`` (their provenance, bundles included)."""
        return [str(path) for job in jobs if getattr(BY_NAME.get(job.rule.name), "product", None)
                for path in job.output]  # fmt: skip

    def started(self, rule: str, wildcards: Mapping[str, str]) -> list[str]:
        """The registry names whose engines a job of ``rule`` starts."""
        stage = BY_NAME.get(rule)
        return stage.starts(self.scope, dict(wildcards)) if stage else []

    # --- when a run starts ----------------------------------------------------------------------------

    def start(self, jobs: Iterable[Any], log: logging.Logger, local: bool = True) -> SaidTime | None:
        """What a run does before the first of Snakemake's ``jobs`` starts (a dry run starts none): it fails, before
        it changes anything, where a model they start lacks what it needs from the environment (an API key: a
        ``ConfigError``); removes the tables and figures they remake, so that a run stopped before it remakes them
        leaves none that disagrees with the results under it (the partial Table 2, made from the scores before the
        judge runs, says what is final); writes the run's validated configuration, which every command reads (only
        the keys its stage declares); and where the jobs run on this machine (``local``) and one starts a model
        whose engine is timed on its CPU (``Engine.timed_on_cpu``), says how long they will take
        (``plan.timing.say_expected_time``): what it said, to set beside the time they took."""
        jobs = list(jobs)
        started = {name for job in jobs for name in self.started(job.rule.name, job.wildcards)}
        check_environment(self.config, started)
        remove_paths(self.tables_of(jobs))
        write_resolved(self.config, self.results.path("config"))
        timed = any(name in self.registry and engine_of(self.registry[name]).timed_on_cpu for name in started)
        return self._say_expected_time(jobs, log) if local and timed else None

    def _say_expected_time(self, jobs: list[Any], log: logging.Logger) -> SaidTime | None:
        """How long Snakemake's ``jobs`` will take, said in ``log`` before the first starts: those that start a model
        are timed by the plan of their requests, the others as the jobs that start none."""
        # imported here: the plan's model calls load the API client, seconds a dry run or a cluster job need not spend
        from h2htalk.plan.calls import job_name
        from h2htalk.plan.timing import estimate_run, say_expected_time

        named = [(job_name(job.rule.name, dict(job.wildcards.items())), job) for job in jobs]
        needed = {name for name, _ in named}
        others = [name for name, job in named if not self.started(job.rule.name, job.wildcards)]
        return say_expected_time(
            lambda: estimate_run(STAGES, self.config, self.results, self.registry, needed, others), log
        )
