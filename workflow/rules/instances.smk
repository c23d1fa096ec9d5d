# What a model under test sees: one validated instance set per subtask (the demo set, a file, or inputs
# reconstructed from the released references), and the rendered chat messages for each (variant, subtask).


rule instances:
    input:
        instance_source,
    output:
        INSTANCES,
    log:
        f"{LOGS}/instances/{{subtask}}.log",
    benchmark:
        f"{BENCHMARKS}/instances/{{subtask}}.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        file=lambda wc, input: f"--file {shlex.quote(input[0])}" if input else "",
    shell:
        "python -m h2htalk --log {log} instances --subtask {wildcards.subtask} {params.file} --out {output}"


rule reconstruct_instances:
    input:
        curated=expand(CURATED, subtask=SUBTASKS),
        model_files=gguf(*RECONSTRUCT_MODELS),
        prefetched=prefetched(*RECONSTRUCT_MODELS),
        decisions=config["instances"]["review_imports"],
    output:
        instances=expand(RECONSTRUCTED, subtask=SUBTASKS),
        reports=expand(RECONSTRUCTION_REPORT, subtask=SUBTASKS),
        review=expand(INSTANCE_REVIEW, subtask=SUBTASKS),
    log:
        main=f"{LOGS}/reconstructed/reconstruct.log",
        server=f"{LOGS}/reconstructed/reconstruct.server.log",
    benchmark:
        f"{BENCHMARKS}/reconstruct_instances.tsv"
    conda:
        "../../envs/generation.yaml"
    threads: threads_for(*RECONSTRUCT_MODELS)
    resources:
        **job_resources(*RECONSTRUCT_MODELS),
    params:
        config=config_json("model_registry", "generation", "instances"),
        subtasks=SUBTASKS,
        model_files=model_files_option,
        prefetched=prefetched_option,
        decisions=lambda wc, input: " ".join(
            f"--decisions {shlex.quote(p)}" for p in input.decisions
        ),
    shell:
        "python -m h2htalk --log {log.main} reconstruct {params.config} {params.prefetched} --subtask {params.subtasks}"
        " --curated {input.curated} {params.model_files} --server-log {log.server} {params.decisions}"
        " --out {output.instances} --report {output.reports} --review {output.review}"


rule instances_review:
    input:
        expand(INSTANCE_REVIEW, subtask=SUBTASKS),
    output:
        INSTANCE_REVIEW_ALL,
    log:
        f"{LOGS}/reconstructed/review.log",
    benchmark:
        f"{BENCHMARKS}/instances_review.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk --log {log} join-csv {input} --out {output}"


rule reconstruct:
    input:
        expand(RECONSTRUCTION_REPORT, subtask=SUBTASKS),
        INSTANCE_REVIEW_ALL,


rule prompt_messages:
    input:
        INSTANCES,
    output:
        PROMPTS,
    log:
        f"{LOGS}/prompts/{{variant}}/{{subtask}}.log",
    benchmark:
        f"{BENCHMARKS}/prompt_messages/{{variant}}/{{subtask}}.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk --log {log} prompts --instances {input} --variant {wildcards.variant} --out {output}"


rule prompts:
    input:
        expand(PROMPTS, variant=VARIANTS, subtask=SUBTASKS),
