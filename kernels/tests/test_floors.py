"""kernels/ is the ground floor: none of its files imports harness/, arms/, figures/ or gate/, and its
modules import one another without a loop. Read from the source with ``ast``, so an import inside a
function (the kind that hid both loops this repository had) counts like one at the top."""
import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROJECT = ("kernels", "arms", "harness", "gate", "figures")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = REPO) -> set[str]:
    """Every module the file imports, anywhere in it: ``from a import b`` counts as ``a.b`` where b is a
    module of the tree under ``root``, else as ``a``; relative imports are resolved against the file."""
    name = module_name(path, root).split(".")
    package = name if path.name == "__init__.py" else name[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]) if node.level else node.module
            base = base.strip(".")
            for a in node.names:
                sub = f"{base}.{a.name}"
                where = root / Path(*sub.split("."))
                found.add(sub if where.with_suffix(".py").exists() or where.is_dir() else base)
    return found


def import_graph(package: Path, root: Path) -> dict[str, set[str]]:
    """{module: the modules of the same package it imports}, tests left out."""
    graph = {}
    for path in sorted(package.rglob("*.py")):
        name = module_name(path, root)
        if ".tests" not in name:
            graph[name] = {m for m in imported_modules(path, root) if m.split(".")[0] == package.name and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import loop as [a, b, ..., a], or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state and (loop := visit(n)):
                return loop
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state and (loop := visit(m)):
            return loop
    return None


def upward_imports(package: Path, root: Path, forbidden) -> list[str]:
    return [f"{path.relative_to(root)} imports {m}" for path in sorted(package.rglob("*.py"))
            for m in sorted(imported_modules(path, root)) if m.split(".")[0] in forbidden]


def test_kernels_import_nothing_of_the_floors_above():
    assert upward_imports(REPO / "kernels", REPO, set(PROJECT) - {"kernels"}) == []


def test_no_import_loop_inside_kernels():
    assert find_cycle(import_graph(REPO / "kernels", REPO)) is None


@pytest.fixture
def planted(tmp_path):
    """A package whose loop and upward import hide inside functions, as kernels/ had them."""
    pkg = tmp_path / "kernels"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "em.py").write_text("from kernels.two_pass import run\n")
    (pkg / "two_pass.py").write_text("def run():\n    from kernels import two_pass_ws\n")
    (pkg / "two_pass_ws.py").write_text("def main():\n    from harness.data import make_dataset\n    from . import em\n")
    (pkg / "one_pass.py").write_text("import kernels.em\n")
    return tmp_path


def test_the_walker_finds_loops_and_upward_imports_inside_functions(planted):
    graph = import_graph(planted / "kernels", planted)
    assert graph["kernels.two_pass_ws"] == {"kernels.em"}  # a relative import, resolved
    assert find_cycle(graph) == ["kernels.em", "kernels.two_pass", "kernels.two_pass_ws", "kernels.em"]
    assert upward_imports(planted / "kernels", planted, {"harness"}) == [
        f"{Path('kernels/two_pass_ws.py')} imports harness.data"]
    del graph["kernels.two_pass_ws"]
    assert find_cycle(graph) is None
