# Scoring stage: BLEU-1..4, ROUGE-1/L, SS and S for every cell of a model, and its safety-study answers, in
# one job per (embedder, model): the embedder loads once.


rule score:
    input:
        generations=paths("generations", RUN.scoring("{model}", "-", studies=True)),
        references={
            LAYOUT.references(c.variant, c.task): None
            for c in RUN.scoring("-", "-", studies=True)
        },
        prefetched=embedder_prefetched,
    output:
        scored=paths("score_items", RUN.scoring("{model}", "{embedder}", studies=True)),
        summaries=paths(
            "score_summary", RUN.scoring("{model}", "{embedder}", studies=True)
        ),
    log:
        f"{LOGS}/scores/{{embedder}}/{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/score/{{embedder}}/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(RUN.models),
    conda:
        "../../envs/metrics.yaml"
    resources:
        **scoring_job_resources(mem_mb=8000, runtime=240),
    params:
        settings=settings("score", "model"),
    shell:
        h2htalk("score", "--model {wildcards.model} --embedder {wildcards.embedder}")


use rule score as score_baseline with:
    input:
        generations=paths("generations", RUN.scoring("{model}", "-", studies=False)),
        references=expand(path("instances"), subtask=RUN.subtasks),
        prefetched=embedder_prefetched,
    output:
        scored=paths("score_items", RUN.scoring("{model}", "{embedder}", studies=False)),
        summaries=paths(
            "score_summary", RUN.scoring("{model}", "{embedder}", studies=False)
        ),
    benchmark:
        f"{BENCHMARKS}/score/{{embedder}}/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(RUN.baselines),


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
