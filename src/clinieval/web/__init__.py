"""The clinician platform: invitations, profiles, blinded rating and pairwise
tasks with leases, drafts and revisions (FastAPI + Jinja2, no CDN).

Start it with ``clinieval serve``; in Python, ``create_app(engine)`` gives the
ASGI application on a migrated database. The package imports FastAPI only
when ``create_app`` is asked for (the services it calls are in
:mod:`clinieval.platform`).
"""

__all__ = ["create_app"]


def __getattr__(name: str):
    # Lazily: importing a submodule (clinieval.web.testing, say) must not build the app.
    if name == "create_app":
        from clinieval.web.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
