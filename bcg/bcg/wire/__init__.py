"""The Unitree G1 low-level wire protocol (``unitree_hg`` LowCmd / LowState).

- ``bcg.wire.idl``    : the Cyclone DDS IDL types (wire type names ``unitree_hg::msg::dds_::*``)
  and the topic names.
- ``bcg.wire.crc``    : the robot's CRC32, fast.
- ``bcg.wire.layout`` : C (CRC) and XCDR1 (wire) layouts derived from the IDL types.
- ``bcg.wire.codec``  : numpy records <-> serialized bytes, byte-identical to IdlStruct.
"""
from bcg.wire.codec import (
                            LOWCMD,
                            LOWSTATE,
                            MessageCodec,
                            RecordEncoder,
                            WireError,
                            codec_of,
                            crc_ok,
                            decode_lowcmd,
                            decode_lowstate,
                            encode_lowcmd,
                            encode_lowstate,
                            lowcmd_crc,
                            lowstate_crc,
                            new_lowcmd,
                            new_lowstate,
)
from bcg.wire.idl import LOWCMD_TOPIC, LOWSTATE_TOPIC, NUM_MOTORS, IMUState_, LowCmd_, LowState_, MotorCmd_, MotorState_

__all__ = [
    "LOWCMD", "LOWSTATE", "MessageCodec", "RecordEncoder", "WireError", "codec_of", "crc_ok", "decode_lowcmd",
    "decode_lowstate", "encode_lowcmd", "encode_lowstate", "lowcmd_crc", "lowstate_crc",
    "new_lowcmd", "new_lowstate", "LOWCMD_TOPIC", "LOWSTATE_TOPIC", "NUM_MOTORS", "IMUState_",
    "LowCmd_", "LowState_", "MotorCmd_", "MotorState_",
]
