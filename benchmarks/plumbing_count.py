"""How much code wires the stages together: non-blank lines of the workflow's plumbing, file by file.

    python benchmarks/plumbing_count.py [--rev REV]

Plumbing is the code that does no stage's work but connects the stages to Snakemake, to the command line and to
each other. Counted, in two parts:

the workflow and the stage machinery
    ``Snakefile``, ``workflow/rules/*.smk``, ``src/h2htalk/cli/`` (every command's wiring), ``commands.py``
    (``@command``, a command declared at its function), and ``src/h2htalk/stages/`` whole: the registry, the spec
    and job, ``@stage`` and its checks, the rules' maker, the reference, and the stage functions in
    ``stages/jobs/`` with their declarations; and a declaration is wiring wherever it lives: in a module outside
    these whose function is a stage or a command (``@stage(...)`` or ``@command(...)`` at the function that does
    the work), the decorator's lines, with the module-level constants that only declarations read (a group of
    files or keys several declarations share);
the modules whose one job is wiring
    ``run_summary.py`` (the run's closing lines), ``freshness.py`` (the result graph, stale results removed),
    ``layout.py`` (every result's address), ``cells.py`` (the cells a run's jobs cover), ``cluster.py`` (what a
    job asks SLURM for), ``workflow_log.py`` (Snakemake's terminal output) and ``__main__.py``.

The first part is the list of the count quoted on main at f255a22 (2,478 lines); the total adds the second. A line
is non-blank when it holds anything but white space: comments and docstrings count, as they are read too.
A stage's or command's function outside them holds the work, and may also hold glue (reading inputs, naming the
job's line, the lines a command prints) that an adapter in ``stages/jobs/`` or ``cli/`` held before; which lines
are which is a judgement, so a third figure, printed apart and left out of the total, counts those functions whole
(their bodies with their declarations): the most the first part could be said to hold.
With ``--rev``, the files are read from that git revision instead of the working tree. Prints each file's count,
each part's and the total; ``--by-definition``, the first part's Python machinery by top-level definition, largest
first (what each piece costs).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "src/h2htalk"
DECLARATIONS = ("stage", "command")  # the decorators that declare a function a stage or a command

PARTS = {
    "workflow and stage machinery": [
        "Snakefile",
        "workflow/rules/*.smk",
        f"{PACKAGE}/cli/*.py",
        f"{PACKAGE}/commands.py",
        f"{PACKAGE}/stages/*.py",  # the stage functions in stages/jobs/ too: fnmatch's * spans folders
    ],
    "wiring modules": [
        f"{PACKAGE}/{name}.py"
        for name in ("run_summary", "freshness", "layout", "cells", "cluster", "workflow_log", "__main__")
    ],
}


def tracked(rev: str | None) -> list[str]:
    """The repository's files: at ``rev``, or in the working tree (tracked and untracked, not ignored)."""
    if rev:
        command = ["git", "ls-tree", "-r", "--name-only", rev]
    else:
        command = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True).stdout.splitlines()
    return sorted(path for path in listed if rev or (ROOT / path).is_file())


def text(path: str, rev: str | None) -> str:
    if rev:
        return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout  # fmt: skip
    return (ROOT / path).read_text(encoding="utf-8")


def non_blank(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip())


def declared_functions(source: str) -> list[tuple[int, int, int]]:
    """Each function of a module that is a stage or a command: (first line of its ``@stage``/``@command``
    decorators, the line its ``def`` is on, its last line)."""
    return [(min(d.lineno for d in declared), node.lineno, node.end_lineno or node.lineno)
            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)
            for declared in [[d for d in node.decorator_list
                              if isinstance(d, ast.Call) and getattr(d.func, "id", None) in DECLARATIONS]]
            if declared]  # fmt: skip


def declaration_lines(source: str, whole: bool = False) -> int:
    """The non-blank lines of a module's ``@stage(...)`` and ``@command(...)`` declarations (``whole``: with the
    functions they declare)."""
    lines = source.splitlines()
    return sum(non_blank("\n".join(lines[first - 1 : (last if whole else body - 1)]))
               for first, body, last in declared_functions(source))  # fmt: skip


