# The two discussion studies: the SAP safety ablation (Table 3) and instruction following (Figure 7).


rule study_inputs:
    input:
        lambda wc: [STUDY_FILES[wc.study]] if STUDY_FILES[wc.study] else [],
    output:
        prompts="results/studies/{study}/prompts/{variant}.jsonl",
        study_items="results/studies/{study}/items/{variant}.jsonl",
    log:
        f"{LOG_DIR}/studies/{{study}}/inputs_{{variant}}.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        scenarios=lambda wc, input: (
            f"--scenarios {shlex.quote(input[0])}" if input else ""
        ),
        sample=lambda wc: (
            f"--sample {STUDY['sample'][wc.study]} --seed {STUDY['sample']['seed']}"
            if STUDY["sample"][wc.study]
            else ""
        ),
    shell:
        "python -m h2htalk study-inputs {wildcards.study} --variant {wildcards.variant} {params.scenarios} {params.sample}"
        " --out-prompts {output.prompts} --out-items {output.study_items} > {log} 2>&1"


rule study_generate:
    input:
        prompts=expand(
            "results/studies/{study}/prompts/{variant}.jsonl",
            study=STUDY_NAMES,
            variant=VARIANTS,
        ),
        model_file=model_file,
    output:
        expand(
            "results/studies/generations/{{model}}/{variant}/{study}.jsonl",
            study=STUDY_NAMES,
            variant=VARIANTS,
        ),
        summary="results/studies/generations/{model}/run.json",
    log:
        main=f"{LOG_DIR}/studies/generations/{{model}}.log",
        server=f"{LOG_DIR}/studies/generations/{{model}}.server.log",
    conda:
        "../../envs/generation.yaml"
    threads: lambda wildcards: engine_threads(wildcards.model)
    resources:
        mem_mb=model_resource("mem_mb", 4000),
        runtime=model_resource("runtime_min", 240),
        gpu=lambda wildcards: MODELS[wildcards.model].get("gpus", 0),
        slurm_partition=lambda wildcards: partition(
            MODELS[wildcards.model].get("gpus", 0)
        ),
    params:
        registry=config["model_registry"],
        settings=lambda wc: shlex.quote(
            json.dumps(
                {
                    **config["generation"],
                    "max_new_tokens": {
                        s: STUDY["max_new_tokens"] for s in STUDY_NAMES
                    },
                }
            )
        ),
        files=" ".join(
            f"--prompt-file {v}/{s}=results/studies/{s}/prompts/{v}.jsonl"
            for s in STUDY_NAMES
            for v in VARIANTS
        ),
        model_file=model_file_option,
        cache_dir=config["generation"]["cache_dir"],
    shell:
        "python -m h2htalk generate --model {wildcards.model} --registry {params.registry} --settings {params.settings}"
        " {params.files} --out-dir results/studies/generations/{wildcards.model} --cache-dir {params.cache_dir}"
        " {params.model_file} --server-log {log.server} --summary {output.summary} > {log.main} 2>&1"


rule safety_score:
    input:
        generations="results/studies/generations/{model}/{variant}/safety.jsonl",
        references="results/studies/safety/items/{variant}.jsonl",
    output:
        per_item="results/studies/safety/scores/{embedder}/{model}/{variant}.items.jsonl",
        summary="results/studies/safety/scores/{embedder}/{model}/{variant}.summary.json",
    log:
        f"{LOG_DIR}/studies/safety/scores/{{embedder}}/{{model}}/{{variant}}.log",
    conda:
        "../../envs/metrics.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        spec=lambda wc: shlex.quote(json.dumps(config["embedders"][wc.embedder])),
        scoring=config["scoring"],
    shell:
        "python -m h2htalk score --generations {input.generations} --references {input.references}"
        " --out-items {output.per_item} --out-summary {output.summary} --model {wildcards.model}"
        " --variant {wildcards.variant} --embedder {wildcards.embedder} --embedder-spec {params.spec}"
        " --tokenizer {params.scoring[tokenizer]} --cache-dir {params.scoring[cache_dir]}"
        " --resamples {params.scoring[bootstrap][resamples]} --seed {params.scoring[bootstrap][seed]} > {log} 2>&1"


