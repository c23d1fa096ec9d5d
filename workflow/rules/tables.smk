# Paper tables, each a named target (snakemake --profile profiles/local table1), and the run's provenance.


rule provenance:
    input:
        manifest="results/data/manifest.json",
    output:
        "results/provenance.json",
    log:
        "results/logs/provenance.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        config=lambda wc: shlex.quote(json.dumps(config, sort_keys=True)),
        root=workflow.basedir,
    shell:
        "python -m h2htalk provenance --config-json {params.config} --manifest {input.manifest}"
        " --root {params.root} --out {output} > {log} 2>&1"


rule table1:
    input:
        provenance="results/provenance.json",
        reports=expand(f"{CURATED_DIR}/{{subtask}}.report.json", subtask=SUBTASKS),
        paper=config["paper"]["table1"],
    output:
        meta="paper_figures/table1.meta.json",
        csv=report(
            "paper_figures/table1.csv",
            caption="../report/table1.rst",
            category="Tables",
        ),
        md="paper_figures/table1.md",
        tex="paper_figures/table1.tex",
    log:
        f"{LOG_DIR}/tables/table1.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m h2htalk table1 {input.reports} --paper {input.paper} --provenance {input.provenance} --out paper_figures/table1 > {log} 2>&1"


rule table2:
    input:
        provenance="results/provenance.json",
        summaries=table2_summaries,
        registry=config["model_registry"],
        paper=config["paper"]["table2"],
        paper_counts=config["paper"]["table1"],
        review="results/review/queue.csv",
    output:
        meta="paper_figures/table2.meta.json",
        csv=report(
            "paper_figures/table2.csv",
            caption="../report/table2.rst",
            category="Tables",
        ),
        md="paper_figures/table2.md",
        tex="paper_figures/table2.tex",
        heatmap=report(
            "paper_figures/table2_heatmap.png",
            caption="../report/table2.rst",
            category="Tables",
        ),
        vs_paper="paper_figures/table2_vs_paper.csv",
        audit="paper_figures/table2_paper_audit.csv",
    log:
        f"{LOG_DIR}/tables/table2.log",
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m h2htalk table2 {input.summaries} --registry {input.registry} --paper {input.paper}"
        " --paper-counts {input.paper_counts} --provenance {input.provenance} --out paper_figures/table2 > {log} 2>&1"


rule calibration:
    input:
        provenance="results/provenance.json",
        summaries=table2_summaries,
        floor_items=expand(
            "results/scores/{embedder}/baseline-random-reference/sap/{subtask}.items.jsonl",
            embedder=config["scoring"]["embedders"],
            subtask=SUBTASKS,
        ),
    output:
        meta="paper_figures/calibration.meta.json",
        md="paper_figures/calibration.md",
        csv=report(
            "paper_figures/calibration.csv",
            caption="../report/calibration.rst",
            category="Tables",
        ),
    log:
        f"{LOG_DIR}/tables/calibration.log",
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m h2htalk calibration {input.summaries} --floor-items {input.floor_items}"
        " --out paper_figures/calibration --provenance {input.provenance} > {log} 2>&1"
