# Shared by every rule: the results tree (h2htalk.layout), the run's cells (h2htalk.cells), the command line of
# each job and where it runs. Logic lives in the h2htalk package; rules only declare files and resources.
from h2htalk.cells import RunCells
from h2htalk.cli import command_reads
from h2htalk.cli.figures import FIGURES as FIGURE_NAMES
from h2htalk.cluster import cpu_job, embedder_job, model_job
from h2htalk.config import (
    check_environment,
    load_registry,
    registry_files,
    settings_hash,
    write_resolved,
)
from h2htalk.errors import ConfigError
from h2htalk.export.items import item_files
from h2htalk.export.summaries import summary_paths
from h2htalk.freshness import remove_stale, result_graph, stale_results
from h2htalk.instances.sources import source_file
from h2htalk.layout import Cell, Layout, instances_set
from h2htalk.llm.engines import engine_of
from h2htalk.prefetch import embedder_downloads
from h2htalk.ratings import (
    INSTANCE_DECISIONS,
    NEED_VERDICTS,
    REVIEW_SCORES,
    SAFETY_RATINGS,
)
from h2htalk.review.store import ReviewStore, ratings_digest
from h2htalk.run_summary import run_summary
from h2htalk.settings import STUDIES, VARIANTS as ALL_VARIANTS
from h2htalk.studies.data import scenario_file
from h2htalk.tables.human_review import reads_decisions
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask

import time

from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod

# Rules run "python -m h2htalk" from the checkout's package: with --software-deployment-method conda
# in the rule's conda env, otherwise with the interpreter that runs Snakemake.
_SRC = Path(workflow.basedir) / "src"
if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    shell.prefix(f"export PYTHONPATH={_SRC}; ")
else:
    shell.prefix(
        f"export PYTHONPATH={_SRC}; export PATH={Path(sys.executable).parent}:$PATH; "
    )

# One results tree for every instance set: the set's own results under results/sets/{set}/ and its tables under
# paper_figures/{set}/, the data, the reconstruction and the model files shared (h2htalk.layout).
RESULTS = "results"
LAYOUT = Layout(RESULTS, instances_set(config))
RUN = RunCells(config)
REGISTRY = load_registry(registry_files(config))
READS = command_reads()
LOGS, BENCHMARKS = LAYOUT.path("logs"), LAYOUT.path("benchmarks")
FIGURES = {name: number for number, name in FIGURE_NAMES.items() if number < 7}
PAPER_FIGURES = LAYOUT.figures
RUBRIC_JUDGE, STUDY_JUDGE = (
    config["rubric_judge"]["model"],
    config["study_judge"]["model"],
)
_reconstruct = config["instances"]["reconstruct"]
RECONSTRUCT_MODELS = list(
    dict.fromkeys([_reconstruct["generator"], *_reconstruct["voters"]])
)


class _Wildcards(dict):
    def __missing__(self, name):
        return f"{{{name}}}"


# Results whose inputs are gone (a failed job's outputs are removed; a killed forced job leaves none): removed
# before the run, so that it rebuilds them and everything missing under them instead of "nothing to be done".
if workflow.is_main_process:
    _stale = stale_results(result_graph(config, LAYOUT), PAPER_FIGURES)
    if _stale:
        _dry = any(
            arg in ("-n", "-np", "-pn", "--dry-run", "--dryrun") for arg in sys.argv
        )
        logger.warning(
            f"{len(_stale)} results were made from files that are gone or changed and "
            + ("would be rebuilt by a real run:" if _dry else "are rebuilt:")
        )
        for _path, _why in list(_stale.items())[:10]:
            logger.warning(f"  {_path}: {_why}")
        if not _dry:
            remove_stale(_stale)


# The review desk's store of people's ratings (review.store, outside the results tree) is an input of the rules
# that read ratings (combine_j, table2, table3, agreement, fig7, reconstruct_instances). An empty one is made where
# there is none, so that its first ratings change no job's list of inputs; it is read as ancient, so that only a
# change to what a job reads from it (ratings_param) reruns the job.
STORE = config["review"]["store"]
if workflow.is_main_process and not Path(STORE).exists():
    ReviewStore(STORE, create=True).close()


