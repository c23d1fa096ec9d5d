"""A stage is declared at its function and checked as it loads: each mistake below fails the declaration (and so
the import of the registry) with an error naming the stage and the field, before any rule or job exists."""

from __future__ import annotations

import inspect
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h2htalk.config import default_config
from h2htalk.layout import Layout
from h2htalk.settings import BootstrapSettings
from h2htalk.stages.declare import (
    MACHINERY,
    StageError,
    check_labels,
    check_names,
    check_one_writer,
    check_reached,
    check_step_names,
    stage,
)
from h2htalk.stages.spec import Done, Each, Figure, Grows, One, Over, Paths, Product, Scope, figure_files
from h2htalk.stages.steps import Step, declared_steps, steps_making
from h2htalk.stages.table import BY_NAME, CHECKED_RUN, STAGES

from .conftest import REPO_ROOT


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
    why = "the name of an argument the machinery gives" if name == "results" else "named twice among the inputs"
    with pytest.raises(StageError, match=rf"stage toy: {name}: {why}"):

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
    @stage("toy", "a toy", jobs=Over(subtask=lambda run: run.subtasks), outputs={"curated": One("curated")},
           reads=("scoring.bootstrap",))  # fmt: skip
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
PLAIN = dict(outputs={"csv": One("curation_report")})  # a stage's file that is no product's
TOY_TABLE = Product("table", "Toy", "a toy", main="csv")


