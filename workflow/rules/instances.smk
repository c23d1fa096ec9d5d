# What a model under test sees: one validated instance set per subtask (the demo set, a file, or inputs
# reconstructed from the released references), and the rendered chat messages for each (variant, subtask).


rule instances:
    input:
        instance_source,
    output:
        INSTANCES,
    log:
        f"{LOGS}/instances/{{subtask}}.log",
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
        curated=CURATED,
        model_files=gguf(*RECONSTRUCT_MODELS),
        decisions=config["instances"]["review_imports"],
    output:
        instances=RECONSTRUCTED,
        report=RECONSTRUCTION_REPORT,
        review=INSTANCE_REVIEW,
    log:
        main=f"{LOGS}/reconstructed/{{subtask}}.log",
        server=f"{LOGS}/reconstructed/{{subtask}}.server.log",
    conda:
        "../../envs/generation.yaml"
    threads: threads_for(*RECONSTRUCT_MODELS)
    resources:
        mem_mb=model_resources(*RECONSTRUCT_MODELS)["mem_mb"],
        runtime=720,
        gpu=gpus_for(*RECONSTRUCT_MODELS),
        slurm_partition=partition(gpus_for(*RECONSTRUCT_MODELS)),
    params:
        config=config_json("model_registry", "generation", "instances"),
        model_files=model_files_option,
        decisions=lambda wc, input: " ".join(
            f"--decisions {shlex.quote(p)}" for p in input.decisions
        ),
    shell:
        "python -m h2htalk --log {log.main} reconstruct {params.config} --subtask {wildcards.subtask} --curated {input.curated}"
        " {params.model_files} --server-log {log.server} {params.decisions}"
        " --out {output.instances} --report {output.report} --review {output.review}"


rule instances_review:
    input:
        expand(INSTANCE_REVIEW, subtask=SUBTASKS),
    output:
        INSTANCE_REVIEW_ALL,
    log:
        f"{LOGS}/reconstructed/review.log",
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
