# The run's results in other tools' formats, each a named target (snakemake --profile profiles/local viewer): the
# results JSON (after lm-eval's results_*.json), the leaderboard, the Every Eval Ever records (checked by that
# project's validator, which needs Python 3.12: envs/export.yaml, or $H2HTALK_EEE_PYTHON) and the results viewer.


rule results_json:
    input:
        provenance=path("provenance"),
        summaries=summary_paths(RUN, LAYOUT),
        registry=registry_files(config),
        safety=rules.table3.output.csv,
        instruction_following=rules.fig7.output.csv,
    output:
        meta=f"{PAPER_FIGURES}/results.meta.json",
        json=f"{PAPER_FIGURES}/results.json",
    log:
        f"{LOGS}/export/results_json.log",
    benchmark:
        f"{BENCHMARKS}/results_json.tsv"
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("results-json"),
    shell:
        h2htalk(
            "results-json",
            "--safety-table {input.safety}"
            " --instruction-following-table {input.instruction_following}",
        )


rule leaderboard:
    input:
        provenance=path("provenance"),
        summaries=summary_paths(RUN, LAYOUT),
        registry=registry_files(config),
    output:
        meta=f"{PAPER_FIGURES}/leaderboard.meta.json",
        json=f"{PAPER_FIGURES}/leaderboard.json",
    log:
        f"{LOGS}/export/leaderboard.log",
    benchmark:
        f"{BENCHMARKS}/leaderboard.tsv"
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("leaderboard"),
    shell:
        h2htalk("leaderboard")


rule every_eval_ever:
    input:
        provenance=path("provenance"),
        summaries=summary_paths(RUN, LAYOUT),
        per_item=item_files(RUN, LAYOUT),
        registry=registry_files(config),
    output:
        meta=f"{PAPER_FIGURES}/every_eval_ever.meta.json",
        records=directory(f"{PAPER_FIGURES}/every_eval_ever"),
    log:
        f"{LOGS}/export/every_eval_ever.log",
    benchmark:
        f"{BENCHMARKS}/every_eval_ever.tsv"
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        settings=settings("every-eval-ever"),
    shell:
        h2htalk("every-eval-ever")


rule viewer:
    input:
        provenance=path("provenance"),
        summaries=summary_paths(RUN, LAYOUT),
        per_item=item_files(RUN, LAYOUT),
        registry=registry_files(config),
    output:
        meta=f"{PAPER_FIGURES}/viewer.meta.json",
        bundle=directory(f"{PAPER_FIGURES}/viewer"),
    log:
        f"{LOGS}/export/viewer.log",
    benchmark:
        f"{BENCHMARKS}/viewer.tsv"
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        settings=settings("viewer"),
    shell:
        h2htalk("viewer")
