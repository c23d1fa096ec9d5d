# Scoring stage: BLEU-1..4, ROUGE-1/L, SS and S for every (variant, subtask) of a model, and its safety-study
# answers, in one job per (embedder, model): the embedder loads once.


rule score:
    input:
        generations=[
            *expand(
                GENERATIONS, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
            ),
            *expand(
                STUDY_GENERATIONS, study="safety", variant=VARIANTS, allow_missing=True
            ),
        ],
        references=[
            *cell_instances(SUBTASKS),
            *expand(STUDY_ITEMS, study="safety", variant=VARIANTS),
        ],
        prefetched=embedder_prefetched,
    output:
        scored=[
            *expand(
                SCORE_ITEMS, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
            ),
            *expand(SAFETY_ITEMS, variant=VARIANTS, allow_missing=True),
        ],
        summaries=[
            *expand(
                SCORE_SUMMARY, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
            ),
            *expand(SAFETY_SUMMARY, variant=VARIANTS, allow_missing=True),
        ],
    log:
        f"{LOGS}/scores/{{embedder}}/{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/score/{{embedder}}/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(LLMS),
    conda:
        "../../envs/metrics.yaml"
    resources:
        **scoring_job_resources(mem_mb=8000, runtime=240),
    params:
        config=config_json("scoring", "embedders"),
        prefetched=prefetched_option,
    shell:
        "python -m h2htalk --log {log} score {params.config} {params.prefetched} --embedder {wildcards.embedder}"
        " --generations {input.generations} --references {input.references}"
        " --out-items {output.scored} --out-summary {output.summaries}"


use rule score as score_baseline with:
    input:
        generations=expand(
            GENERATIONS, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
        ),
        references=cell_instances(SUBTASKS),
        prefetched=embedder_prefetched,
    output:
        scored=expand(
            SCORE_ITEMS, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
        ),
        summaries=expand(
            SCORE_SUMMARY, variant=VARIANTS, subtask=SUBTASKS, allow_missing=True
        ),
    benchmark:
        f"{BENCHMARKS}/score/{{embedder}}/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(BASELINES),


rule scores:
    input:
        expand(
            SCORE_SUMMARY,
            embedder=EMBEDDERS,
            model=RUN_MODELS,
            variant=VARIANTS,
            subtask=SUBTASKS,
        ),
