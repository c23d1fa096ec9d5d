# Generation stage: one job per model (the engine starts once per job) writing every (variant, subtask).
# Responses are cached content-addressed, so a rerun, a resumed job or one regenerated subtask sends
# requests only for what is missing.


rule provision_model:
    output:
        "results/models/{model}.gguf",
    log:
        f"{LOG_DIR}/models/{{model}}.log",
    conda:
        "../../envs/generation.yaml"
    resources:
        mem_mb=1000,
        runtime=60,
    params:
        registry=config["model_registry"],
    shell:
        "python -m h2htalk provision-model --model {wildcards.model} --registry {params.registry} --out {output} > {log} 2>&1"


rule generate:
    input:
        prompts=expand(
            "results/prompts/{variant}/{subtask}.jsonl",
            variant=VARIANTS,
            subtask=SUBTASKS,
        ),
        model_file=model_file,
        instances=baseline_instances,
    output:
        responses=expand(
            "results/generations/{{model}}/{variant}/{subtask}.jsonl",
            variant=VARIANTS,
            subtask=SUBTASKS,
        ),
        summary="results/generations/{model}/run.json",
    log:
        main=f"{LOG_DIR}/generations/{{model}}.log",
        server=f"{LOG_DIR}/generations/{{model}}.server.log",
    conda:
        "../../envs/generation.yaml"
    threads: lambda wildcards: engine_threads(wildcards.model)
    resources:
        mem_mb=model_resource("mem_mb", 4000),
        runtime=model_resource("runtime_min", 240),
        gpu=lambda wildcards: MODELS[wildcards.model].get("gpus", 0),
        slurm_partition=lambda wildcards: partition(
            MODELS[wildcards.model].get("gpus", 0)
        ),
    params:
        registry=config["model_registry"],
        settings=shlex.quote(json.dumps(config["generation"])),
        selection=" ".join(
            [f"--variant {v}" for v in VARIANTS] + [f"--subtask {s}" for s in SUBTASKS]
        ),
        model_file=model_file_option,
        cache_dir=config["generation"]["cache_dir"],
    shell:
        "python -m h2htalk generate --model {wildcards.model} --registry {params.registry} --settings {params.settings}"
        " --prompts-dir results/prompts --instances-dir results/instances {params.selection}"
        " --out-dir results/generations/{wildcards.model}"
        " --cache-dir {params.cache_dir} {params.model_file} --server-log {log.server}"
        " --summary {output.summary} > {log.main} 2>&1"


rule generations:
    input:
        expand("results/generations/{model}/run.json", model=RUN_MODELS),
