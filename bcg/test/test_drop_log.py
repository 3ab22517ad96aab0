"""How dropped and rejected messages are reported (both nodes): first at once, then rate-limited summaries."""
from bcg.transport.drop_log import DropLog

REASONS = {"crc": "CRC mismatch (a simulator that sends crc 0? set check_state_crc: false)",
           "malformed": "malformed (wrong size or encoding)"}


def test_first_drop_at_once_then_a_summary_every_interval():
    log = DropLog("LowState", REASONS, interval_s=5.0)
    assert log.update({"crc": 0, "malformed": 0}, 0.0) is None and str(log) == "none"
    first = log.update({"crc": 1, "malformed": 0}, 0.01)
    assert first.startswith("LowState dropped: CRC mismatch (a simulator that sends crc 0?")
    assert "summarised every 5 s" in first
    for k in range(2, 1000):
        assert log.update({"crc": k, "malformed": 0}, 0.005 * k) is None       # < 5 s: quiet
    assert log.update({"crc": 1251, "malformed": 0}, 5.02) == \
        "1,250 LowStates dropped in 5 s: CRC mismatch (a simulator that sends crc 0? set check_state_crc: false)"
    assert log.update({"crc": 1251, "malformed": 0}, 11.0) is None            # nothing new: nothing to say
    assert log.update({"crc": 1300, "malformed": 2}, 12.0) == \
        "51 LowStates dropped in 7 s: 49 CRC mismatch (a simulator that sends crc 0? set check_state_crc: false); " \
        "2 malformed (wrong size or encoding)"
    assert log.totals == {"crc": 1300, "malformed": 2} and str(log) == "1,302 (crc 1,300, malformed 2)"


def test_counters_of_several_sources_and_other_names():
    log = DropLog("LowCmd", {"crc": "CRC mismatch", "mode_machine": "wrong mode_machine"}, verb="rejected")
    assert log.update({"crc": 0, "mode_machine": 3, "unrelated": 9}, 1.0) == \
        "LowCmd rejected: wrong mode_machine; further ones are summarised every 5 s"
    assert log.update({"mode_machine": 3}, 7.0) == "2 LowCmds rejected in 6 s: wrong mode_machine"
