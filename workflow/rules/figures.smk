# Dataset statistics figures (Figures 4-6), each a named target, each with the CSV of what it draws.

FIGURES = {4: "fig4_wordcloud", 5: "fig5_verb_noun", 6: "fig6_lengths"}


def figure_rule(number):
    name = FIGURES[number]
    top = {4: config["figures"]["top_words"], 5: config["figures"]["top_pairs"], 6: 0}[number]

    rule:
        name:
            f"fig{number}"
        input:
            curated=expand(f"{CURATED_DIR}/{{subtask}}.jsonl", subtask=SUBTASKS),
            instances=expand(f"{INSTANCES_DIR}/{{subtask}}.jsonl", subtask=SUBTASKS),
        output:
            png=report(f"paper_figures/{name}.png", caption=f"../report/{name}.rst", category="Figures"),
            csv=f"paper_figures/{name}.csv",
        params:
            font=config["figures"]["cjk_font"],
            top=f"--top {top}" if top else "",
        log:
            f"{LOG_DIR}/figures/{name}.log",
        resources:
            mem_mb=2000,
            runtime=20,
        conda:
            "../../envs/figures.yaml"
        shell:
            f"{{H2HTALK}} figure {number} --curated {{input.curated}} --instances {{input.instances}}"
            f" --font {{params.font:q}} {{params.top}} --out paper_figures/{name} > {{log}} 2>&1"


for _number in FIGURES:
    figure_rule(_number)
