# What a model under test sees: one validated instance set per subtask, and the rendered chat messages
# for each (variant, subtask).


def instance_source_file(wildcards):
    if config["instances"]["source"] == "file":
        return config["instances"]["files"][wildcards.subtask]
    return str(demo_instances_path(wildcards.subtask))


rule instances:
    input:
        instance_source_file,
    output:
        f"{INSTANCES_DIR}/{{subtask}}.jsonl",
    params:
        source=config["instances"]["source"],
    log:
        f"{LOG_DIR}/instances/{{subtask}}.log",
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        "../../envs/data.yaml"
    shell:
        "{H2HTALK} instances --subtask {wildcards.subtask} --source {params.source} --file {input:q}"
        " --out {output} > {log} 2>&1"


rule prompt_messages:
    input:
        f"{INSTANCES_DIR}/{{subtask}}.jsonl",
    output:
        "results/prompts/{variant}/{subtask}.jsonl",
    log:
        f"{LOG_DIR}/prompts/{{variant}}/{{subtask}}.log",
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        "../../envs/data.yaml"
    shell:
        "{H2HTALK} prompts --instances {input} --variant {wildcards.variant} --out {output} > {log} 2>&1"


rule prompts:
    input:
        expand("results/prompts/{variant}/{subtask}.jsonl", variant=VARIANTS, subtask=SUBTASKS),