def ratings_param(*sheets, by_model=False):
    """A param that reruns a job when the store's ratings of ``sheets`` change (of the job's own model only,
    with ``by_model``)."""

    def param(wildcards):
        model = wildcards.model if by_model else None
        return " ".join(ratings_digest(STORE, sheet, model) for sheet in sheets)

    return param


onstart:
    # Not in a dry run (it runs no job): the models the jobs will start find their API keys, before any starts.
    try:
        check_environment(config, models_started_by(workflow.dag.needrun_jobs()))
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None
    # Every command reads the run's validated configuration from one file (only the sections it declares).
    write_resolved(config, LAYOUT.path("config"))


RUN_STARTED = time.time()


onsuccess:
    # The run ends with what it made and where, what to open first, and the warnings that matter.
    for level, line in run_summary(config, PAPER_FIGURES, RUN_STARTED, log, LOGS):
        logger.log(level, line)


def path(kind, **labels):
    """The path of ``kind`` in the results tree; a label not given stays a wildcard."""
    return LAYOUT.pattern(kind).format_map(_Wildcards(labels))


def paths(method, cells):
    """``LAYOUT.method(cell)`` of every cell (a model or embedder given as ``{model}`` stays a wildcard)."""
    return [getattr(LAYOUT, method)(cell) for cell in cells]


def h2htalk(command, arguments="", log="{log}"):
    """A job's command line: the sub-command with the run's config file and results tree."""
    config_file = f" --config {LAYOUT.path('config')}" if READS[command] else ""
    results = f"--results {RESULTS} --instance-set {LAYOUT.instance_set}"
    return f"python -m h2htalk --log {log} {command}{config_file} {results} {arguments}"


def settings(command, *models):
    """A param that reruns a job when what its command reads changes: its config sections and the registry
    entries of ``models`` (given as wildcard names, e.g. "model")."""

    def param(wildcards):
        names = [getattr(wildcards, m, m) for m in models]
        return settings_hash(config, READS[command], [REGISTRY[n] for n in names])

    return param


# --- models and their jobs -------------------------------------------------------------------------------


def gguf(*models):
    """The provisioned GGUF files of the models among ``models`` whose engine needs one."""
    return [
        path("model_file", model=m)
        for m in models
        if engine_of(REGISTRY[m]).needs_model_file
    ]


def prefetched(*models):
    """The prefetch records of the models among ``models`` whose weights come from the Hugging Face hub
    (fetched on the submit host; the jobs then run offline)."""
    return [
        path("prefetched_model", model=m)
        for m in models
        if engine_of(REGISTRY[m]).downloads(REGISTRY[m])
    ]


def model_inputs(wildcards):
    """What a job running the ``model`` wildcard's model needs besides its data."""
    return [*gguf(wildcards.model), *prefetched(wildcards.model)]


def study_model_inputs(wildcards):
    """What a study job needs besides its data: its model's files and the study judge's."""
    models = dict.fromkeys([wildcards.model, STUDY_JUDGE])
    return [*gguf(*models), *prefetched(*models)]


def embedder_prefetched(wildcards):
    settings = config["embedders"][wildcards.embedder]
    return (
        [path("prefetched_embedder", embedder=wildcards.embedder)]
        if embedder_downloads(settings)
        else []
    )


def alternatives(names):
    """A wildcard constraint matching exactly ``names`` (nothing when there are none)."""
    return "|".join(map(re.escape, names)) or "(?!)"


def threads_for(*models):
    """CPU threads of a job that runs ``models``: the most any of their engines asks for."""
    return max((engine_of(REGISTRY[m]).threads(REGISTRY[m]) for m in models), default=1)


def models_started_by(jobs):
    """The registry names whose engines ``jobs`` (Snakemake jobs: rule and wildcards) start."""
    started = {
        "generate": lambda job: [job.wildcards.model],
        "rubric_judge": lambda job: [RUBRIC_JUDGE],
        "study": lambda job: [job.wildcards.model, STUDY_JUDGE],
        "judge_ladder": lambda job: [job.wildcards.model],
        "reconstruct_instances": lambda job: RECONSTRUCT_MODELS,
    }
    return {
        model
        for job in jobs
        if job.rule.name in started
        for model in started[job.rule.name](job)
    }


