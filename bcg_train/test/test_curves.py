"""bcg-curves: PNGs of several runs and the windowed table that makes a comparison reproducible."""
import csv

import pytest

from bcg_train.curves import main, parse_windows


def write_run(folder, values):
    """A run folder whose metrics.csv has iterations 1..len(values), env steps 100 per iteration and
    'add/delta_abs_mean' = values (None: an empty cell)."""
    folder.mkdir()
    with open(folder / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration", "env_steps", "wall_clock_s", "add/delta_abs_mean"])
        for i, v in enumerate(values, 1):
            w.writerow([i, 100 * i, 0.5 * i, "" if v is None else v])
    return folder


def test_windows_table_holds_each_runs_mean_per_window(tmp_path, capsys):
    a = write_run(tmp_path / "bundle", [1.0, 3.0, 5.0, 7.0])
    b = write_run(tmp_path / "plain", [2.0, None, 4.0, 8.0])
    out = tmp_path / "out"
    assert main([str(a), str(b), "-o", str(out), "--metric", "add/delta_abs_mean", "--windows", "1-2,3-4"]) == 0
    table = (out / "windows.md").read_text()
    assert table.startswith("runs: bundle / plain")
    assert "| 1-2 | 2 / 2 |" in table           # plain's empty cell is left out of its mean
    assert "| 3-4 | 6 / 6 |" in table
    assert (out / "curves_vs_env_steps.png").is_file()
    assert table in capsys.readouterr().out


@pytest.mark.parametrize("text", ["1-50,60", "50-1", "a-b", "1-"])
def test_bad_windows_are_refused_by_name(text, tmp_path, capsys):
    with pytest.raises(ValueError, match="FIRST-LAST"):
        parse_windows(text)
    run = write_run(tmp_path / "run", [1.0])
    assert main([str(run), "-o", str(tmp_path / "out"), "--windows", text]) == 1
    assert "--windows" in capsys.readouterr().err and not (tmp_path / "out").exists()
