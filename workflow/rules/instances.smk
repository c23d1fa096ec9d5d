# Instances stage: one validated instance set per subtask (the demo set, a file, or inputs reconstructed from
# the released references and verified by vote).


rule instances:
    input:
        instance_source,
    output:
        path("instances"),
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
        settings=settings("instances"),
    shell:
        h2htalk("instances", "--subtask {wildcards.subtask}")


rule reconstruct_instances:
    input:
        curated=expand(path("curated"), subtask=RUN.subtasks),
        model_files=gguf(*RECONSTRUCT_MODELS),
        prefetched=prefetched(*RECONSTRUCT_MODELS),
        decisions=config["instances"]["review_imports"],
        store=ancient(STORE),
    output:
        instances=expand(path("reconstructed"), subtask=RUN.subtasks),
        reports=expand(path("reconstruction_report"), subtask=RUN.subtasks),
        review=expand(path("instance_review"), subtask=RUN.subtasks),
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
        settings=settings("reconstruct", *RECONSTRUCT_MODELS),
        ratings=ratings_param(INSTANCE_DECISIONS),
    shell:
        h2htalk("reconstruct", "--server-log {log.server}", log="{log.main}")


rule instances_review:
    input:
        expand(path("instance_review"), subtask=RUN.subtasks),
    output:
        path("instance_review_all"),
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
        expand(path("reconstruction_report"), subtask=RUN.subtasks),
        path("instance_review_all"),
