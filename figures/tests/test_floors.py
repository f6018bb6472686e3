"""Figures read CSVs only: no module of figures/ imports torch or the kernels, neither in its own source
nor through what it imports (checked in a fresh interpreter)."""
import json
import subprocess
import sys

from harness.tests.test_floors import REPO, imported_modules

NOT_HERE = ("torch", "triton", "turbo_gmm", "arms", "gate", "jax")


def test_figure_modules_import_neither_torch_nor_kernels():
    found = [f"{p.relative_to(REPO)} imports {m}" for p in sorted((REPO / "figures").glob("*.py"))
             for m in sorted(imported_modules(p)) if m.split(".")[0] in NOT_HERE]
    assert found == []


def test_rendering_loads_neither_torch_nor_kernels():
    code = ("import importlib, json, pkgutil, sys, figures\n"
            "for m in pkgutil.iter_modules(figures.__path__):\n"
            "    importlib.import_module('figures.' + m.name) if m.name != 'tests' else None\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {NOT_HERE!r})))")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.splitlines()[-1]) == []
