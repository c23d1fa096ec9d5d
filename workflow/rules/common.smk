# Shared settings, path patterns and input functions. Logic lives in the h2htalk package; rules only wire
# files together, and every path pattern is declared here once.
import os

from h2htalk.config import load_registry
from h2htalk.prefetch import embedder_downloads, model_downloads
from h2htalk.settings import STUDIES, VARIANTS as ALL_VARIANTS, StudySettings
from h2htalk.subtasks import JUDGED as ALL_JUDGED, SUBTASK_KEYS, get_subtask

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

# --- what runs -----------------------------------------------------------------------------------------
SUBTASKS = list(config["subtasks"])
VARIANTS = list(config["variants"])
JUDGED = [s for s in SUBTASKS if s in ALL_JUDGED]
MODELS = load_registry(config["model_registry"])
LLMS = list(
    config["models"]
)  # models under test: an engine answers the benchmark and the studies
BASELINES = list(
    config["baselines"]
)  # no model: they answer from the instances, on the submit host
RUN_MODELS = [*LLMS, *BASELINES]  # everything with generations, scores, rows
JUDGED_MODELS = [*LLMS, *(BASELINES if config["judge"]["baselines"] else [])]
EMBEDDERS = list(config["scoring"]["embedders"])
EMBEDDER = EMBEDDERS[
    0
]  # the embedder of the single-embedder outputs (review queue, Table 3)
JUDGE_MODEL = config["judge"]["model"]
RECONSTRUCT = config["instances"]["reconstruct"]
RECONSTRUCT_MODELS = list(
    dict.fromkeys([RECONSTRUCT["generator"], *RECONSTRUCT["judges"]])
)
STUDY = StudySettings.from_config(config)
FIGURES = {"fig4_wordcloud": 4, "fig5_verb_noun": 5, "fig6_lengths": 6}

# --- path patterns -------------------------------------------------------------------------------------
LOGS = "results/logs"
BENCHMARKS = "results/benchmarks"  # {rule}/{wildcards}.tsv a job: wall and CPU time, memory (benchmarks/main_job.py)
MANIFEST = "results/data/manifest.json"
UPSTREAM = "results/data/upstream/{file}"
CURATED = "results/data/curated/{subtask}.jsonl"
CURATION = "results/data/curated/{subtask}.report.json"
CURATION_REPORT = "results/data/curation_report"  # .json, .md
PROVENANCE = "results/provenance.json"
INSTANCES = "results/instances/{subtask}.jsonl"
RECONSTRUCTED = "results/reconstructed/{subtask}.jsonl"
RECONSTRUCTION_REPORT = "results/reconstructed/{subtask}.report.json"
INSTANCE_REVIEW = "results/review/instances/{subtask}.csv"
INSTANCE_REVIEW_ALL = "results/review/instances.csv"
PROMPTS = "results/prompts/{variant}/{subtask}.jsonl"
MODEL_FILE = "results/models/{model}.gguf"
PREFETCHED_MODEL = "results/prefetch/models/{model}.json"
PREFETCHED_EMBEDDER = "results/prefetch/embedders/{embedder}.json"
GENERATIONS = "results/generations/{model}/{variant}/{subtask}.jsonl"
GENERATION_RUN = "results/generations/{model}/run.json"
SCORE_ITEMS = "results/scores/{embedder}/{model}/{variant}/{subtask}.items.jsonl"
SCORE_SUMMARY = "results/scores/{embedder}/{model}/{variant}/{subtask}.summary.json"
JUDGE_SAMPLES = "results/judge_samples/{model}/{variant}/{subtask}.jsonl"
JUDGE_RUN = "results/judge_samples/{model}/run.json"
J_ITEMS = "results/j_scores/{embedder}/{model}/{variant}/{subtask}.items.jsonl"
J_SUMMARY = "results/j_scores/{embedder}/{model}/{variant}/{subtask}.summary.json"
REVIEW_QUEUE = "results/review/queue.csv"
STUDY_PROMPTS = "results/studies/{study}/prompts/{variant}.jsonl"
STUDY_ITEMS = "results/studies/{study}/items/{variant}.jsonl"
STUDY_GENERATIONS = "results/generations/{model}/{variant}/{study}.jsonl"
SAFETY_ITEMS = "results/studies/safety/scores/{embedder}/{model}/{variant}.items.jsonl"
SAFETY_SUMMARY = (
    "results/studies/safety/scores/{embedder}/{model}/{variant}.summary.json"
)
STUDY_VERDICTS = "results/studies/{study}/verdicts/{model}/{variant}.jsonl"
STUDY_JUDGE_RUN = "results/studies/verdicts/{model}.run.json"
FIGURE = "paper_figures/{figure}"
TABLE1, TABLE2, TABLE3 = (
    "paper_figures/table1",
    "paper_figures/table2",
    "paper_figures/table3",
)
FIG7 = "paper_figures/fig7_instruction_following"
CALIBRATION = "paper_figures/calibration"


