"""The ONNX policy contract shared by training (writer) and the policy node (reader)."""
from .builtin import STAND_POLICY_NAME, mlp_model, random_mlp, stand_contract, stand_gains, stand_policy_path
from .checked_policies import CheckedPolicies
from .metadata import CONTRACT_VERSION, ContractError, PolicyContract
from .observation import (
                          TERMS,
                          ObservationInputs,
                          ObservationSpec,
                          ObservationSpecError,
                          ObservationTerm,
                          robot_state_spec,
                          tracking_spec,
)
from .policy_file import Policy, PolicyFileError, check_graph, load_policy, read_contract, write_policy

__all__ = ["CONTRACT_VERSION", "CheckedPolicies", "ContractError", "ObservationInputs", "ObservationSpec",
           "ObservationSpecError", "ObservationTerm", "Policy", "PolicyContract", "PolicyFileError",
           "STAND_POLICY_NAME", "TERMS", "check_graph", "load_policy", "mlp_model", "random_mlp", "read_contract",
           "robot_state_spec", "stand_contract", "stand_gains", "stand_policy_path", "tracking_spec", "write_policy"]
