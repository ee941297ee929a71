"""The curated public API: __all__ is sorted, every name resolves, and is documented."""

import clinieval


def test_all_is_sorted_and_every_name_resolves():
    assert clinieval.__all__ == sorted(clinieval.__all__)
    for name in clinieval.__all__:
        assert getattr(clinieval, name) is not None, name
    assert set(clinieval.__all__) <= set(dir(clinieval))


def test_unknown_names_raise_attribute_error():
    try:
        clinieval.no_such_thing  # noqa: B018
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:
        raise AssertionError("expected AttributeError")


def test_every_export_is_documented():
    for name in clinieval.__all__:
        assert getattr(clinieval, name).__doc__, name
