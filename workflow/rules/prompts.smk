# Prompts stage: what a model under test sees, rendered for every (variant, subtask).


rule prompt_messages:
    input:
        path("instances"),
    output:
        path("prompts"),
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
        h2htalk(
            "prompts", "--subtask {wildcards.subtask} --variant {wildcards.variant}"
        )


rule prompts:
    input:
        expand(path("prompts"), variant=RUN.variants, subtask=RUN.subtasks),