@pytest.mark.parametrize(
    ("declared", "error"),
    [
        (dict(product=Product("table", "Toy", "a toy", main="md"), **TABLE), r"product\.main 'md': none of its"),
        (dict(product=Product("table", "Toy", "a toy", main="csv", shown=("heatmap",)), **TABLE),
         r"product\.shown 'heatmap': none of its outputs"),
        (dict(product=Product("table", "Toy", "a toy", main="csv", inner="index.html"), **TABLE),
         r"product inner: a file inside its main output, which is no folder \('csv'\)"),
        (dict(product=Product("table", {"a": "A"}, "a toy", main="csv"), **TABLE),
         r"product: a title or caption by the job's label, but its jobs have not one label"),
        (dict(uses=("subtask",), **PLAIN), r"uses 'subtask': no folder of the package's resources"),
        (dict(where="gpu", **PLAIN), r"where: 'gpu' is none of local, cpu, model, embedder"),
        (dict(where="model", **PLAIN), r"starts: a stage starts models \(starts=\.\.\.\) where, and only where"),
        (dict(starts=lambda scope, labels: ["qwen2.5-7b-instruct"], **PLAIN), r"starts: a stage starts models"),
        (dict(where="embedder", **PLAIN), r"where: an embedder job is placed by its embedder"),
        (dict(options=("engine", "bootstrapp"), **PLAIN), r"options: no option group 'bootstrapp' \(there are engine,"),
        (dict(jobs=Over(model="models"), **PLAIN), r"jobs model: 'models' is not a function of the run's cells"),
        (dict(outputs=figure_files("toy", csv="csv"), product=TOY_TABLE),
         r"outputs\.csv: suffix 'csv' has no extension \(as '\.csv' or '_ranks\.csv'\)"),
        (dict(outputs=figure_files("toy", csv="csv."), product=TOY_TABLE), r"outputs\.csv: suffix 'csv\.' has no"),
        (dict(outputs=figure_files("toy", csv=".csv\n"), product=TOY_TABLE), r"outputs\.csv: suffix '\.csv\\n' has no"),
        (dict(memory_mb=True, **PLAIN), r"memory_mb: True is not a whole number above 0"),
        (dict(product=Product("table", "Toy", "a toy", main="csv", first="no"), **TABLE),  # "no" would be true
         r"product: its first is True or False, and its shown a tuple"),
        (dict(product=Product("table", "Toy", "a toy", main="csv", shown="csv"), **TABLE),  # its letters: 'c'
         r"product: its first is True or False, and its shown a tuple"),
        (dict(memory_mb="2 GB", **PLAIN), r"memory_mb: '2 GB' is not a whole number above 0"),
        (dict(minutes=0, **PLAIN), r"minutes: 0 is not a whole number above 0"),
        (dict(in_all="no", **PLAIN), r"in_all: 'no' is neither True, False nor a function of the run's config"),
        (dict(product=Product("tabel", "Toy", "a toy", main="csv"), **TABLE),
         r"product: kind 'tabel' is none of table, figure, export"),
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


def test_a_stage_of_labels_that_no_target_has_and_no_stage_reads_fails_and_one_a_target_has_is_taken():
    """Snakemake takes no rule of wildcards as a target: such a stage runs as a named target's, a product's (in
    ``all``) or another stage's input, and one that is none of these would never run."""
    declared = dict(
        jobs=Over(model=lambda run: run.models),
        outputs={"counts": Paths(lambda scope, labels: [f"results/toy/{labels['model']}.json"])},
    )

    @stage("toy", "a toy", **declared)
    def unreached(model: str, counts: str) -> None: ...

    @stage("toy", "a toy", targets="counts", **declared)
    def targeted(model: str, counts: str) -> None: ...

    with pytest.raises(StageError, match=r"^stage toy: targets: no stage reads its files and no target has them"):
        check_reached(with_unreached := (*STAGES, *unreached.stages), *check_one_writer(with_unreached, CHECKED_RUN))
    check_reached(with_targeted := (*STAGES, *targeted.stages), *check_one_writer(with_targeted, CHECKED_RUN))


def test_two_stages_of_one_model_writing_one_file_fail_in_the_run_the_registry_checks():
    """The schema's default run has no model under test: the registry checks its stages in it with one."""

    @stage("toy", "a toy", jobs=Over(model=lambda run: run.models), outputs={"summary": One("generation_run")})
    def toy(model: str, summary: str) -> None: ...

    with pytest.raises(StageError, match=r"stage toy: outputs\.summary: .*/a-model/run\.json is written by generate"):
        check_one_writer((*STAGES, *toy.stages), CHECKED_RUN)


def test_files_that_collide_only_in_another_run_are_found_when_that_run_loads(monkeypatch):
    """The registry checks the schema's default run as it loads; the workflow checks its own run too: here two
    stages write one file only where the run has the embedder ``usem3``, which the default run lacks."""
    from h2htalk.stages import workflow

    @stage("toy", "a toy", jobs=Over(embedder=lambda run: run.embedders),
           product=Product("table", "Toy", "a toy", main="csv"),
           outputs=figure_files("zz_{embedder}", csv=".csv"))  # fmt: skip
    def toy(csv: str, embedder: str) -> None: ...

    @stage("toy_too", "a toy", product=Product("table", "Toy", "a toy", main="csv"),
           outputs=figure_files("zz_usem3", csv=".csv"))  # fmt: skip
    def toy_too(csv: str) -> None: ...

    stages = (*STAGES, *toy.stages, *toy_too.stages)
    check_one_writer(stages, Scope(default_config({"scoring": {"embedders": ["bge-m3"]}}), Layout("results", "demo")))
    run = default_config({"scoring": {"embedders": ["usem3"]}})
    monkeypatch.setattr(workflow, "STAGES", stages)
    with pytest.raises(
        StageError, match=r"stage toy_too: outputs\.csv: .*zz_usem3\.csv is written by toy too \(in this run\)"
    ):
        workflow.Rules(run, Layout("results", "demo"), {}, REPO_ROOT)


def test_a_stage_whose_conda_env_the_checkout_lacks_fails_as_the_workflow_loads(monkeypatch):
    from h2htalk.stages import workflow

    @stage("toy", "a toy", env="scorin", outputs={"report": Paths(lambda scope, labels: ["results/toy.csv"])})
    def toy(report: list[str]) -> None: ...

    monkeypatch.setattr(workflow, "STAGES", (*STAGES, *toy.stages))
    with pytest.raises(StageError, match=r"stage toy: env: 'scorin' is no file envs/scorin\.yaml"):
        workflow.Rules(default_config(), Layout("results", "demo"), {}, REPO_ROOT)


def test_a_file_inside_a_folder_another_stage_writes_fails():
    @stage("toy", "a toy", product=Product("table", "Toy", "a toy", main="csv"),
           outputs=figure_files("viewer/extra", csv=".csv"))  # fmt: skip
    def toy(csv: str) -> None: ...

    with pytest.raises(StageError, match=r"stage toy: outputs: .*viewer/extra\.csv is inside .*viewer, which viewer"):
        check_one_writer((*STAGES, *toy.stages), CHECKED_RUN)


def test_a_file_written_twice_by_one_stage_or_inside_a_folder_another_keeps_fails():
    """Snakemake would keep one of two jobs of one file, and remove a job's outputs before it runs: a file inside a
    folder another stage adds to across runs (the drift canary's history) would take that history with it."""

    one_file = Paths(lambda scope, labels: [f"{scope.results.root}/toy.csv"])

    @stage("toy_too", "a toy", outputs={"report": one_file, "table": one_file})
    def toy_too(report: list[str], table: list[str]) -> None: ...

    with pytest.raises(StageError, match=r"stage toy_too: outputs\.table: results/toy\.csv is written by two of its"):
        check_one_writer((*STAGES, *toy_too.stages), CHECKED_RUN)
    spelt_otherwise = Paths(lambda scope, labels: [f"{scope.results.root}/./toy.csv"])

    @stage("toy_spelt", "a toy", outputs={"report": one_file, "table": spelt_otherwise})
    def toy_spelt(report: list[str], table: list[str]) -> None: ...

    with pytest.raises(StageError, match=r"stage toy_spelt: outputs\.table: results/toy\.csv is written by two of"):
        check_one_writer((*STAGES, *toy_spelt.stages), CHECKED_RUN)
    in_history = Paths(lambda scope, labels: [scope.results.path("canary_history", role="toy")[:-5] + "x.json"])

    @stage("toy_kept", "a toy", outputs={"note": in_history})
    def toy_kept(note: list[str]) -> None: ...

    with pytest.raises(StageError, match=r"stage toy_kept: outputs: .*judge_canary/.* is inside .*judge_canary, which"
                       r" judge_ladder writes or keeps"):  # fmt: skip
        check_one_writer((*STAGES, *toy_kept.stages), CHECKED_RUN)
    spelt = Paths(
        lambda scope, labels: [scope.results.path("canary_history", role="toy").replace("/judge", "/./judge")]
    )

    @stage("toy_spelt_kept", "a toy", outputs={"note": spelt})
    def toy_spelt_kept(note: list[str]) -> None: ...

    with pytest.raises(StageError, match=r"stage toy_spelt_kept: outputs: .*/demo/judge_canary/toy/.* is inside"):
        check_one_writer((*STAGES, *toy_spelt_kept.stages), CHECKED_RUN)


@pytest.mark.parametrize(
    ("declared", "field"),
    [
        (dict(jobs=Over(modle=lambda run: run.models), outputs={"summary": One("generation_run")}),
         "outputs.summary"),  # a label misspelt
        (dict(jobs=Over(model=lambda run: run.modles), outputs={"summary": One("generation_run")}),
         "jobs"),  # a list misspelt
        (dict(jobs=Over(model=lambda run: run.models), outputs={"summary": One("generation_run")},
              inputs={"curated": One("curated", over=("subtask", "subtaks"))}),
         "inputs.curated"),  # an input's list misspelt
        (dict(jobs=Over(model=lambda run: run.models), outputs={"summary": One("generation_run")},
              inputs={"generations": Each("generations")}, cells=lambda run, labels: run.benchmark(labels["modl"])),
         "cells"),  # a label misspelt in its cells
        (dict(jobs=Over(model=lambda run: run.models), outputs=figure_files("zz_{model}", summary=".csv"),
              product=Product("table", {"b-model": "B"}, "a toy", main="summary")),
         "product"),  # a title for some of its jobs
        (dict(jobs=Over(model=lambda run: run.models[0]), outputs={"summary": One("generation_run")}),
         "jobs"),  # one value, not a list: a job for each of its letters
        (dict(jobs=Over(model=lambda run: run.models), outputs={"summary": One("generation_run")}, where="model",
              starts=lambda scope, labels: labels["model"]),
         "starts"),  # one name, not a list: a model for each of its letters
        (dict(jobs=Over(model=lambda run: run.models), outputs={"summary": One("generation_run")},
              in_all=lambda config: config["judge_reliabilty"]["every_run"]),
         "in_all"),  # a key misspelt: Snakemake's KeyError in the Snakefile, naming no stage
        (dict(jobs=Over(lambda run: [(m, "rubric") for m in run.models], model=str), outputs={"summary": One(
            "generation_run")}), "jobs"),  # a label left out of a combination's labels: 2 values for 1 label
        (dict(jobs=Over(model=lambda run: run.models[0].encode()), outputs={"summary": One("generation_run")}),
         "jobs"),  # bytes: a job for each of its bytes
        (dict(jobs=Over(model=lambda run: bytearray(run.models[0].encode())), outputs={"summary": One(
            "generation_run")}), "jobs"),  # a bytearray too
    ],
)  # fmt: skip
def test_a_file_its_jobs_cannot_resolve_fails_naming_the_stage_and_the_field_not_a_bare_error(declared, field):
    @stage("toy", "a toy", **declared)
    def toy(summary: str, inputs: dict[str, list[str]]) -> None: ...

    with pytest.raises(
        StageError, match=rf"^stage toy: {field}: (Key|Attribute|Type|Value)Error: .*, in the schema's default run"
    ) as raised:
        check_one_writer((*STAGES, *toy.stages), CHECKED_RUN)
    assert str(raised.value).endswith(f"(its jobs' labels: {', '.join(toy.stages[0].labels)})")  # the misspelt one


@pytest.mark.parametrize(
    ("declared", "error"),
    [
        (dict(inputs={"provenance": One("provenance")}, product=TOY_TABLE, **TABLE),
         r"inputs\.provenance: a product's provenance, which"),
        (dict(outputs={"meta": Figure("toy", ".json"), **TABLE["outputs"]}, product=TOY_TABLE),
         r"outputs\.meta: a product's provenance, which the machinery"),
        (TABLE, r"outputs: a file in the tables folder is a product's \(product=\.\.\.\)"),
        (dict(product=Product("table", "Toy", "a toy", main="csv")), r"outputs: a product's files are in the tables"),
        (dict(reads=("scoring.bootstrapp",), **PLAIN), r"reads 'scoring\.bootstrapp': .*mean 'scoring\.bootstrap'"),
        (dict(reads=("-rubric_judge.alpha",), **PLAIN), r"reads '-rubric_judge\.alpha': a -key leaves a key out of a"),
        (dict(reads=("generation.rate_limits.gpt-4o.rpm",), **PLAIN), r"reads 'generation\.rate_limits\.gpt-4o\.rpm'"),
        (dict(reads=("scoring.embedders",), typed=True, **PLAIN),
         r"bootstrap: BootstrapSettings: the stage reads config key 'scoring\.bootstrap'"),
        (dict(name="zz a-b", **PLAIN), r"name: a rule's name is a Python identifier"),
    ],
)  # fmt: skip
def test_a_declaration_that_would_go_wrong_later_fails_as_it_loads(declared, error):
    """Provenance declared by hand (replacing the machinery's, or a table without one), a product without files, a
    misspelt or unread key (a typed setting reads keys the stage must declare), or a name no rule may have."""
    name, typed = declared.pop("name", "toy"), declared.pop("typed", False)

    def toy(csv: str) -> None: ...

    def typed_toy(csv: str, bootstrap: BootstrapSettings) -> None: ...

    with pytest.raises(StageError, match=rf"^stage {name}: {error}") as raised:
        check_names(stage(name, "a toy", **declared)(typed_toy if typed else toy).stages)
    if "name" not in error:  # said of the declaration, where it is
        assert re.search(r"\(at tests\.test_stage_declarations\..*\.(typed_)?toy\)$", str(raised.value))


def test_the_base_of_the_settings_of_one_section_is_no_typed_setting():
    from h2htalk.settings import FromSection

    def toy(csv: str, judge: FromSection) -> None: ...

    with pytest.raises(StageError, match=r"^stage toy: judge: a parameter that is no declared input, output, label"):
        stage("toy", "a toy", reads=("rubric_judge",), **PLAIN)(toy)


def test_a_products_title_is_its_own_or_by_the_jobs_one_label():
    assert Product("table", "T", "a toy", main="csv").about({"model": "m", "variant": "sap"}) == ("T", "a toy")
    assert Product("table", {"m": "T m"}, "a toy", main="csv").about({"model": "m"}) == ("T m", "a toy")


def test_a_typed_setting_is_taken_by_its_class_too():
    """A module without ``from __future__ import annotations`` names its settings by their classes."""

    def toy(csv: str, bootstrap: BootstrapSettings) -> None: ...

    toy.__annotations__["bootstrap"] = BootstrapSettings
    declared = stage("toy", "a toy", reads=("scoring.bootstrap",), **PLAIN)(toy)
    assert [s.name for s in declared.stages] == ["toy"]


@pytest.fixture
def module_of(tmp_path, monkeypatch):
    """A module of the given lines, importable by its name (which this returns) for the test's length."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def written(name: str, *lines: str) -> str:
        (tmp_path / f"{name}.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return name

    return written


STAGE_IMPORTS = (
    "from h2htalk.stages.declare import stage",
    "from h2htalk.stages.spec import One, Product, figure_files",
)


def test_a_stage_whose_function_its_module_does_not_name_fails(module_of):
    """Two functions of one name in a module (the second hides the first), or one inside a class: its stage would
    be left out of the registry without a word."""
    from h2htalk.commands import declared_in
    from h2htalk.stages.declare import check_reachable

    hidden = module_of(
        "hidden_toy", *STAGE_IMPORTS,
        "@stage('toy_one', 'a toy', outputs={'csv': One('curation_report')})", "def toy(csv): ...",
        "@stage('toy_two', 'a toy', outputs={'csv': One('curation_report_md')})", "def toy(csv): ...",
    )  # fmt: skip
    with pytest.raises(StageError, match=r"stage toy_one: hidden_toy\.toy is no name of its module \(a later"):
        check_reachable(hidden, declared_in(hidden, "stages"))
    wrapped = module_of(
        "wrapped_toy", "import functools", *STAGE_IMPORTS,
        "def logged(function):", "    return functools.wraps(function)(lambda **given: function(**given))",
        "@logged", "@stage('toy_one', 'a toy', outputs={'csv': One('curation_report')})", "def toy(csv): ...",
    )  # fmt: skip
    with pytest.raises(StageError, match=r"stage toy_one: wrapped_toy\.toy .* \(a decorator above @stage wraps it"):
        check_reachable(wrapped, declared_in(wrapped, "stages"))


def test_a_module_whose_declaration_cannot_be_built_is_named_with_its_line(module_of):
    """A keyword misspelt in a value a declaration is built of (``Product``, a file's kind) fails before any check
    runs: the module and its line are named, as a declaration checked wrong is, not a traceback; one checked wrong
    stays its own error."""
    from h2htalk.commands import declared_in
    from h2htalk.errors import H2HTalkError

    unbuilt = module_of(
        "unbuilt_toy", *STAGE_IMPORTS,
        "@stage('toy', 'a toy', outputs=figure_files('toy', csv='.csv'),",
        "       product=Product('table', 'Toy', 'a toy', main='csv', shwon=('csv',)))", "def toy(csv): ...",
    )  # fmt: skip
    with pytest.raises(H2HTalkError, match=r"^module unbuilt_toy: TypeError: .*'shwon' \(at .*unbuilt_toy\.py:4\)$"):
        declared_in(unbuilt, "stages")
    checked = module_of(
        "checked_toy", *STAGE_IMPORTS,
        "@stage('toy', 'a toy', reads=('subtask',), outputs={'csv': One('curation_report')})", "def toy(csv): ...",
    )  # fmt: skip
    with pytest.raises(StageError, match=r"^stage toy: reads 'subtask'"):
        declared_in(checked, "stages")


def test_a_named_target_that_is_a_rule_name_fails():
    @stage("toy", "a toy", targets="table1", outputs={"report": One("curation_report")})
    def toy(report: str) -> None: ...

    with pytest.raises(StageError, match=r"^stage toy: targets: 'table1' is the name of a rule too"):
        check_names((*STAGES, *toy.stages))


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


def _toy_job(tmp_path, function, **declared):
    (toy,) = stage("toy", "a toy", outputs={"report": One("curation_report")}, **declared)(function).stages
    return toy, toy.job(default_config(), Layout(str(tmp_path / "results")), {}, models=None)


def test_a_stage_reading_the_review_stores_sheets_declares_the_key_that_names_the_store():
    from h2htalk.sheets import SAFETY_RATINGS

    with pytest.raises(StageError, match=r"stage toy: ratings: sheets of the review store, which 'review\.store'"):

        @stage("toy", "a toy", ratings=(SAFETY_RATINGS,), reads=("review.mode",),
               outputs={"report": One("curation_report")})  # fmt: skip
        def toy(report: str) -> None: ...

    @stage("toy", "a toy", ratings=(SAFETY_RATINGS,), reads=("review",), outputs={"report": One("curation_report")})
    def toy_reading_it(report: str) -> None: ...


def test_what_only_a_job_shows_is_named_as_the_job_runs(tmp_path):
    """A function that returns no ``Done``, reads a key its stage does not declare, or reaches a file of each cell
    that its stage does not declare, fails naming the stage and what is wrong, not with a bare error after it."""
    from h2htalk.config import UndeclaredSetting

    def says_nothing(report: str) -> None:
        return None

    with pytest.raises(StageError, match=r"^stage toy: .*says_nothing returned None, not a Done$"):
        _toy_job(tmp_path, says_nothing)[1].call()

    def reads_more(report: str, config: dict) -> Done:
        return Done(str(config["scoring"]["bootstrap"]["seed"] + config["baselines"]))

    with pytest.raises(UndeclaredSetting, match=r"^stage toy reads config key 'baselines', which it does not declare"):
        _toy_job(tmp_path, reads_more, reads=("scoring.bootstrap.seed",))[1].call()
    for read in (lambda report, config: config["scoring"]["bootstrap"]["resamples"],
                 lambda report, config: config["scoring"]["bootstrap"].get("resamples", 100)):  # fmt: skip
        with pytest.raises(UndeclaredSetting, match=r"^stage toy reads config key 'scoring\.bootstrap\.resamples'"):
            _toy_job(tmp_path, read, reads=("scoring.bootstrap.seed",))[1].call()

    def reaches_another(report: str, each, cells) -> Done:
        return Done(each("generation", None))

    with pytest.raises(
        StageError, match=r"^stage toy: each\('generation'\): no file of each cell of that name \(\[\]\)"
    ):
        _toy_job(tmp_path, reaches_another)[1].call()


def test_a_file_its_function_asks_for_by_a_name_not_declared_is_named_with_those_declared(tmp_path):
    """A function given ``outputs`` or ``inputs`` by name: a key renamed in the declaration alone (``tex`` to
    ``latex``) is the stage's error with the declared names, not a bare ``KeyError`` after some files are written."""

    def asks(report: str, outputs: dict[str, str], inputs: dict[str, list[str]]) -> Done:
        return Done(outputs["tex"])

    with pytest.raises(StageError, match=r"^stage toy: no file 'tex' is declared \(its files: report\)$"):
        _toy_job(tmp_path, asks)[1].call()

    def reads(report: str, inputs: dict[str, list[str]]) -> Done:
        return Done(inputs["summary"][0])

    with pytest.raises(StageError, match=r"^stage toy: no file 'summary' is declared \(its files: runs\)$"):
        _toy_job(tmp_path, reads, inputs={"runs": One("generation_run", over=("model", "models"))})[1].call()


def test_a_job_that_leaves_a_declared_output_unwritten_fails_naming_it(tmp_path, monkeypatch, capsys):
    """Said by the job, not by Snakemake as a missing file after waiting for a slow file system."""
    from h2htalk.cli import main, stages

    def writes_nothing(report: str) -> Done:
        return Done("nothing")

    toy, _ = _toy_job(tmp_path, writes_nothing)
    monkeypatch.setattr(stages, "STAGES", (toy,))
    assert main(["toy", "--results", str(tmp_path / "results")]) == 2
    assert re.search(r"error: stage toy: declared outputs it did not write: .*curation_report", capsys.readouterr().err)


def test_every_model_jobs_command_takes_the_engine_options_its_rule_passes():
    """A model job's rule passes ``--server-log``; its command has the engine's options without declaring them, and a
    stage that declares them fails naming it: a model job, as it has them already, and any other, as it starts no
    engine."""
    from h2htalk.cli import build_parser
    from h2htalk.layout import LABEL_VALUES
    from h2htalk.stages.declare import checked

    for model_job in (s for s in STAGES if s.where == "model"):
        labels = [f"--{label}={LABEL_VALUES.get(label, ('x',))[0]}" for label in model_job.labels]
        args = build_parser().parse_args([model_job.command_name, "--server-log", "s.log", "--base-url", "http://h/v1",
                                          *labels])  # fmt: skip
        assert (str(args.server_log), args.base_url) == ("s.log", "http://h/v1")
    for declared in ("generate", "table2"):
        with pytest.raises(StageError, match=r"stage toy: options: 'engine': the engine's options are a model job's"):
            checked(replace(BY_NAME[declared], name="toy", command="toy", options=("engine",)))


def test_a_label_missing_from_an_outputs_path_or_a_cell_not_of_its_jobs_labels_fails_as_the_registry_loads():
    """Every job of the stage would write that one path (Snakemake refuses the rule, naming it alone); a job of one
    model that reads every model's cells as its own would count them all, silently."""
    jobs = Over(model=lambda run: run.models, subtask=lambda run: run.subtasks)

    @stage("toy", "a toy", jobs=jobs, outputs={"lengths": One("generation_run")}, targets="lengths")
    def toy(lengths: str) -> None: ...

    with pytest.raises(StageError, match=r"stage toy: outputs\.lengths: no \{subtask\} in .*/\{model\}/run\.json"):
        check_labels((*STAGES, *toy.stages), CHECKED_RUN)
    two_models = Scope({**default_config(), "models": ["a-model", "b-model"]}, Layout("results", "demo"))

    @stage("toy_all", "a toy", jobs=Over(model=lambda run: run.models), targets="lengths",
           cells=lambda run, labels: [cell for model in run.models for cell in run.benchmark(model)],
           inputs={"generations": Each("generations")}, outputs={"lengths": One("generation_run")})  # fmt: skip
    def toy_all(generations: list[str], lengths: str) -> None: ...

    with pytest.raises(StageError, match=r"stage toy_all: cells: the job of model a-model has a cell of b-model"):
        check_labels((*STAGES, *toy_all.stages), two_models)
    check_labels(STAGES, two_models)  # the workflow's own: a job's cells are its own
    # with the one model of the registry's run, a job's outputs of every model's cells lack its label: the cells' fault
    with pytest.raises(StageError, match=r"stage toy_out: cells: no \{model\} in .*/a-model/.* \(generations\)"):

        @stage("toy_out", "a toy", jobs=Over(model=lambda run: run.models), targets="lengths",
               cells=lambda run, labels: [cell for model in run.models for cell in run.benchmark(model)],
               outputs={"generations": Each("generations")})  # fmt: skip
        def toy_out(generations: list[str]) -> None: ...

        check_labels((*STAGES, *toy_out.stages), CHECKED_RUN)


def test_a_combination_of_a_jobs_labels_of_another_length_says_so():
    """A label dropped from ``Over`` and kept in its combinations: said as that, not as ``zip``'s own error."""
    with pytest.raises(ValueError, match=r"^\('a-model', 'rubric'\): 2 values for the labels model$"):
        Over(lambda run: [(m, "rubric") for m in run.models], model=str)(CHECKED_RUN.run)


def test_a_stage_reading_what_a_later_stage_writes_fails_naming_both():
    """The registry's order is the pipeline's (the plan runs its stages in it); read against it, the two are out of
    order, or a cycle Snakemake would name by one rule alone."""

    @stage("toy", "a toy", inputs={"table": Figure("table1", ".csv")}, outputs={"report": One("curation_report")})
    def toy(table: str, report: str) -> None: ...

    with pytest.raises(StageError, match=r"^stage toy: inputs\.table: .*table1\.csv is written by table1, which the"):
        check_one_writer((*toy.stages, *(s for s in STAGES if s.name != "curation_report")), CHECKED_RUN)

    @stage("toy_too", "a toy reading it after the first", inputs={"table": Figure("table1", ".csv")})
    def toy_too(table: str) -> None: ...

    with pytest.raises(StageError, match=r"^stage toy: inputs\.table: "):  # the first to read it out of order
        check_one_writer(
            (*toy.stages, *toy_too.stages, *(s for s in STAGES if s.name != "curation_report")), CHECKED_RUN
        )
    check_one_writer((*(s for s in STAGES if s.name != "curation_report"), *toy.stages), CHECKED_RUN)  # after it


def test_a_misspelt_field_of_a_declaration_is_named_with_the_field_it_meant():
    with pytest.raises(StageError, match=r"^stage toy: target: no field of a Stage \(did you mean 'targets'\?\)"):

        @stage("toy", "a toy", target="lengths", **PLAIN)
        def toy(csv: str) -> None: ...


def test_an_input_of_the_results_or_the_tables_folder_that_no_stage_writes_fails_naming_it():
    """A misspelt stem (``table_2``) or a kind no stage makes is named as the registry loads, not as Snakemake's
    missing input of one rule; a file the run is given (a config file: ``Paths``) is no stage's."""

    @stage("toy", "a toy", inputs={"table": Figure("table_2", ".csv")}, outputs={"report": One("curation_report")})
    def toy(table: str, report: str) -> None: ...

    others = tuple(s for s in STAGES if s.name != "curation_report")
    with pytest.raises(StageError, match=r"^stage toy: inputs\.table: .*table_2\.csv is written by no stage \(in the"):
        check_one_writer((*others, *toy.stages), CHECKED_RUN)


@pytest.mark.parametrize(
    "reader", [s for s in STAGES if any(isinstance(spec, Figure) for spec in s.inputs.values())], ids=lambda s: s.name
)
def test_a_real_stage_reading_a_misspelt_table_fails_as_the_registry_loads(reader):
    name, spec = next((name, spec) for name, spec in reader.inputs.items() if isinstance(spec, Figure))
    misspelt = replace(reader, inputs={**reader.inputs, name: replace(spec, stem=spec.stem + "s")})
    with pytest.raises(StageError, match=rf"^stage {reader.name}: inputs\.{name}: \S+ is written by no stage"):
        check_one_writer(tuple(misspelt if s is reader else s for s in STAGES), CHECKED_RUN)


def test_a_function_that_takes_its_commands_options_needs_an_option_group_unless_it_is_a_model_jobs():
    """A model job has the engine's options without declaring them (``--base-url``, ...); any other stage whose
    function reads its options declares their group, or its flags are gone."""
    jobs = Over(model=lambda run: run.models)

    @stage("toy_model", "a toy", jobs=jobs, where="model", starts=lambda s, w: [w["model"]],
           outputs={"summary": One("generation_run")})  # fmt: skip
    def toy_model(summary: str, options) -> None: ...

    assert toy_model.stages[0].options == ()  # declared as it is
    with pytest.raises(StageError, match=r"^stage toy_local: options: toy_local takes its command's options, but"):

        @stage("toy_local", "a toy", jobs=jobs, outputs={"summary": One("generation_run")})
        def toy_local(summary: str, options) -> None: ...
