"""The robot's side of the wire tests, in a process of its own (as a robot is a machine of its own):
publishes the LowState held in a memory-mapped file at 500 Hz on a deadline schedule until SIGTERM.

    python lowstate_publisher.py DOMAIN FILE

FILE: one byte (non-zero: paused, nothing is published), then one LowState record (`bcg.wire`),
edited in place by the test (`StateClient`). A thread in pytest's own process was not enough: it
shares the GIL and the garbage collector with the whole suite, whose full collections took 50-170 ms
under load, longer than the node's 60 ms staleness limit.
"""
import sys
import time

import numpy as np

from bcg.transport import TransportConfig, make_transport
from bcg.wire import new_lowstate


def lowstate_layout():
    """The file's record: the paused flag, then the LowState."""
    return np.dtype([("paused", np.uint8), ("state", new_lowstate().dtype)])


def main(domain: int, path: str) -> None:
    shared = np.memmap(path, dtype=lowstate_layout(), mode="r+", shape=(1,))
    transport = make_transport(TransportConfig.simulation(domain_id=domain, transport="dds"))
    writer = transport.lowstate_writer()
    deadline = time.monotonic()
    while True:
        if not shared["paused"][0]:
            writer.write(shared["state"][0].copy())
        deadline += 0.002
        time.sleep(max(0.0, deadline - time.monotonic()))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
