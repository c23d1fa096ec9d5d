# What a model under test sees: one validated instance set per subtask, and the rendered chat messages
# for each (variant, subtask).


rule instances:
    input:
        instance_source_file,
    output:
        f"{INSTANCES_DIR}/{{subtask}}.jsonl",
    log:
        f"{LOG_DIR}/instances/{{subtask}}.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        source="demo" if config["instances"]["source"] == "demo" else "file",
    shell:
        "python -m h2htalk instances --subtask {wildcards.subtask} --source {params.source} --file {input:q}"
        " --out {output} > {log} 2>&1"


rule reconstruct_instances:
    input:
        curated=f"{CURATED_DIR}/{{subtask}}.jsonl",
        model_files=expand(
            "results/models/{model}.gguf", model=LOCAL_RECONSTRUCT_MODELS
        ),
        decisions=config["instances"]["review_imports"],
    output:
        instances="results/reconstructed/{subtask}.jsonl",
        report="results/reconstructed/{subtask}.report.json",
        review="results/review/instances/{subtask}.csv",
    log:
        f"{LOG_DIR}/reconstructed/{{subtask}}.log",
    conda:
        "../../envs/generation.yaml"
    threads: max(engine_threads(m) for m in RECONSTRUCT_MODELS)
    resources:
        mem_mb=4000,
        runtime=720,
        gpu=max(MODELS[m].get("gpus", 0) for m in RECONSTRUCT_MODELS),
        slurm_partition=partition(
            max(MODELS[m].get("gpus", 0) for m in RECONSTRUCT_MODELS)
        ),
    params:
        registry=config["model_registry"],
        settings=shlex.quote(json.dumps(config["generation"])),
        options=shlex.quote(json.dumps(RECONSTRUCT)),
        model_files=" ".join(
            f"--model-file {m}=results/models/{m}.gguf"
            for m in LOCAL_RECONSTRUCT_MODELS
        ),
        decisions=lambda wc, input: " ".join(
            f"--decisions {shlex.quote(p)}" for p in input.decisions
        ),
        cache_dir=RECONSTRUCT["cache_dir"],
    shell:
        "python -m h2htalk reconstruct --subtask {wildcards.subtask} --curated {input.curated}"
        " --registry {params.registry} --settings {params.settings} --reconstruct-settings {params.options}"
        " {params.model_files} --cache-dir {params.cache_dir}"
        " --server-logs results/logs/reconstructed/{wildcards.subtask}.servers"
        " {params.decisions} --out {output.instances} --report {output.report} --review {output.review}"
        " > {log} 2>&1"


rule instances_review:
    input:
        expand("results/review/instances/{subtask}.csv", subtask=SUBTASKS),
    output:
        "results/review/instances.csv",
    log:
        f"{LOG_DIR}/reconstructed/review.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk join-csv {input} --out {output} > {log} 2>&1"


rule reconstruct:
    input:
        expand("results/reconstructed/{subtask}.report.json", subtask=SUBTASKS),
        "results/review/instances.csv",


rule prompt_messages:
    input:
        f"{INSTANCES_DIR}/{{subtask}}.jsonl",
    output:
        "results/prompts/{variant}/{subtask}.jsonl",
    log:
        f"{LOG_DIR}/prompts/{{variant}}/{{subtask}}.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk prompts --instances {input} --variant {wildcards.variant} --out {output} > {log} 2>&1"


rule prompts:
    input:
        expand(
            "results/prompts/{variant}/{subtask}.jsonl",
            variant=VARIANTS,
            subtask=SUBTASKS,
        ),
