"""The repository stands alone: no tracked file points at material outside a clone.

Papers are cited by arXiv id (or venue) and their own section, table, figure or
equation (see "Papers cited" in docs/architecture.md); the architecture and metric
definitions live in docs/architecture.md. A reference to a paper "digest", to a
DESIGN.md or to a shared papers folder would send a reader to files a clone lacks.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(r"digest|DESIGN\.md|shared/papers", re.IGNORECASE)
# "digest" as a word of the code, not a pointer to notes: hash digests and the
# ``rule=digest`` value of the CDFGNN cache's threshold rule (a public parameter).
ALLOWED = re.compile(r"hexdigest|digest_size|\.digest\(|\bdigest\(|rule=digest|[\"']digest[\"']"
                     r"|digest rule|valid: digest, literal|doc=\"digest: ", re.IGNORECASE)


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name]


def _offending_lines(text: str) -> list[str]:
    """``"<line number>: <line>"`` for every line pointing outside the repository."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
            if FORBIDDEN.search(ALLOWED.sub("", line))]


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):  # binary files cannot point anywhere
        return ""


def test_no_tracked_file_points_at_digests_or_design_notes():
    this = Path(__file__).resolve()
    bad = [f"{path.relative_to(ROOT)}:{hit}" for path in _tracked_files()
           if path.resolve() != this and path.is_file() for hit in _offending_lines(_text(path))]
    assert not bad, "references to material outside the repository:\n" + "\n".join(bad)


def test_the_check_catches_pointers_and_spares_hash_digests():
    text = ("# see the CoFree digest Q5\nh.hexdigest()\n# DESIGN.md sec. 4\n"
            "x = hashlib.sha256(b).digest()\n# ../shared/papers/001_cofree.md\n")
    assert _offending_lines(text) == [
        "1: # see the CoFree digest Q5", "3: # DESIGN.md sec. 4",
        "5: # ../shared/papers/001_cofree.md"]


def test_architecture_doc_defines_the_metrics_and_cites_the_papers():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for needed in ("## Metrics", "Epoch time", "modelled on a device profile",
                   "## Papers cited", "arXiv 2408.00232", "arXiv 2308.03209",
                   "arXiv 2509.05207", "arXiv 2303.01277", "Neurocomputing"):
        assert needed in text, needed


# ------------------------------------------ no pointer to an issue, a work item, a snapshot
#: "issue 21", "issue #3", "issue-11", "the issue's", "issue target", "item 5", "items 1-4",
#: "work item", "snapshot": words that point at a tracker or a copy outside the repository
#: ("a rank issues a kernel" and "issue order" are plain English and pass)
OUTSIDE = re.compile(r"\bissues?\s*#?\d+|\bissue-\d+|\bissue['’]s\b|\bissue targets?\b"
                     r"|\bitems?\s+\d+|\bwork items?\b|\bsnapshots?\b", re.IGNORECASE)
#: what a reader reads: every markdown/reST page and the notebook, the config comments, and
#: the claims texts (every report module writes its claims, notes and captions from source)
READ = ("*.md", "*.rst", "*.ipynb", "configs/*.yaml", "configs/*/*.yaml", "cdfgnn/report/*.py")


def _read_files() -> list[Path]:
    files = {p for pattern in READ for p in ROOT.glob(pattern)} | set(ROOT.glob("docs/*.md"))
    tracked = set(_tracked_files())
    return sorted(p for p in files if p in tracked)


def outside_pointers(text: str) -> list[str]:
    """``"<line number>: <line>"`` for every line naming an issue, a work item or a snapshot."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
            if OUTSIDE.search(line)]


def test_docs_readme_and_claims_name_no_issue_item_or_snapshot():
    files = _read_files()
    assert ROOT / "README.md" in files and ROOT / "docs" / "results.md" in files
    assert ROOT / "cdfgnn" / "report" / "claims.py" in files
    bad = [f"{p.relative_to(ROOT)}:{hit}" for p in files for hit in outside_pointers(_text(p))]
    assert not bad, "pointers outside the repository:\n" + "\n".join(bad)


def test_the_outside_check_catches_each_form():
    text = ("see issue 21\nissue #4 says\nthe issue's 35%\nissue-11 work\nissue target\n"
            "item 8 of it\na stored snapshot\nthe thread issues an op\nin issue order\n"
            "items per batch\n")
    assert [hit.split(":")[0] for hit in outside_pointers(text)] == [
        "1", "2", "3", "4", "5", "6", "7"]


def test_claims_rows_name_no_issue():
    """The claims texts themselves, as the tables print them (claim, paper value, note)."""
    from cdfgnn.report.claims import ClaimSpec
    from cdfgnn.report.registry import discover
    import importlib
    import pkgutil

    import cdfgnn.report as pkg

    discover()
    texts = []
    for mod in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"cdfgnn.report.{mod.name}")
        for value in vars(module).values():
            if isinstance(value, tuple) and value and all(isinstance(v, ClaimSpec) for v in value):
                texts += [t for spec in value for t in (spec.claim, spec.paper_value, spec.note)]
    assert len(texts) > 100
    assert not [t for t in texts if OUTSIDE.search(t)]


# ------------------------------------------------ quoted constants are the shipped ones
def test_efficiency_constants_quoted_in_docs_are_the_shipped_ones():
    """A doc that quotes a pricing constant (`launch` 3.36, `stream_bw` of 0.34, ...) quotes
    the value of the shipped efficiency file, to the digits it prints."""
    from dataclasses import fields

    from cdfgnn.pricing.efficiency import Efficiency, load_efficiency

    shipped = load_efficiency()
    names = [f.name for f in fields(Efficiency) if isinstance(getattr(shipped, f.name), float)]
    quoted = re.compile(r"`(" + "|".join(names) + r")`\s*(?:of\s+|=\s*|\(|is\s+)?(\d+\.\d+)")
    seen, bad = 0, []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(_text(path).splitlines(), 1):
            for name, text in quoted.findall(line):
                seen += 1
                decimals = len(text.split(".")[1])
                if abs(float(text) - getattr(shipped, name)) > 0.5 * 10 ** -decimals + 1e-12:
                    bad.append(f"{path.relative_to(ROOT)}:{n}: `{name}` {text}, shipped "
                               f"{getattr(shipped, name)}")
    assert seen, "no quoted constant found: the pattern no longer matches the docs"
    assert not bad, "\n".join(bad)


def test_readme_layout_lists_every_package_and_doc():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("```", 2)[1]
    packages = sorted(p.parent.name for p in (ROOT / "cdfgnn").glob("*/__init__.py"))
    missing = [f"cdfgnn/{name}/" for name in packages if f"cdfgnn/{name}/" not in layout]
    missing += [p.name for p in (ROOT / "docs").glob("*.md") if p.name not in layout]
    missing += [p.name for p in (ROOT / "configs").glob("*.yaml") if p.name not in layout]
    assert not missing, f"README's layout does not list: {missing}"
