"""The suite's two launch graphs: `g1_run` (real robot) and `mujoco_check` (sim-to-sim verdict)."""
from pathlib import Path
from typing import Dict, List

from bcg.config_files import config_file

from .graph import LaunchArgument, LaunchGraph, ProcessSpec, as_bool, as_number


def _policy_node(a: Dict[str, str], domain: int, interface: str, extra=()) -> ProcessSpec:
    args = ["--params", str(config_file("policy_node.yaml")), "--domain", str(domain)]
    if interface:
        args += ["--interface", interface]
    for key in ("policy", "motion"):
        if a[key]:
            args += [f"--{key}", a[key]]
    return ProcessSpec("policy_node", "bcg_policy_node", "policy_node", "bcg-policy-node", tuple(args + list(extra)),
                       parameters=(str(config_file("policy_node.yaml")),))


def _g1_run(a: Dict[str, str]) -> List[ProcessSpec]:
    domain = as_number("domain_id", a["domain_id"], int, 0)
    return [_policy_node(a, domain, a["network_interface"])]


G1_RUN = LaunchGraph(
    "g1_run", "the policy node on the real G1 (start with the remote: start, A; select/B = damping)",
    (LaunchArgument("policy", "", "ONNX policy file ('' = built-in zero-action stand policy)"),
     LaunchArgument("motion", "", "reference motion file (.csv / .npz)"),
     LaunchArgument("network_interface", "", "network interface wired to the robot (e.g. eth0)"),
     LaunchArgument("domain_id", "0", "DDS domain id")),
    _g1_run)


NODE_START_TIMEOUT_S = 60.0
"""Wall seconds the bridge holds simulated time at 0 until the policy node's first LowCmd."""


def run_files(verdict: str) -> Dict[str, str]:
    """Files of a mujoco_check run, next to the verdict: bridge metrics and node events."""
    v = Path(verdict)
    stem = v.name[:-len(".json")] if v.name.endswith(".json") else v.name
    return {"metrics": str(v.with_name(stem + ".metrics.json")), "events": str(v.with_name(stem + ".events.jsonl"))}


def _mujoco_check(a: Dict[str, str]) -> List[ProcessSpec]:
    domain = as_number("domain_id", a["domain_id"], int, 0)
    duration = as_number("duration", a["duration"], float, 0.1)
    files = run_files(a["verdict"])
    bridge = ["--params", str(config_file("sim_bridge.yaml")), "--domain", str(domain), "--interface", "lo",
              "--duration", str(duration), "--metrics", files["metrics"],
              "--wait-for-command", str(NODE_START_TIMEOUT_S)]
    if as_bool("headless", a["headless"]):
        bridge.append("--headless")
    if as_bool("elastic_band", a["elastic_band"]):
        bridge.append("--elastic-band")
    for key in ("record", "motion", "model"):
        if a[key]:
            bridge += [f"--{key}", a[key]]
    node_extra = ["--autostart", "--events", files["events"]] + (["--model", a["model"]] if a["model"] else [])
    return [
        ProcessSpec("sim_bridge", "bcg_sim_bridge", "sim_bridge", "bcg-sim-bridge", tuple(bridge), role="main",
                    parameters=(str(config_file("sim_bridge.yaml")),)),
        _policy_node(a, domain, "lo", node_extra),
        ProcessSpec("evaluator", "bcg", "bcg", "bcg",
                    ("verdict", "--metrics", files["metrics"], "--events", files["events"], "--verdict", a["verdict"],
                     "--duration", str(duration)), role="final"),
    ]


MUJOCO_CHECK = LaunchGraph(
    "mujoco_check", "MuJoCo bridge + policy node + evaluator: is this policy safe to try on the robot?",
    (LaunchArgument("policy", "", "ONNX policy file ('' = built-in zero-action stand policy)"),
     LaunchArgument("motion", "", "reference motion file (.csv) for the policy and the tracking error"),
     LaunchArgument("duration", "10", "simulated seconds to run"),
     LaunchArgument("headless", "true", "no viewer window"),
     LaunchArgument("record", "", "save a GIF / video of the run here"),
     LaunchArgument("verdict", "mujoco_check_verdict.json", "verdict JSON (a table goes next to it, .txt)"),
     LaunchArgument("domain_id", "1", "DDS domain id (loopback)"),
     LaunchArgument("elastic_band", "false", "hold the torso with the elastic band"),
     LaunchArgument("model", "", "G1 MuJoCo XML ('' = $BCG_G1_MODEL)")),
    _mujoco_check)

GRAPHS = {g.name: g for g in (G1_RUN, MUJOCO_CHECK)}
