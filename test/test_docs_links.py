"""The user's documentation holds together: every relative link in README.md, docs/, policies/ and
bench/results/ points at a file that exists (and, with an anchor, at a heading of it), the README keeps
the commands CI and users run, and every section the code cites by name ("README's \"...\"",
"docs/method.md, \"...\"") is still a heading of that file."""
import re
from pathlib import Path
from typing import Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("bcg", "bcg_train", "bcg_policy_node", "bcg_sim_bridge", "config", "tools", "bench", "launch", "test")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
CITED_SECTION = re.compile(r"""(README|docs/[\w-]+\.md)(?:'s|,)\s*"([^"\n]{3,80})\"""")


def documents() -> List[Path]:
    """The Markdown files a user reads: README.md, docs/, policies/, bench/results/ (every level)."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "policies").glob("*.md")),
             *sorted((ROOT / "bench" / "results").rglob("*.md"))]
    return [path for path in found if path.is_file()]


def prose(text: str) -> str:
    """`text` without fenced code blocks and inline code, where brackets are command syntax."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(path: Path) -> Iterator[str]:
    for match in LINK.finditer(prose(path.read_text(encoding="utf-8"))):
        target = match.group(1)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target):     # http:, https:, mailto: are not checked here
            yield target


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, code marks and punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path: Path) -> List[str]:
    return [m.group(1) for m in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8")))]


def anchors(path: Path) -> Set[str]:
    return {slug(h) for h in headings(path)}


def broken_links() -> List[Tuple[str, str, str]]:
    broken = []
    for doc in documents():
        for target in links(doc):
            file_part, _, anchor = target.partition("#")
            resolved = (doc.parent / file_part).resolve() if file_part else doc
            where = str(doc.relative_to(ROOT))
            if not resolved.exists():
                broken.append((where, target, "no such file"))
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append((where, target, "no such heading"))
    return broken


def test_every_document_is_found():
    names = {str(path.relative_to(ROOT)) for path in documents()}
    assert {"README.md", "policies/README.md", "bench/results/README.md", "docs/method.md"} <= names


def test_every_relative_link_resolves():
    assert broken_links() == []


def test_the_link_check_sees_a_broken_link(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("# Title\n[here](missing.md) [ok](doc.md#title) [bad](doc.md#nothing) `[code](x.md)`\n"
                   "```\n[fenced](y.md)\n```\n[web](https://example.org)\n")
    assert list(links(doc)) == ["missing.md", "doc.md#title", "doc.md#nothing"]
    assert slug("Against Unitree's MuJoCo simulator") == "against-unitrees-mujoco-simulator"
    assert slug("The differentiable simulator (`bcg_train.diffsim`)") == "the-differentiable-simulator-bcg_traindiffsim"
    assert "title" in anchors(doc) and "nothing" not in anchors(doc)


def test_readme_keeps_the_commands_users_and_ci_run():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "tools/test.sh" in ci
    for command in ("tools/test.sh", "tools/main.sh", "bcg-train --motion", "mujoco_check.launch.py",
                    "g1_run.launch.py", "bench/results/any_motion/table.md"):
        assert command in readme, command
    assert "RUN/policy/shac_<label>_k300.onnx" in readme


def cited_sections() -> Iterator[Tuple[str, str, str]]:
    """(citing file, cited document, section) for every section the code, configs and scripts cite by name."""
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".yaml", ".sh") or "results" in path.parts:
                continue
            for match in CITED_SECTION.finditer(path.read_text(encoding="utf-8", errors="replace")):
                document = "README.md" if match.group(1) == "README" else match.group(1)
                yield str(path.relative_to(ROOT)), document, match.group(2)


@pytest.mark.parametrize("citing, document, section", list(cited_sections()))
def test_sections_the_code_cites_exist(citing, document, section):
    assert (ROOT / document).is_file(), f"{citing} cites {document}"
    assert any(h.startswith(section) for h in headings(ROOT / document)), \
        f"{citing} cites {document}, \"{section}\": no such heading"
