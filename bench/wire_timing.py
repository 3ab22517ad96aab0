"""What the wire benches share: a median timing and a sample message record."""
import statistics
import time

import numpy as np

from bcg.wire import LOWCMD


def median_us(fn, repeats: int) -> float:
    """Median wall time of one call of `fn` [us] over `repeats` calls, after up to 200 untimed ones."""
    for _ in range(min(200, repeats)):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def sample(codec, fields=("q", "dq")):
    """A record of `codec` (LOWCMD or LOWSTATE) with random motor `fields` (35 motors), mode_machine 5
    and a valid CRC."""
    rng = np.random.default_rng(0)
    rec = codec.new()
    group = "motor_cmd" if codec is LOWCMD else "motor_state"
    for field in fields:
        rec[group][field] = rng.normal(size=35)
    rec["mode_machine"] = 5
    rec["crc"] = codec.crc(rec)
    return rec
