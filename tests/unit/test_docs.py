"""The docs speak to users: they never point at the project's issue tracker or its test files,
which users of an installed lakectl do not have, and every relative link resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_no_page_refers_to_issues_or_test_files() -> None:
    """Architecture decisions (docs/decisions) are for those who work on lakectl: they cite the
    tests that hold a decision. Every other page is for users."""
    found = []
    for page in PAGES:
        for_users = "decisions" not in page.parts
        for number, line in enumerate(page.read_text().splitlines(), 1):
            test_file = for_users and re.search(r"\btests/[\w/]+\.py\b", line)
            if test_file or re.search(r"\bissues? #?\d+\b", line, re.I):
                found.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_relative_links_resolve() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, "\n".join(broken)
