"""Direct Cyclone DDS transport on loopback, between processes (domain ids 10-19)."""
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from bcg.transport import TransportConfig, make_transport
from bcg.transport.cyclone_config import cyclone_config_xml
from bcg.wire import crc_ok, new_lowcmd, new_lowstate

FAST_ECHO = """
import sys, time
from bcg.transport import TransportConfig, make_transport
from bcg.wire import new_lowstate
with make_transport(TransportConfig.simulation(domain_id=int(sys.argv[1]), transport="dds")) as t:
    commands, states = t.lowcmd_reader(check_crc=True), t.lowstate_writer()
    replies, deadline = 0, time.monotonic() + 30
    while time.monotonic() < deadline:
        cmd = commands.wait(0.5)
        if cmd is None:
            continue
        if cmd["mode_pr"] == 1:
            break
        state = new_lowstate()
        state["tick"] = cmd["motor_cmd"]["reserve"][0]
        state["mode_machine"] = cmd["mode_machine"]
        state["motor_state"]["q"] = cmd["motor_cmd"]["q"]
        state["motor_state"]["dq"] = cmd["motor_cmd"]["kd"]
        states.write(state)
        replies += 1
    print("replies", replies, "crc_errors", commands.dropped["crc"], flush=True)
"""

# A peer as unitree_sdk2_python is: plain IdlStruct types, default QoS, DataReader.take().
# It answers with crc = 0 (as Unitree's MuJoCo bridge does) and echoes the command's crc.
IDL_PEER = """
import sys, time
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.internal import InvalidSample
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from bcg.wire.idl import IMUState_, LowCmd_, LowState_, MotorState_
domain = int(sys.argv[1])
# Keep the Domain referenced (as Unitree's ChannelFactory does): once it is garbage-collected,
# participants silently get Cyclone's default configuration instead of this loopback one.
config = Domain(domain, '''<CycloneDDS><Domain Id="any"><General><Interfaces>
  <NetworkInterface name="lo"/></Interfaces><AllowMulticast>false</AllowMulticast></General>
  <Discovery><ParticipantIndex>auto</ParticipantIndex><Peers><Peer address="127.0.0.1"/>
  </Peers></Discovery></Domain></CycloneDDS>''')
participant = DomainParticipant(domain)
reader = DataReader(participant, Topic(participant, "rt/lowcmd", LowCmd_))
writer = DataWriter(participant, Topic(participant, "rt/lowstate", LowState_))
replies, deadline = 0, time.monotonic() + 30
while time.monotonic() < deadline:
    samples = [s for s in reader.take(10) if not isinstance(s, InvalidSample)]
    if not samples:
        time.sleep(0.005)
        continue
    cmd = samples[-1]
    if cmd.mode_pr == 1:
        break
    motors = [MotorState_(1, m.q, m.kd, 0.0, m.tau, [40, 41], 24.0, [0, 0], 0, [0] * 4)
              for m in cmd.motor_cmd]
    imu = IMUState_([1.0, 0.0, 0.0, 0.0], [0.0] * 3, [0.0, 0.0, 9.81], [0.0] * 3, 30)
    writer.write(LowState_([1, 2], 0, cmd.mode_machine, cmd.motor_cmd[0].reserve, imu, motors,
                           bytes(40), [cmd.crc, 0, 0, 0], 0))
    replies += 1
print("replies", replies, flush=True)
"""


