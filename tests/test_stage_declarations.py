"""A stage is declared at its function and checked as it loads: each mistake below fails the declaration (and so
the import of the registry) with an error naming the stage and the field, before any rule or job exists."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h2htalk.config import default_config
from h2htalk.layout import Layout
from h2htalk.settings import BootstrapSettings
from h2htalk.stages.declare import MACHINERY, StageError, check_names, check_one_writer, check_step_names, stage
from h2htalk.stages.spec import Each, Figure, Grows, One, Over, Product, Scope, figure_files
from h2htalk.stages.steps import Step, declared_steps, steps_making
from h2htalk.stages.table import BY_NAME, CHECKED_RUN, STAGES


def test_a_declared_input_that_is_no_parameter_fails_naming_the_stage_and_the_input():
    with pytest.raises(StageError, match=r"stage toy: inputs\.reports: declared but not a parameter of toy"):

        @stage("toy", "a toy", inputs={"reports": One("curation", over=("subtask", "subtasks"))},
               outputs={"report": One("curation_report")})  # fmt: skip
        def toy(report: str) -> None: ...


def test_a_declared_output_that_is_no_parameter_fails():
    with pytest.raises(StageError, match=r"stage toy: outputs\.md: declared but not a parameter"):

        @stage("toy", "a toy", outputs={"json": One("curation_report"), "md": One("curation_report_md")})
        def toy(json: str) -> None: ...


def test_a_file_of_each_cell_may_be_reached_through_each_but_one_file_may_not():
    cells = dict(jobs=Over(model=lambda run: run.models), cells=lambda run, w: run.benchmark(w["model"]))

    @stage("toy", "a toy", **cells, inputs={"generations": Each("generations")}, outputs={"out": Each("score_items")})
    def toy(each: object) -> None: ...

    with pytest.raises(StageError, match=r"stage toy: outputs\.summary: declared but not a parameter"):

        @stage("toy", "a toy", **cells, inputs={"generations": Each("generations")},
               outputs={"summary": One("generation_run")})  # fmt: skip
        def toy_too(each: object) -> None: ...


def test_a_parameter_nothing_declares_fails():
    with pytest.raises(StageError, match=r"stage toy: subtask: a parameter that is no declared input, output, label"):

        @stage("toy", "a toy", outputs={"report": One("curation_report")})
        def toy(report: str, subtask: str) -> None: ...


@pytest.mark.parametrize(
    ("files", "name"),
    [
        (dict(inputs={"curated": One("curated")}, outputs={"curated": One("reconstructed")}), "curated"),
        (dict(outputs={"subtask": One("curated")}), "subtask"),
        (dict(outputs={"results": One("curated")}), "results"),
    ],
)
def test_a_name_given_twice_or_hiding_a_machinery_argument_fails(files, name):
    """A parameter is given one thing: an input and an output of one name, a file named as a label, or as what the
    machinery gives (``results``), would give the function the first and hide the other."""
    with pytest.raises(StageError, match=rf"stage toy: {name}: named twice .* or as a machinery argument"):

        @stage("toy", "a toy", jobs=Over(subtask=lambda run: run.subtasks), **files)
        def toy(subtask: str, curated: str, results: object) -> None: ...


NAMES = ("curated", "report", "model", "subtask", "results", "config")  # files, labels and the machinery's names
LABELS = {"model": lambda run: run.models, "subtask": lambda run: run.subtasks}


@settings(max_examples=300, deadline=None)
@given(
    inputs=st.sets(st.sampled_from(NAMES)), outputs=st.sets(st.sampled_from(NAMES)),
    labels=st.sets(st.sampled_from(tuple(LABELS))), parameters=st.sets(st.sampled_from(NAMES)),
)  # fmt: skip
def test_a_declaration_is_taken_exactly_when_each_parameter_is_given_one_thing_and_each_file_is_given(
    inputs, outputs, labels, parameters
):
    """Against every combination of names: a declaration is refused exactly when a parameter is given nothing, a
    declared file is given to no parameter, or one name would be given two things."""
    named = [*inputs, *outputs, *labels]
    clash = any(named.count(n) > 1 or n in MACHINERY for n in named)
    undeclared = any(p not in {*named, *MACHINERY} for p in parameters)
    unused = any(f not in parameters for f in (*inputs, *outputs))

    def toy(**given: object) -> None: ...

    toy.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY) for p in sorted(parameters)]
    )
    files = dict(inputs={n: One("curated") for n in inputs}, outputs={n: One("curation_report") for n in outputs})
    declare = stage("toy", "a toy", jobs=Over(**{label: LABELS[label] for label in sorted(labels)}), **files)
    if clash or undeclared or unused:
        with pytest.raises(StageError, match=r"^stage toy: "):
            declare(toy)
    else:
        assert [s.name for s in declare(toy).stages] == ["toy"]


def test_a_label_a_file_and_a_typed_setting_are_parameters():
    @stage("toy", "a toy", jobs=Over(subtask=lambda run: run.subtasks), outputs={"curated": One("curated")})
    def toy(subtask: str, curated: str, bootstrap: BootstrapSettings) -> None: ...

    assert [s.name for s in toy.stages] == ["toy"]


def test_a_file_of_each_cell_without_cells_fails():
    with pytest.raises(StageError, match=r"stage toy: inputs\.generations: a file of each cell, but .* no cells"):

        @stage("toy", "a toy", inputs={"generations": Each("generations")}, outputs={"report": One("curation_report")})
        def toy(generations: list[str], report: str) -> None: ...


def test_a_read_key_the_config_schema_lacks_fails():
    with pytest.raises(StageError, match=r"stage toy: reads 'scoring\.bootstrapp': not a key of the config schema"):

        @stage("toy", "a toy", reads=("scoring.bootstrapp",), outputs={"report": One("curation_report")})
        def toy(report: str) -> None: ...


TABLE = dict(outputs=figure_files("toy", csv=".csv"))


@pytest.mark.parametrize(
    ("declared", "error"),
    [
        (dict(product=Product("table", "Toy", "a toy", main="md"), **TABLE), r"product 'md': none of its outputs"),
        (dict(product=Product("table", "Toy", "a toy", main="csv", shown=("heatmap",)), **TABLE),
         r"product 'heatmap': none of its outputs"),
        (dict(product=Product("table", "Toy", "a toy", main="csv", inner="index.html"), **TABLE),
         r"product inner: a file inside its main output, which is no folder \('csv'\)"),
        (dict(product=Product("table", {"a": "A"}, "a toy", main="csv"), **TABLE),
         r"product: a title or caption by the job's label, but its jobs have not one label"),
        (dict(uses=("subtask",), **TABLE), r"uses 'subtask': no folder of the package's resources"),
        (dict(where="gpu", **TABLE), r"where: 'gpu' is none of local, cpu, model, embedder"),
        (dict(where="model", **TABLE), r"starts: a stage starts models \(starts=\.\.\.\) where, and only where"),
        (dict(starts=lambda scope, labels: ["qwen2.5-7b-instruct"], **TABLE), r"starts: a stage starts models"),
        (dict(where="embedder", **TABLE), r"where: an embedder job is placed by its embedder"),
        (dict(options=("engine", "bootstrapp"), **TABLE), r"options: no option group 'bootstrapp' \(there are engine,"),
        (dict(jobs=Over(model="models"), **TABLE), r"jobs model: 'models' is not a function of the run's cells"),
    ],
)  # fmt: skip
def test_a_field_that_would_fail_a_job_late_or_leave_it_silently_wrong_fails_as_it_loads(declared, error):
    """What would otherwise fail a job after its work (a product's main file), its command (an option group), its
    placement (a model job that starts none), or never (a resources folder misnamed: its changes rerun nothing)."""
    with pytest.raises(StageError, match=rf"stage toy: {error}"):

        @stage("toy", "a toy", **declared)
        def toy(csv: str) -> None: ...


def test_a_file_of_a_kind_the_results_tree_lacks_fails():
    """A cell's kinds are ``Layout.cell_path``'s (its task's references, not ``instances``), a result's are the
    tree's patterns: a new kind is a line in ``layout.PATTERNS``."""
    cells = dict(jobs=Over(model=lambda run: run.models), cells=lambda run, w: run.benchmark(w["model"]))
    with pytest.raises(StageError, match=r"stage toy: inputs\.instances: 'instances' is no kind of layout\.CELL_KINDS"):

        @stage("toy", "a toy", **cells, inputs={"instances": Each("instances")}, outputs={"csv": One("curated")})
        def toy(instances: list[str], csv: str) -> None: ...

    with pytest.raises(StageError, match=r"stage toy: outputs\.csv: 'answer_lengths' is no kind of layout\.PATTERNS"):

        @stage("toy", "a toy", outputs={"csv": One("answer_lengths")})
        def toy_too(csv: str) -> None: ...


def test_two_stages_writing_one_file_fail_naming_both():
    @stage("toy", "a second Table 1", product=Product("table", "Toy", "a toy", main="md"),
           outputs=figure_files("table1", md=".md"))  # fmt: skip
    def toy(md: str) -> None: ...

    scope = Scope(default_config(), Layout("results", "demo"))
    with pytest.raises(StageError, match=r"stage toy: outputs\.md: .*table1\.md is written by table1 too"):
        check_one_writer((*STAGES, *toy.stages), scope)  # the file it declares named, not its provenance


def test_two_stages_of_one_model_writing_one_file_fail_in_the_run_the_registry_checks():
    """The schema's default run has no model under test: the registry checks its stages in it with one."""

    @stage("toy", "a toy", jobs=Over(model=lambda run: run.models), outputs={"summary": One("generation_run")})
    def toy(model: str, summary: str) -> None: ...

    with pytest.raises(StageError, match=r"stage toy: outputs\.summary: .*/a-model/run\.json is written by generate"):
        check_one_writer((*STAGES, *toy.stages), CHECKED_RUN)


def test_two_stages_of_one_name_or_command_fail_naming_both_functions():
    @stage("table1", "a second Table 1", outputs={"report": One("curation_report")})
    def toy(report: str) -> None: ...

    with pytest.raises(StageError, match=r"stage table1: name: 'table1' is declared twice \(h2htalk\.tables\.table1\."):
        check_names((*STAGES, *toy.stages))

    @stage("toy", "a toy", command="table1", outputs={"report": One("curation_report")})
    def toy_too(report: str) -> None: ...

    with pytest.raises(StageError, match=r"stage toy: command: 'table1' is declared twice"):
        check_names((*STAGES, *toy_too.stages))


@pytest.mark.parametrize(
    ("declared", "field"),
    [
        ({"steps": (Step(makes="verdicts", judges="generat"),)}, "steps"),
        ({"grows": Grows("answer_scored_s", ("generat",))}, "grows"),
    ],
)
def test_a_step_name_no_stage_declares_fails(declared, field):
    @stage("toy", "a toy judge", planned=True, **declared)
    def toy() -> None: ...

    with pytest.raises(StageError, match=rf"stage toy: {field}: 'generat' is no step a stage declares"):
        check_step_names((*STAGES, *toy.stages))
    check_step_names(STAGES)  # the registry's own names are all declared


def test_the_machinery_adds_a_products_provenance_and_no_stage_declares_it():
    @stage(
        "toy", "a toy", product=Product("table", "Toy", "a toy", main="csv"), outputs=figure_files("toy", csv=".csv")
    )
    def toy(csv: str) -> None: ...

    (declared,) = toy.stages
    assert declared.inputs["provenance"] == One("provenance") and declared.outputs["meta"] == Figure(
        "toy", ".meta.json"
    )
    assert declared.product
    for name, found in BY_NAME.items():  # every table of the registry has its provenance, added the same way
        assert ("meta" in found.outputs) == (found.product is not None), name
        if found.product:
            assert next(iter(found.inputs)) == "provenance" and next(iter(found.outputs)) == "meta", name


def test_the_steps_the_plan_names_are_those_the_stages_declare_in_the_plan_reports_order():
    steps = declared_steps(STAGES)
    assert list(steps) == [
        "reconstruct_instances", "generate", "baseline_answers", "study.answers", "rubric_judge", "rubric_judge.sample",
        "study.judge", "study.judge.sample", "judge_ladder",
    ]  # fmt: skip  # the answers as the stages run them, then the verdicts in the order of what they judge
    assert steps_making(STAGES, "answers") == ["generate", "study.answers"]
    assert steps_making(STAGES, "verdicts") == ["rubric_judge", "study.judge", "judge_ladder"]
    unbatched = [name for name, step in steps.items() if not step.batchable]
    assert unbatched == ["generate", "baseline_answers", "study.answers"]
    study = BY_NAME["study"]
    assert study.step("judge.sample") == "study.judge.sample" and BY_NAME["generate"].step() == "generate"
    with pytest.raises(ValueError, match=r"stage 'study' declares no step 'study\.verdicts'"):
        study.step("verdicts")
    with pytest.raises(ValueError, match="stage 'study' declares no step 'study'"):
        study.step()


def test_a_judge_declared_later_is_listed_after_the_judges_of_the_answers_before_its_own():
    @stage("toy_judge", "a toy", planned=True, steps=(Step(makes="verdicts", judges="study.answers"),),
           outputs={"out": One("curation_report")})  # fmt: skip
    def toy(out: str) -> None: ...

    order = list(declared_steps((*STAGES, *toy.stages)))
    assert order.index("rubric_judge.sample") < order.index("toy_judge") < order.index("judge_ladder")
    assert order.index("study.judge.sample") < order.index("toy_judge")  # the same answers' judge that runs before


def test_model_calls_of_a_stage_the_plan_does_not_run_fail():
    with pytest.raises(StageError, match=r"stage toy: steps: model calls the plan would not count"):

        @stage("toy", "a toy", steps=(Step(makes="answers"),), outputs={"out": One("curation_report")})
        def toy(out: str) -> None: ...


def test_a_planned_job_asking_models_under_a_step_no_stage_declares_fails_naming_it():
    from h2htalk.config import default_config
    from h2htalk.errors import H2HTalkError
    from h2htalk.plan.calls import PlanEngines
    from h2htalk.settings import ClientSettings

    engines = PlanEngines(ClientSettings.from_config(default_config()), 0, lambda name: None, declared_steps(STAGES))
    engines.step("study.verdicts", "m")
    with pytest.raises(H2HTalkError, match=r"under the step 'study\.verdicts', which no stage declares"):
        engines.session({"name": "m"}, "/nonexistent", batch=False)


def test_loading_the_registry_imports_no_heavy_library():
    """Every job and dry run loads the registry, and so every module that declares a stage: the numerical, language
    and model libraries wait until a stage's function runs."""
    import subprocess
    import sys

    heavy = ("numpy", "scipy", "nltk", "jieba", "torch", "sentence_transformers", "sklearn", "pandas", "matplotlib",
             "openai", "httpx", "rouge_score", "llama_cpp")  # fmt: skip
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, h2htalk.stages.table; print(' '.join(sys.modules))"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    assert sorted({name.split(".")[0] for name in loaded} & set(heavy)) == []


def test_a_product_says_where_it_went_its_main_file_then_the_others_that_are_there(tmp_path):
    names = {"meta": "t.meta.json", "csv": "t.csv", "md": "t.md", "heatmap": "t_heatmap.png", "tex": "t.tex"}
    files = {name: [str(tmp_path / file)] for name, file in {**names, "pairs": "pairs.csv"}.items()}
    for name in ("meta", "csv", "md", "heatmap", "pairs"):  # the tex is not there
        (tmp_path / files[name][0]).write_text("x", encoding="utf-8")
    table = Product("table", "T", "a table", main="md")
    assert table.opened(files) == tmp_path / "t.md"
    assert table.where(files) == f"{tmp_path / 't.md'} (+ .csv _heatmap.png pairs.csv)"  # its provenance left out
    folder = tmp_path / "viewer"
    folder.mkdir()
    bundle = Product("export", "V", "a folder", main="bundle", inner="index.html")
    assert bundle.where({"meta": files["meta"], "bundle": [str(folder)]}) == str(folder / "index.html")
