"""The public API's docstrings: every public name has Parameters (or Attributes) and an Example, and the
examples run (on the CPU through TRITON_INTERPRET=1, as the rest of the library's tests)."""
import doctest
import inspect

import pytest

import turbo_gmm

FUNCTIONS_AND_CLASSES = [n for n in turbo_gmm.__all__ if inspect.isfunction(getattr(turbo_gmm, n))
                         or n in ("GaussianMixture", "KMeans")]


@pytest.mark.parametrize("name", FUNCTIONS_AND_CLASSES)
def test_public_docstrings_are_numpydoc_with_an_example(name):
    doc = inspect.getdoc(getattr(turbo_gmm, name))
    assert "Parameters\n----------" in doc and "Examples\n--------" in doc, name


@pytest.mark.parametrize("name", FUNCTIONS_AND_CLASSES)
def test_public_examples_run(name):
    obj = getattr(turbo_gmm, name)
    finder, runner = doctest.DocTestFinder(recurse=False), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(obj, name, globs={})
    assert tests and tests[0].examples, name
    for test in tests:
        runner.run(test)
    assert runner.failures == 0, f"{name}: {runner.failures} failing example(s)"
