"""The order the suite runs in: the notebooks first (each runs a minute or more), then the tests as collected, so
that with several processes (pytest-xdist, ``--dist worksteal``) the short tests fill in around the long notebooks
instead of one process running a notebook alone at the end."""

from __future__ import annotations


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.path.suffix != ".ipynb")  # stable: otherwise the collected order
