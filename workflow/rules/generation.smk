# Generation stage: one job per model under test (its engine starts once) answering every (variant,
# subtask) of the benchmark and both studies; baselines answer from the instances, on the submit host.
# Answers are cached content-addressed, so a rerun, a resumed job or one regenerated subtask sends
# requests only for what is missing.


rule provision_model:
    output:
        MODEL_FILE,
    log:
        f"{LOGS}/models/{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/provision_model/{{model}}.tsv"
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
        prompts=[
            *expand(PROMPTS, variant=VARIANTS, subtask=SUBTASKS),
            *expand(STUDY_PROMPTS, study=STUDIES, variant=VARIANTS),
        ],
        model_files=model_gguf,
        prefetched=model_prefetched,
    output:
        responses=[
            *expand(
                GENERATIONS, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
            ),
            *expand(
                STUDY_GENERATIONS, study=STUDIES, variant=VARIANTS, allow_missing=True
            ),
        ],
        summary=GENERATION_RUN,
    log:
        main=f"{LOGS}/generations/{{model}}.log",
        server=f"{LOGS}/generations/{{model}}.server.log",
    benchmark:
        f"{BENCHMARKS}/generate/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(LLMS),
    conda:
        "../../envs/generation.yaml"
    threads: lambda wc: threads_for(wc.model)
    resources:
        **model_job_resources(),
    params:
        config=config_json("model_registry", "generation", "studies"),
        model_files=model_files_option,
        prefetched=prefetched_option,
    shell:
        "python -m h2htalk --log {log.main} generate {params.config} {params.prefetched} --model {wildcards.model}"
        " --prompts {input.prompts} --out {output.responses} {params.model_files} --server-log {log.server}"
        " --summary {output.summary}"


rule baseline_answers:
    input:
        prompts=expand(PROMPTS, variant=VARIANTS, subtask=SUBTASKS),
        instances=expand(INSTANCES, subtask=SUBTASKS),
    output:
        responses=expand(
            GENERATIONS, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
        ),
        summary=GENERATION_RUN,
    log:
        f"{LOGS}/generations/{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/baseline_answers/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(BASELINES),
    conda:
        "../../envs/generation.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        config=config_json("model_registry", "generation"),
    shell:
        "python -m h2htalk --log {log} generate {params.config} --model {wildcards.model} --prompts {input.prompts}"
        " --instances {input.instances} --out {output.responses} --summary {output.summary}"


rule generations:
    input:
        expand(GENERATION_RUN, model=RUN_MODELS),
