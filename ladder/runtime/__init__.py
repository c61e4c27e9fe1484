"""What every run of every rung shares, apart from its algorithm: the one training loop (``loop``) and the run it
drives (``session``); the run directory's files (``runlog``, written whole by ``whole_files``, the checkpoint by
``checkpoint_file``, one run per directory by ``run_lock``, the run an ``--overwrite`` replaces in
``replaced_run``); the random generators (``seeding``), the processes (``distributed``), the trackers
(``trackers``), the time limits (``limits``), code the user wrote run with its output held (``user_code``) and the
two ways a command ends short (``errors``)."""
