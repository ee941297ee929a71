"""The shipped demo bundle is what the generator makes today."""

from clinieval.demo import build_demo, demo_bundle
from clinieval.io.bundle import read_manifest


def test_shipped_demo_equals_a_fresh_generation(tmp_path):
    fresh = build_demo(tmp_path / "demo")
    shipped = read_manifest(demo_bundle())
    assert fresh["snapshot_sha256"] == shipped["snapshot_sha256"], (
        "the generator changed: regenerate with `python -m clinieval.demo`")
    assert 5_000 <= shipped["tables"]["ratings"]["rows"] <= 25_000
