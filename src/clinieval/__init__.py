"""clinieval: safety-first evaluation of medical LLMs."""

__version__ = "0.1.0"
