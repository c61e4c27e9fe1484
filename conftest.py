"""The order the suite runs in, for two processes (``-n auto`` on two cores, ``--dist worksteal``): the notebooks run
first, in two lanes of about equal time, each lane followed by the tests that read its notebooks' runs (marked
``notebook_runs``: notebooks 4, 5, 7, 8 and 9 keep their runs in ``$LADDER_CACHE``), then the other tests.

pytest-xdist's worksteal hands each process a contiguous half of this order and lets an idle process take from the
end of another's queue. So lane A opens the first half and lane B the second: each process runs its lane's notebooks,
then the tests that read their runs (made by then: without the notebook, a test makes the run itself), then short
tests, and the two processes share the long notebooks instead of one running them all in a row. With one process the
order is the same, lane A, then lane B."""

from __future__ import annotations

LANE_B_NOTEBOOKS = ("3_", "5_", "6b_", "7_", "9_")  # ~290 s of notebooks against lane A's ~260 s (2 quiet cores)
LANE_B_READERS = {"test_rung_preferences", "test_viz_agent", "test_viz_sampler"}  # notebooks 9, 7 and 5's runs


def _in_lane_b(item) -> bool:
    if item.path.suffix == ".ipynb":
        return item.path.name.startswith(LANE_B_NOTEBOOKS)
    return item.path.stem in LANE_B_READERS


def pytest_collection_modifyitems(items):
    notebooks = [i for i in items if i.path.suffix == ".ipynb"]
    readers = [i for i in items if i.path.suffix != ".ipynb" and i.get_closest_marker("notebook_runs")]
    placed = {id(i) for i in notebooks + readers}
    rest = [i for i in items if id(i) not in placed]
    lane_a = [i for i in notebooks + readers if not _in_lane_b(i)]
    lane_b = [i for i in notebooks + readers if _in_lane_b(i)]
    fill = max(0, len(items) // 2 - len(lane_a))  # lane B starts the second half
    items[:] = lane_a + rest[:fill] + lane_b + rest[fill:]
