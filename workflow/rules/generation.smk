# Generation stage: one job per model (the engine starts once per job) writing every (variant, subtask).
# Responses are cached content-addressed, so a rerun, a resumed job or one regenerated subtask sends
# requests only for what is missing.


rule provision_model:
    output:
        "results/models/{model}.gguf",
    params:
        registry=config["model_registry"],
    log:
        f"{LOG_DIR}/models/{{model}}.log",
    resources:
        mem_mb=1000,
        runtime=60,
    conda:
        "../../envs/generation.yaml"
    shell:
        "{H2HTALK} provision-model --model {wildcards.model} --registry {params.registry} --out {output} > {log} 2>&1"


def model_file(wildcards):
    engine = MODELS[wildcards.model]["engine"]
    return [f"results/models/{wildcards.model}.gguf"] if engine == "llamacpp" else []


def baseline_instances(wildcards):
    """Baselines answer from the instances (references, inputs) instead of a model."""
    if MODELS[wildcards.model]["engine"] != "baseline":
        return []
    return expand(f"{INSTANCES_DIR}/{{subtask}}.jsonl", subtask=SUBTASKS)


def model_resource(key, default):
    return lambda wildcards: MODELS[wildcards.model].get("resources", {}).get(key, default)


rule generate:
    input:
        prompts=expand("results/prompts/{variant}/{subtask}.jsonl", variant=VARIANTS, subtask=SUBTASKS),
        model_file=model_file,
        instances=baseline_instances,
    output:
        responses=expand(
            "results/generations/{{model}}/{variant}/{subtask}.jsonl", variant=VARIANTS, subtask=SUBTASKS
        ),
        summary="results/generations/{model}/run.json",
    params:
        registry=config["model_registry"],
        settings=shlex.quote(json.dumps(config["generation"])),
        selection=" ".join(
            [f"--variant {v}" for v in VARIANTS] + [f"--subtask {s}" for s in SUBTASKS]
        ),
        model_file=lambda wc, input: f"--model-file {input.model_file[0]}" if input.model_file else "",
        cache_dir=config["generation"]["cache_dir"],
    log:
        main=f"{LOG_DIR}/generations/{{model}}.log",
        server=f"{LOG_DIR}/generations/{{model}}.server.log",
    threads: lambda wildcards: workflow.cores if MODELS[wildcards.model]["engine"] == "llamacpp" else 1
    resources:
        mem_mb=model_resource("mem_mb", 4000),
        runtime=model_resource("runtime_min", 240),
        gpu=lambda wildcards: MODELS[wildcards.model].get("gpus", 0),
    conda:
        "../../envs/generation.yaml"
    shell:
        "{H2HTALK} generate --model {wildcards.model} --registry {params.registry} --settings {params.settings}"
        " --prompts-dir results/prompts --instances-dir {INSTANCES_DIR} {params.selection}"
        " --out-dir results/generations/{wildcards.model}"
        " --cache-dir {params.cache_dir} {params.model_file} --server-log {log.server}"
        " --summary {output.summary} > {log.main} 2>&1"


rule generations:
    input:
        expand("results/generations/{model}/run.json", model=RUN_MODELS),
