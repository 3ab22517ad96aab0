"""Median encode / decode time of LowCmd and LowState: fast numpy codec vs cyclonedds IdlStruct.

The fast encode includes computing and setting the CRC; IdlStruct.serialize() does not (so the
ratio understates the gain). Decode: neither checks the CRC. Prints microseconds and the ratio
IdlStruct / fast, both measured in this run.

    python bench/bench_codec.py [--repeats 2000]
"""
import argparse

from wire_timing import median_us, sample

from bcg.wire import LOWCMD, LOWSTATE


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000, help="timed calls per figure")
    args = parser.parse_args()
    print(f"{'message':10s} {'op':7s} {'fast us':>9s} {'IdlStruct us':>13s} {'ratio':>7s}")
    for codec in (LOWCMD, LOWSTATE):
        rec = sample(codec)
        data = codec.encode(rec)
        msg = codec.to_idl(rec)
        idl_type = codec.idl_type

        cases = {
            "encode": (lambda: codec.encode(rec), msg.serialize),
            "decode": (lambda: codec.decode(data), lambda: idl_type.deserialize(data)),
        }
        for op, (fast, slow) in cases.items():
            t_fast, t_slow = median_us(fast, args.repeats), median_us(slow, args.repeats)
            print(f"{idl_type.__name__:10s} {op:7s} {t_fast:9.1f} {t_slow:13.1f} "
                  f"{t_slow / t_fast:7.1f}")


if __name__ == "__main__":
    main()
