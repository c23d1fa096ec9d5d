# Judge stage for ItineraryBasic/Middle/Advanced: rubric judge (k samples an item), J = alpha*S/20 +
# (1-alpha)*J_judge, the human-review gate and imports of human scores.


rule judge:
    input:
        instances=expand(f"{INSTANCES_DIR}/{{subtask}}.jsonl", subtask=JUDGED),
        prompts=expand(
            "results/prompts/{variant}/{subtask}.jsonl",
            variant=VARIANTS,
            subtask=JUDGED,
        ),
        generations=expand(
            "results/generations/{{model}}/{variant}/{subtask}.jsonl",
            variant=VARIANTS,
            subtask=JUDGED,
        ),
        model_file=gguf(JUDGE["model"]),
    output:
        verdicts=expand(
            "results/judgments/{{model}}/{variant}/{subtask}.jsonl",
            variant=VARIANTS,
            subtask=JUDGED,
        ),
        summary="results/judgments/{model}/run.json",
    log:
        main=f"{LOG_DIR}/judgments/{{model}}.log",
        server=f"{LOG_DIR}/judgments/{{model}}.server.log",
    conda:
        "../../envs/generation.yaml"
    threads: engine_threads(JUDGE["model"])
    resources:
        mem_mb=fixed_model_resource(JUDGE["model"], "mem_mb", 4000),
        runtime=fixed_model_resource(JUDGE["model"], "runtime_min", 240),
        gpu=MODELS[JUDGE["model"]].get("gpus", 0),
        slurm_partition=partition(MODELS[JUDGE["model"]].get("gpus", 0)),
    params:
        judge=JUDGE["model"],
        registry=config["model_registry"],
        settings=shlex.quote(json.dumps(config["generation"])),
        judge_settings=shlex.quote(json.dumps(JUDGE)),
        selection=" ".join(
            [f"--variant {v}" for v in VARIANTS] + [f"--subtask {s}" for s in JUDGED]
        ),
        model_file=model_file_option,
        cache_dir=JUDGE["cache_dir"],
    shell:
        "python -m h2htalk judge --model {params.judge} --registry {params.registry} --settings {params.settings}"
        " --judge-settings {params.judge_settings} {params.selection} --instances-dir results/instances"
        " --prompts-dir results/prompts --generations-dir results/generations/{wildcards.model}"
        " --out-dir results/judgments/{wildcards.model} --cache-dir {params.cache_dir} {params.model_file}"
        " --server-log {log.server} --summary {output.summary} > {log.main} 2>&1"


rule combine_j:
    input:
        scores="results/scores/{embedder}/{model}/{variant}/{subtask}.items.jsonl",
        judgments="results/judgments/{model}/{variant}/{subtask}.jsonl",
        human=config["review"]["imports"],
    output:
        per_item="results/judged/{embedder}/{model}/{variant}/{subtask}.items.jsonl",
        summary="results/judged/{embedder}/{model}/{variant}/{subtask}.summary.json",
    log:
        f"{LOG_DIR}/judged/{{embedder}}/{{model}}/{{variant}}/{{subtask}}.log",
    conda:
        "../../envs/metrics.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        human=lambda wc, input: " ".join(
            f"--human {shlex.quote(p)}" for p in input.human
        ),
        bootstrap=config["scoring"]["bootstrap"],
        gate=JUDGE,
    shell:
        "python -m h2htalk combine-j --model {wildcards.model} --variant {wildcards.variant} --subtask {wildcards.subtask}"
        " --embedder {wildcards.embedder} --scores {input.scores} --judgments {input.judgments} {params.human}"
        " --alpha {params.gate[alpha]} --tau {params.gate[tau]} --max-spread {params.gate[max_spread]}"
        " --resamples {params.bootstrap[resamples]} --seed {params.bootstrap[seed]}"
        " --confidence {params.bootstrap[confidence]}"
        " --out-items {output.per_item} --out-summary {output.summary} > {log} 2>&1"


rule review_queue:
    input:
        expand(
            "results/judged/{embedder}/{model}/{variant}/{subtask}.items.jsonl",
            embedder=config["scoring"]["embedders"][:1],
            model=RUN_MODELS,
            variant=VARIANTS,
            subtask=JUDGED,
        ),
    output:
        "results/review/queue.csv",
    log:
        f"{LOG_DIR}/review_queue.log",
    conda:
        "../../envs/metrics.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk review-queue {input} --out {output} > {log} 2>&1"
