"""MuJoCo sim-to-sim check: sim bridge + policy node + evaluator -> verdict JSON and table.

ROS 2:   ros2 launch bcg mujoco_check.launch.py policy:=FILE.onnx duration:=10 verdict:=out.json
No ROS:  bcg launch mujoco_check.launch.py policy:=FILE.onnx duration:=10 verdict:=out.json
Both read the one graph description, `bcg.launch_graph.graphs.MUJOCO_CHECK`.
"""
from bcg.launch_graph.graphs import MUJOCO_CHECK as GRAPH


def generate_launch_description():
    from bcg.launch_graph.ros import generate
    return generate(GRAPH)
