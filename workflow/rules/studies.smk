# The two discussion studies: the SAP safety ablation (Table 3) and instruction following (Figure 7).


rule study_inputs:
    input:
        scenario_file,
    output:
        prompts=STUDY_PROMPTS,
        study_items=STUDY_ITEMS,
    log:
        f"{LOGS}/studies/{{study}}/inputs_{{variant}}.log",
    benchmark:
        f"{BENCHMARKS}/study_inputs/{{study}}/{{variant}}.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        config=config_json("studies"),
        scenarios=lambda wc, input: (
            f"--scenarios {shlex.quote(input[0])}" if input else ""
        ),
    shell:
        "python -m h2htalk --log {log} study-inputs {params.config} {wildcards.study} --variant {wildcards.variant}"
        " {params.scenarios} --out-prompts {output.prompts} --out-items {output.study_items}"


rule study_judge:
    input:
        study_items=expand(STUDY_ITEMS, study=STUDIES, variant=ALL_VARIANTS[0]),
        generations=expand(
            STUDY_GENERATIONS, study=STUDIES, variant=VARIANTS, allow_missing=True
        ),
        model_files=gguf(STUDY.judge),
        prefetched=prefetched(STUDY.judge),
    output:
        verdicts=expand(
            STUDY_VERDICTS, study=STUDIES, variant=VARIANTS, allow_missing=True
        ),
        summary=STUDY_JUDGE_RUN,
    log:
        main=f"{LOGS}/studies/judge_{{model}}.log",
        server=f"{LOGS}/studies/judge_{{model}}.server.log",
    benchmark:
        f"{BENCHMARKS}/study_judge/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(STUDY.models),
    conda:
        "../../envs/generation.yaml"
    threads: threads_for(STUDY.judge)
    resources:
        **job_resources(STUDY.judge),
    params:
        config=config_json("model_registry", "generation", "judge", "studies"),
        model_files=model_files_option,
        prefetched=prefetched_option,
    shell:
        "python -m h2htalk --log {log.main} judge-study {params.config} {params.prefetched} --items {input.study_items}"
        " --generations {input.generations} --out {output.verdicts} {params.model_files}"
        " --server-log {log.server} --summary {output.summary}"


rule table3:
    input:
        provenance=PROVENANCE,
        scores=expand(
            SAFETY_ITEMS, embedder=EMBEDDER, model=STUDY.models, variant=VARIANTS
        ),
        verdicts=expand(
            STUDY_VERDICTS, study="safety", model=STUDY.models, variant=VARIANTS
        ),
        paper=config["paper"]["table3"],
        human=config["studies"]["human_ratings"],
    output:
        meta=f"{TABLE3}.meta.json",
        csv=report(f"{TABLE3}.csv", caption="../report/table3.rst", category="Tables"),
        md=f"{TABLE3}.md",
        tex=f"{TABLE3}.tex",
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
        config=config_json("scoring", "studies", "paper"),
        out=output_prefix("csv"),
    shell:
        "python -m h2htalk --log {log} table3 {params.config} --scores {input.scores} --verdicts {input.verdicts}"
        " --provenance {input.provenance} --out {params.out}"


rule fig7:
    input:
        verdicts=expand(
            STUDY_VERDICTS,
            study="instruction_following",
            model=STUDY.models,
            variant=VARIANTS,
        ),
        provenance=PROVENANCE,
    output:
        meta=f"{FIG7}.meta.json",
        png=report(f"{FIG7}.png", caption="../report/fig7.rst", category="Figures"),
        csv=f"{FIG7}.csv",
    log:
        f"{LOGS}/figures/fig7.log",
    benchmark:
        f"{BENCHMARKS}/fig7.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        config=config_json("scoring"),
        out=output_prefix("csv"),
    shell:
        "python -m h2htalk --log {log} fig7 {params.config} --verdicts {input.verdicts} --provenance {input.provenance}"
        " --out {params.out}"
