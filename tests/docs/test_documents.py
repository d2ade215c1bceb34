"""The documents a newcomer reads stand alone: every relative link leads to a file of the
repository (and to a heading of it when it names one), the README links every page of docs/
and the decisions index every decision record, and nothing points to documents outside the
repository (a design document, issue or seed numbers, another checkout's paths)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
                    *(ROOT / "docs" / "decisions").glob("*.md"),
                    *(ROOT / "charts").glob("*/README.md")])
# What a chart user reads too: values comments end up in docs/configuration.md.
READ_BY_USERS = sorted([*DOCUMENTS, *(ROOT / "charts").glob("*/values.yaml"),
                        *(ROOT / "charts").glob("*/Chart.yaml"),
                        *(ROOT / "charts").glob("*/templates/NOTES.txt"),
                        # what `kubectl explain` shows
                        *(ROOT / "crds").glob("*.yaml"),
                        *(ROOT / "charts").glob("*/files/crds/*.yaml")])
OUTSIDE = re.compile(r"DESIGN\.md|team workspace|\bseed \d{3}\b|\bissue #?\d+\b|\.\./shared/",
                     re.IGNORECASE)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def prose(path: Path) -> str:
    """The Markdown without its fenced code blocks (a `# comment` there is no heading)."""
    return FENCE.sub("", path.read_text())


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, a repeated
    heading numbered."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", prose(path), re.MULTILINE):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        candidate, number = slug, 0
        while candidate in found:
            number += 1
            candidate = f"{slug}-{number}"
        found.add(candidate)
    return found


def links(path: Path) -> list[str]:
    return [target for target in LINK.findall(prose(path))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto:


@pytest.mark.parametrize("document", DOCUMENTS, ids=relative)
def test_every_relative_link_leads_into_the_repository(document: Path) -> None:
    broken = []
    for target in links(document):
        file_part, _, anchor = target.partition("#")
        destination = (document.parent / file_part).resolve() if file_part else document
        if not destination.is_relative_to(ROOT) or not destination.exists():
            broken.append(f"{target}: no such file in the repository")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: {relative(destination)} has no heading #{anchor}")
    assert not broken, f"{relative(document)}:\n" + "\n".join(broken)


def test_the_readme_links_every_page_of_the_docs() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(ROOT / "README.md")}
    missing = [relative(page) for page in sorted((ROOT / "docs").glob("*.md"))
               if page.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


def test_the_decisions_index_links_every_record() -> None:
    index = ROOT / "docs" / "decisions" / "README.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for target in links(index)}
    missing = [relative(record) for record in sorted(index.parent.glob("*.md"))
               if record != index and record.resolve() not in linked]
    assert not missing, f"{relative(index)} does not link {missing}"


@pytest.mark.parametrize("document", READ_BY_USERS, ids=relative)
def test_nothing_points_outside_the_repository(document: Path) -> None:
    found = [f"{number}: {line.strip()}"
             for number, line in enumerate(document.read_text().splitlines(), start=1)
             if OUTSIDE.search(line)]
    assert not found, f"{relative(document)} refers to what a reader cannot open:\n" + \
        "\n".join(found)
