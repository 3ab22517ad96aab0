"""The policy node on the real G1 (remote: start = ramp to the default pose, A = run the policy,
select / B = damping).

ROS 2:   ros2 launch bcg g1_run.launch.py policy:=FILE.onnx network_interface:=eth0
No ROS:  bcg launch g1_run.launch.py policy:=FILE.onnx network_interface:=eth0
Both read the one graph description, `bcg.launch_graph.graphs.G1_RUN`.
"""
from bcg.launch_graph.graphs import G1_RUN as GRAPH


def generate_launch_description():
    from bcg.launch_graph.ros import generate
    return generate(GRAPH)
