"""The G1 as a MuJoCo plant, shared by the sim bridge and the trainer's evaluation.

- `PhysicsCore`: the MuJoCo G1 stepped at a given rate with the motor PD law evaluated inside every
  physics step (`physics.py`), under a `JointCommand` (`joint_command.py`);
- `FootContacts`: the foot-floor contacts among MuJoCo's (`foot_contacts.py`);
- `self_contacts`: how many of MuJoCo's contacts are the robot touching itself (`self_contacts.py`).
Imports MuJoCo (unlike `bcg.robot`, whose description loads it only when used).
"""
from .foot_contacts import FootContacts
from .joint_command import JointCommand
from .physics import PhysicsCore
from .self_contacts import self_contacts

__all__ = ["FootContacts", "JointCommand", "PhysicsCore", "self_contacts"]
