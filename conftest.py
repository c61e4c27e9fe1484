"""The order the suite runs in: the notebooks first (each runs a minute or more), then the tests that read a notebook's
runs (marked ``notebook_runs``: notebooks 4, 5, 7, 8 and 9 keep their runs in ``$LADDER_CACHE``), then the other
tests as collected. pytest-xdist's ``--dist worksteal`` hands each process a contiguous share of this order and lets
an idle process take from the end of another's: the notebooks and the tests that read their runs stay in one
process, in that order, so those tests read the runs made (without the notebook, a test makes the run itself), and
the short tests fill in around the long notebooks instead of one process running a notebook alone at the end."""

from __future__ import annotations


def _place(item) -> int:
    if item.path.suffix == ".ipynb":
        return 0
    return 1 if item.get_closest_marker("notebook_runs") else 2


def pytest_collection_modifyitems(items):
    items.sort(key=_place)  # stable: otherwise the collected order
