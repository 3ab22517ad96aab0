"""One training per run folder: the lock refuses a second live holder, takes over a dead one's, and
bcg-train reports a busy folder before writing anything into it."""
import os
import socket
import subprocess
import sys

import pytest

from bcg_train import cli
from bcg_train.run_lock import LOCK_NAME, RunFolderInUse, RunFolderLock


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_held_folder_is_refused_and_free_again_after(tmp_path):
    run = tmp_path / "run"
    with RunFolderLock(run):
        assert (run / LOCK_NAME).read_text().split() == [socket.gethostname(), str(os.getpid())]
        with pytest.raises(RunFolderInUse, match=f"in use by process {os.getpid()} .*another --run-dir"):
            with RunFolderLock(run):
                pass
        assert (run / LOCK_NAME).exists()              # the refused attempt left the holder's lock alone
    assert not (run / LOCK_NAME).exists()
    with RunFolderLock(run):
        pass


@pytest.mark.parametrize("content", ["{host} {dead}\n", "", "garbage"])
def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path, content):
    (tmp_path / LOCK_NAME).write_text(content.format(host=socket.gethostname(), dead=_dead_pid()))
    with RunFolderLock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text().split() == [socket.gethostname(), str(os.getpid())]
    assert not (tmp_path / LOCK_NAME).exists()


def test_another_host_s_lock_is_not_second_guessed(tmp_path):
    (tmp_path / LOCK_NAME).write_text("some-other-host 12345\n")
    with pytest.raises(RunFolderInUse, match="process 12345 on some-other-host .*remove .*if that run is over"):
        with RunFolderLock(tmp_path):
            pass


@pytest.mark.usefixtures("one_torch_thread")
def test_bcg_train_refuses_a_busy_run_folder_before_writing_to_it(toy_factory, tmp_path, capsys):
    busy, done = tmp_path / "busy", tmp_path / "done"
    small = ["--set", "shac.iterations=1", "--set", "shac.actor_hidden=[16]", "--set", "add.hidden=[16]"]
    assert cli.main(["--preset", "cpu-smoke", "--motion", "jump", "--run-dir", str(done), *small]) == 0
    assert not (done / LOCK_NAME).exists()                              # released at the end
    with RunFolderLock(busy), RunFolderLock(done):
        assert cli.main(["--preset", "cpu-smoke", "--motion", "jump", "--run-dir", str(busy), *small]) \
            == cli.EXIT_USAGE
        assert sorted(p.name for p in busy.iterdir()) == [LOCK_NAME]     # no config.yaml, nothing else
        assert "busy is in use by process" in capsys.readouterr().err
        before = sorted(p.name for p in done.rglob("*"))
        assert cli.main(["--resume", str(done), "--iterations", "2"]) == cli.EXIT_USAGE
        assert "done is in use by process" in capsys.readouterr().err
        assert sorted(p.name for p in done.rglob("*")) == before
    assert len(toy_factory) == 1                                        # no env was built for the refused runs
