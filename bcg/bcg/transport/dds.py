"""Direct Cyclone DDS transport, wire-compatible with the G1, Unitree's SDKs and ROS 2 (Cyclone RMW).

Topics ``rt/lowcmd`` / ``rt/lowstate`` with the ``unitree_hg::msg::dds_`` IDL types, so that
discovery, type matching and type information are exactly those of an IdlStruct participant;
but samples bypass IdlStruct (120-215 us each way) and go through the fast codec: the binding's
own ``DataWriter.write`` / ``DataReader.take`` only call ``sample.serialize()`` /
``deserialize(bytes)`` around ``_clayer.ddspy_write(ref, bytes)`` / ``ddspy_take(ref, n)``,
which take and return the serialized sample (4-byte encapsulation header + XCDR1), and those two
are called here directly with the codec's bytes. (They are private names of cyclonedds 0.10.2,
the version the robot runs and the one pinned here.)

QoS as Unitree's SDK (which passes none, so Cyclone's defaults): writers reliable (blocking at
most 100 ms), keep last 1, volatile; readers best effort, keep last 1 (or `depth`). A best-effort reader
matches every writer and a reliable writer matches every reader.
"""
import threading
from typing import Dict, List, Optional

import numpy as np
from cyclonedds._clayer import ddspy_take, ddspy_write
from cyclonedds.core import (
    DDSException,
    Entity,
    InstanceState,
    Policy,
    Qos,
    ReadCondition,
    SampleState,
    ViewState,
    WaitSet,
)
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from bcg.transport import Transport, TransportConfig, Writer
from bcg.transport.cyclone_config import cyclone_config_xml
from bcg.transport.latest import LatestSampleReader
from bcg.wire import LOWCMD, LOWCMD_TOPIC, LOWSTATE, LOWSTATE_TOPIC, MessageCodec, RecordEncoder

WRITER_QOS = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)),
                 Policy.History.KeepLast(1), Policy.Durability.Volatile)
"""Cyclone's default writer QoS, as Unitree's SDK uses it."""


def reader_qos(depth: int = 1) -> Qos:
    """Cyclone's default reader QoS, as Unitree's SDK uses it (depth 1), or a deeper keep-last history."""
    return Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(depth), Policy.Durability.Volatile)


TAKE_EXTRA = 8
"""Samples taken per poll beyond the history depth (instance state changes)."""

_domains: Dict[int, List] = {}
"""domain id -> [Domain, its XML, open transports]: one Domain per id and process, deleted with its
last transport (explicitly: a Domain left to the interpreter's finalisation was seen to hang it)."""
_domains_lock = threading.Lock()


def _open_domain(domain_id: int, xml: str) -> Domain:
    """The process's Domain `domain_id` with configuration `xml` (created by its first user)."""
    with _domains_lock:
        if domain_id in _domains:
            entry = _domains[domain_id]
            if entry[1] != xml:
                raise ValueError(f"domain_id: domain {domain_id} is already open in this process "
                                 "with another interface / peers configuration")
            entry[2] += 1
            return entry[0]
        try:
            domain = Domain(domain_id, xml)
        except DDSException as e:
            raise RuntimeError(f"domain_id: cannot configure DDS domain {domain_id} ({e}); was a "
                               "participant created on it before, outside bcg.transport?") from e
        _domains[domain_id] = [domain, xml, 1]
        return domain


def _release_domain(domain_id: int) -> None:
    """One user of `domain_id` is done; the last one deletes the Domain."""
    with _domains_lock:
        entry = _domains[domain_id]
        entry[2] -= 1
        if entry[2] == 0:
            del _domains[domain_id]
            Entity.__del__(entry[0])