rule study_judge:
    input:
        study_items="results/studies/{study}/items/sap.jsonl",
        generations=expand(
            "results/studies/generations/{{model}}/{variant}/{{study}}.jsonl",
            variant=VARIANTS,
        ),
        model_file=gguf(STUDY_JUDGE),
    output:
        verdicts=expand(
            "results/studies/{{study}}/verdicts/{{model}}/{variant}.jsonl",
            variant=VARIANTS,
        ),
        summary="results/studies/{study}/verdicts/{model}/run.json",
    log:
        main=f"{LOG_DIR}/studies/{{study}}/judge_{{model}}.log",
        server=f"{LOG_DIR}/studies/{{study}}/judge_{{model}}.server.log",
    conda:
        "../../envs/generation.yaml"
    threads: engine_threads(STUDY_JUDGE)
    resources:
        mem_mb=fixed_model_resource(STUDY_JUDGE, "mem_mb", 4000),
        runtime=fixed_model_resource(STUDY_JUDGE, "runtime_min", 240),
        gpu=MODELS[STUDY_JUDGE].get("gpus", 0),
        slurm_partition=partition(MODELS[STUDY_JUDGE].get("gpus", 0)),
    params:
        judge=STUDY_JUDGE,
        cache_dir=JUDGE["cache_dir"],
        registry=config["model_registry"],
        settings=shlex.quote(json.dumps(config["generation"])),
        judge_settings=shlex.quote(json.dumps(config["judge"])),
        generations=lambda wc: " ".join(
            f"--generations {v}=results/studies/generations/{wc.model}/{v}/{wc.study}.jsonl"
            for v in VARIANTS
        ),
        model_file=model_file_option,
    shell:
        "python -m h2htalk judge-study {wildcards.study} --model {params.judge} --registry {params.registry}"
        " --settings {params.settings} --judge-settings {params.judge_settings} --items {input.study_items}"
        " {params.generations} --out-dir results/studies/{wildcards.study}/verdicts/{wildcards.model}"
        " --cache-dir {params.cache_dir} {params.model_file} --server-log {log.server}"
        " --summary {output.summary} > {log.main} 2>&1"


rule table3:
    input:
        provenance="results/provenance.json",
        scores=expand(
            "results/studies/safety/scores/{embedder}/{model}/{variant}.items.jsonl",
            embedder=EMBEDDER,
            model=STUDY_MODELS,
            variant=VARIANTS,
        ),
        verdicts=expand(
            "results/studies/safety/verdicts/{model}/{variant}.jsonl",
            model=STUDY_MODELS,
            variant=VARIANTS,
        ),
        paper=config["paper"]["table3"],
        human=STUDY["human_ratings"],
    output:
        meta="paper_figures/table3.meta.json",
        csv=report(
            "paper_figures/table3.csv",
            caption="../report/table3.rst",
            category="Tables",
        ),
        md="paper_figures/table3.md",
        tex="paper_figures/table3.tex",
    log:
        f"{LOG_DIR}/tables/table3.log",
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        pairs=" ".join(
            f"--scores {m}/{v}=results/studies/safety/scores/{EMBEDDER}/{m}/{v}.items.jsonl"
            f" --verdicts {m}/{v}=results/studies/safety/verdicts/{m}/{v}.jsonl"
            for m in STUDY_MODELS
            for v in VARIANTS
        ),
        human=lambda wc, input: " ".join(
            f"--human {shlex.quote(p)}" for p in input.human
        ),
        bootstrap=config["scoring"]["bootstrap"],
    shell:
        "python -m h2htalk table3 {params.pairs} {params.human} --paper {input.paper} --provenance {input.provenance}"
        " --resamples {params.bootstrap[resamples]} --seed {params.bootstrap[seed]} --out paper_figures/table3"
        " > {log} 2>&1"


rule fig7:
    input:
        expand(
            "results/studies/instruction_following/verdicts/{model}/{variant}.jsonl",
            model=STUDY_MODELS,
            variant=VARIANTS,
        ),
        provenance="results/provenance.json",
    output:
        meta="paper_figures/fig7_instruction_following.meta.json",
        png=report(
            "paper_figures/fig7_instruction_following.png",
            caption="../report/fig7.rst",
            category="Figures",
        ),
        csv="paper_figures/fig7_instruction_following.csv",
    log:
        f"{LOG_DIR}/figures/fig7.log",
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        verdicts=" ".join(
            f"--verdicts {m}/{v}=results/studies/instruction_following/verdicts/{m}/{v}.jsonl"
            for m in STUDY_MODELS
            for v in VARIANTS
        ),
        bootstrap=config["scoring"]["bootstrap"],
    shell:
        "python -m h2htalk fig7 {params.verdicts} --provenance {input.provenance} --resamples {params.bootstrap[resamples]}"
        " --seed {params.bootstrap[seed]} --out paper_figures/fig7_instruction_following > {log} 2>&1"
