"""The node's hand-over against the blend time, in this process: no DDS, simulated time only.

The node's core (`Controller` and its command plan, as the LowCmd writer composes it) drives the
bridge's plant (`SimBridge`: this suite's physics, PD in every 1 ms step, from the default pose; or
`--emulate`: Unitree's simulator's command path, explicit PD every 2 ms from one-step-old sensors,
from the zero pose), no band: each LowState goes to the controller, its command to the plant for one
state period (`run`, which test/test_handover.py uses too). A seed turns the robot to a random
heading and adds 0.02 rad of joint noise, as `bcg-sim-bridge --seed`. Ramp 2 s, hold 0.5 s, then
BLEND and the policy to `--duration`. One line per run (fell, when, lowest pelvis, the policy's first
observation), then falls per blend time and policy.

    python bench/handover_blend.py [--policies policies/shac_*_k300.onnx ...] [--blends 0 0.25 0.5]
                                   [--seeds 5] [--duration 15] [--emulate both|on|off]

Last line: falls=<runs that fell>/<runs>.
"""
import argparse
import glob
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bcg.contract import load_policy, read_contract
from bcg.motion import load_motion
from bcg.robot import RobotDescription
from bcg.wire import lowcmd_crc
from bcg_policy_node.core.command_plan import LowCmdComposer, new_plan
from bcg_policy_node.core.controller import Controller
from bcg_policy_node.core.safety import SafetyLimits
from bcg_policy_node.core.state_machine import Phase, StateMachine
from bcg_policy_node.realtime.scheduling import PolicySchedule
from bcg_sim_bridge.bridge import SimBridge
from bcg_sim_bridge.config import BridgeConfig

REPO = Path(__file__).resolve().parents[1]
UNITREE = dict(emulate="unitree_mujoco", physics_hz=500.0, state_hz=500.0, initial_pose="zero", wait_for_command=0.0)
"""The bridge as Unitree's simulator, set up as the README says (config/sim_bridge_unitree_mujoco.yaml)."""


def run(controller: Controller, bridge: SimBridge, until_s: float) -> None:
    """Simulate until `until_s` (or damping): LowState -> controller (the policy at its rate) -> command
    plan composed at the state's simulated time -> the plant's gate -> one state period of physics."""
    schedule = PolicySchedule(controller.contract.control_period_s)
    plan, composer = new_plan(), LowCmdComposer()
    state = bridge.lowstate
    while bridge.core.time < until_s - 1e-9 and controller.machine.phase is not Phase.DAMPING:
        bridge.filler.fill(bridge.core.data)
        if bridge.config.emulate:
            state["tick"] = int(round(bridge.core.time * 1000)) + 1   # a clock for the controller only
        now = bridge.core.time
        controller.on_state(state, now)
        if schedule.arrival(now):
            controller.policy_step(now)
            schedule.stepped(now)
            controller.prepare_next_step()
        controller.write_plan(plan)
        if plan["active"]:
            if not composer.compose(plan, now):
                raise RuntimeError(f"non-finite command at {now:.3f} s")
            composer.cmd["crc"] = lowcmd_crc(composer.cmd)
            bridge.gate.offer(composer.cmd, now)
        for _ in range(bridge.config.steps_per_state):
            bridge.physics_step()
        bridge.metrics.sample(bridge.core.data)


def node(robot, policy_path, motion=None, blend_s: float = 0.25, hold_s: float = 0.5) -> Controller:
    """The node's controller as `--autostart` runs it: ramp 2 s, hold `hold_s`, blend `blend_s`."""
    machine = StateMachine(ramp_duration_s=2.0, autostart=True, autostart_hold_s=hold_s, blend_duration_s=blend_s)
    return Controller(load_policy(policy_path), robot, SafetyLimits(), machine, damping_kd=robot.damping_kd,
                      motion=motion)


def node_motion(name: str, folder: Path):
    """The policy's reference motion as the node reads it, or None when its data is not found."""
    proc = subprocess.run([sys.executable, "-m", "bcg_train.motion", "node-motion", name, "--out", str(folder)],
                          capture_output=True, text=True)
    return load_motion(proc.stdout.strip()) if proc.returncode == 0 else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policies", nargs="+", default=sorted(glob.glob(str(REPO / "policies" / "shac_*_k300.onnx"))))
    p.add_argument("--blends", nargs="+", type=float, default=[0.0, 0.25, 0.5])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--emulate", choices=("both", "on", "off"), default="both")
    p.add_argument("--motions", type=Path, default=Path("out/handover_blend/motions"))
    args = p.parse_args(argv)
    robot = RobotDescription.load()
    plants = {"both": (False, True), "on": (True,), "off": (False,)}[args.emulate]
    falls, runs = Counter(), Counter()
    for policy in map(Path, args.policies):
        motion = node_motion(read_contract(policy).motion, args.motions)
        if motion is None:
            print(f"{policy.stem}: motion data not found, not run", flush=True)
            continue
        for blend in args.blends:
            for emulate in plants:
                for seed in range(args.seeds):
                    bridge = SimBridge(BridgeConfig(headless=True, seed=seed, **(UNITREE if emulate else {})), robot)
                    controller = node(robot, policy, motion, blend)
                    run(controller, bridge, args.duration)
                    ev = bridge.metrics.report()
                    key = (blend, policy.stem)
                    runs[key] += 1
                    falls[key] += ev["fell"]
                    print(json.dumps({"policy": policy.stem, "blend_s": blend, "unitree": emulate, "seed": seed,
                                      "fell": ev["fell"], "fall_time_s": ev["fall_time_s"],
                                      "min_root_height_m": round(ev["min_root_height_m"], 3),
                                      "first_observation": controller.start_deviation}), flush=True)
    for (blend, name), n in sorted(runs.items()):
        print(f"blend {blend:g} s  {name:28s} fell {falls[(blend, name)]}/{n}")
    print(f"falls={sum(falls.values())}/{sum(runs.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
