"""Imports point down the layers of docs/architecture.md, read from the source with ``ast``
(every import statement, also those inside functions), so a lazy import cannot hide an
upward arrow."""
from __future__ import annotations

import ast
import subprocess
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


def module_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (any import, also inside a function;
    ``from cdfgnn.x import name`` resolves to ``cdfgnn.x.name`` when that is a module)."""
    names = {module_name(p): p for p in modules()}

    def resolve(target: str, src: str) -> str | None:
        while target and target not in names:
            target = target.rpartition(".")[0]
        # a package's own __init__ and its ancestors are not edges (importing a submodule
        # runs them; that is not a cycle between modules)
        if not target or target == src or src.startswith(target + "."):
            return None
        return target

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cdfgnn"):
                edges |= {resolve(f"{node.module}.{a.name}", name) for a in node.names}
        edges |= {resolve(t, name) for _, t in imported(path)}
        graph[name] = {e for e in edges if e is not None}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_between_modules():
    """No two modules import each other, directly or around a loop, even lazily: a lazy
    import that closes a loop hides a dependency that goes both ways."""
    assert cycles(module_graph()) == []


def test_the_cycle_finder_finds_a_lazy_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_pricing_a_record_imports_no_torch():
    """Pricing is a pure function of a record and a cluster: repricing (the claims'
    device columns, `cdfgnn reprice`, `compare`'s sweeps) loads no torch."""
    code = ("import sys, cdfgnn.pricing.record, cdfgnn.pricing.roofline\n"
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
