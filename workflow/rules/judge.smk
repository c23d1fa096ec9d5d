# Judge stage for ItineraryBasic/Middle/Advanced: rubric judge (k samples an item), J = alpha*S/20 +
# (1-alpha)*J_judge, the human-review gate and imports of human scores.


rule judge:
    input:
        instances=expand(INSTANCES, subtask=JUDGED),
        prompts=expand(PROMPTS, variant=VARIANTS, subtask=JUDGED),
        generations=expand(
            GENERATIONS, variant=VARIANTS, subtask=JUDGED, allow_missing=True
        ),
        model_files=gguf(JUDGE_MODEL),
        prefetched=prefetched(JUDGE_MODEL),
    output:
        verdicts=expand(
            JUDGE_SAMPLES, variant=VARIANTS, subtask=JUDGED, allow_missing=True
        ),
        summary=JUDGE_RUN,
    log:
        main=f"{LOGS}/judge_samples/{{model}}.log",
        server=f"{LOGS}/judge_samples/{{model}}.server.log",
    benchmark:
        f"{BENCHMARKS}/judge/{{model}}.tsv"
    conda:
        "../../envs/generation.yaml"
    threads: threads_for(JUDGE_MODEL)
    resources:
        **job_resources(JUDGE_MODEL),
    params:
        config=config_json("model_registry", "generation", "judge"),
        model_files=model_files_option,
        prefetched=prefetched_option,
    shell:
        "python -m h2htalk --log {log.main} judge {params.config} {params.prefetched} --instances {input.instances} --prompts {input.prompts}"
        " --generations {input.generations} --out {output.verdicts} {params.model_files}"
        " --server-log {log.server} --summary {output.summary}"


rule combine_j:
    input:
        scores=expand(SCORE_ITEMS, variant=VARIANTS, subtask=JUDGED, allow_missing=True),
        judgments=expand(
            JUDGE_SAMPLES, variant=VARIANTS, subtask=JUDGED, allow_missing=True
        ),
        human=config["review"]["imports"],
    output:
        scored=expand(J_ITEMS, variant=VARIANTS, subtask=JUDGED, allow_missing=True),
        summaries=expand(
            J_SUMMARY, variant=VARIANTS, subtask=JUDGED, allow_missing=True
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
        config=config_json("judge", "scoring"),
        human=lambda wc, input: " ".join(
            f"--human {shlex.quote(p)}" for p in input.human
        ),
    shell:
        "python -m h2htalk --log {log} combine-j {params.config} --scores {input.scores} --judgments {input.judgments}"
        " {params.human} --out-items {output.scored} --out-summary {output.summaries}"


rule review_queue:
    input:
        expand(
            J_ITEMS,
            embedder=EMBEDDER,
            model=JUDGED_MODELS,
            variant=VARIANTS,
            subtask=JUDGED,
        ),
    output:
        REVIEW_QUEUE,
    log:
        f"{LOGS}/review_queue.log",
    benchmark:
        f"{BENCHMARKS}/review_queue.tsv"
    conda:
        "../../envs/metrics.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk --log {log} review-queue {input} --out {output}"
