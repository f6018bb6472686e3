"""kernels/ (the library, imported as turbo_gmm) is the ground floor: none of its files imports harness/, arms/,
figures/ or gate/, its modules import one another without a loop and by relative imports, and nothing in the
repository imports the folder's name ``kernels``. Read from the source with ``ast``, so an import inside a
function (the kind that hid both loops this repository had) counts like one at the top."""
import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIBRARY, LIBRARY_DIR = "turbo_gmm", "kernels"  # pyproject.toml: package-dir = {"turbo_gmm" = "kernels"}
PROJECT = (LIBRARY, "arms", "harness", "gate", "figures")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts = [LIBRARY if i == 0 and p == LIBRARY_DIR else p for i, p in enumerate(parts)]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_path(module: str, root: Path) -> Path:
    parts = module.split(".")
    return root / Path(*[LIBRARY_DIR if i == 0 and p == LIBRARY else p for i, p in enumerate(parts)])


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
                where = source_path(sub, root)
                found.add(sub if where.with_suffix(".py").exists() or where.is_dir() else base)
    return found


def import_graph(package: Path, root: Path) -> dict[str, set[str]]:
    """{module: the modules of the same package it imports}, tests left out."""
    graph = {}
    for path in sorted(package.rglob("*.py")):
        name = module_name(path, root)
        if ".tests" not in name:
            top = module_name(package / "__init__.py", root)
            graph[name] = {m for m in imported_modules(path, root) if m.split(".")[0] == top and m != name}
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


def test_the_library_imports_nothing_of_the_floors_above():
    assert upward_imports(REPO / LIBRARY_DIR, REPO, set(PROJECT) - {LIBRARY}) == []


def test_no_import_loop_inside_the_library():
    assert find_cycle(import_graph(REPO / LIBRARY_DIR, REPO)) is None


def absolute_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module)
    return found


def test_the_library_imports_itself_relatively():
    """Installed or not, under whatever path: no module of the library names ``turbo_gmm`` (its tests and the
    Sphinx configuration in kernels/docs/, neither of them in the wheel, do)."""
    found = [f"{p.relative_to(REPO)} imports {m}" for p in sorted((REPO / LIBRARY_DIR).rglob("*.py"))
             if not {"tests", "docs"} & set(p.relative_to(REPO).parts)
             for m in sorted(absolute_imports(p)) if m.split(".")[0] == LIBRARY]
    assert found == []


def test_nothing_imports_the_folder_name():
    """``kernels`` is also a PyPI package: no code of the repository imports it."""
    found = [f"{p.relative_to(REPO)} imports {m}" for top in PROJECT + ("hydra_plugins",)
             for p in sorted((REPO / (LIBRARY_DIR if top == LIBRARY else top)).rglob("*.py"))
             for m in sorted(absolute_imports(p)) if m.split(".")[0] == LIBRARY_DIR]
    assert found == []


@pytest.fixture
def planted(tmp_path):
    """A package whose loop and upward import hide inside functions, as kernels/ had them."""
    pkg = tmp_path / LIBRARY_DIR
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "em.py").write_text("from turbo_gmm.two_pass import run\n")
    (pkg / "two_pass.py").write_text("def run():\n    from turbo_gmm import two_pass_ws\n")
    (pkg / "two_pass_ws.py").write_text("def main():\n    from harness.data import make_dataset\n    from . import em\n")
    (pkg / "one_pass.py").write_text("import turbo_gmm.em\n")
    return tmp_path


def test_the_walker_finds_loops_and_upward_imports_inside_functions(planted):
    graph = import_graph(planted / LIBRARY_DIR, planted)
    assert graph["turbo_gmm.two_pass_ws"] == {"turbo_gmm.em"}  # a relative import, resolved
    assert find_cycle(graph) == ["turbo_gmm.em", "turbo_gmm.two_pass", "turbo_gmm.two_pass_ws", "turbo_gmm.em"]
    assert upward_imports(planted / LIBRARY_DIR, planted, {"harness"}) == [
        f"{Path('kernels/two_pass_ws.py')} imports harness.data"]
    del graph["turbo_gmm.two_pass_ws"]
    assert find_cycle(graph) is None
