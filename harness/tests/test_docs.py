"""The Markdown guides: every relative link resolves to a file of the repository, and no
text or file name names a run by the ordinal of a work period (runs are named by date and commit).
The Sphinx documentation (kernels/docs/, built by `make docs`): its API page lists turbo_gmm.__all__,
its user guide is README's "Use it", which starts with the install and the estimator."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {"third_party", "wheelhouse", "node_modules"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# Built from pieces so that this file does not match itself.
ORDINAL = re.compile("sess" + r"ion ?[0-9]+|" + "sess" + r"ions? [0-9]", re.IGNORECASE)


def _tracked(p: Path) -> bool:
    """Skips hidden folders (.venv, .git, .hydra_runs), third-party checkouts and the uncommitted
    results of a CPU smoke run (results/<host>-cpu/)."""
    rel = p.relative_to(ROOT).parts
    if any(part.startswith(".") or part in SKIP_DIRS for part in rel):
        return False
    return not (len(rel) > 2 and rel[0] == "results" and rel[1].endswith("-cpu"))


def _files(pattern: str) -> list[Path]:
    return sorted(p for p in ROOT.rglob(pattern) if p.is_file() and _tracked(p))


MARKDOWN = _files("*.md")


def test_the_guides_exist():
    names = {p.relative_to(ROOT).as_posix() for p in MARKDOWN}
    for guide in ("README.md", "kernels/README.md", "arms/README.md", "harness/PROTOCOL.md",
                  "results/h200/NOTES.md", "results/EXPECTED.md"):
        assert guide in names


def test_readme_is_at_most_200_lines():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


@pytest.mark.parametrize("md", MARKDOWN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(md: Path):
    text = md.read_text(encoding="utf-8")
    missing = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        path = target.split("#", 1)[0]
        if not (md.parent / path).exists():
            missing.append(target)
    assert not missing, f"{md.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_no_text_or_file_name_names_a_run_by_an_ordinal():
    hits = []
    for pattern in ("*.md", "*.py", "*.yaml", "*.toml", "Makefile", "*.cpp"):
        for p in _files(pattern):
            rel = p.relative_to(ROOT).as_posix()
            for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if ORDINAL.search(line):
                    hits.append(f"{rel}:{i}: {line.strip()[:80]}")
    results = ROOT / "results"
    if results.is_dir():
        hits += [p.relative_to(ROOT).as_posix() for p in results.rglob("*")
                 if _tracked(p) and "sess" + "ion" in p.name.lower()]
    assert not hits, "name runs by date and commit:\n" + "\n".join(hits)


def _docs_conf():
    """kernels/docs/conf.py, imported without Sphinx (it needs only turbo_gmm)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("turbo_gmm_docs_conf", ROOT / "kernels" / "docs" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def test_readme_use_it_starts_with_the_install_and_the_estimator():
    conf = _docs_conf()
    section = conf.readme_section("Use it")
    first_block = re.search(r"```\w*\n(.*?)```", section, re.S).group(1)
    assert first_block.lstrip().startswith("pip install turbo-gmm")
    assert "pip install -c constraints.txt -e '.[" in first_block
    assert "from turbo_gmm import GaussianMixture" in section


def test_the_api_reference_lists_every_public_name_once():
    """generated/api.rst is written from turbo_gmm.__all__ at each `make docs`: every name once, under its kind."""
    import turbo_gmm
    page = _docs_conf().api_page()
    listed = re.findall(r"^   ([A-Za-z_]\w*)$", page, re.M)
    assert sorted(listed) == sorted(turbo_gmm.__all__)
    assert "GaussianMixture" in page.split("Estimator", 1)[1].split("\n\n", 3)[2]


def test_the_user_guide_is_readmes_use_it_with_the_repositorys_links():
    conf = _docs_conf()
    assert "<!-- README: Use it -->" in (ROOT / "kernels" / "docs" / "guide.md").read_text()
    text = "[`a.md`](kernels/a.md), [protocol](harness/P.md#x), [web](https://x.org/y), [here](#z), ![f](r/f.png)"
    assert conf.repository_links(text, None) == ("`a.md`, protocol (`harness/P.md`), [web](https://x.org/y), "
                                                 "[here](#z), f (`r/f.png`)")
    assert conf.repository_links("[p](harness/P.md#x) ![f](r/f.png)", "https://github.com/o/r") == (
        "[p](https://github.com/o/r/blob/main/harness/P.md#x) ![f](https://github.com/o/r/raw/main/r/f.png)")


def test_make_docs_builds_with_warnings_as_errors_into_an_ignored_folder():
    make = (ROOT / "Makefile").read_text()
    assert "-m sphinx -E -W --keep-going" in make and "kernels/docs $(DOCS_OUT)/html" in make
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "kernels/docs/_build/" in ignored and "kernels/docs/generated/" in ignored
