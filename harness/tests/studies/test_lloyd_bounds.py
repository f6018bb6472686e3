import numpy as np
from sklearn.cluster import kmeans_plusplus

from harness.studies.lloyd_bounds import bounded_lloyd, main
from turbo_gmm.datasets import make_dataset


def _problem(N=3000, K=20, d=8):
    X = make_dataset(N, 8, d, seed=0, device="cpu").X.double().numpy()
    seeds, _ = kmeans_plusplus(X, K, random_state=np.random.RandomState(0))
    return X, seeds


def test_bounded_lloyd_labels_are_plain_lloyds_and_the_bounds_skip_rows():
    X, seeds = _problem()
    rows = list(bounded_lloyd(X, seeds, max_iter=100, tol=0.0, tile=16))
    assert all(r["exact"] for r in rows)
    assert rows[-1]["changed"] == 0  # ran to strict convergence
    assert all(0.0 <= r["score_fraction"] <= r["tighten_fraction"] <= 1.0 for r in rows)
    assert all(r["score_fraction"] <= r["tile_fraction"] for r in rows)
    assert min(r["score_fraction"] for r in rows) < 0.5  # settled centers: most rows decided by their bounds


def test_bounded_lloyd_follows_the_plain_trajectory():
    """The centers after convergence are those of a plain float64 Lloyd from the same seeds."""
    X, seeds = _problem(N=1500, K=12)
    C = seeds.copy()
    for _ in range(100):
        D = ((X[:, None, :] - C[None]) ** 2).sum(2)
        lab = D.argmin(1)
        new = np.array([X[lab == k].mean(0) if (lab == k).any() else C[k] for k in range(len(C))])
        if np.array_equal(new, C):
            break
        C = new
    n_plain = _ + 1
    rows = list(bounded_lloyd(X, seeds, max_iter=100, tol=0.0))
    assert len(rows) in (n_plain - 1, n_plain)  # the plain loop counts the assignment that confirms convergence


def test_study_writes_one_row_an_iteration(tmp_path):
    main(["--out", str(tmp_path), "--shape", "2K_10_8", "--max-iter", "5"])
    (path,) = tmp_path.glob("lloyd_bounds_*.csv")
    lines = path.read_text().splitlines()
    assert lines[0].startswith("commit,date,device,shape")
    assert 2 <= len(lines) <= 6 and all(",True" in line for line in lines[1:])
