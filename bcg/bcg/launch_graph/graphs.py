"""The suite's two launch graphs: `g1_run` (real robot) and `mujoco_check` (sim-to-sim verdict)."""
from pathlib import Path
from typing import Dict, List

from bcg.config_check import ConfigError
from bcg.config_files import config_file
from bcg.ros_params import read_ros_parameters

from .graph import LaunchArgument, LaunchArgumentError, LaunchGraph, ProcessSpec, as_bool, as_number


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
HARNESS_STIFFNESS = 5000.0
"""N/m of mujoco_check's band ('hold' mode): the G1's weight (~340 N) stretches it about 7 cm, so
even a policy's low tracking gains cannot fold the robot during the ramp (Unitree's 200 N/m would
let it sink 1.7 m)."""
HARNESS_DAMPING = 1000.0
"""N s/m along the band (about critically damped for 35 kg on HARNESS_STIFFNESS)."""


def run_files(verdict: str) -> Dict[str, str]:
    """Files of a mujoco_check run, next to the verdict: bridge metrics and node events."""
    v = Path(verdict)
    stem = v.name[:-len(".json")] if v.name.endswith(".json") else v.name
    return {"metrics": str(v.with_name(stem + ".metrics.json")), "events": str(v.with_name(stem + ".events.jsonl"))}


def policy_start_s() -> float:
    """Seconds from the node's first LowState to its autostarted policy's first step (the start of its
    BLEND): the ramp to the default pose plus the hold (config/policy_node.yaml's ramp_duration +
    autostart_hold). Node and bridge both count them in simulated time (lockstep), so the bridge's
    band release and motion start fall on that step whatever the machine's load."""
    params = read_ros_parameters(config_file("policy_node.yaml"), "policy_node")
    missing = [k for k in ("ramp_duration", "autostart_hold") if k not in params]
    if missing:
        raise ConfigError(f"{config_file('policy_node.yaml')}: mujoco_check needs {missing} to know when the "
                             "policy starts")
    return float(params["ramp_duration"]) + float(params["autostart_hold"])


def policy_lead_in_s(policy: str) -> float:
    """The policy's `motion_lead_in_s` (its contract), for the bridge's tracking; LaunchArgumentError
    naming the file when it carries no readable contract."""
    from bcg.contract import ContractError, PolicyFileError, read_contract  # onnx: only with a policy and a motion
    try:
        return read_contract(policy).motion_lead_in_s
    except (OSError, ContractError, PolicyFileError) as e:
        raise LaunchArgumentError(f"policy={policy!r}: {e}") from None


def _mujoco_check(a: Dict[str, str]) -> List[ProcessSpec]:
    domain = as_number("domain_id", a["domain_id"], int, 0)
    duration = as_number("duration", a["duration"], float, 0.1)
    files = run_files(a["verdict"])
    start = policy_start_s()
    bridge = ["--params", str(config_file("sim_bridge.yaml")), "--domain", str(domain), "--interface", "lo",
              "--duration", str(duration), "--metrics", files["metrics"],
              "--wait-for-command", str(NODE_START_TIMEOUT_S), "--lockstep", "--motion-start", str(start)]
    if a["seed"]:
        bridge += ["--seed", str(as_number("seed", a["seed"], int, 0))]
    if as_bool("headless", a["headless"]):
        bridge.append("--headless")
    if as_bool("elastic_band", a["elastic_band"]):
        bridge += ["--elastic-band", "--band-release-time", str(start), "--band-stiffness", str(HARNESS_STIFFNESS),
                   "--band-damping", str(HARNESS_DAMPING)]
    for key in ("record", "record_fps", "record_width", "record_height", "motion", "model"):
        if a[key]:
            bridge += [f"--{key.replace('_', '-')}", a[key]]
    if a["motion"] and a["policy"]:
        bridge += ["--motion-lead-in", str(policy_lead_in_s(a["policy"]))]
    node_extra = ["--autostart", "--lockstep", "--events", files["events"]] + (["--model", a["model"]] if a["model"]
                                                                             else [])
    return [
        ProcessSpec("sim_bridge", "bcg_sim_bridge", "sim_bridge", "bcg-sim-bridge", tuple(bridge), role="main",
                    parameters=(str(config_file("sim_bridge.yaml")),)),
        _policy_node(a, domain, "lo", node_extra),
        ProcessSpec("evaluator", "bcg", "bcg", "bcg",
                    ("verdict", "--metrics", files["metrics"], "--events", files["events"], "--verdict", a["verdict"],
                     "--duration", str(duration)), role="final"),
    ]


MUJOCO_CHECK = LaunchGraph(
    "mujoco_check", "MuJoCo bridge + policy node + evaluator in lockstep (simulated time on both sides): "
                    "is this policy safe to try on the robot?",
    (LaunchArgument("policy", "", "ONNX policy file ('' = built-in zero-action stand policy)"),
     LaunchArgument("motion", "", "reference motion file (.csv) for the policy and the tracking error"),
     LaunchArgument("duration", "10", "simulated seconds to run"),
     LaunchArgument("headless", "true", "no viewer window"),
     LaunchArgument("record", "", "save a GIF / video of the run here"),
     LaunchArgument("record_fps", "", "frames per simulated second of the recording ('' = config/sim_bridge.yaml's)"),
     LaunchArgument("record_width", "", "recording width in pixels ('' = config/sim_bridge.yaml's)"),
     LaunchArgument("record_height", "", "recording height in pixels ('' = config/sim_bridge.yaml's)"),
     LaunchArgument("verdict", "mujoco_check_verdict.json", "verdict JSON (a table goes next to it, .txt)"),
     LaunchArgument("domain_id", "1", "DDS domain id (loopback)"),
     LaunchArgument("elastic_band", "true", "hold the torso with the elastic band until the policy starts "
                    "(as the robot hangs in its harness during the ramp); false: stand on its own from the start"),
     LaunchArgument("model", "", "G1 MuJoCo XML ('' = $BCG_G1_MODEL)"),
     LaunchArgument("seed", "", "perturb the start from this seed: heading, joint noise 0.02 rad ('' = none)")),
    _mujoco_check)

GRAPHS = {g.name: g for g in (G1_RUN, MUJOCO_CHECK)}
