"""ladder beside TRL: the map from TRL's names to ladder's options and the ``ladder.core`` functions that compute
them (``map``, generated from the TRL names each option declares, ``ladder.trl_rows.TRL``), and ``--export-trl``, which
writes a run as a runnable TRL script (``export``, the script's functions in ``export_helpers``;
``export_preferences`` for the reward-model and dpo rungs)."""
