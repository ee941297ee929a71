"""The supported surface of clinieval.stats stays curated and in step."""

import inspect

import clinieval.stats as stats


def test_all_is_sorted_and_complete():
    assert stats.__all__ == sorted(stats.__all__)
    public = {
        name
        for name, obj in vars(stats).items()
        if not name.startswith("_") and not inspect.ismodule(obj)
    }
    assert public == set(stats.__all__)


def test_every_export_is_documented():
    undocumented = [name for name in stats.__all__ if not inspect.getdoc(getattr(stats, name))]
    assert undocumented == []
