# Paper tables, each a named target (snakemake --profile profiles/local table1), and the run's provenance.


rule provenance:
    input:
        manifest=MANIFEST,
    output:
        PROVENANCE,
    log:
        f"{LOGS}/provenance.log",
    benchmark:
        f"{BENCHMARKS}/provenance.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        config=config_json(),
        root=workflow.basedir,
    shell:
        "python -m h2htalk --log {log} provenance {params.config} --manifest {input.manifest} --root {params.root}"
        " --out {output}"


rule table1:
    input:
        provenance=PROVENANCE,
        reports=expand(CURATION, subtask=SUBTASKS),
    output:
        meta=f"{TABLE1}.meta.json",
        csv=report(f"{TABLE1}.csv", caption="../report/table1.rst", category="Tables"),
        md=f"{TABLE1}.md",
        tex=f"{TABLE1}.tex",
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
        out=output_prefix("csv"),
    shell:
        "python -m h2htalk --log {log} table1 {input.reports} --provenance {input.provenance} --out {params.out}"


rule table2:
    input:
        provenance=PROVENANCE,
        summaries=table2_summaries,
        registry=config["model_registry"],
        paper=config["paper"]["table2"],
        review=REVIEW_QUEUE,
    output:
        meta=f"{TABLE2}.meta.json",
        csv=report(f"{TABLE2}.csv", caption="../report/table2.rst", category="Tables"),
        md=f"{TABLE2}.md",
        tex=f"{TABLE2}.tex",
        heatmap=report(
            f"{TABLE2}_heatmap.png", caption="../report/table2.rst", category="Tables"
        ),
        vs_paper=f"{TABLE2}_vs_paper.csv",
        audit=f"{TABLE2}_paper_audit.csv",
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
        config=config_json(
            "model_registry",
            "paper",
            "tables",
            "models",
            "baselines",
            "instances",
            "judge",
        ),
        out=output_prefix("csv"),
    shell:
        "python -m h2htalk --log {log} table2 {params.config} {input.summaries} --provenance {input.provenance}"
        " --out {params.out}"


rule calibration:
    input:
        provenance=PROVENANCE,
        summaries=table2_summaries,
        floor_items=expand(
            SCORE_ITEMS,
            embedder=EMBEDDERS,
            model="baseline-random-reference",
            variant=ALL_VARIANTS[0],
            subtask=SUBTASKS,
        ),
    output:
        meta=f"{CALIBRATION}.meta.json",
        md=f"{CALIBRATION}.md",
        csv=report(
            f"{CALIBRATION}.csv",
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
        out=output_prefix("csv"),
    shell:
        "python -m h2htalk --log {log} calibration {input.summaries} --floor-items {input.floor_items}"
        " --provenance {input.provenance} --out {params.out}"
