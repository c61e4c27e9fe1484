"""The order the suite runs in: the notebooks first (each runs a minute or more), then the tests as collected, and last
the tests that read a notebook's runs (marked ``notebook_runs``: notebooks 4, 5, 7, 8 and 9 make them and keep them in
``$LADDER_CACHE``), so that with several processes (pytest-xdist, ``--dist worksteal``) the short tests fill in around
the long notebooks, no process runs a notebook alone at the end, and a test rarely waits for a run a notebook is
still making (it reads the run when it is there; without the notebook it makes the run itself)."""

from __future__ import annotations


def _place(item) -> int:
    if item.path.suffix == ".ipynb":
        return 0
    return 2 if item.get_closest_marker("notebook_runs") else 1


def pytest_collection_modifyitems(items):
    items.sort(key=_place)  # stable: otherwise the collected order
