"""Files shipped inside the package: Alembic migrations and the bundled example problems.

They are package data, so an installed wheel finds them as an editable checkout does
(`migrations/` and `examples/` at the repository root are links to these folders).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def _package_dir(package: str, *parts: str) -> Path:
    path = Path(str(resources.files(package).joinpath(*parts)))
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path} is missing from the installed kernelband package; reinstall it from a wheel "
            "or a checkout (zip imports are not supported)"
        )
    return path


def migrations_dir() -> Path:
    """The Alembic script directory (env.py, versions/)."""
    return _package_dir("kernelband.db", "migrations")


def examples_dir() -> Path:
    """The bundled example problems (native format; tritonbench/ and kernelbench/ beside them)."""
    return _package_dir("kernelband", "examples")


def example(name: str) -> Path:
    """One bundled native example by stem, e.g. `example("vector_add")`."""
    return examples_dir() / f"{name}.py"
