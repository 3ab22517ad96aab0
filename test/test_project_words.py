"""The repository speaks of the project alone: no machine's absolute paths, no pointer to documents a
clone does not have, and no words of the workplace it was built in (tracker numbers, machine loans)."""
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "an absolute path of a build machine": re.compile(r"/work/|/home/\w+/"),
    "a document outside the repository": re.compile(r"shared/docs"),
    "a tracker's item number": re.compile(r"\b[Ii]ssues? #?\d+"),
    "a machine-loan word": re.compile(r"\b(lent|lending|give_back)\b"),
}


def tracked_text_files():
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split("\0")):
        path = REPO / name
        if path.is_file() and b"\0" not in path.read_bytes()[:4096]:
            yield name, path


def offending_lines(text: str):
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in FORBIDDEN.items():
            if pattern.search(line):
                yield f"{number}: {what}: {line.strip()[:120]}"


def test_the_patterns_catch_what_they_name():
    text = "see /work/main/x\n../shared/docs/METHOD.md\nas issue 16 asks\nwhen a GPU is lent\nplain line\n"
    assert [line.split(":")[0] for line in offending_lines(text)] == ["1", "2", "3", "4"]


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git checkout to list tracked files")
def test_no_tracked_file_speaks_of_anything_but_the_project():
    found = [f"{name}:{hit}" for name, path in tracked_text_files()
             for hit in offending_lines(path.read_text(errors="replace"))
             if name != "test/test_project_words.py"]
    assert not found, "\n".join(found)
