"""The run doctor: reads a ladder or TRL run's logs and names the known failures it finds (``python -m ladder.doctor``).

    runs.py        a run directory → named series (step → value) under ladder's names, and the config facts
    run_data.py    what a run is read into (Series, Facts, Run), and how a log's records become series
    trl_logs.py    a TRL output directory: log_history under ladder's names, the GRPOConfig facts
    log_values.py  any path and any JSON value in a run's files, read leniently
    signatures.py  the thresholds, the wording, and one small function per failure signature
    report.py      the text / JSON verdict and doctor.png (written whole or not at all)
    verdict.py     the verdict in one line, and text made safe to print and to draw
    vitals.py      per rung, the series a practitioner reads (a panel each) and the thresholds drawn on them
    chart.py       doctor.png of one run: its vital signs, the findings marked and named, the verdict on top
    compare.py     several runs overlaid on one figure, labelled by directory and differing flags
    chart_parts.py the grid, series, guides and evidence marks both figures are drawn from
"""

from ladder.doctor.runs import Run, Series, read_run
from ladder.doctor.signatures import SIGNATURES, Finding, diagnose

__all__ = ["Run", "Series", "read_run", "Finding", "SIGNATURES", "diagnose"]
