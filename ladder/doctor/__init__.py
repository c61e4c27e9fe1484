"""The run doctor: reads a ladder or TRL run's logs and names the known failures it finds (``python -m ladder.doctor``).

    runs.py        a run directory → named series (step → value) under ladder's names, and the config facts
    signatures.py  the thresholds, the wording, and one small function per failure signature
    report.py      the text / JSON verdict and doctor.png (written whole or not at all)
"""

from ladder.doctor.runs import Run, Series, read_run
from ladder.doctor.signatures import SIGNATURES, Finding, diagnose

__all__ = ["Run", "Series", "read_run", "Finding", "SIGNATURES", "diagnose"]
