"""Evaluation of exported policies in MuJoCo and in the training simulator (`bcg-eval`).

Modules: `plants` (MujocoPlant, WarpPlant), `rollout` (run_policy), `cli` (`bcg-eval`), `table`
(`bcg-table`), `screen` (`bcg-screen`), `ship` (`bcg-ship`). It imports nothing here, so that each
command line's `--help` loads no simulator.
"""
