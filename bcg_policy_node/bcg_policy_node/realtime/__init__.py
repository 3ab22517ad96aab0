"""The node's threads and its LowCmd writer process around the core (`runtime.NodeRuntime`)."""
