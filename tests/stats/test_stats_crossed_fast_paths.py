"""Fast paths of the cluster sums in stats.crossed against the general ones,
bit for bit: clusters that lie in one group (cases and (rater, case) cells by
specialty) and dense influences summed by a sparse product (Bradley-Terry)."""

import numpy as np
import pytest

import clinieval.stats.crossed.grouped as grouped
import clinieval.stats.crossed.variance as variance


def _cluster_of_one_group(rng, n_clusters, n_runs, n_groups, spread):
    """Runs of clusters whose groups depend on the cluster; ``spread`` codes
    leave gaps (unused clusters) and shuffle the runs."""
    cluster_group = rng.integers(0, n_groups, n_clusters)
    code = rng.integers(0, n_clusters, n_runs)
    if spread:
        code = code * 3
        cluster_group = np.repeat(cluster_group, 3)
    return code, cluster_group[code]


@pytest.mark.parametrize(("n_clusters", "n_runs", "n_groups", "spread", "one_run"), [
    (40, 400, 5, False, False),  # few bins: bincount over (cluster, group) bins
    (40, 400, 5, True, False),  # with unused clusters
    (3000, 500, 7, False, False),  # many more bins than runs, some shared
    (3000, 500, 7, False, True),  # many more bins than runs, one run each
    (200, 5000, 2, True, False),
])
@pytest.mark.parametrize("blocks", [False, True])
def test_single_group_clusters_match_the_bins(monkeypatch, n_clusters, n_runs, n_groups,
                                              spread, one_run, blocks):
    if blocks:  # blocks of two groups (the cells by specialty at 100x take blocks)
        monkeypatch.setattr(grouped, "_BIN_BUDGET", 2 * n_clusters * (3 if spread else 1))
    rng = np.random.default_rng(n_clusters + n_runs + spread)
    code, group = _cluster_of_one_group(rng, n_clusters, n_runs, n_groups, spread)
    if one_run:
        keep = np.unique(code, return_index=True)[1]
        keep = keep[rng.permutation(keep.size)]  # run order differs from cluster order
        code, group = code[keep], group[keep]
    z = rng.normal(size=code.size) * 10.0 ** rng.integers(-6, 3, code.size)
    fast = grouped._run_squares(code, group, z, n_groups)
    monkeypatch.setattr(grouped, "_single_group_squares", lambda *args: None)
    general = grouped._run_squares(code, group, z, n_groups)
    assert np.array_equal(fast[0], general[0])
    assert np.array_equal(fast[1], general[1])


def test_clusters_across_groups_take_the_general_path():
    code, group = np.array([0, 0, 1]), np.array([0, 1, 1])
    assert grouped._single_group_squares(code, group, np.ones(3), 2, 2) is None


def test_unit_variance_by_specialty_is_unchanged(monkeypatch):
    # Shares of flagged answers by a case-level group (specialties): the
    # case and cell sums take the fast path; the variances are the same bits.
    rng = np.random.default_rng(3)
    n_cases, n_raters = 300, 40
    case_group = rng.integers(0, 6, n_cases)
    answer_case = np.repeat(np.arange(n_cases), 4)
    flags = (rng.random(answer_case.size) < 0.2).astype(float)
    flags[rng.random(flags.size) < 0.05] = np.nan
    raters = np.stack([rng.choice(n_raters, 3, replace=False) for _ in answer_case])
    piece_answer = np.repeat(np.arange(answer_case.size), 3)
    piece_rater = raters.ravel()
    args = (flags, case_group[answer_case], 6, answer_case, piece_answer, piece_rater)
    fast = grouped.crossed_share_variance(*args)
    monkeypatch.setattr(grouped, "_single_group_squares", lambda *args: None)
    general = grouped.crossed_share_variance(*args)
    for name in fast._fields:
        assert np.array_equal(getattr(fast, name), getattr(general, name)), name


def _binned_squares(code, z, present):
    """The dense sums by a bincount over (cluster, statistic) bins."""
    n_clusters, n_stats = int(code.max()) + 1, z.shape[1]
    key = (code.astype(np.int64) * n_stats)[:, None] + np.arange(n_stats)
    totals = np.bincount(key.ravel(), weights=z.ravel(), minlength=n_clusters * n_stats)
    seen = np.bincount(key.ravel(), weights=present.ravel(), minlength=totals.size) > 0
    return ((totals**2).reshape(n_clusters, n_stats).sum(axis=0),
            seen.reshape(n_clusters, n_stats).sum(axis=0))


@pytest.mark.parametrize("n_clusters", [1, 17, 5000])
def test_dense_cluster_squares_match_the_bins(n_clusters):
    rng = np.random.default_rng(n_clusters)
    code = rng.integers(0, n_clusters, 2000)
    z = rng.normal(size=(2000, 6)) * 10.0 ** rng.integers(-5, 3, (2000, 1))
    z[rng.random(2000) < 0.3] = 0.0  # rows without influence: not counted as present
    got = variance._cluster_squares(code, z, z != 0)
    want = _binned_squares(code, z, z != 0)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize(("n_clusters", "n_groups"), [(50, 4), (5000, 3), (2, 1)])
@pytest.mark.parametrize("blocks", [None, 2, 1])
def test_runs_in_bin_order_match_the_bins(monkeypatch, n_clusters, n_groups, blocks):
    # One run per (cluster, group) bin, in bin order (answers by case): the
    # squares in run order are the bins' sums in cluster order, bit for bit,
    # in one block of groups or in blocks of 2 (a block of one group sums
    # pairwise: then the bins are summed as before).
    if blocks:
        monkeypatch.setattr(grouped, "_BIN_BUDGET", blocks * n_clusters)
    rng = np.random.default_rng(n_clusters)
    bins = np.flatnonzero(rng.random(n_clusters * n_groups) < 0.4)
    code, group = bins // n_groups, bins % n_groups
    z = rng.normal(size=bins.size) * 10.0 ** rng.integers(-6, 3, bins.size)
    fast = grouped._run_squares(code, group, z, n_groups)
    # an extra run of 0 in the first bin, out of order, forces the bins
    monkeypatch.setattr(grouped, "_single_group_squares", lambda *args: None)
    squares, clusters = grouped._run_squares(np.r_[code, code[:1]], np.r_[group, group[:1]],
                                             np.r_[z, 0.0], n_groups)
    assert np.array_equal(fast[0], squares) and np.array_equal(fast[1], clusters)
