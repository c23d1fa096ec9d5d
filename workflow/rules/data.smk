# Data stage: fetch the pinned upstream release, curate one flagged JSONL per subtask, report.


rule fetch:
    output:
        manifest=MANIFEST,
        files=[upstream_file(key) for key in SUBTASK_KEYS],
    log:
        f"{LOGS}/data/fetch.log",
    benchmark:
        f"{BENCHMARKS}/fetch.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=15,
    params:
        config=config_json("data", "upstream_dir"),
        out_dir=output_folder("files"),
    shell:
        "python -m h2htalk --log {log} fetch {params.config} --out-dir {params.out_dir} --manifest {output.manifest}"


rule prefetch_model:
    output:
        PREFETCHED_MODEL,
    log:
        f"{LOGS}/prefetch/models/{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/prefetch_model/{{model}}.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=2000,
        runtime=720,  # a 72B model is about 150 GB
    params:
        config=config_json("model_registry"),
    shell:
        "python -m h2htalk --log {log} prefetch {params.config} --model {wildcards.model} --out {output}"


rule prefetch_embedder:
    output:
        PREFETCHED_EMBEDDER,
    log:
        f"{LOGS}/prefetch/embedders/{{embedder}}.log",
    benchmark:
        f"{BENCHMARKS}/prefetch_embedder/{{embedder}}.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        config=config_json("embedders"),
    shell:
        "python -m h2htalk --log {log} prefetch {params.config} --embedder {wildcards.embedder} --out {output}"


rule curate:
    input:
        manifest=MANIFEST,
        upstream=lambda wc: upstream_file(wc.subtask),
    output:
        curated=CURATED,
        report=CURATION,
    log:
        f"{LOGS}/data/curate/{{subtask}}.log",
    benchmark:
        f"{BENCHMARKS}/curate/{{subtask}}.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        config=config_json("data"),
    shell:
        "python -m h2htalk --log {log} curate {params.config} --subtask {wildcards.subtask} --upstream {input.upstream}"
        " --manifest {input.manifest} --out {output.curated} --report {output.report}"


rule curation_report:
    input:
        expand(CURATION, subtask=SUBTASKS),
    output:
        json=f"{CURATION_REPORT}.json",
        md=f"{CURATION_REPORT}.md",
    log:
        f"{LOGS}/data/curation_report.log",
    benchmark:
        f"{BENCHMARKS}/curation_report.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk --log {log} curation-report {input} --out-json {output.json} --out-md {output.md}"
