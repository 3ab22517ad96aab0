"""Training, the policy node and the sim bridge read their settings with one grammar
(`bcg.config_check`): a bad value of any of them is a ConfigError of one shape,
"KEY=VALUE: what is wrong; expected what", KEY dotted from the config's root."""
import re

import pytest

from bcg.config_check import ConfigError, apply_overrides, parse_assignments, validate_config
from bcg.ros_params import layered_parameters
from bcg_policy_node.config import NODE_NAME as POLICY_NODE
from bcg_policy_node.config import PolicyNodeConfig
from bcg_sim_bridge.config import NODE_NAME as SIM_BRIDGE
from bcg_sim_bridge.config import BridgeConfig
from bcg_train.train_config import TrainConfig

SHAPE = re.compile(r"^[\w.\[\]]+=.+: .+; expected .+$")


def training(items):
    apply_overrides(TrainConfig(), parse_assignments(items)).validate()


def node(cls, name):
    """Items given as a ROS 2 command line's `-p KEY:=VALUE`, as the node reads them."""
    def build(items):
        argv = ["--ros-args"] + [arg for item in items for arg in ("-p", item.replace("=", ":=", 1))]
        return cls(**layered_parameters(cls, name, argv=argv))
    return build


@pytest.mark.parametrize("build, items, key", [
    (training, ["shac.horizon=0"], "shac.horizon"),
    (training, ["shac.horizon=long"], "shac.horizon"),
    (training, ["env.sim.bundle.branches=0"], "env.sim.bundle.branches"),
    (training, ["env.randomization.kp_scale=[1.2, 0.8]"], "env.randomization.kp_scale"),
    (training, ["runner.screen_every=30"], "runner.screen_every"),
    (training, ["env.alive_rewrd=1"], "env.alive_rewrd"),
    (node(PolicyNodeConfig, POLICY_NODE), ["domain=300"], "policy_node.domain"),
    (node(PolicyNodeConfig, POLICY_NODE), ["writer_hz=fast"], "policy_node.writer_hz"),
    (node(PolicyNodeConfig, POLICY_NODE), ["writer_spin=0.01"], "policy_node.writer_spin"),
    (node(PolicyNodeConfig, POLICY_NODE), ["domian=3"], "policy_node.domian"),
    (node(BridgeConfig, SIM_BRIDGE), ["state_hz=300.0"], "sim_bridge.state_hz"),
    (node(BridgeConfig, SIM_BRIDGE), ["band_mode=lift"], "sim_bridge.band_mode"),
    (node(BridgeConfig, SIM_BRIDGE), ["fast=maybe"], "sim_bridge.fast")])
def test_every_config_error_has_one_shape(build, items, key):
    with pytest.raises(ConfigError) as error:
        build(items)
    message = str(error.value)
    assert SHAPE.match(message) and message.startswith(f"{key}="), message


@pytest.mark.parametrize("config", [TrainConfig(), PolicyNodeConfig(), BridgeConfig()])
def test_the_defaults_pass_the_one_validation(config):
    validate_config(config)