def module_of(path: str) -> str:
    return path.removeprefix("src/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def declaration_constants(sources: dict[str, str]) -> dict[str, int]:
    """Each module -> the non-blank lines of its top-level assignments that only declarations read: names a
    ``@stage(...)`` or ``@command(...)`` uses (its own module's, or imported from another) and no other code."""
    trees = {module: ast.parse(source) for module, source in sources.items()}
    in_declarations, elsewhere = set(), set()  # (module, name) of every name read
    for module, tree in trees.items():
        imported = {alias.asname or alias.name: (node.module, alias.name) for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}  # fmt: skip
        inside = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for d in f.decorator_list
                  if isinstance(d, ast.Call) and getattr(d.func, "id", None) in DECLARATIONS
                  for n in ast.walk(d)}  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                (in_declarations if id(node) in inside else elsewhere).add(imported.get(node.id, (module, node.id)))
    found: dict[str, int] = {}
    for module, tree in trees.items():
        for node in (n for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign)):
            names = {(module, t.id) for t in getattr(node, "targets", [getattr(node, "target", None)])
                     if isinstance(t, ast.Name)}  # fmt: skip
            if names and names <= in_declarations and not names & elsewhere:
                lines = sources[module].splitlines()[node.lineno - 1 : node.end_lineno]
                found[module] = found.get(module, 0) + non_blank("\n".join(lines))
    return found


def definitions(source: str) -> list[tuple[int, str]]:
    """Each top-level definition of a module (a class's methods apart, its other lines as the class) and each run of
    other top-level statements (imports, constants): (non-blank lines, name)."""
    lines, found = source.splitlines(), []
    for node in ast.parse(source).body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        span = non_blank("\n".join(lines[first - 1 : node.end_lineno]))
        name = getattr(node, "name", None) or ast.unparse(node).split("\n")[0][:60]  # an assignment: its first line
        methods = [m for m in getattr(node, "body", []) if isinstance(node, ast.ClassDef)
                   and isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]  # fmt: skip
        for method in methods:
            start = min([method.lineno, *(d.lineno for d in method.decorator_list)])
            size = non_blank("\n".join(lines[start - 1 : method.end_lineno]))
            found.append((size, f"{name}.{method.name}"))
            span -= size
        found.append((span, name))
    return [*found, (non_blank(source) - sum(n for n, _ in found), "comments between them")]


def count(rev: str | None = None) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Each part's files -> their non-blank lines (a module outside them that declares a stage or a command is in
    the first part with its declarations' lines); and apart, such modules -> their declared functions' lines,
    declarations included."""
    files = tracked(rev)
    parts = {part: [path for path in files if any(fnmatch.fnmatchcase(path, p) for p in globs)]
             for part, globs in PARTS.items()}  # fmt: skip
    counts = {part: {path: non_blank(text(path, rev)) for path in sorted(paths)} for part, paths in parts.items()}
    listed = {path for paths in parts.values() for path in paths}
    first, whole = counts[next(iter(counts))], {}
    package = {path: text(path, rev) for path in files if path.startswith(f"{PACKAGE}/") and path.endswith(".py")}
    constants = declaration_constants({module_of(path): source for path, source in package.items()})
    for path, source in package.items():
        if path not in listed:
            found = [f"@{d}" for d in DECLARATIONS if f"@{d}(" in source]
            if lines := declaration_lines(source) + constants.get(module_of(path), 0):
                what = f"its {' and '.join(found)} declarations" if found else "what only declarations read"
                first[f"{path} ({what})"] = lines
                whole[path] = declaration_lines(source, whole=True) + constants.get(module_of(path), 0)
    return counts, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="count the files of this git revision (default: the working tree)")
    parser.add_argument(
        "--by-definition", action="store_true", help="the first part's machinery by top-level definition, largest first"
    )
    args = parser.parse_args()
    counts, whole = count(args.rev)
    if args.by_definition:
        machinery = [path for path in next(iter(counts.values())) if path.endswith(".py")]
        for lines, name in sorted(((n, f"{path}: {d}") for path in machinery
                                   for n, d in definitions(text(path, args.rev))), reverse=True):  # fmt: skip
            print(f"  {lines:6,d}  {name}")
        return
    for part, files in counts.items():
        print(f"{part}:")
        for path, lines in files.items():
            print(f"  {lines:6,d}  {path}")
        total = sum(files.values())
        print(f"  {total:6,d}  (this part)")
        if declared := sum(lines for path, lines in files.items() if "(" in path):
            print(f"  {declared:6,d}  of which the declarations listed; {total - declared:,d} the machinery")
    print(f"{sum(sum(files.values()) for files in counts.values()):8,d}  plumbing in all")
    if whole:
        first = sum(next(iter(counts.values())).values())
        declared = sum(lines for path, lines in next(iter(counts.values())).items() if "(" in path)
        bodies = sum(whole.values()) - declared
        print(f"stage and command functions outside them, whole: {sum(whole.values()):,d} lines in {len(whole)}"
              " modules;")  # fmt: skip
        print(f"  {first + bodies:6,d}  the first part were their bodies counted too")


if __name__ == "__main__":
    main()
