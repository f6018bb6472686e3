"""Sphinx configuration of turbo-gmm's documentation (`make docs`: kernels/docs/_build/html, warnings are errors).

The API reference, generated/api.rst, is written here from ``turbo_gmm.__all__`` (autosummary over
those names' numpydoc docstrings; generated/ is not committed). The user guide (guide.md) is
README.md's "Use it" section, put in when the page is read, with README's links to files of the
repository turned into links to the repository's web pages (or into plain file names while
pyproject.toml names no ``Source`` URL)."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import turbo_gmm

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parents[1]

project = "turbo-gmm"
author = "The turbo-gmm developers"
project_copyright = "2026, The turbo-gmm developers"
version = release = turbo_gmm.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
templates_path = ["_templates"]
exclude_patterns = ["_build"]
autosummary_generate = True
autodoc_typehints = "none"  # the numpydoc Parameters sections give the types
numpydoc_show_class_members = False  # the class template documents the members
numpydoc_class_members_toctree = False
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = f"turbo-gmm {release}"
html_static_path: list[str] = []

URLS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("urls", {})
SOURCE = URLS.get("Source")  # e.g. https://github.com/<owner>/turbo-gmm: README's file links point there
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
GROUPS = (("Estimator", lambda o: isinstance(o, type) and hasattr(o, "fit") and hasattr(o, "get_params")),
          ("Exceptions and warnings", lambda o: isinstance(o, type) and issubclass(o, BaseException)),
          ("Functions", lambda o: not isinstance(o, type)),
          ("Classes", lambda o: isinstance(o, type)))


def api_page(names: list[str] | None = None) -> str:
    """generated/api.rst: ``turbo_gmm``'s docstring, then every name of ``turbo_gmm.__all__`` once, by kind."""
    names = list(turbo_gmm.__all__ if names is None else names)
    lines = ["API reference", "=============", "", ".. automodule:: turbo_gmm", "   :no-members:", "",
             ".. currentmodule:: turbo_gmm", ""]
    for title, belongs in GROUPS:
        group = [n for n in names if belongs(getattr(turbo_gmm, n))]
        names = [n for n in names if n not in group]
        if group:
            lines += [title, "-" * len(title), "", ".. autosummary::", "   :toctree: .", "   :nosignatures:", ""]
            lines += [f"   {n}" for n in group] + [""]
    assert not names, names
    return "\n".join(lines)


def write_api_page() -> None:
    page = DOCS / "generated" / "api.rst"
    text = api_page()
    if not page.exists() or page.read_text() != text:  # unchanged: Sphinx keeps its cached build
        page.parent.mkdir(exist_ok=True)
        page.write_text(text)


def readme_section(title: str = "Use it") -> str:
    """README.md's section ``## <title>``, up to the next ``## `` heading, without its heading."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if match is None:
        raise RuntimeError(f'README.md has no "## {title}" section (kernels/docs/guide.md includes it)')
    return match.group(1)


def repository_links(markdown: str, source: str | None = SOURCE) -> str:
    """README's links to files of the repository (relative) as links to its web pages, or as the text alone."""
    def link(m: re.Match) -> str:
        bang, text, target = m.groups()
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return m.group(0)
        if source:
            return f"{bang}[{text}]({source.rstrip('/')}/{'raw' if bang else 'blob'}/main/{target})"
        return text if text.startswith("`") else f"{text} (`{target.split('#')[0]}`)"
    return LINK.sub(link, markdown)


def fill_guide(app, docname: str, source: list[str]) -> None:
    if docname == "guide":
        source[0] = source[0].replace("<!-- README: Use it -->", repository_links(readme_section()))


def skip_member(app, what, name, obj, skip, options):
    """scikit-learn's generated metadata-routing setters (set_fit_request, ...) refer to its own glossary."""
    return True if re.fullmatch(r"set_\w+_request", name) else None


def setup(app):
    write_api_page()
    app.connect("source-read", fill_guide)
    app.connect("autodoc-skip-member", skip_member)
