"""The one native part, built by `pip install` (`make`) with the rest of pyproject.toml's
project: `mulligan.app.workspace.store._lstats`, the stat index's compare in C (see its
source). Optional: where it cannot be compiled the install goes on, and the walk uses its
Python path (tests/test_lstats.py fails under CI=true when it is missing)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("mulligan.app.workspace.store._lstats",
                             ["src/mulligan/app/workspace/store/_lstats.c"],
                             extra_compile_args=["-O2", "-Wall", "-Wextra"],
                             optional=True)])