def upstream_file(subtask):
    return UPSTREAM.format(file=get_subtask(subtask).upstream_file)


# --- options the rules pass to the h2htalk command -------------------------------------------------------


def config_json(*sections):
    """The validated config's sections as a --config-json option: the command's settings, and (as a param)
    what reruns the rule when they change. A function, so that Snakemake does not read the braces of the
    JSON (e.g. the upstream URL template) as wildcards."""
    selected = {s: config[s] for s in sections or config}
    # where a scoring job runs (embedders' gpus) changes neither its command nor its results
    if "embedders" in selected:
        selected["embedders"] = {
            name: {k: v for k, v in spec.items() if k != "gpus"}
            for name, spec in selected["embedders"].items()
        }
    option = f"--config-json {shlex.quote(json.dumps(selected, sort_keys=True))}"
    return lambda wildcards: option


def output_prefix(name):
    """A param: output ``name`` without its extension (commands that write PREFIX.csv, .md, ...)."""
    return lambda wildcards, output: os.path.splitext(output[name])[0]


def output_folder(name):
    """A param: the folder of output ``name`` (the first file when it is a list)."""
    return lambda wildcards, output: os.path.dirname(output.get(name)[0])


def model_files_option(wildcards, input):
    """--model-file NAME=PATH for every provisioned GGUF among the inputs."""
    return " ".join(
        f"--model-file {Path(path).stem}={path}"
        for path in input.get("model_files", [])
    )


# --- models and their jobs -------------------------------------------------------------------------------


def gguf(*models):
    """The provisioned GGUF files of the llamacpp models among ``models`` (other engines need none)."""
    return [
        MODEL_FILE.format(model=m) for m in models if MODELS[m]["engine"] == "llamacpp"
    ]


def model_gguf(wildcards):
    return gguf(wildcards.model)


def prefetched(*models):
    """The prefetch records of the models among ``models`` whose weights come from the Hugging Face hub
    (fetched on the submit host; the jobs then run offline)."""
    return [
        PREFETCHED_MODEL.format(model=m) for m in models if model_downloads(MODELS[m])
    ]


def model_prefetched(wildcards):
    return prefetched(wildcards.model)


def embedder_prefetched(wildcards):
    settings = config["embedders"][wildcards.embedder]
    return (
        [PREFETCHED_EMBEDDER.format(embedder=wildcards.embedder)]
        if embedder_downloads(settings)
        else []
    )


def prefetched_option(wildcards, input):
    """--prefetched FILE for every prefetch record among the inputs."""
    return " ".join(f"--prefetched {path}" for path in input.get("prefetched", []))


def cell_instances(subtasks):
    """The instance file of every (variant, subtask) cell, in the order of expand(..., variant=VARIANTS,
    subtask=subtasks), repeats kept: commands zip it with the cells' other files."""
    return [INSTANCES.format(subtask=s) for _ in VARIANTS for s in subtasks]


def alternatives(names):
    """A wildcard constraint matching exactly ``names`` (nothing when there are none)."""
    return "|".join(map(re.escape, names)) or "(?!)"


def threads_for(*models):
    """CPU threads of a job that runs ``models``: the llama.cpp server's threads, one otherwise."""
    threads = [
        MODELS[m]["llamacpp"]["threads"]
        for m in models
        if MODELS[m]["engine"] == "llamacpp"
    ]
    return max(threads, default=1)


