"""pyproject.toml, environment.yml and the Makefile pin the same versions."""
import re
import tomllib

import yaml

from harness.tests.conftest import REPO


def _name(req: str) -> str:
    return re.split(r"[=<>!~ ]", req, maxsplit=1)[0].lower().replace("_", "-")


def _pyproject():
    p = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {g: list(reqs) for g, reqs in p["optional-dependencies"].items()}
    return p["dependencies"], groups


def test_conda_pins_equal_pyproject_pins():
    core, groups = _pyproject()
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    expected = core + [r for g, reqs in groups.items() if g != "torchgmm" for r in reqs]
    assert sorted(pip) == sorted(expected)
    assert f"python={env['dependencies'][0].split('=')[1]}" == "python=3.11"


def test_every_pin_is_exact_except_torch():
    core, groups = _pyproject()
    for req in core + [r for reqs in groups.values() for r in reqs]:
        assert "==" in req or _name(req) == "torch", req


def test_torchgmm_is_installed_without_its_unused_deps_everywhere():
    (pin,) = _pyproject()[1]["torchgmm"]
    assert f"TORCHGMM ?= {pin}" in (REPO / "Makefile").read_text()
    assert f"pip install --no-deps {pin}" in (REPO / "environment.yml").read_text()


def test_offline_wheel_list_uses_the_same_pins():
    core, groups = _pyproject()
    pins = {_name(r): r for r in core + [r for reqs in groups.values() for r in reqs]}
    make = (REPO / "Makefile").read_text()
    offline = re.search(r"WHEELS_ALL := (.*?)\n(?=\S)", make, re.S).group(1).replace("\\\n", " ").split()
    offline += re.search(r"WHEELS_MIN := (.*?)\n(?=\S)", make, re.S).group(1).replace("\\\n", " ").split()
    for req in offline:
        if "==" in req:  # unpinned names are transitive dependencies of pinned ones
            assert pins.get(_name(req)) == req, req
    assert f"TORCH ?= torch==2.13.0" in make
