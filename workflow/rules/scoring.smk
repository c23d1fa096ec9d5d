# Scoring stage: BLEU-1..4, ROUGE-1/L, SS and S for every (embedder, model, variant, subtask).


rule score:
    input:
        generations=GENERATIONS,
        references=INSTANCES,
    output:
        scored=SCORE_ITEMS,
        summary=SCORE_SUMMARY,
    log:
        f"{LOGS}/scores/{{embedder}}/{{model}}/{{variant}}/{{subtask}}.log",
    conda:
        "../../envs/metrics.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        config=config_json("scoring", "embedders"),
    shell:
        "python -m h2htalk --log {log} score {params.config} --embedder {wildcards.embedder} --generations {input.generations}"
        " --references {input.references} --out-items {output.scored} --out-summary {output.summary}"


rule scores:
    input:
        expand(
            SCORE_SUMMARY,
            embedder=EMBEDDERS,
            model=RUN_MODELS,
            variant=VARIANTS,
            subtask=SUBTASKS,
        ),
