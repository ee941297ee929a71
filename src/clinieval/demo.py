"""The bundled demo snapshot: a small synthetic bundle shipped in the package.

Regenerate it with ``python -m clinieval.demo`` after changing the generator;
a test checks the shipped files still equal a fresh generation.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from clinieval.snapshot import Snapshot

DEMO_SEED = 3
DEMO_SCALE = 0.05


def demo_bundle() -> Path:
    """Path of the shipped demo bundle."""
    return Path(str(resources.files("clinieval.data").joinpath("demo")))


def demo_snapshot() -> Snapshot:
    """The shipped demo snapshot, read and verified."""
    from clinieval.io.bundle import read_bundle

    return read_bundle(demo_bundle())


def build_demo(out: Path) -> dict:
    from clinieval.io.bundle import write_bundle
    from clinieval.synth import generate

    return write_bundle(generate(seed=DEMO_SEED, scale=DEMO_SCALE), out, overwrite=True)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else demo_bundle()
    manifest = build_demo(target)
    print(f"wrote {target} ({manifest['tables']['ratings']['rows']:,} ratings)")
