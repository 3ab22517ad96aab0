"""The realtime policy node for the Unitree G1: LowState in, an ONNX policy at 50 Hz, LowCmd out at 500 Hz.

Laid out in three layers, each importing only the ones below it (and `config`):
- `core`: the node's logic without threads, processes or middleware, time as an argument (the
  controller and its safety checks, phases, joint mapping, command plan, gains); unit-tested directly.
- `realtime`: the threads and the LowCmd writer process around the core, the shared command plan,
  best-effort real-time scheduling.
- `entry`: how the node starts: the command line (`entry.main`, the console scripts), the ROS 2
  shell (`entry.ros_node`), loading and checking robot, policy and motion (`entry.setup_node`),
  running until stopped (`entry.run_node`).
`config` holds the node's typed parameters and names.
"""
