"""The pair task's candidate order against a brute-force listing of every pair."""

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from clinieval.platform.assignment import pair_options

MODELS = ["m1", "m2", "m3", "m4"]


def every_pair(pool, loads, limit):
    """All pairs of two answers of one case by different models, sorted by
    (model pair's load, case, answer ids): the definition, spelled out."""
    rows = sorted(pool)
    options = sorted(
        (loads.get(tuple(sorted((m1, m2))), 0), c1, min(a1, a2), max(a1, a2))
        for (a1, c1, m1), (a2, c2, m2) in combinations(rows, 2) if c1 == c2 and m1 != m2)
    return [(x, y) for _, _, x, y in options[:limit]]


pools = st.lists(
    st.tuples(st.sampled_from(["c1", "c2", "c3"]), st.sampled_from(MODELS)), max_size=14,
).map(lambda rows: [(f"a{i:02d}", case, model) for i, (case, model) in enumerate(rows)])
loads = st.dictionaries(st.sampled_from(list(combinations(MODELS, 2))),
                        st.integers(0, 3), max_size=6)


@settings(max_examples=300, deadline=None)
@given(pools, loads, st.integers(1, 12))
def test_pairs_come_in_order_of_load_case_and_answers(pool, loads, limit):
    assert pair_options(pool, loads, limit) == every_pair(pool, loads, limit)


def test_by_hand():
    pool = [("a1", "c1", "m1"), ("a2", "c1", "m2"), ("a3", "c1", "m3"),
            ("a4", "c2", "m1"), ("a5", "c2", "m2"), ("a6", "c2", "m2")]
    # m1-m2 has 2 votes, m1-m3 and m2-m3 none: c1's pairs with m3 come first.
    assert pair_options(pool, {("m1", "m2"): 2}, 10) == [
        ("a1", "a3"), ("a2", "a3"), ("a1", "a2"), ("a4", "a5"), ("a4", "a6")]
    assert pair_options(pool, {("m1", "m2"): 2}, 1) == [("a1", "a3")]
    assert pair_options([("a1", "c1", "m1"), ("a2", "c1", "m1")], {}, 5) == []
