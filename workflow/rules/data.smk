# Data stage: fetch the pinned upstream release, curate one flagged JSONL per subtask, report; and fetch
# Hugging Face weights on the submit host before any compute job needs them.


rule fetch:
    output:
        manifest=path("manifest"),
        files=[
            path("upstream", file=get_subtask(key).upstream_file)
            for key in SUBTASK_KEYS
        ],
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
        settings=settings("fetch"),
    shell:
        h2htalk("fetch")


rule prefetch_model:
    output:
        path("prefetched_model"),
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
        settings=settings("prefetch", "model"),
    shell:
        h2htalk("prefetch", "--model {wildcards.model}")


rule prefetch_embedder:
    output:
        path("prefetched_embedder"),
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
        settings=settings("prefetch"),
    shell:
        h2htalk("prefetch", "--embedder {wildcards.embedder}")


rule curate:
    input:
        manifest=path("manifest"),
        upstream=lambda wc: path("upstream", file=get_subtask(wc.subtask).upstream_file),
    output:
        curated=path("curated"),
        report=path("curation"),
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
        settings=settings("curate"),
    shell:
        h2htalk("curate", "--subtask {wildcards.subtask}")


rule curation_report:
    input:
        expand(path("curation"), subtask=RUN.subtasks),
    output:
        json=path("curation_report"),
        md=path("curation_report_md"),
    log:
        f"{LOGS}/data/curation_report.log",
    benchmark:
        f"{BENCHMARKS}/curation_report.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        settings=settings("curation-report"),
    shell:
        h2htalk("curation-report")
