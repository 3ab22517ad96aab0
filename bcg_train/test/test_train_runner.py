"""The runner: exact resume after Ctrl-C, atomic checkpoints, logs and curves; PPO through the same loop."""
import csv
import os
import signal

import pytest
import torch

from bcg_train.checkpoint import CheckpointError, find_checkpoint, load_checkpoint, save_atomic
from bcg_train.runner import Runner, make_algorithm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WALL_CLOCK_COLUMNS = ("wall_clock_s",)


def train(env, cfg, run_dir, resume=None):
    runner = Runner(make_algorithm(env, cfg), cfg, run_dir, {"motion": "toy"})
    if resume is not None:
        runner.resume(resume)
    return runner, runner.train()


def csv_rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in WALL_CLOCK_COLUMNS} for row in csv.DictReader(f)]


def interrupting(env_class, after_steps):
    """An env that sends this process SIGINT (Ctrl-C) during its `after_steps`-th step."""
    class Interrupting(env_class):
        def step(self, actions):
            self.calls = getattr(self, "calls", 0) + 1
            if self.calls == after_steps:
                os.kill(os.getpid(), signal.SIGINT)
            return super().step(actions)
    return Interrupting


@pytest.mark.parametrize("algorithm", ["shac", "ppo"])
def test_resume_after_ctrl_c_reproduces_the_uninterrupted_run(algorithm, toy_env_class, tiny_config_factory, tmp_path):
    cfg = tiny_config_factory(algorithm, iterations=4, checkpoint_every=3)
    straight_runner, _ = train(toy_env_class(num_envs=8), cfg, tmp_path / "straight")

    # Ctrl-C in iteration 2's rollout (8 steps per iteration): it finishes, saves, and returns
    runner, last = train(interrupting(toy_env_class, after_steps=12)(num_envs=8), cfg, tmp_path / "split")
    assert runner.iteration == 2 and last.name == "iter_000002.pt"
    resumed_runner, last = train(toy_env_class(num_envs=8), cfg, tmp_path / "split", resume=tmp_path / "split")
    assert resumed_runner.iteration == 4 and last.name == "iter_000004.pt"

    straight = straight_runner.algorithm.policy().state_dict()
    resumed = resumed_runner.algorithm.policy().state_dict()
    assert straight.keys() == resumed.keys()
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
    assert csv_rows(tmp_path / "straight") == csv_rows(tmp_path / "split")
    assert [r["iteration"] for r in csv_rows(tmp_path / "split")] == ["1", "2", "3", "4"]
    for name in ("curves_vs_iteration.png", "curves_vs_env_steps.png", "curves_vs_wall_clock_s.png",
                 "curves_vs_env_env_steps_total.png"):
        assert (tmp_path / "split" / "curves" / name).is_file(), name
    assert any((tmp_path / "split" / "tensorboard").iterdir())


def test_checkpoint_contents_and_pruning(toy_env_class, tiny_config_factory, tmp_path):
    cfg = tiny_config_factory("shac", iterations=4, checkpoint_every=1)
    cfg.runner.keep_checkpoints = 2
    runner, last = train(toy_env_class(num_envs=8), cfg, tmp_path)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["iter_000003.pt", "iter_000004.pt"]
    state = load_checkpoint(tmp_path)
    assert state["iteration"] == 4 and state["algorithm_name"] == "shac"
    assert state["config"]["shac"]["horizon"] == 8 and state["run_info"] == {"motion": "toy"}
    assert state["dims"] == {"obs": 12, "act": 2, "add": 4}
    assert state["contract"]["motion"] == '"toy_circle"'


def test_a_crash_while_writing_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "iter_000001.pt"
    save_atomic({"iteration": 1, "weights": torch.arange(5.0)}, path)

    def crash_midway(state, f):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt  # e.g. Ctrl-C or the machine going down while writing

    monkeypatch.setattr(torch, "save", crash_midway)         # checkpoint.py imports torch when it saves
    with pytest.raises(KeyboardInterrupt):
        save_atomic({"iteration": 2, "weights": torch.zeros(5)}, path)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["iter_000001.pt"]  # no temp file left behind
    state = load_checkpoint(path)
    assert state["iteration"] == 1 and torch.equal(state["weights"], torch.arange(5.0))


