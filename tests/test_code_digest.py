"""Each rule's shell names the digest of the code its stage runs (``workflow.code_digest``), so that Snakemake's
code trigger reruns the stages whose code changed and no other: the stage's module, the package's modules it
imports (inside its functions too) and theirs, and the packages above them."""

from __future__ import annotations

import shutil
from pathlib import Path

from h2htalk.stages.table import BY_NAME
from h2htalk.stages.workflow import PACKAGE, code_digest, module_source, package_imports

from .package_imports import modules
from .package_imports import package_imports as imports_read_by_ast


def test_the_import_scan_finds_every_import_the_syntax_tree_holds():
    """The digest's scan reads the source as text (a workflow load parses no module); it misses none of the imports
    an ``ast`` walk finds: at module level, in functions, parenthesised over lines, under TYPE_CHECKING."""
    known = modules(PACKAGE)

    def module_of(name: str) -> str:
        while name not in known:
            name = name.rpartition(".")[0]
        return name

    found = {name: {module_of(n) for n in package_imports(path.read_text(encoding="utf-8"))} - {name}
             for name, path in known.items()}  # fmt: skip
    missed = [(i.importer, i.imported, i.line) for i in imports_read_by_ast(PACKAGE)]
    assert not [(importer, imported, line) for importer, imported, line in missed if imported not in found[importer]]
    text = "from h2htalk.a import (\n    b,  # why\n    c as d,\n)\n    import h2htalk.e as f\nfrom h2htalk import g\n"
    assert package_imports(text) == {"h2htalk.a", "h2htalk.a.b", "h2htalk.a.c", "h2htalk.e", "h2htalk", "h2htalk.g"}


def test_a_changed_module_changes_the_digest_of_the_stages_that_run_it_and_no_other(tmp_path):
    package = tmp_path / "src" / "h2htalk"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    stages = ("score", "generate", "table1", "figure", "rubric_judge")
    modules_of = {name: BY_NAME[name].run.__module__ for name in stages}

    def digests() -> dict[str, str]:
        module_source.cache_clear()  # the package's files are read once per process
        return {name: code_digest(module, package) for name, module in modules_of.items()}

    before = digests()
    assert before == {name: code_digest(module) for name, module in modules_of.items()}  # the copy is the package
    assert len(set(before.values())) == len(stages)
    changes = {
        "scoring/metrics.py": {"score"},  # imported inside the scoring job's function
        "judge/cascade.py": {"rubric_judge"},
        "io.py": set(stages),  # every stage writes through it
    }
    for file, rerun in changes.items():
        with open(package / file, "a", encoding="utf-8") as handle:
            handle.write("\n# a change\n")
        after = digests()
        assert {name for name in stages if after[name] != before[name]} == rerun, file
        before = after
    Path(package, "unused.py").write_text("X = 1\n", encoding="utf-8")  # a module no stage imports
    assert digests() == before
