"""Every notebook run by ``pytest --nbmake`` fails if a cell's output announces a deprecation in a call
that ladder makes (``ladder.patches.library_deprecations``): a learner cannot tell such a warning from a
real problem, so CI must see it first."""

from __future__ import annotations

from nbmake.nb_result import NotebookError
from nbmake.nb_run import NotebookRun

from ladder.patches import library_deprecations

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
