# Scoring stage: BLEU-1..4, ROUGE-1/L, SS and S for every (embedder, model, variant, subtask).


rule score:
    input:
        generations="results/generations/{model}/{variant}/{subtask}.jsonl",
        references=f"{INSTANCES_DIR}/{{subtask}}.jsonl",
    output:
        per_item="results/scores/{embedder}/{model}/{variant}/{subtask}.items.jsonl",
        summary="results/scores/{embedder}/{model}/{variant}/{subtask}.summary.json",
    log:
        f"{LOG_DIR}/scores/{{embedder}}/{{model}}/{{variant}}/{{subtask}}.log",
    conda:
        "../../envs/metrics.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        spec=lambda wc: shlex.quote(json.dumps(config["embedders"][wc.embedder])),
        tokenizer=config["scoring"]["tokenizer"],
        cache_dir=config["scoring"]["cache_dir"],
        resamples=config["scoring"]["bootstrap"]["resamples"],
        seed=config["scoring"]["bootstrap"]["seed"],
        confidence=config["scoring"]["bootstrap"]["confidence"],
    shell:
        "python -m h2htalk score --generations {input.generations} --references {input.references}"
        " --out-items {output.per_item} --out-summary {output.summary}"
        " --model {wildcards.model} --variant {wildcards.variant} --subtask {wildcards.subtask}"
        " --embedder {wildcards.embedder} --embedder-spec {params.spec} --tokenizer {params.tokenizer}"
        " --cache-dir {params.cache_dir} --resamples {params.resamples} --seed {params.seed}"
        " --confidence {params.confidence} > {log} 2>&1"


rule scores:
    input:
        expand(
            "results/scores/{embedder}/{model}/{variant}/{subtask}.summary.json",
            embedder=config["scoring"]["embedders"],
            model=RUN_MODELS,
            variant=VARIANTS,
            subtask=SUBTASKS,
        ),