def placement(gpus, gpu_model=None):
    """Where a submitted job asking for ``gpus`` goes: partition, account and extra flags from ``cluster``,
    and the GPUs with their type (``gpu_model``, else the cluster's)."""
    cluster = config["cluster"]
    return {
        "slurm_partition": cluster["gpu_partition" if gpus else "cpu_partition"],
        "slurm_account": cluster["account"] or "",
        "slurm_extra": cluster["extra_sbatch"] or "",
        "gpu": gpus,
        "gpu_model": (gpu_model or cluster["gpu_model"] or "") if gpus else "",
    }


def job_resources(*models):
    """What a submitted job that runs ``models`` asks SLURM for: its ``placement``; GPUs, their type, CPUs
    per GPU, memory and runtime from the registry (the most any model needs). Splat it into a rule's
    resources."""
    gpu_models = [MODELS[m].get("gpu_model") for m in models if MODELS[m]["gpus"]]
    return {
        **placement(
            max((MODELS[m]["gpus"] for m in models), default=0),
            next(filter(None, gpu_models), None),
        ),
        "cpus_per_gpu": max((MODELS[m]["cpus_per_gpu"] for m in models), default=4),
        "mem_mb": max((MODELS[m]["resources"]["mem_mb"] for m in models), default=4000),
        "runtime": max(
            (MODELS[m]["resources"]["runtime_min"] for m in models), default=60
        ),
    }


def embedder_job_resources(embedder, mem_mb, runtime):
    """A scoring job, which runs no LLM: placed by its embedder's GPUs (``embedders.NAME.gpus``; 0: the CPU
    partition)."""
    gpus = config["embedders"][embedder]["gpus"]
    return {**job_resources(), **placement(gpus), "mem_mb": mem_mb, "runtime": runtime}


def per_job(resources_of):
    """Resources that depend on the job's wildcards, one function per resource (Snakemake's form)."""
    return {key: (lambda wc, key=key: resources_of(wc)[key]) for key in job_resources()}


def model_job_resources():
    """``job_resources`` of the job's own model (the ``model`` wildcard)."""
    return per_job(lambda wc: job_resources(wc.model))


def scoring_job_resources(mem_mb, runtime):
    """``embedder_job_resources`` of the job's own embedder (the ``embedder`` wildcard)."""
    return per_job(lambda wc: embedder_job_resources(wc.embedder, mem_mb, runtime))


# --- inputs of the tables ---------------------------------------------------------------------------------


def instance_source(wildcards):
    source = config["instances"]["source"]
    if source == "file":
        return [config["instances"]["files"][wildcards.subtask]]
    if source == "reconstructed":
        return [RECONSTRUCTED.format(subtask=wildcards.subtask)]
    return []  # the demo set, from the subtask's definition


def scenario_file(wildcards):
    """A study's scenario file, when the config names one (the shipped set otherwise)."""
    path = config["studies"][
        "safety_scenarios" if wildcards.study == "safety" else "instruction_following"
    ]
    return [path] if path else []


def instance_review_targets():
    """The instance review queue, when instances are reconstructed."""
    return (
        [INSTANCE_REVIEW_ALL]
        if config["instances"]["source"] == "reconstructed"
        else []
    )


def cell_summary(embedder, model, variant, subtask):
    """The summary Table 2 reads for one cell: J for judged subtasks (of the judged models), S otherwise."""
    pattern = (
        J_SUMMARY if subtask in JUDGED and model in JUDGED_MODELS else SCORE_SUMMARY
    )
    return pattern.format(
        embedder=embedder, model=model, variant=variant, subtask=subtask
    )


def table2_summaries(wildcards):
    return [
        cell_summary(e, m, v, s)
        for e in EMBEDDERS
        for m in RUN_MODELS
        for v in VARIANTS
        for s in SUBTASKS
    ]


def calibration_targets():
    """Calibration needs the chance floor and the oracle among the baselines."""
    wanted = {"baseline-random-reference", "baseline-oracle"}
    return [f"{CALIBRATION}.md"] if wanted <= set(config["baselines"]) else []
