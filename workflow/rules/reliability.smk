# The judges' reliability card (a named target: snakemake judge_reliability): each judge model's sanity ladder
# and drift canary in one job (its engine started once), then the card from those, the judges' own samples of
# the run's items and the agreement report (the judges against people).


rule judge_ladder:
    input:
        rubric=rubric_ladder_inputs,
        model=model_inputs,
    output:
        ladder=path("judge_ladder"),
        canary=path("judge_canary"),
        summary=path("judge_ladder_run"),
    log:
        main=f"{LOGS}/judge_reliability/{{model}}.log",
        server=f"{LOGS}/judge_reliability/{{model}}.server.log",
    benchmark:
        f"{BENCHMARKS}/judge_ladder/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(RUN.judges),
    conda:
        "../../envs/generation.yaml"
    threads: lambda wildcards: threads_for(wildcards.model)
    resources:
        **model_job_resources(),
    params:
        settings=settings("judge-ladder", "model"),
    shell:
        h2htalk(
            "judge-ladder",
            "--model {wildcards.model} --server-log {log.server}",
            log="{log.main}",
        )


rule judge_reliability:
    input:
        provenance=path("provenance"),
        ladders=[path("judge_ladder", model=m) for m in RUN.judges],
        canaries=[path("judge_canary", model=m) for m in RUN.judges],
        judge_samples=paths(
            "judge_samples", [c for m in RUN.judged_models for c in RUN.judged(m)]
        ),
        verdicts=paths(
            "verdicts", [c for m in RUN.study_models for c in RUN.studies(m)]
        ),
        agreement=rules.agreement.output.csv,
    output:
        meta=f"{PAPER_FIGURES}/judge_reliability.meta.json",
        md=f"{PAPER_FIGURES}/judge_reliability.md",
        csv=report(
            f"{PAPER_FIGURES}/judge_reliability.csv",
            caption="../report/judge_reliability.rst",
            category="Tables",
        ),
    log:
        f"{LOGS}/tables/judge_reliability.log",
    benchmark:
        f"{BENCHMARKS}/judge_reliability.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("judge-reliability"),
    shell:
        h2htalk("judge-reliability", "--agreement {input.agreement}")
