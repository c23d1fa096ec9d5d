# Scoring stage: BLEU-1..4, ROUGE-1/L, SS and S for every Table 2 cell of a model, in one job per (embedder,
# model): the embedder loads once; and the safety study's answers of every study model, in one job per embedder.


rule score:
    input:
        generations=paths("generations", RUN.scoring("{model}", "-")),
        references=expand(path("instances"), subtask=RUN.subtasks),
        prefetched=embedder_prefetched,
    output:
        scored=paths("score_items", RUN.scoring("{model}", "{embedder}")),
        summaries=paths("score_summary", RUN.scoring("{model}", "{embedder}")),
    log:
        f"{LOGS}/scores/{{embedder}}/{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/score/{{embedder}}/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(RUN.run_models),
    conda:
        "../../envs/metrics.yaml"
    resources:
        **scoring_job_resources(mem_mb=8000, runtime=240),
    params:
        settings=settings("score", "model"),
    shell:
        h2htalk("score", "--model {wildcards.model} --embedder {wildcards.embedder}")


rule score_studies:
    input:
        generations=paths("generations", RUN.study_scoring("-")),
        references={
            LAYOUT.references(c.variant, c.task): None for c in RUN.study_scoring("-")
        },
        prefetched=embedder_prefetched,
    output:
        scored=paths("score_items", RUN.study_scoring("{embedder}")),
        summaries=paths("score_summary", RUN.study_scoring("{embedder}")),
    log:
        f"{LOGS}/studies/scores/{{embedder}}.log",
    benchmark:
        f"{BENCHMARKS}/score_studies/{{embedder}}.tsv"
    conda:
        "../../envs/metrics.yaml"
    resources:
        **scoring_job_resources(mem_mb=8000, runtime=60),
    params:
        settings=settings("score-studies"),
    shell:
        h2htalk("score-studies", "--embedder {wildcards.embedder}")


rule scores:
    input:
        paths(
            "score_summary",
            [
                c.scored_by(e)
                for e in RUN.embedders
                for m in RUN.run_models
                for c in RUN.benchmark(m)
            ],
        ),
