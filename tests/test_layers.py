"""Imports point down the layers of docs/architecture.md, read from the source with ``ast``
(every import statement, also those inside functions), so a lazy import cannot hide an
upward arrow."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import cdfgnn

PACKAGE = Path(cdfgnn.__file__).parent
#: bottom to top; a module may import its own layer and the layers below it
LAYERS = ["data", "partition", "twins", "cost", "comm", "pricing", "sampling", "models", "methods",
          "train", "report", "experiments", "cli"]
#: the console script ``cdfgnn`` (pyproject.toml: cdfgnn.cli:run)
ENTRY_POINT = "cdfgnn.cli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, wherever it stands;
    ``from cdfgnn import train`` counts as ``cdfgnn.train``, relative imports resolve."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out += [(node.lineno, f"{base}.{a.name}" if base == "cdfgnn" and is_module(a.name)
                     else base) for a in node.names]
    return out


def is_module(name: str) -> bool:
    """Is ``cdfgnn.<name>`` a module or package (not an attribute such as __version__)?"""
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def layer_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "cdfgnn" else None


def upward_imports(allowed_below: dict[str, set[str]]) -> list[str]:
    bad = []
    for path in modules():
        src = layer_of(module_name(path))
        if src not in allowed_below:
            continue
        for line, target in imported(path):
            dst = layer_of(target)
            if dst is not None and dst != src and dst not in allowed_below[src]:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    return bad


def test_layer_table_names_real_packages():
    for layer in LAYERS:
        assert (PACKAGE / layer / "__init__.py").is_file() or (PACKAGE / f"{layer}.py").is_file()


def test_imports_point_down_the_layers():
    """data < partition < twins < cost < comm < pricing < sampling < models < methods < train <
    report < experiments < cli: nothing imports a layer above its own. The top-level helper
    modules (cdfgnn.errors, cdfgnn.arrays, ...) sit below every layer."""
    helpers = {p.stem for p in PACKAGE.glob("*.py")} - {"cli", "__init__"}
    below = {layer: set(LAYERS[:i]) | helpers for i, layer in enumerate(LAYERS)}
    below.update({helper: helpers for helper in helpers})
    assert upward_imports(below) == []


def test_methods_import_neither_train_nor_experiments():
    bad = [f"{p.relative_to(PACKAGE.parent)}:{line} imports {t}"
           for p in (PACKAGE / "methods").rglob("*.py") for line, t in imported(p)
           if layer_of(t) in ("train", "experiments")]
    assert bad == []


def test_only_the_entry_point_is_cli():
    bad = [f"{p.relative_to(PACKAGE.parent)}:{line}" for p in modules()
           if module_name(p) != ENTRY_POINT
           for line, t in imported(p) if t == ENTRY_POINT or t.startswith(ENTRY_POINT + ".")]
    assert bad == []


def test_no_private_name_crosses_a_module():
    """Code shared between modules is public: no ``from cdfgnn.x import _name``."""
    bad = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cdfgnn"):
                bad += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {a.name}"
                        for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []


def test_the_checker_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    """The checker itself: an import inside a function and a relative one are found."""
    pkg = tmp_path / "cdfgnn"
    for layer in ("methods", "train", "experiments"):
        (pkg / layer).mkdir(parents=True)
        (pkg / layer / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("")
    (pkg / "methods" / "m.py").write_text(
        "def f():\n    from cdfgnn.train import loop\n    from ..cli import main\n"
        "    from cdfgnn import experiments\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    found = [t for _, t in imported(pkg / "methods" / "m.py")]
    assert found == ["cdfgnn.train", "cdfgnn.cli", "cdfgnn.experiments"]
    assert len(upward_imports({"methods": {"data"}})) == 3
