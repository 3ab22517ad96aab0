"""The node's logic without threads, processes or middleware; every time is an argument."""
