"""The docs hold to the code: docs/contracts.md is generated (scripts/contracts.py) and never stale,
the user docs cite nothing outside the repository, name no "seed", carry no run log, and every link
and table they keep by hand resolves."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _contracts():
    spec = importlib.util.spec_from_file_location("contracts", REPO / "scripts" / "contracts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_contracts_doc_is_generated_from_the_code(sysroots):
    contracts = _contracts()
    assert (REPO / "docs" / "contracts.md").read_text() == contracts.document(sysroots), (
        "docs/contracts.md is stale: run .venv/bin/python scripts/contracts.py"
    )


def test_exit_codes_are_read_from_errors_py():
    from hostkit import errors

    codes = {name: value for name, value, _ in _contracts().exit_codes()}
    assert codes == {n: getattr(errors, n) for n in dir(errors) if n.startswith("EXIT_")}


CITATIONS = ("DESIGN", "§", "seeds'")  # sections of design documents that are not in the repository


def test_no_document_outside_the_repository_is_cited():
    """Code, --help and docs cite only what a reader of the repository can open."""
    texts = {f"--help of {name}": text for name, text in _contracts().helps()}
    for path in list((REPO / "hostkit").rglob("*.py")) + list((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]:
        texts[str(path.relative_to(REPO))] = path.read_text()
    cited = {where for where, text in texts.items() if any(c in text for c in CITATIONS)}
    assert not cited, cited


# ----------------------------------------------------------------------------- the user docs

USER_DOCS = sorted((REPO / "docs").glob("*.md"))  # docs/dev/ holds the developers' pages
DEV_DOCS = sorted((REPO / "docs" / "dev").glob("*.md"))
README = REPO / "README.md"
# "seed" as the name of the source documents; not kubelet.preseed, pre-seeded drop-ins, a reseed.
SEED = re.compile(r"\bseeds?'?s?\b", re.I)
# A commit hash: 7-40 hex digits with a letter and a digit, standing alone (not a mask such as
# IRQBALANCE_BANNED_CPUS=0000ff00, a path or a run id's tail), where a commit is named: after
# "commit", "at", "(", a table's "|", or before ")", ",", ":", "'s" or " (".
HASH = re.compile(
    r"(?:(?<=commit )|(?<=\bat )|(?<=\()|(?<=\| ))(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-])"
    r"|(?<![\w/.=-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?=[),:]|'s\b| \()"
)
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def _user_texts() -> dict[str, str]:
    texts = {"README.md": README.read_text()}
    texts.update({str(p.relative_to(REPO)): p.read_text() for p in USER_DOCS})
    return texts


def _seed_cases():
    texts = _user_texts()
    texts.update({f"--help of {name}": text for name, text in _contracts().helps()})
    for where, text in sorted(texts.items()):
        yield pytest.param(where, text, id=where)


@pytest.mark.parametrize(("where", "text"), list(_seed_cases()))
def test_no_seed_wording_for_users(where, text):
    """The source documents are "the production incident", told once in the README; a user cannot
    know what a "seed" is."""
    found = [m.group(0) for m in SEED.finditer(text)]
    assert not found, f"{where} says {found}: write 'the production incident' or 'the original inference actor'"


def test_the_seed_pattern():
    assert SEED.search("the seed's worker") and SEED.search("Seeds 002-004") and SEED.search("the seeds' queue")
    assert not SEED.search("kubelet.preseed: true, a pre-seeded drop-in, hostkit-reseed")


def test_no_commit_hash_or_dated_run_in_user_docs():
    """Run logs (dated rows, commits) belong in CHANGELOG.md; the user docs say what is true now."""
    found = {}
    for where, text in _user_texts().items():
        hits = [m.group(0) for m in HASH.finditer(text)] + [m.group(0) for m in DATE.finditer(text)]
        if hits:
            found[where] = hits
    assert not found, found


def test_the_hash_and_date_patterns():
    assert HASH.search("commit 1706de0 (the jump") and HASH.search("at 2bfa442)") and HASH.search("(8be0868, same")
    assert DATE.search("| 2026-12-06 | 31 min |")
    assert HASH.search("| 2f920ac | 5.5x |") and HASH.search("e500562's code took 30:12")
    for not_a_hash in ("IRQBALANCE_BANNED_CPUS=0000ff00", "20261130T061500Z-1a2b3c", "an ed25519 host key", "(sha256)"):
        assert not HASH.search(not_a_hash), not_a_hash


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown page's headings."""
    out = set()
    for line in text.splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_every_link_of_the_docs_resolves():
    """Relative links of the README and every page of docs/ name a file that exists, and a heading of
    it when they carry an anchor."""
    broken = []
    for page in [README, *USER_DOCS, *DEV_DOCS]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, broken


def test_docs_name_no_moved_page():
    """docs/operator-guide.md and docs/real-kernel-lab.md were split into topic pages; testing,
    architecture and benchmarks moved to docs/dev/. Nothing in the repository points at the old paths."""
    old = re.compile(r"docs/(operator-guide|real-kernel-lab|testing|architecture|benchmarks)\.md|operator guide")
    hits = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        if rel.parts[0] in (".git", ".venv", "build", "dist", ".hostkit") or rel.parts[0].endswith(".egg-info"):
            continue
        if not path.is_file():
            continue
        if (
            path.suffix not in (".py", ".md", ".yml", ".yaml", ".txt", ".sh", ".cfg", ".toml", "")
            and path.name != "Makefile"
        ):
            continue
        if rel == Path("tests/unit/test_docs.py"):
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        hits += [f"{rel}: {m.group(0)}" for m in old.finditer(text)]
    assert not hits, hits


def test_profile_key_table_is_generated_from_the_schema():
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "profile_keys.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_fixture_is_in_the_lab_page():
    from hostkit.lab import fixtures

    page = (REPO / "docs" / "lab.md").read_text()
    missing = [n for n in fixtures.fixture_names() if f"| `{n}` |" not in page]
    assert not missing, f"docs/lab.md's fixture table lacks {missing}"
