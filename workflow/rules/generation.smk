# Generation stage: one job per model under test (its engine starts once) answering every Table 2 cell (the
# studies' answers are made by each study model's study job, studies.smk); baselines answer the benchmark from the
# instances, on the submit host. Answers are cached content-addressed, so a rerun, a resumed job or one
# regenerated subtask sends requests only for what is missing.


rule provision_model:
    output:
        path("model_file"),
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
        settings=settings("provision-model", "model"),
    shell:
        h2htalk("provision-model", "--model {wildcards.model}")


rule generate:
    input:
        prompts=expand(path("prompts"), variant=RUN.variants, subtask=RUN.subtasks),
        model=model_inputs,
    output:
        responses=paths("generations", RUN.benchmark("{model}")),
        summary=path("generation_run"),
    log:
        main=f"{LOGS}/generations/{{model}}.log",
        server=f"{LOGS}/generations/{{model}}.server.log",
    benchmark:
        f"{BENCHMARKS}/generate/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(RUN.models),
    conda:
        "../../envs/generation.yaml"
    threads: lambda wc: threads_for(wc.model)
    resources:
        **model_job_resources(),
    params:
        settings=settings("generate", "model"),
    shell:
        h2htalk(
            "generate",
            "--model {wildcards.model} --server-log {log.server}",
            log="{log.main}",
        )


rule baseline_answers:
    input:
        prompts=expand(path("prompts"), variant=RUN.variants, subtask=RUN.subtasks),
        instances=expand(path("instances"), subtask=RUN.subtasks),
    output:
        responses=paths("generations", RUN.benchmark("{model}")),
        summary=path("generation_run"),
    log:
        f"{LOGS}/generations/{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/baseline_answers/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(RUN.baselines),
    conda:
        "../../envs/generation.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("generate", "model"),
    shell:
        h2htalk("generate", "--model {wildcards.model}")


rule generations:
    input:
        expand(path("generation_run"), model=RUN.run_models),
