"""The gate judges plain arrays: no module of gate/ imports anything of the project."""
from harness.tests.test_floors import PROJECT, REPO, imported_modules


def test_gate_imports_nothing_of_the_project():
    found = [f"{p.relative_to(REPO)} imports {m}" for p in sorted((REPO / "gate").glob("*.py"))
             for m in sorted(imported_modules(p)) if m.split(".")[0] in PROJECT and m.split(".")[0] != "gate"]
    assert found == []
