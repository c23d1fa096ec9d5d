# Judge stage for ItineraryBasic/Middle/Advanced: the rubric judge (k samples an item), J = alpha*S/20 +
# (1-alpha)*J_judge, the human-review gate and people's scores (filled-in queues, the review desk's store).


rule rubric_judge:
    input:
        instances=expand(path("instances"), subtask=RUN.judged_subtasks),
        prompts=expand(
            path("prompts"), variant=RUN.variants, subtask=RUN.judged_subtasks
        ),
        generations=paths("generations", RUN.judged("{model}")),
        model=[*gguf(RUBRIC_JUDGE), *prefetched(RUBRIC_JUDGE)],
    output:
        verdicts=paths("judge_samples", RUN.judged("{model}")),
        summary=path("judge_run"),
    log:
        main=f"{LOGS}/judge_samples/{{model}}.log",
        server=f"{LOGS}/judge_samples/{{model}}.server.log",
    benchmark:
        f"{BENCHMARKS}/rubric_judge/{{model}}.tsv"
    conda:
        "../../envs/generation.yaml"
    threads: threads_for(RUBRIC_JUDGE)
    resources:
        **job_resources(RUBRIC_JUDGE),
    params:
        settings=settings("rubric-judge", RUBRIC_JUDGE),
    shell:
        h2htalk(
            "rubric-judge",
            "--model {wildcards.model} --server-log {log.server}",
            log="{log.main}",
        )


rule combine_j:
    input:
        scores=paths(
            "score_items", [c.scored_by("{embedder}") for c in RUN.judged("{model}")]
        ),
        judgments=paths("judge_samples", RUN.judged("{model}")),
        human=config["review"]["imports"],
        store=ancient(STORE),
    output:
        scored=paths(
            "j_items", [c.scored_by("{embedder}") for c in RUN.judged("{model}")]
        ),
        summaries=paths(
            "j_summary", [c.scored_by("{embedder}") for c in RUN.judged("{model}")]
        ),
    log:
        f"{LOGS}/j_scores/{{embedder}}/{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/combine_j/{{embedder}}/{{model}}.tsv"
    conda:
        "../../envs/metrics.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("combine-j"),
        ratings=ratings_param(REVIEW_SCORES, by_model=True),
    shell:
        h2htalk(
            "combine-j", "--model {wildcards.model} --embedder {wildcards.embedder}"
        )


rule review_queue:
    input:
        paths(
            "j_items",
            [
                c.scored_by(RUN.embedder)
                for m in RUN.judged_models
                for c in RUN.judged(m)
            ],
        ),
    output:
        path("review_queue"),
    log:
        f"{LOGS}/review_queue.log",
    benchmark:
        f"{BENCHMARKS}/review_queue.tsv"
    conda:
        "../../envs/metrics.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        settings=settings("review-queue"),
    shell:
        h2htalk("review-queue")
