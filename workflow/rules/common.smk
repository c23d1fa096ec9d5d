# Shared settings and input functions. Logic lives in the h2htalk package; rules only wire files together.
import os

from h2htalk.config import load_registry
from h2htalk.instances import demo_instances_path
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask

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

SUBTASKS = list(config["subtasks"])
VARIANTS = list(config["variants"])
MODELS = load_registry(config["model_registry"])
RUN_MODELS = [
    *config["models"],
    *config["baselines"],
]  # everything that gets generations, scores, rows
UPSTREAM_DIR = "results/data/upstream"
CURATED_DIR = "results/data/curated"
INSTANCES_DIR = "results/instances"
LOG_DIR = "results/logs"
JUDGE = config["judge"]
JUDGED = [s for s in SUBTASKS if get_subtask(s).score == "J"]
RECONSTRUCT = config["instances"]["reconstruct"]
RECONSTRUCT_MODELS = list(
    dict.fromkeys([RECONSTRUCT["generator"], *RECONSTRUCT["judges"]])
)
LOCAL_RECONSTRUCT_MODELS = [
    m for m in RECONSTRUCT_MODELS if MODELS[m]["engine"] == "llamacpp"
]
STUDY = config["studies"]
STUDY_MODELS = STUDY["models"] or config["models"]
STUDY_JUDGE = STUDY["judge"] or JUDGE["model"]
STUDY_NAMES = ["safety", "instruction_following"]
STUDY_FILES = {
    "safety": STUDY["safety_scenarios"],
    "instruction_following": STUDY["instruction_following"],
}
EMBEDDER = config["scoring"]["embedders"][
    0
]  # the embedder of the single-embedder outputs (review, Table 3)
FIGURES = {
    "fig4_wordcloud": ("4", config["figures"]["top_words"]),
    "fig5_verb_noun": ("5", config["figures"]["top_pairs"]),
    "fig6_lengths": ("6", 0),
}


def upstream_file(subtask):
    return f"{UPSTREAM_DIR}/{get_subtask(subtask).upstream_file}"


def shell_list(values):
    """Comma-separated, quoted for the shell: the form the h2htalk command takes for list options."""
    return shlex.quote(",".join(values))


def shell_mapping(mapping):
    return shlex.quote(",".join(f"{k}={v}" for k, v in mapping.items()))


def gguf(model):
    """The provisioned GGUF file of a llamacpp model, as a list (empty for other engines)."""
    return (
        [f"results/models/{model}.gguf"]
        if MODELS[model]["engine"] == "llamacpp"
        else []
    )


def model_file(wildcards):
    return gguf(wildcards.model)


def model_file_option(wildcards, input):
    return f"--model-file {input.model_file[0]}" if input.model_file else ""


def baseline_instances(wildcards):
    """Baselines answer from the instances (references, inputs) instead of a model."""
    if MODELS[wildcards.model]["engine"] != "baseline":
        return []
    return expand(f"{INSTANCES_DIR}/{{subtask}}.jsonl", subtask=SUBTASKS)


def model_resource(key, default):
    return (
        lambda wildcards: MODELS[wildcards.model].get("resources", {}).get(key, default)
    )


def fixed_model_resource(model, key, default):
    return lambda wildcards: MODELS[model].get("resources", {}).get(key, default)


def engine_threads(model):
    """CPU threads of a job that runs the model: the llama.cpp server's threads, one otherwise."""
    spec = MODELS[model]
    return (
        spec.get("llamacpp", {}).get("threads", 2)
        if spec["engine"] == "llamacpp"
        else 1
    )


def partition(gpus):
    """The SLURM partition for a job needing ``gpus`` GPUs."""
    return (
        config["cluster"]["gpu_partition"]
        if gpus
        else config["cluster"]["cpu_partition"]
    )


def instance_source_file(wildcards):
    source = config["instances"]["source"]
    if source == "file":
        return config["instances"]["files"][wildcards.subtask]
    if source == "reconstructed":
        return f"results/reconstructed/{wildcards.subtask}.jsonl"
    return str(demo_instances_path(wildcards.subtask))


def instance_review_targets():
    """The instance review queue, when instances are reconstructed."""
    return (
        ["results/review/instances.csv"]
        if config["instances"]["source"] == "reconstructed"
        else []
    )


def table2_summaries(wildcards):
    """Per (embedder, model, variant, subtask): the J summary for judged subtasks, the S summary otherwise."""
    paths = []
    for embedder in config["scoring"]["embedders"]:
        for model in RUN_MODELS:
            for variant in VARIANTS:
                for subtask in SUBTASKS:
                    stage = "judged" if subtask in JUDGED else "scores"
                    paths.append(
                        f"results/{stage}/{embedder}/{model}/{variant}/{subtask}.summary.json"
                    )
    return paths


def calibration_targets():
    """Calibration needs the chance floor and the oracle among the baselines."""
    wanted = {"baseline-random-reference", "baseline-oracle"}
    return (
        ["paper_figures/calibration.md"] if wanted <= set(config["baselines"]) else []
    )
