# Data stage: fetch the pinned upstream release, curate one flagged JSONL per subtask, report.


rule fetch:
    output:
        manifest="results/data/manifest.json",
        files=[upstream_file(key) for key in SUBTASK_KEYS],
    log:
        f"{LOG_DIR}/data/fetch.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=15,
    params:
        repo=config["data"]["upstream"]["repo"],
        commit=config["data"]["upstream"]["commit"],
        url_template=lambda wc: config["data"]["upstream"]["url_template"],
        timeout=config["data"]["upstream"]["timeout_s"],
        retries=config["data"]["upstream"]["retries"],
        upstream_dir=(
            f"--upstream-dir {shlex.quote(config['upstream_dir'])}"
            if config["upstream_dir"]
            else ""
        ),
    shell:
        "python -m h2htalk fetch --repo {params.repo:q} --commit {params.commit:q}"
        " --url-template {params.url_template:q} --timeout {params.timeout} --retries {params.retries}"
        " {params.upstream_dir} --out-dir results/data/upstream --manifest {output.manifest} > {log} 2>&1"


rule curate:
    input:
        manifest="results/data/manifest.json",
        upstream=lambda wc: upstream_file(wc.subtask),
    output:
        curated=f"{CURATED_DIR}/{{subtask}}.jsonl",
        report=f"{CURATED_DIR}/{{subtask}}.report.json",
    log:
        f"{LOG_DIR}/data/curate/{{subtask}}.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        exclude=shell_list(config["data"]["curate"]["exclude_flags"]),
        anonymise=shell_mapping(config["data"]["curate"]["anonymise"]),
        persona=shell_list(config["data"]["curate"]["persona_names"]),
    shell:
        "python -m h2htalk curate --subtask {wildcards.subtask} --upstream-dir results/data/upstream"
        " --manifest {input.manifest} --out-dir results/data/curated --exclude-flags {params.exclude}"
        " --anonymise {params.anonymise} --persona-names {params.persona} > {log} 2>&1"


rule curation_report:
    input:
        expand(f"{CURATED_DIR}/{{subtask}}.report.json", subtask=SUBTASKS),
    output:
        json="results/data/curation_report.json",
        md="results/data/curation_report.md",
    log:
        f"{LOG_DIR}/data/curation_report.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk curation-report {input} --out-json {output.json} --out-md {output.md} > {log} 2>&1"
