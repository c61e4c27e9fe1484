"""Every notebook run by ``pytest --nbmake`` fails if a cell's output announces a deprecation in a call
that ladder makes (``ladder.patches.library_deprecations``): a learner cannot tell such a warning from a
real problem, so CI must see it first.

The notebooks that train and then say what the training did (each such sentence printed from the run's values,
so another CPU's rounding changes the number, not the truth of the sentence) carry the ``trained`` marker:
``pytest -m trained --nbmake notebooks`` runs them."""

from __future__ import annotations

from nbmake.nb_result import NotebookError
from nbmake.nb_run import NotebookRun

from ladder.patches import library_deprecations

TRAINED = ("2_ppo_cartpole", "3_three_policies_and_kl", "4_ppo_rlhf_sentiment", "5_grpo_qlora",
           "6_design_space_and_trl", "6b_objectives_entropy_staleness", "7_agents", "8_run_doctor",
           "9_where_the_reward_comes_from", "10_learning_from_a_teacher")

_execute = NotebookRun.execute


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return "\n".join(str(v) for k, v in output.get("data", {}).items() if k == "text/plain")


def _execute_and_read_the_outputs(self):
    result = _execute(self)
    if result.error is None:
        for index, cell in enumerate(result.nb.cells):
            found = library_deprecations("\n".join(_text(o) for o in cell.get("outputs", [])))
            if found:
                result.error = NotebookError(summary=f"cell {index} prints a library deprecation: {found[0]}",
                                             trace="\n".join(found), failing_cell_index=index)
                break
    return result


NotebookRun.execute = _execute_and_read_the_outputs


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.suffix == ".ipynb" and item.path.stem in TRAINED:
            item.add_marker("trained")
