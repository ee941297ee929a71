"""The curated public API: __all__ is sorted and matches what is exported."""

import clinieval


def test_all_is_sorted_and_complete():
    assert clinieval.__all__ == sorted(clinieval.__all__)
    public = {name for name in vars(clinieval) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(clinieval, name)).__name__ == "module"}
    assert public - modules == set(clinieval.__all__)


def test_every_export_is_documented():
    for name in clinieval.__all__:
        assert getattr(clinieval, name).__doc__, name