def start_peer(code: str, domain_id: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(domain_id)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_peer(peer: subprocess.Popen, writer) -> str:
    """Send the stop command (mode_pr = 1) until the peer exits; its stdout."""
    stop = new_lowcmd()
    stop["mode_pr"] = 1
    deadline = time.monotonic() + 10
    while peer.poll() is None and time.monotonic() < deadline:
        writer.write(stop)
        time.sleep(0.05)
    if peer.poll() is None:
        peer.kill()
    out, err = peer.communicate(timeout=5)
    assert peer.returncode == 0, err
    return out


def exchange(states, commands, n: int, check):
    """Send commands with sequence numbers until `n` matching states came back."""
    rng = np.random.default_rng(0)
    matched, seq, deadline = 0, 0, time.monotonic() + 20
    while matched < n and time.monotonic() < deadline:
        seq += 1
        cmd = new_lowcmd()
        cmd["mode_machine"] = 5
        cmd["motor_cmd"]["reserve"][0] = seq
        cmd["motor_cmd"]["q"] = rng.normal(size=35)
        cmd["motor_cmd"]["kd"] = rng.uniform(0, 5, size=35)
        commands.write(cmd)
        state = states.wait(0.1)
        if state is not None and state["tick"] == seq:
            check(cmd, state)
            matched += 1
    assert matched == n, f"only {matched} of {n} round trips in 20 s"


def test_round_trip_between_two_fast_processes():
    config = TransportConfig.simulation(domain_id=11, transport="dds")
    peer = start_peer(FAST_ECHO, 11)
    with make_transport(config) as transport:
        states, commands = transport.lowstate_reader(check_crc=True), transport.lowcmd_writer()

        def check(cmd, state):
            assert crc_ok(state)
            assert state["mode_machine"] == 5
            np.testing.assert_array_equal(state["motor_state"]["q"], cmd["motor_cmd"]["q"])
            np.testing.assert_array_equal(state["motor_state"]["dq"], cmd["motor_cmd"]["kd"])

        exchange(states, commands, 5, check)
        assert states.dropped == {"crc": 0, "malformed": 0}
        out = finish_peer(peer, commands)
    replies = int(out.split()[1])
    assert replies >= 5 and out.split()[3] == "0"  # no command failed the peer's CRC check


def test_interop_with_plain_idlstruct_peer():
    """What the fast path writes, an IdlStruct reader reads (its crc echoed back intact), and
    what an IdlStruct writer writes, the fast path reads; crc = 0 states are dropped when
    checking CRCs and accepted when not."""
    peer = start_peer(IDL_PEER, 12)
    with make_transport(TransportConfig.simulation(domain_id=12, transport="dds")) as transport:
        checked = transport.lowstate_reader(check_crc=True)
        states, commands = transport.lowstate_reader(check_crc=False), transport.lowcmd_writer()

        def check(cmd, state):
            assert state["reserve"][0] == cmd["crc"] != 0
            np.testing.assert_array_equal(state["motor_state"]["q"], cmd["motor_cmd"]["q"])
            np.testing.assert_array_equal(state["motor_state"]["dq"], cmd["motor_cmd"]["kd"])
            assert list(state["motor_state"]["temperature"][3]) == [40, 41]
            assert state["imu_state"]["accelerometer"][2] == np.float32(9.81)
            assert state["imu_state"]["temperature"] == 30 and state["crc"] == 0
            assert checked.take() is None

        exchange(states, commands, 5, check)
        assert checked.dropped["crc"] >= 1 and checked.received == 0
        finish_peer(peer, commands)


def test_two_transports_in_one_process_share_the_domain():
    config = TransportConfig.simulation(domain_id=13, transport="dds")
    other = TransportConfig(transport="dds", domain_id=13, interface="lo")
    with make_transport(config) as a, make_transport(config) as b:
        writer, reader = a.lowstate_writer(), b.lowstate_reader()
        state = new_lowstate()
        state["tick"] = 77
        got, deadline = None, time.monotonic() + 5
        while got is None and time.monotonic() < deadline:
            writer.write(state)
            got = reader.wait(0.05)
        assert got is not None and got["tick"] == 77 and crc_ok(got)
        assert reader.take() is None or reader.take() is None  # newest only, then nothing
        with pytest.raises(ValueError, match="domain_id: domain 13 is already open"):
            make_transport(other)
    with make_transport(other) as c:              # the domain went with its last transport
        assert c.lowstate_reader().take() is None


def test_cyclone_config():
    sim = ET.fromstring(cyclone_config_xml(TransportConfig.simulation(domain_id=14)))
    ns = {"c": "https://cdds.io/config"}
    domain = sim.find("c:Domain", ns)
    assert domain.get("Id") == "14"
    assert domain.find("c:General/c:Interfaces/c:NetworkInterface", ns).get("name") == "lo"
    assert domain.find("c:General/c:AllowMulticast", ns).text == "false"
    assert domain.find("c:Discovery/c:Peers/c:Peer", ns).get("address") == "127.0.0.1"
    robot = ET.fromstring(cyclone_config_xml(TransportConfig.robot("eth0")))
    assert robot.find("c:Domain", ns).get("Id") == "0"
    assert robot.find("c:Domain/c:Discovery", ns) is None
    with pytest.raises(ValueError, match="interface"):
        cyclone_config_xml(TransportConfig(interface='lo"/><x'))


def test_transport_choice():
    with pytest.raises(ValueError, match="transport"):
        TransportConfig(transport="zenoh")
    with pytest.raises(ValueError, match="domain_id"):
        TransportConfig(domain_id=300)
    with pytest.raises(ModuleNotFoundError, match="rclpy|unitree_hg"):
        make_transport(TransportConfig(transport="ros2"))


def test_a_deeper_reader_keeps_every_sample_until_take_all():
    config = TransportConfig.simulation(domain_id=15, transport="dds")
    with make_transport(config) as a, make_transport(config) as b:
        writer, reader = a.lowcmd_writer(), b.lowcmd_reader(check_crc=True, depth=8)
        cmd = new_lowcmd()
        deadline = time.monotonic() + 5
        while reader.wait(0.05) is None and time.monotonic() < deadline:   # discovery
            writer.write(cmd)
        for k in range(1, 6):
            cmd["motor_cmd"]["q"][0] = k
            writer.write(cmd)
        got = []
        while len(got) < 5 and time.monotonic() < deadline:
            got += reader.take_all()
            time.sleep(0.01)
        assert [int(g["motor_cmd"]["q"][0]) for g in got] == [1, 2, 3, 4, 5]
        assert all(crc_ok(g) for g in got) and reader.take_all() == []


def test_drops_are_counted_by_reason_and_a_writer_can_send_crc_0():
    """A LowState written with crc=False (Unitree's simulator's way) arrives with crc 0 and intact
    contents; a reader checking CRCs drops it as 'crc'; a sample that cannot be decoded (too short)
    is dropped as 'malformed'."""
    from cyclonedds._clayer import ddspy_write
    config = TransportConfig.simulation(domain_id=16, transport="dds")
    with make_transport(config) as a, make_transport(config) as b:
        writer = a.lowstate_writer(crc=False)
        checked, unchecked = b.lowstate_reader(check_crc=True), b.lowstate_reader(check_crc=False)
        state = new_lowstate()
        state["motor_state"]["q"][:29] = np.arange(29) / 10.0
        state["tick"] = 7
        got, deadline = None, time.monotonic() + 5
        while got is None and time.monotonic() < deadline:
            writer.write(state)
            got = unchecked.wait(0.05)
        assert got is not None and got["crc"] == 0 and state["crc"] == 0 and got["tick"] == 7
        np.testing.assert_allclose(got["motor_state"]["q"][:29], np.arange(29) / 10.0, rtol=1e-6)
        assert checked.take() is None and checked.dropped["crc"] >= 1 and checked.dropped["malformed"] == 0
        for _ in range(20):
            ddspy_write(writer._writer._ref, bytes(writer._encoder.out[:100]))   # a truncated sample
            time.sleep(0.01)
            unchecked.take()
        assert unchecked.dropped["malformed"] >= 1 and unchecked.dropped["crc"] == 0