def per_job(resources_of):
    """Resources that depend on the job's wildcards, one function per resource (Snakemake's form)."""
    keys = (
        "slurm_partition",
        "slurm_account",
        "slurm_extra",
        "gpu",
        "gpu_model",
        "cpus_per_gpu",
        "mem_mb",
        "runtime",
    )
    return {key: (lambda wc, key=key: resources_of(wc)[key]) for key in keys}


def job_resources(*models):
    """What a submitted job that runs ``models`` asks SLURM for (splat it into a rule's resources)."""
    return model_job(config["cluster"], [REGISTRY[m] for m in models])


def model_job_resources():
    """``job_resources`` of the job's own model (the ``model`` wildcard)."""
    return per_job(lambda wc: job_resources(wc.model))


def cpu_job_resources(mem_mb, runtime):
    """A submitted job that runs no model and needs no GPU: the CPU partition, the cluster's account and flags."""
    return cpu_job(config["cluster"], mem_mb, runtime)


def scoring_job_resources(mem_mb, runtime):
    """A scoring job's, placed by its embedder's GPUs (the ``embedder`` wildcard)."""
    return per_job(
        lambda wc: embedder_job(
            config["cluster"], config["embedders"][wc.embedder], mem_mb, runtime
        )
    )


# --- inputs that depend on the configuration ---------------------------------------------------------------


def instance_source(wildcards):
    file = source_file(config["instances"], wildcards.subtask, LAYOUT)
    return [file] if file else []  # none: the demo set, from the subtask's definition


def study_scenarios(wildcards):
    """A study's scenario file, when the config names one (the shipped set otherwise)."""
    file = scenario_file(config["studies"], wildcards.study)
    return [file] if file else []


def table2_summaries(wildcards):
    return RUN.table2_summaries(LAYOUT)


def table2_items(wildcards):
    return list(RUN.table2_items(LAYOUT).values())


def instance_review_targets():
    """The instance review queue, when instances are reconstructed."""
    return (
        [path("instance_review_all")]
        if config["instances"]["source"] == "reconstructed"
        else []
    )


def curated_for_decisions():
    """The curated references, which people's instance decisions name, when there are decisions to read (files
    of them, or reconstructed instances, which the review desk takes decisions on)."""
    if not reads_decisions(config):
        return []
    return expand(path("curated"), subtask=RUN.subtasks)


def calibration_targets():
    """Calibration needs the chance floor and the oracle among the baselines."""
    wanted = {"baseline-random-reference", "baseline-oracle"}
    return (
        [f"{PAPER_FIGURES}/calibration.md"]
        if wanted <= set(config["baselines"])
        else []
    )


def reliability_targets():
    """The judges' reliability card, when every run makes it (judge_reliability.every_run)."""
    return (
        [f"{PAPER_FIGURES}/judge_reliability.md"]
        if config["judge_reliability"]["every_run"]
        else []
    )


def rubric_canary(wildcards):
    """Table 2 notes a changed rubric judge from its drift canary, when every run checks it."""
    if not (config["judge_reliability"]["every_run"] and RUN.judged_subtasks):
        return []
    return [path("judge_canary", model=RUBRIC_JUDGE)]


def rubric_ladder_inputs(wildcards):
    """What the rubric judge's ladder is made of: the judged subtasks' instances and one variant's prompts."""
    if RUBRIC_JUDGE != wildcards.model or not RUN.judged_subtasks:
        return []
    return [
        *expand(path("instances"), subtask=RUN.judged_subtasks),
        *expand(path("prompts"), variant=RUN.variants[0], subtask=RUN.judged_subtasks),
    ]


def plan_inputs(wildcards):
    """What the plan reads: the curated references (a reconstructed benchmark's) or the instance files, the
    answer caches as they are now, the price and throughput tables."""
    instances = config["instances"]
    if instances["source"] == "reconstructed":
        sources = expand(path("curated"), subtask=RUN.subtasks)
    else:
        sources = [
            instances["files"][s] for s in RUN.subtasks if instances["source"] == "file"
        ]
    folders = {
        config["generation"]["cache_dir"],
        config["rubric_judge"]["cache_dir"],
        config["study_judge"]["cache_dir"],
        instances["reconstruct"]["cache_dir"],
    }
    caches = sorted(str(p) for folder in folders for p in Path(folder).glob("*.sqlite"))
    return [*sources, *caches, config["plan"]["prices"], config["plan"]["throughput"]]
