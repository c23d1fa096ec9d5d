# The paper's tables, each a named target (snakemake --profile profiles/local table2).


rule table1:
    input:
        provenance=path("provenance"),
        reports=expand(path("curation"), subtask=RUN.subtasks),
    output:
        meta=f"{PAPER_FIGURES}/table1.meta.json",
        csv=report(
            f"{PAPER_FIGURES}/table1.csv",
            caption="../report/table1.rst",
            category="Tables",
        ),
        md=f"{PAPER_FIGURES}/table1.md",
        tex=f"{PAPER_FIGURES}/table1.tex",
    log:
        f"{LOGS}/tables/table1.log",
    benchmark:
        f"{BENCHMARKS}/table1.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        settings=settings("table1"),
    shell:
        h2htalk("table1")


# Which rows of Table 2 can be told apart: paired bootstrap comparisons on the items both rows answered, rank
# intervals and the smallest detectable differences (h2htalk.tables.table2_pairs); Table 2 marks them.
rule table2_pairs:
    input:
        provenance=path("provenance"),
        scores=table2_items,
        registry=registry_files(config),
    output:
        meta=f"{PAPER_FIGURES}/table2_pairs.meta.json",
        csv=report(
            f"{PAPER_FIGURES}/table2_pairs.csv",
            caption="../report/table2_pairs.rst",
            category="Tables",
        ),
        ranks=f"{PAPER_FIGURES}/table2_ranks.csv",
        figure=report(
            f"{PAPER_FIGURES}/table2_ranks.png",
            caption="../report/table2_pairs.rst",
            category="Tables",
        ),
    log:
        f"{LOGS}/tables/table2_pairs.log",
    benchmark:
        f"{BENCHMARKS}/table2_pairs.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        **cpu_job_resources(mem_mb=2000, runtime=20),
    params:
        settings=settings("table2-pairs", *RUN.models),
    shell:
        h2htalk("table2-pairs")


rule table2:
    input:
        provenance=path("provenance"),
        summaries=table2_summaries,
        registry=registry_files(config),
        paper=config["paper"]["table2"],
        review=path("review_queue"),
        pairs=rules.table2_pairs.output.csv,
        ranks=rules.table2_pairs.output.ranks,
        judge_samples=paths(
            "judge_samples", [c for m in RUN.judged_models for c in RUN.judged(m)]
        ),
        human=config["review"]["imports"],
        store=ancient(STORE),
        canary=rubric_canary,
    output:
        meta=f"{PAPER_FIGURES}/table2.meta.json",
        csv=report(
            f"{PAPER_FIGURES}/table2.csv",
            caption="../report/table2.rst",
            category="Tables",
        ),
        md=f"{PAPER_FIGURES}/table2.md",
        tex=f"{PAPER_FIGURES}/table2.tex",
        heatmap=report(
            f"{PAPER_FIGURES}/table2_heatmap.png",
            caption="../report/table2.rst",
            category="Tables",
        ),
        vs_paper=f"{PAPER_FIGURES}/table2_vs_paper.csv",
        audit=f"{PAPER_FIGURES}/table2_paper_audit.csv",
    log:
        f"{LOGS}/tables/table2.log",
    benchmark:
        f"{BENCHMARKS}/table2.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("table2", *RUN.run_models),
        ratings=ratings_param(REVIEW_SCORES),
    shell:
        h2htalk("table2")


rule table3:
    input:
        provenance=path("provenance"),
        scores=paths(
            "score_items",
            [
                c.scored_by(RUN.embedder)
                for m in RUN.study_models
                for c in RUN.studies(m, ("safety",))
            ],
        ),
        verdicts=paths(
            "verdicts",
            [c for m in RUN.study_models for c in RUN.studies(m, ("safety",))],
        ),
        paper=config["paper"]["table3"],
        human=config["studies"]["human_ratings"],
        store=ancient(STORE),
    output:
        meta=f"{PAPER_FIGURES}/table3.meta.json",
        csv=report(
            f"{PAPER_FIGURES}/table3.csv",
            caption="../report/table3.rst",
            category="Tables",
        ),
        md=f"{PAPER_FIGURES}/table3.md",
        tex=f"{PAPER_FIGURES}/table3.tex",
    log:
        f"{LOGS}/tables/table3.log",
    benchmark:
        f"{BENCHMARKS}/table3.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("table3"),
        ratings=ratings_param(SAFETY_RATINGS),
    shell:
        h2htalk("table3")


rule agreement:
    input:
        provenance=path("provenance"),
        judge_samples=paths(
            "judge_samples", [c for m in RUN.judged_models for c in RUN.judged(m)]
        ),
        review=config["review"]["imports"],
        verdicts=paths(
            "verdicts",
            [
                c
                for m in RUN.study_models
                for c in RUN.studies(m, ("safety", "instruction_following"))
            ],
        ),
        safety=config["studies"]["human_ratings"],
        curated=curated_for_decisions(),
        decisions=config["instances"]["review_imports"],
        store=ancient(STORE),
    output:
        meta=f"{PAPER_FIGURES}/agreement.meta.json",
        csv=report(
            f"{PAPER_FIGURES}/agreement.csv",
            caption="../report/agreement.rst",
            category="Tables",
        ),
        md=f"{PAPER_FIGURES}/agreement.md",
    log:
        f"{LOGS}/tables/agreement.log",
    benchmark:
        f"{BENCHMARKS}/agreement.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("agreement"),
        ratings=ratings_param(
            REVIEW_SCORES, SAFETY_RATINGS, NEED_VERDICTS, INSTANCE_DECISIONS
        ),
    shell:
        h2htalk("agreement")


rule calibration:
    input:
        provenance=path("provenance"),
        summaries=table2_summaries,
        floor_items=paths(
            "score_items",
            [
                Cell("baseline-random-reference", RUN.variants[0], s, e)
                for e in RUN.embedders
                for s in RUN.subtasks
            ],
        ),
    output:
        meta=f"{PAPER_FIGURES}/calibration.meta.json",
        md=f"{PAPER_FIGURES}/calibration.md",
        csv=report(
            f"{PAPER_FIGURES}/calibration.csv",
            caption="../report/calibration.rst",
            category="Tables",
        ),
    log:
        f"{LOGS}/tables/calibration.log",
    benchmark:
        f"{BENCHMARKS}/calibration.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("calibration"),
    shell:
        h2htalk("calibration")
