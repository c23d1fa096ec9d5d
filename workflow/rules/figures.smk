# Dataset statistics figures (Figures 4-6), each a named target, each with the CSV of what it draws.


rule figure:
    input:
        provenance="results/provenance.json",
        curated=expand(f"{CURATED_DIR}/{{subtask}}.jsonl", subtask=SUBTASKS),
        instances=expand(f"{INSTANCES_DIR}/{{subtask}}.jsonl", subtask=SUBTASKS),
    output:
        meta="paper_figures/{figure}.meta.json",
        png=report(
            "paper_figures/{figure}.png",
            caption="../report/figures.rst",
            category="Figures",
        ),
        csv="paper_figures/{figure}.csv",
    log:
        "results/logs/figures/{figure}.log",
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        number=lambda wc: FIGURES[wc.figure][0],
        top=lambda wc: f"--top {FIGURES[wc.figure][1]}" if FIGURES[wc.figure][1] else "",
        font=config["figures"]["cjk_font"],
    shell:
        "python -m h2htalk figure {params.number} --curated {input.curated} --instances {input.instances}"
        " --font {params.font:q} {params.top} --provenance {input.provenance} --out paper_figures/{wildcards.figure} > {log} 2>&1"


rule fig4:
    input:
        "paper_figures/fig4_wordcloud.png",


rule fig5:
    input:
        "paper_figures/fig5_verb_noun.png",


rule fig6:
    input:
        "paper_figures/fig6_lengths.png",
