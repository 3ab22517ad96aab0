"""How dropped and rejected messages are reported (both nodes): the first of each reason at once, then
rate-limited summaries, flushed at once when asked."""
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
    assert log.update({"crc": 1300, "malformed": 0}, 12.0) == \
        "49 LowStates dropped in 7 s: CRC mismatch (a simulator that sends crc 0? set check_state_crc: false)"
    assert log.update({"crc": 1310, "malformed": 2}, 20.0) == \
        "LowState dropped: malformed (wrong size or encoding); further ones are summarised every 5 s"
    assert log.update({"crc": 1310, "malformed": 2}, 26.0) == \
        "11 LowStates dropped in 6 s: 10 CRC mismatch (a simulator that sends crc 0? set check_state_crc: false); " \
        "1 malformed (wrong size or encoding)"
    assert log.totals == {"crc": 1310, "malformed": 2} and str(log) == "1,312 (crc 1,310, malformed 2)"


def test_a_new_reason_is_named_at_once_not_only_in_the_final_summary():
    """The bridge used to log a mode_machine rejection that followed a CRC rejection only at its end."""
    log = DropLog("LowCmd", {"crc": "CRC mismatch", "mode_machine": "wrong mode_machine"}, verb="rejected")
    assert log.update({"crc": 1, "mode_machine": 0}, 0.0) == \
        "LowCmd rejected: CRC mismatch; further ones are summarised every 5 s"
    assert log.update({"crc": 1, "mode_machine": 1}, 0.5) == \
        "LowCmd rejected: wrong mode_machine; further ones are summarised every 5 s"
    assert log.update({"crc": 1, "mode_machine": 1}, 9.0) is None and log.totals == {"crc": 1, "mode_machine": 1}


def test_a_flush_says_what_is_pending_at_once():
    """The node flushes when its phase changes: a summary of drops from before is never logged later,
    when it would read as news of the new phase."""
    log = DropLog("LowState", REASONS, interval_s=5.0)
    log.update({"crc": 1}, 0.0)
    assert log.update({"crc": 80}, 0.2) is None
    assert log.update({"crc": 80}, 0.25, flush=True) == \
        "79 LowStates dropped in 0.25 s: CRC mismatch (a simulator that sends crc 0? set check_state_crc: false)"
    assert log.update({"crc": 80}, 6.0) is None and log.update({"crc": 80}, 6.0, flush=True) is None


def test_counters_of_several_sources_and_other_names():
    log = DropLog("LowCmd", {"crc": "CRC mismatch", "mode_machine": "wrong mode_machine"}, verb="rejected")
    assert log.update({"crc": 0, "mode_machine": 3, "unrelated": 9}, 1.0) == \
        "LowCmd rejected: wrong mode_machine; further ones are summarised every 5 s"
    assert log.update({"mode_machine": 3}, 7.0) == "2 LowCmds rejected in 6 s: wrong mode_machine"