def test_a_checkpoint_of_another_format_is_refused_by_name(tmp_path):
    path = tmp_path / "iter_000001.pt"
    torch.save({"iteration": 1, "format": 2}, path)
    with pytest.raises(CheckpointError, match="format 2, this bcg_train reads format 3"):
        load_checkpoint(path)


def test_unusable_checkpoints_are_refused_by_name(tmp_path):
    with pytest.raises(CheckpointError, match="no iter_"):
        find_checkpoint(tmp_path)
    bad = tmp_path / "iter_000001.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="iter_000001.pt: cannot be read"):
        load_checkpoint(tmp_path)


def test_ppo_runs_and_logs_the_same_reward_terms(toy_env_class, tiny_config_factory, tmp_path):
    cfg = tiny_config_factory("ppo", iterations=3, checkpoint_every=3)
    runner, last = train(toy_env_class(num_envs=8), cfg, tmp_path)
    rows = csv_rows(tmp_path)
    assert len(rows) == 3
    for key in ("reward/add", "reward/effort", "reward/total", "loss/value", "loss/surrogate", "add/loss"):
        assert all(r[key] not in ("", "nan") for r in rows), key
    assert float(rows[-1]["env_steps"]) == 3 * 8 * 8


def test_training_sets_the_garbage_collector_and_restores_it(toy_env_class, tiny_config_factory, tmp_path):
    """While the loop runs, what existed before it is frozen out of the collector's scans and the
    youngest generation waits for YOUNG_THRESHOLD allocations; afterwards both are as they were,
    also when training stops with an error."""
    import gc

    from bcg_train.garbage_collection import YOUNG_THRESHOLD
    before, frozen_before = gc.get_threshold(), gc.get_freeze_count()
    seen = []

    class Watching(toy_env_class):
        def step(self, actions):
            seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
            if len(seen) == 20:
                raise RuntimeError("stop here")
            return super().step(actions)
    cfg = tiny_config_factory("shac", iterations=4)
    with pytest.raises(RuntimeError, match="stop here"):
        train(Watching(num_envs=8), cfg, tmp_path / "run")
    assert {threshold for threshold, _ in seen} == {YOUNG_THRESHOLD} and min(n for _, n in seen) > frozen_before
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen_before



def stand_in_screen(monkeypatch, rows_code):
    """Make BackgroundScreen run a stand-in for bcg-screen that writes screen.json as it does (the rows
    from `rows_code`, a Python expression over `its`: the run's checkpoint iterations; the pick: the
    standing row with the lowest tracking_cm) and make its poll wait for that process, so what the runner
    sees does not depend on timing."""
    import sys

    from bcg_train import background_screen
    script = ("import json, pathlib, sys; run = pathlib.Path(sys.argv[1]); "
              "its = sorted(int(p.stem[5:]) for p in (run / 'checkpoints').glob('iter_*.pt')); "
              f"rows = {rows_code}; best = min(rows, key=lambda r: r['tracking_cm']); "
              "(run / 'screen' / 'screen.json').write_text(json.dumps(dict(rows=rows, pick=best)))")
    cls = background_screen.BackgroundScreen
    real_init, real_poll = cls.__init__, cls.poll

    def init(self, run_dir, every, seeds):
        real_init(self, run_dir, every, seeds)
        assert self.command[-4:] == ["--every", str(every), "--seeds", str(seeds)]
        self.command = [sys.executable, "-c", script, str(run_dir)]
    monkeypatch.setattr(cls, "__init__", init)
    monkeypatch.setattr(cls, "poll", lambda self: (self.wait(), real_poll(self))[1])


ROW = ("dict(iteration=i, falls_reference=0, falls_hold=0, time_up_s=15.0, tracking_cm={}, tracking_root_xy_cm=4.0, "
       "self_contact_s=0.0)")


