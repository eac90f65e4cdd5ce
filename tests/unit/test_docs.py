"""The docs stay true: every path and name docs/architecture.md cites exists, no doc sends
readers outside the repository, and the README's figures are the ones the bench's recorded
results give (`python -m bench.readme`), not a pasted table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bench import readme

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "logbus"
ARCHITECTURE = REPO / "docs" / "architecture.md"

# Backticked tokens that look like paths, `package.Name` references, or CamelCase names.
PATH = re.compile(r"[\w./-]+\.(?:py|pyi|c|md|json|html|css)|[\w./-]+/")
DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
CAMEL = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+")


def _repo_files() -> list[str]:
    skip = {".git", ".venv", "node_modules", "__pycache__"}
    return [p.relative_to(REPO).as_posix() for p in REPO.rglob("*")
            if not skip.intersection(p.relative_to(REPO).parts)]


def _definitions() -> str:
    return "\n".join(p.read_text() for p in SRC.rglob("*.py"))


def _defines(source: str, name: str) -> bool:
    return re.search(rf"^\s*(?:class|def|async def) {re.escape(name)}\b"
                     rf"|^\s*{re.escape(name)}\s*(?::[^=\n]+)?=", source, re.M) is not None


def _cited(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", text))


def missing_citations(text: str, files: list[str], source: str) -> list[str]:
    """The cited paths and names of `text` that the tree no longer has."""
    modules = {p.stem for p in SRC.rglob("*.py")} | {p.name for p in SRC.iterdir() if p.is_dir()}
    missing = []
    for token in sorted(_cited(text)):
        if PATH.fullmatch(token):
            path = token.rstrip("/")
            if not any(f == path or f.endswith("/" + path) for f in files):
                missing.append(f"path {token}")
        elif DOTTED.fullmatch(token) and token.split(".")[0] in modules:
            if not _defines(source, token.split(".")[-1]):
                missing.append(f"name {token}")
        elif CAMEL.fullmatch(token) and not _defines(source, token):
            missing.append(f"name {token}")
    return missing


def test_architecture_cites_only_what_exists() -> None:
    missing = missing_citations(ARCHITECTURE.read_text(), _repo_files(), _definitions())
    assert not missing, f"docs/architecture.md cites what the tree does not have: {missing}"


def test_the_check_finds_a_stale_citation() -> None:
    files, source = _repo_files(), _definitions()
    assert missing_citations("`storage/log_manager.py` `LogManager`", files, source) == []
    stale = "`storage/no_such_module.py`, `NoSuchManager`, `log_manager.NoSuchThing`"
    assert missing_citations(stale, files, source) == [
        "name NoSuchManager", "name log_manager.NoSuchThing", "path storage/no_such_module.py"]


@pytest.mark.parametrize("doc", [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"],
                         ids=lambda p: p.name)
def test_docs_point_inside_the_repository(doc: Path) -> None:
    text = doc.read_text()
    assert "../shared" not in text, f"{doc.name} sends readers outside the repository"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (doc.parent / target).exists(), f"{doc.name} links to a missing {target}"


def test_readme_figures_are_generated_from_the_recorded_results() -> None:
    table = readme.current_table(readme.recorded_runs())
    assert readme.readme_block((REPO / "README.md").read_text()) == table, (
        "README.md's bench table is not the one bench/results/ gives: "
        "run `python -m bench.readme`")
