"""ONNX graphs built without a training framework, and the built-in zero-action test policy.

`mlp_model` writes a plain MLP (linear layers with ELU between them) as an ONNX graph; the
built-in *stand* policy is its smallest case: one linear layer with zero weights, so it always
outputs zero actions and the node holds the contract's default pose. It exists so the deploy path
(node, bridge, mujoco_check) runs before any policy is trained; it is no controller. onnx is
imported where a graph is built: importing the contract (as training does) does not load it.
"""
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

import numpy as np

from bcg.robot.pd_stability import PdPath, best_kd

from .cache import cache_dir
from .metadata import PolicyContract
from .observation import robot_state_spec
from .policy_file import write_policy

if TYPE_CHECKING:
    import onnx

STAND_POLICY_NAME = "builtin_stand_zero_action"
"""File stem and `description` of the built-in zero-action test policy."""
STAND_KP_SCALE = 10.0
"""kp multiplier on config/g1.yaml's gains for the stand policy. g1.yaml's gains suit an actively
balancing policy; a plain PD hold of the default pose with them tips over in MuJoCo in about 1.5 s,
and so does 5x (the ankles, kp 142, fold); 10x stands (measured: pelvis 0.755 m)."""
STAND_KD_SCALE_MAX = 3.0
"""At most this multiple of g1.yaml's kd for the stand policy (below it where `best_kd` says so)."""
STAND_PATH = PdPath(step_s=0.002, delay_steps=1)
"""The slowest control path the stand policy is made for: Unitree's MuJoCo simulator at the 2 ms step
the README sets (explicit PD, sensors one step old). Its kd per joint is the fastest-decaying one
there (`pd_stability.best_kd`), at most STAND_KD_SCALE_MAX x g1.yaml's: 10x kp with 3x kd was unstable
there on the ankle roll joints and barely stable (gain margin 1.0-1.1) on the ankle pitch and knee
joints. Measured with these gains, ramping from the zero pose: standing
(pelvis 0.755 m) after 13 s at 2 ms with one step of delay and at 1 ms without (this suite's bridge);
at Unitree's default 5 ms no PD gains stiff enough to stand are stable (the ankles need kp about 285,
alpha = 0.69, above the bound of about 0.25), hence the README's step setting."""


def mlp_model(layers: Sequence[Tuple[np.ndarray, np.ndarray]], input_name: str = "obs",
              output_name: str = "actions") -> "onnx.ModelProto":
    """An ONNX MLP: `layers` is [(W (in, out), b (out,)), ...]; ELU between layers, none after the last.

    Input [batch, in_0] float32, output [batch, out_last] float32.
    """
    from onnx import TensorProto, helper, numpy_helper
    nodes, inits, x = [], [], input_name
    for k, (w, b) in enumerate(layers):
        inits += [numpy_helper.from_array(np.asarray(w, np.float32), f"w{k}"),
                  numpy_helper.from_array(np.asarray(b, np.float32), f"b{k}")]
        last = k == len(layers) - 1
        nodes += [helper.make_node("MatMul", [x, f"w{k}"], [f"mm{k}"]),
                  helper.make_node("Add", [f"mm{k}", f"b{k}"], [output_name if last else f"z{k}"])]
        if not last:
            nodes.append(helper.make_node("Elu", [f"z{k}"], [f"h{k}"]))
            x = f"h{k}"
    n_in, n_out = np.shape(layers[0][0])[0], np.shape(layers[-1][0])[1]
    graph = helper.make_graph(nodes, "mlp_policy",
                              [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", n_in])],
                              [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, ["batch", n_out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bcg.contract")
    model.ir_version = 8
    return model


def random_mlp(n_in: int, hidden: Sequence[int], n_out: int, seed: int = 0,
               out_gain: float = 0.01) -> "onnx.ModelProto":
    """An MLP with random weights (He init; last layer scaled by `out_gain`), e.g. for benchmarks."""
    rng = np.random.default_rng(seed)
    sizes = [n_in, *hidden, n_out]
    layers = []
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = rng.normal(0, np.sqrt(2.0 / a), (a, b)) * (out_gain if k == len(sizes) - 2 else 1.0)
        layers.append((w, np.zeros(b)))
    return mlp_model(layers)


def stand_gains(robot) -> Tuple[np.ndarray, np.ndarray]:
    """(kp, kd), each (num_joints,), of the stand policy for `robot` (a bcg.robot.RobotDescription):
    STAND_KP_SCALE x its kp; the kd that damps best on STAND_PATH, at most STAND_KD_SCALE_MAX x its kd."""
    kp = robot.kp * STAND_KP_SCALE
    return kp, np.minimum(robot.kd * STAND_KD_SCALE_MAX, best_kd(kp, robot.joint_inertia, STAND_PATH))


def stand_contract(robot, control_period_s: float = 0.02) -> PolicyContract:
    """The zero-action policy's contract for `robot` (a bcg.robot.RobotDescription): its joints,
    default pose, standing gains (`stand_gains`), proprioceptive observation, action scale 0.25 rad."""
    n = robot.num_joints
    kp, kd = stand_gains(robot)
    return PolicyContract(joint_names=robot.joint_names, kp=kp, kd=kd,
                          default_joint_pos=robot.default_q, action_scale=np.full(n, 0.25),
                          observation=robot_state_spec(n), control_period_s=control_period_s,
                          contact_stiffness=0.0, motion="",
                          description=f"{STAND_POLICY_NAME}: BCG built-in test policy, outputs zero actions "
                                      "(holds the default pose); not a trained controller")


def stand_policy_path(robot, folder: Optional[Path] = None) -> Path:
    """Write (once) the built-in zero-action policy for `robot` and return its path.

    The file name carries a hash of the contract, so a changed robot or gains file gets a new file.
    """
    contract = stand_contract(robot)
    digest = hashlib.sha256(repr(sorted(contract.to_metadata().items())).encode()).hexdigest()[:12]
    path = Path(folder or cache_dir()) / f"{STAND_POLICY_NAME}_{robot.num_joints}dof_{digest}.onnx"
    if not path.is_file():
        n_obs = contract.observation.size
        write_policy(path, mlp_model([(np.zeros((n_obs, robot.num_joints)), np.zeros(robot.num_joints))]), contract)
    return path
