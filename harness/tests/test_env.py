"""Which commit a row names."""
import subprocess

from harness.env import REPO, git_commit


def test_the_shipped_commit_wins_over_the_copy_s_own_git(monkeypatch):
    monkeypatch.setenv("TURBO_GMM_COMMIT", "0123abc")
    assert git_commit() == "0123abc"


def test_without_a_shipped_commit_the_checkout_s_head_is_named(monkeypatch):
    monkeypatch.delenv("TURBO_GMM_COMMIT", raising=False)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert git_commit().removesuffix("+dirty") == head
