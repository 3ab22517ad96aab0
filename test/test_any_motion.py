"""bench/any_motion.py without training: its held-out list keeps its promises (at least six 10-15 s
windows covering the five takes, none overlapping a window a shipped policy was trained on), and its
table and last line say what the rows say."""
from pathlib import Path

import pytest

from bcg.motion import MotionSource
from bcg.motion.segments import named_segments

WINDOWS = Path(__file__).resolve().parents[1] / "bench" / "any_motion_windows.yaml"


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("any_motion")


def test_the_held_out_windows_cover_every_take_and_overlap_no_trained_window(bench):
    windows = [MotionSource.parse(w) for w in bench.load_windows(WINDOWS)]
    assert len(windows) >= 6
    assert {w.path.name for w in windows} == {s.file for s in named_segments().values()}     # all five takes
    trained = [(s.file, s.start_s, s.end_s) for s in named_segments().values()]
    trained += [("dance1_subject1.csv", 5.0, 20.0), ("dance1_subject1.csv", 70.0, 85.0)]    # the recipe's own
    for w in windows:
        assert 10.0 <= w.end_s - w.start_s <= 15.0, w
        for file, start, end in trained:
            assert file != w.path.name or w.end_s <= start or w.start_s >= end, (w, file, start, end)


def test_the_paper_motions_list_names_the_four_segments_of_the_paper(bench):
    assert bench.load_windows(WINDOWS.with_name("paper_motion_windows.yaml")) == ["jump", "dance", "run", "fight"]


def test_settings_reach_every_new_training_and_a_resume_keeps_its_own(bench, tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(bench.subprocess, "run", lambda command, **kw: commands.append(command) or
                        type("Done", (), {"returncode": 0})())
    bench.train("run", tmp_path / "new", "cpu", tmp_path / "new.log", ["env.sim.kappa=50", "env.lead_in_s=1"])
    (tmp_path / "old" / "checkpoints").mkdir(parents=True)
    (tmp_path / "old" / "checkpoints" / "iter_000025.pt").write_bytes(b"")
    bench.train("run", tmp_path / "old", "cpu", tmp_path / "old.log", ["env.sim.kappa=50"])
    assert commands == [["bcg-train", "--motion", "run", "--run-dir", str(tmp_path / "new"),
                         "--set", "env.sim.kappa=50", "--set", "env.lead_in_s=1"],
                        ["bcg-train", "--resume", str(tmp_path / "old")]]


def test_the_table_and_last_line_report_every_window(bench):
    standing = dict(motion="a.csv@0:15", label="a_0-15", pick="p.onnx", falls_reference=0, falls_rest=0,
                    falls_hold=0, tracking_cm=20.0, tracking_root_xy_cm=3.0, root_offset_m=0.3, env_steps=1_000_000,
                    train_hours=1.0, standing=True)
    falling = {**standing, "motion": "b.csv@0:15", "falls_hold": 2, "standing": False, "env_steps": 5, "train_hours": 9}
    screened = [dict(iteration=i, falls_reference=f_ref, falls_hold=f_hold, time_up_s=up, tracking_cm=cm,
                     tracking_root_xy_cm=5.0, root_offset_m=0.9)
                for i, f_ref, f_hold, up, cm in [(100, 2, 2, 4.2, 80.0), (200, 0, 2, 15.0, 45.0),
                                                 (300, 0, 2, 15.0, 39.3)]]
    closest = bench.closest_to_standing(screened)
    assert closest["iteration"] == 300                       # fewest falls, then longest up, then tracking
    none = dict(motion="c.csv@0:15", label="c_0-15", pick=None, closest=closest, screen_seeds=2,
                trained_iterations=3000, planned_iterations=3000)
    running = {**none, "motion": "d.csv@0:15", "trained_iterations": 1200}
    third = {**standing, "env_steps": 3_000_000, "train_hours": 2.0}
    rows = [standing, falling, none, third, running]
    text = bench.table(rows)
    assert "| `a.csv@0:15` | 0/5 / 0/5 / 0/5 | 20.0 | 3.0 | 0.30 | 1,000,000 | 1.00 |" in text
    assert "0/5 / 0/5 / 2/5" in text
    assert ("| `c.csv@0:15` | no pick; closest, iteration 300 (the trainer's screen, 2 seeds): 0/2 / - / 2/2 | "
            "39.3 | 5.0 | 0.90 | | |") in text
    assert "| `d.csv@0:15` | still training (1200 of 3000 iterations); closest, iteration 300" in text
    assert text.startswith("Trained by `bcg-train --motion WINDOW`.\n")
    paper = bench.table(rows, ["env.sim.contact_model=paper", "env.sim.kappa=50"])
    assert paper.startswith("Trained by `bcg-train --motion WINDOW --set env.sim.contact_model=paper "
                            "--set env.sim.kappa=50`.\n")
    assert bench.summary_line(rows) == "windows_standing=2/5 median_hours=1.50 median_env_steps=2000000"
    assert bench.summary_line([none]) == "windows_standing=0/1 median_hours=nan median_env_steps=nan"
