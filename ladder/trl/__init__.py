"""ladder beside TRL: the map from TRL's names to ladder's options and the ``ladder.core`` functions that compute
them, kept as data (``map``, its rows for the newer GRPO options in ``map_design`` and for RLOO and the classic PPO in
``map_ppo``, the row itself in ``ladder.trl_rows``), and ``--export-trl``, which writes a run as a runnable TRL script
(``export``, the script's functions in ``export_helpers``)."""
