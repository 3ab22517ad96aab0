"""Median time of the ROS 2 transport's record <-> unitree_hg message conversion, per message.

Messages are `bcg.transport.ros2_standins` (shaped like rosidl's generated classes: property
setters with rosidl's checks, ``_<field>`` slots). The reference, measured in the same run, is a
plain per-field conversion through the classes' public setters / getters (one attribute per
member and motor, a new numpy array per array member): the ratio reference / ours is what the conversion gains on
any machine. At 500 Hz a 2 ms period holds both the conversion and rclpy's publish.

    python bench/bench_ros2_convert.py [--repeats 2000]
"""
import argparse

import numpy as np
from wire_timing import median_us, sample

from bcg.transport.ros2_convert import MessageFiller, message_to_record
from bcg.transport.ros2_standins import CLASSES
from bcg.wire import LOWCMD, LOWSTATE
from bcg.wire.layout import members


def per_field(rec, struct, msg) -> None:
    """The reference: every member set through the message's public setter, motor by motor."""
    for name, element, count in members(struct):
        value = rec[name]
        if isinstance(element, np.dtype):
            setattr(msg, name, np.array(value) if count else value.item())
        elif count:
            for sub_rec, sub_msg in zip(value, getattr(msg, name)):
                per_field(sub_rec, element, sub_msg)
        else:
            per_field(value, element, getattr(msg, name))


def per_field_back(msg, struct, rec) -> None:
    """The reference back: every member read through the message's getter, motor by motor."""
    for name, element, count in members(struct):
        value = getattr(msg, name)
        if isinstance(element, np.dtype):
            rec[name] = value
        elif count:
            for sub_msg, sub_rec in zip(value, rec[name]):
                per_field_back(sub_msg, element, sub_rec)
        else:
            per_field_back(value, element, rec[name])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000, help="timed calls per figure")
    args = parser.parse_args()
    print(f"{'message':10s} {'op':10s} {'ours us':>9s} {'per-field us':>13s} {'ratio':>7s}")
    for codec, name in ((LOWCMD, "LowCmd"), (LOWSTATE, "LowState")):
        rec = sample(codec, ("q", "dq", "kp" if codec is LOWCMD else "tau_est"))
        filler, reference = MessageFiller(CLASSES[name](), codec), CLASSES[name]()
        msg = filler.fill(rec)
        t_ours = median_us(lambda: filler.fill(rec), args.repeats)
        t_ref = median_us(lambda: per_field(rec, codec.idl_type, reference), args.repeats)
        print(f"{name:10s} {'to msg':10s} {t_ours:9.1f} {t_ref:13.1f} {t_ref / t_ours:7.1f}")
        t_back = median_us(lambda: message_to_record(msg, codec), args.repeats)
        t_ref = median_us(lambda: per_field_back(msg, codec.idl_type, codec.new()), args.repeats)
        print(f"{name:10s} {'from msg':10s} {t_back:9.1f} {t_ref:13.1f} {t_ref / t_back:7.1f}")


if __name__ == "__main__":
    main()