def test_screening_beside_training_logs_mujoco_and_keeps_the_pick(toy_env_class, tiny_config_factory, tmp_path,
                                                                  monkeypatch):
    """With runner.screen_every the runner starts a screening process at those checkpoints (a stand-in
    picking iteration 2), logs the screened rows as mujoco/*, draws them, and never prunes the pick."""
    import json
    stand_in_screen(monkeypatch, "[" + ROW.format("50.0 - (i == 2) * 10 + i") + " for i in its]")
    cfg = tiny_config_factory("shac", iterations=6, checkpoint_every=1)
    cfg.runner.keep_checkpoints, cfg.runner.screen_every, cfg.runner.screen_seeds = 2, 2, 1
    runner, _ = train(toy_env_class(num_envs=8), cfg, tmp_path)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["iter_000002.pt", "iter_000005.pt", "iter_000006.pt"]       # the pick survives pruning
    assert json.loads((tmp_path / "screen" / "screen.json").read_text())["pick"]["iteration"] == 2
    assert runner.screened["mujoco/iteration"] == 6 and runner.screened["mujoco/time_up_s"] == 15.0
    logged = [r for r in csv_rows(tmp_path) if r.get("mujoco/iteration")]
    assert [r["mujoco/iteration"] for r in logged] == ["2.0", "4.0"]     # each arrived an iteration after its start
    assert (tmp_path / "curves" / "mujoco.png").is_file()          # the screened checkpoints drawn


def test_screening_patience_stops_training_once_the_pick_is_not_beaten(toy_env_class, tiny_config_factory, tmp_path,
                                                                       monkeypatch, capsys):
    """runner.screen_patience 2: the stand-in always picks iteration 2, so training stops once the second
    checkpoint after it (6) is screened, at the next iteration (7 of 20 planned), its checkpoint saved.
    The patience check reads screen.json once per screening that changed it, not every iteration."""
    from bcg_train import background_screen
    from bcg_train import runner as runner_module
    reads = []
    real_read = background_screen.read_screen
    for module in (background_screen, runner_module):
        monkeypatch.setattr(module, "read_screen", lambda run_dir: reads.append(1) or real_read(run_dir))
    stand_in_screen(monkeypatch, "[" + ROW.format("40.0 + (i != 2)") + " for i in its if i % 2 == 0]")
    cfg = tiny_config_factory("shac", iterations=20, checkpoint_every=2)
    cfg.runner.screen_every, cfg.runner.screen_patience = 2, 2
    runner, last = train(toy_env_class(num_envs=8), cfg, tmp_path)
    assert runner.iteration == 7 and last.name == "iter_000007.pt"
    assert "2 checkpoints screened after the pick have not beaten it" in capsys.readouterr().err
    # pruning at checkpoints 2, 4, 6, 7; each screening (of 2, 4, 6): poll and the patience check; the last poll
    assert len(reads) == 4 + 2 * 3 + 1


def test_the_screen_report_is_read_again_only_when_screen_json_changed(tmp_path, monkeypatch):
    """`BackgroundScreen.report` reads screen.json once per change (its inode, mtime or size), and says
    None while there is none or it cannot be read (read again at the next call)."""
    import json

    from bcg_train import background_screen
    reads = []
    real_read = background_screen.read_screen
    monkeypatch.setattr(background_screen, "read_screen", lambda run_dir: reads.append(1) or real_read(run_dir))
    screen = background_screen.BackgroundScreen(tmp_path, every=2, seeds=1)
    path = tmp_path / background_screen.SCREEN_DIR / background_screen.SCREEN_FILE
    assert screen.report() is None and reads == []
    path.parent.mkdir()
    path.write_text("{")                                                # being written: unreadable
    assert screen.report() is None and screen.report() is None and len(reads) == 2
    path.write_text(json.dumps({"rows": [{"iteration": 2}]}))
    assert [screen.report() for _ in range(5)] == [{"rows": [{"iteration": 2}]}] * 5 and len(reads) == 3
    path.write_text(json.dumps({"rows": [{"iteration": 2}, {"iteration": 4}]}))
    assert len(screen.report()["rows"]) == 2 and len(reads) == 4
