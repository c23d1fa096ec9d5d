# Paper tables, each a named target: snakemake --profile profiles/local table1


rule table1:
    input:
        reports=expand(f"{CURATED_DIR}/{{subtask}}.report.json", subtask=SUBTASKS),
        paper=config["paper"]["table1"],
    output:
        csv="paper_figures/table1.csv",
        md="paper_figures/table1.md",
        tex="paper_figures/table1.tex",
    log:
        f"{LOG_DIR}/tables/table1.log",
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        "../../envs/data.yaml"
    shell:
        "{H2HTALK} table1 {input.reports} --paper {input.paper} --out paper_figures/table1 > {log} 2>&1"
