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


rule table2:
    input:
        provenance=path("provenance"),
        summaries=table2_summaries,
        registry=config["model_registry"],
        paper=config["paper"]["table2"],
        review=path("review_queue"),
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