class DdsWriter(Writer):
    """Writes records as serialized samples through the fast codec, into one reused buffer
    (Cyclone copies it during the write). `crc` False: the samples carry crc = 0 (the CRC is the
    last member of both messages, so the last 4 bytes of the sample; checked at construction)."""

    def __init__(self, participant: DomainParticipant, topic: Topic, codec: MessageCodec, crc: bool = True):
        self.codec, self.crc = codec, crc
        self._writer = DataWriter(participant, topic, WRITER_QOS)
        self._encoder = RecordEncoder(codec)
        self._lock = threading.Lock()
        if not crc:
            probe = np.zeros(1, codec.dtype)[0]
            tail = bytes(self._encoder.encode(probe)[-4:])
            if tail != int(probe["crc"]).to_bytes(4, "little"):
                raise RuntimeError(f"{codec.idl_type.__name__}: the CRC is not the last 4 bytes of a sample")

    def write(self, rec) -> None:
        with self._lock:
            sample = self._encoder.encode(rec)
            if not self.crc:
                sample[-4:] = bytes(4)
                rec["crc"] = 0
            ret = ddspy_write(self._writer._ref, sample)
        if ret < 0:
            raise DDSException(ret, f"while writing {self.codec.idl_type.__name__}")


class DdsReader(LatestSampleReader):
    """Takes serialized samples, drops invalid ones (instance state changes), decodes the newest."""

    def __init__(self, participant: DomainParticipant, topic: Topic, codec: MessageCodec,
                 check_crc: bool, depth: int = 1):
        super().__init__(codec, check_crc, depth)
        self._reader = DataReader(participant, topic, reader_qos(depth))
        self._condition = ReadCondition(self._reader,
                                        SampleState.Any | ViewState.Any | InstanceState.Any)
        self._waitset = WaitSet(participant)
        self._waitset.attach(self._condition)
        self._take_lock = threading.Lock()

    def _poll(self) -> None:
        """Offer the newest `depth` valid samples the reader holds, oldest first."""
        with self._take_lock:
            samples = ddspy_take(self._reader._ref, self.depth + TAKE_EXTRA)
            if isinstance(samples, int):
                raise DDSException(samples, f"while taking {self.codec.idl_type.__name__}")
            valid = [data for data, info in samples if info.valid_data]
            for data in valid[-self.depth:]:
                try:
                    rec = self.codec.decode(data)
                except ValueError:
                    self.drop("malformed")
                    continue
                self.offer(rec)

    def _block(self, timeout_s: float) -> None:
        self._waitset.wait(duration(seconds=timeout_s))


class DdsTransport(Transport):
    """Cyclone DDS participant on the domain and interface of a `TransportConfig`."""

    kind = "dds"

    def __init__(self, config: TransportConfig):
        self.config = config
        self._domain = _open_domain(int(config.domain_id), cyclone_config_xml(config))
        self._participant: Optional[DomainParticipant] = DomainParticipant(int(config.domain_id))
        self._topics: Dict[str, Topic] = {}

    def _open(self) -> DomainParticipant:
        if self._participant is None:
            raise RuntimeError("transport is closed")
        return self._participant

    def _topic(self, name: str, codec: MessageCodec) -> Topic:
        if name not in self._topics:
            self._topics[name] = Topic(self._open(), name, codec.idl_type)
        return self._topics[name]

    def lowcmd_writer(self) -> DdsWriter:
        return DdsWriter(self._open(), self._topic(LOWCMD_TOPIC, LOWCMD), LOWCMD)

    def lowstate_writer(self, crc: bool = True) -> DdsWriter:
        return DdsWriter(self._open(), self._topic(LOWSTATE_TOPIC, LOWSTATE), LOWSTATE, crc)

    def lowcmd_reader(self, check_crc: bool = True, depth: int = 1) -> DdsReader:
        return DdsReader(self._open(), self._topic(LOWCMD_TOPIC, LOWCMD), LOWCMD, check_crc, depth)

    def lowstate_reader(self, check_crc: bool = True) -> DdsReader:
        return DdsReader(self._open(), self._topic(LOWSTATE_TOPIC, LOWSTATE), LOWSTATE,
                         check_crc)

    def close(self) -> None:
        """Delete the participant and, with it, every topic, writer and reader it made (and the
        domain, when this was its last transport in the process)."""
        if self._participant is not None:
            Entity.__del__(self._participant)  # dds_delete now, not whenever GC runs
            self._participant = None
            self._topics.clear()
            _release_domain(int(self.config.domain_id))
