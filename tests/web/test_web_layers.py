"""The web package's layers: the services of :mod:`clinieval.platform` import
no web framework (the command line and the live view's worker use them
without FastAPI), and importing :mod:`clinieval.web` builds nothing."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import clinieval.platform

FRAMEWORKS = ("fastapi", "starlette")


def _imported_frameworks(*modules: str) -> list[str]:
    """The web frameworks in ``sys.modules`` of a fresh interpreter after it
    imports ``modules``."""
    code = ("import sys\n"
            + "".join(f"import {m}\n" for m in modules)
            + f"print(*sorted({{m.split('.')[0] for m in sys.modules}} & {set(FRAMEWORKS)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.split()


def test_no_service_imports_a_web_framework():
    modules = [f"clinieval.platform.{m.name}"
               for m in pkgutil.iter_modules(clinieval.platform.__path__)]
    assert len(modules) >= 10
    assert _imported_frameworks(*modules) == []


def test_the_web_package_alone_imports_no_web_framework():
    assert _imported_frameworks("clinieval.web", "clinieval.web.testing") == []
