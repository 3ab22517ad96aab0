"""The node's exit codes that more than one entry module returns (`main`, `run_node`)."""

EXIT_REFUSED = 2
"""Exit code when the node refuses to start (bad policy, motion, parameters, robot): nothing was published."""
