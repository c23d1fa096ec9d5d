# Generation stage: one job per model (the engine starts once per job) writing every (variant, subtask).
# Responses are cached content-addressed, so a rerun, a resumed job or one regenerated subtask sends
# requests only for what is missing.


rule provision_model:
    output:
        MODEL_FILE,
    log:
        f"{LOGS}/models/{{model}}.log",
    conda:
        "../../envs/generation.yaml"
    resources:
        mem_mb=1000,
        runtime=60,
    params:
        config=config_json("model_registry"),
    shell:
        "python -m h2htalk --log {log} provision-model {params.config} --model {wildcards.model} --out {output}"


rule generate:
    input:
        prompts=expand(PROMPTS, variant=VARIANTS, subtask=SUBTASKS),
        model_files=model_gguf,
        instances=baseline_instances,
    output:
        responses=expand(
            GENERATIONS, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
        ),
        summary=GENERATION_RUN,
    log:
        main=f"{LOGS}/generations/{{model}}.log",
        server=f"{LOGS}/generations/{{model}}.server.log",
    conda:
        "../../envs/generation.yaml"
    threads: lambda wc: threads_for(wc.model)
    resources:
        mem_mb=lambda wc: model_resources(wc.model)["mem_mb"],
        runtime=lambda wc: model_resources(wc.model)["runtime_min"],
        gpu=lambda wc: gpus_for(wc.model),
        slurm_partition=lambda wc: partition(gpus_for(wc.model)),
    params:
        config=config_json("model_registry", "generation"),
        model_files=model_files_option,
    shell:
        "python -m h2htalk --log {log.main} generate {params.config} --model {wildcards.model} --prompts {input.prompts}"
        " --out {output.responses} --instances {input.instances} {params.model_files}"
        " --server-log {log.server} --summary {output.summary}"


rule generations:
    input:
        expand(GENERATION_RUN, model=RUN_MODELS),
