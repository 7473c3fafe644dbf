"""Every command of the README runs, on a tiny configuration where the real one is long.

The commands are read from the README itself: every line of its ```bash blocks (a
trailing backslash joins lines, ``# ...`` comments are dropped, ``a && b`` is two
commands) and the command column of its configurations table. :func:`plan` says how each
is checked, and a command it does not recognise fails the test (a new README command needs
a rule here):

* install steps (``python3 -m venv``, ``. .venv/bin/activate``, ``pip install``) are what
  .ci/run does; ``pytest`` is this suite;
* what needs GPUs, a cluster or a download (``configs/full.yaml``, a cluster profile) and
  override files layered on a base (long runs) are dry runs, ``snakemake -n``; a
  multi-host ``torchrun`` has its ``cdfgnn`` arguments parsed;
* every other ``snakemake`` command runs in the shared smoke build (tests/smoke.py) with
  configs/smoke.yaml for the default quick.yaml, after the files it should build are
  removed, so that it builds them; ``--report`` writes the HTML report;
* ``cdfgnn ...`` runs with the tiny settings of :func:`tiny` (2 epochs, the tiny scale,
  three methods for ``compare``), in the smoke tree or, for a block that imports graphs
  from files, in a folder holding tiny versions of those files;
* ``jupyter execute`` runs the review notebook on the smoke tree.

With ``CDFGNN_README_BIN`` set (.ci/run: a venv with the README's plain install, no
extra) the commands run from that venv, and those the README marks as needing an extra
are skipped: the plain install must run everything else. Without it the suite checks
the README's parsing and rules but skips running the commands unless
``CDFGNN_README_COMMANDS=1`` asks for it (:data:`RUN_COMMANDS`).
"""
from __future__ import annotations

import gzip
import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from smoke import BIN, REPO, job_counts, snakemake, tool_env

README = REPO / "README.md"
PLAIN = bool(os.environ.get("CDFGNN_README_BIN"))
#: the commands themselves run where they mean most: on the README's own install
#: (.ci/run's second stage sets CDFGNN_README_BIN); in the suite, on its test install,
#: only when asked (CDFGNN_README_COMMANDS=1), which keeps the suite under 10 minutes
RUN_COMMANDS = PLAIN or bool(os.environ.get("CDFGNN_README_COMMANDS"))
#: commands the README marks as needing an extra (the install line or the text beside it)
EXTRAS = {"jupyter": "notebook", "profiles/slurm": "cluster", "--format dgl": "crosscheck"}


# ------------------------------------------------------------------ reading the README
def bash_blocks(text: str) -> list[list[str]]:
    """The commands of every ```bash block, in order, one list per block."""
    blocks, current = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if current is None:
            if stripped == "```bash":
                current = []
            continue
        if stripped == "```":
            blocks.append(_commands(current))
            current = None
        else:
            current.append(stripped)
    return blocks


def _commands(lines: list[str]) -> list[str]:
    joined, buf = [], ""
    for line in lines:
        if buf:
            line = buf + " " + line
        if line.endswith("\\"):
            buf = line[:-1].rstrip()
            continue
        buf = ""
        line = re.split(r"\s#\s|\s#$", " " + line, maxsplit=1)[0].strip()
        if line and not line.startswith("#"):
            joined += [c.strip() for c in line.split(" && ")]
    return joined


def table_commands(text: str) -> list[str]:
    """The command column of the configurations table (rows naming a configs/ file)."""
    out = []
    for line in text.splitlines():
        if line.startswith("| `configs/"):
            cell = line.rstrip(" |").rsplit("|", 1)[-1].strip()
            if cell.startswith("`snakemake"):
                out.append(cell.strip("`"))
    return out


# ------------------------------------------------------------------ the plan
@dataclass
class Step:
    """How one README command is checked: ``kind`` is install | suite | dry | parse |
    build | report | cdfgnn | notebook; ``argv`` what runs; ``extra`` the install extra
    it needs ('' for none)."""

    command: str
    kind: str
    argv: list[str] = field(default_factory=list)
    extra: str = ""


def plan(command: str) -> Step:
    argv = shlex.split(command)
    extra = next((e for key, e in EXTRAS.items() if key in command), "")
    head = argv[0]
    if head in ("python3", ".", "pip") or command.startswith("python3 -m venv"):
        return Step(command, "install")
    if head == "pytest":
        return Step(command, "suite")
    if head == "torchrun":
        return Step(command, "parse", argv[argv.index("cdfgnn.cli") + 1:])
    if head == "jupyter":
        return Step(command, "notebook", argv, extra)
    if head == "cdfgnn":
        return Step(command, "cdfgnn", argv[1:], extra)
    if head == "snakemake":
        files = _configfiles(argv)
        if "--report" in argv:
            return Step(command, "report", argv, extra)
        if "-n" in argv or "configs/full.yaml" in files or "--workflow-profile" in argv \
                or len(files) > 1:
            return Step(command, "dry", argv, extra)
        return Step(command, "build", argv, extra)
    raise AssertionError(f"README command with no rule in tests/test_readme_commands.py: "
                         f"{command!r}")


def _configfiles(argv: list[str]) -> list[str]:
    if "--configfile" not in argv:
        return []
    rest = argv[argv.index("--configfile") + 1:]
    return [a for a in rest[: next((i for i, a in enumerate(rest) if a.startswith("-")),
                                   len(rest))]]


def readme_steps() -> list[list[Step]]:
    text = README.read_text(encoding="utf-8")
    return [[plan(c) for c in block] for block in bash_blocks(text)] + \
        [[plan(c)] for c in table_commands(text)]


def test_every_readme_command_has_a_rule_and_the_install_has_no_extra():
    steps = [s for block in readme_steps() for s in block]
    kinds = {s.kind for s in steps}
    assert {"install", "dry", "build", "report", "cdfgnn", "notebook", "parse"} <= kinds
    quick_start = next(s.command for s in steps if s.kind == "install"
                       and "constraints.txt" in s.command)
    assert quick_start == "pip install -c constraints.txt -e ."    # the plain install
    # what the README's commands need from the plain install is in the base dependencies
    try:
        import tomllib
    except ModuleNotFoundError:          # Python 3.10
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"]).lower()
    assert "pygments" in base                      # `snakemake --report`
    notebook = " ".join(project["optional-dependencies"]["notebook"]).lower()
    assert "nbclient" in notebook and "ipykernel" in notebook   # `jupyter execute`
    assert '".[notebook]"' in README.read_text()


def test_the_reader_joins_lines_drops_comments_and_splits_chains():
    text = ("```bash\na --x 1 \\\n  --y 2   # note\n# only a comment\nb && c  # c\n```\n"
            "  ```bash\n  d\n  ```\n")
    assert bash_blocks(text) == [["a --x 1 --y 2", "b", "c"], ["d"]]
    with pytest.raises(AssertionError, match="no rule"):
        plan("make all")


# ------------------------------------------------------------------ running them
#: tiny input files for a block that imports graphs (`cdfgnn prepare --from ...`)
EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2)]


def make_inputs(folder: Path) -> None:
    """Tiny versions of every file the README's import examples read."""
    rng = np.random.default_rng(0)
    n = 300
    src, dst = rng.integers(0, n, 1500), rng.integers(0, n, 1500)
    for name in ("edges.txt.gz", "com-dblp.ungraph.txt.gz"):
        with gzip.open(folder / name, "wt") as f:
            f.write("# a random edge list\n" + "".join(f"{a}\t{b}\n" for a, b in zip(src, dst)))
    (folder / "web.mtx").write_text(
        "%%MatrixMarket matrix coordinate pattern symmetric\n5 5 6\n"
        + "".join(f"{b + 1} {a + 1}\n" for a, b in EDGES))
    np.savez(folder / "g.npz", src=np.array(EDGES)[:, 0], dst=np.array(EDGES)[:, 1])
    pd.DataFrame(EDGES).to_csv(folder / "edges.csv", header=False, index=False)
    np.save(folder / "x.npy", rng.standard_normal((5, 4)).astype(np.float32))
    pd.DataFrame([0, 1, 0, 1, 1]).to_csv(folder / "y.csv", header=False, index=False)
    root = folder / "dataset" / "ogbn_arxiv"
    (root / "raw").mkdir(parents=True)
    (root / "split" / "time").mkdir(parents=True)

    def gz(path, arr):
        pd.DataFrame(arr).to_csv(path, header=False, index=False, compression="gzip")

    dgl = _dgl()
    if dgl is not None:                 # the crosscheck extra: a DGL binary graph file
        import torch
        g = dgl.graph((torch.tensor(np.array(EDGES)[:, 0]), torch.tensor(np.array(EDGES)[:, 1])),
                      num_nodes=5)
        dgl.save_graphs(str(folder / "graph.bin"), [g])
    gz(root / "raw" / "edge.csv.gz", np.array(EDGES))
    gz(root / "raw" / "node-feat.csv.gz", np.eye(5, 3))
    gz(root / "raw" / "node-label.csv.gz", np.array([[0], [1], [2], [0], [1]]))
    for k, ids in (("train", [0, 1]), ("valid", [2]), ("test", [3, 4])):
        gz(root / "split" / "time" / f"{k}.csv.gz", np.array(ids)[:, None])


def _dgl():
    """dgl when the crosscheck extra imports (with the graphbolt stand-in), else None."""
    import sys
    import types

    sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    try:
        import dgl
    except Exception:  # noqa: BLE001 - any import failure means: extra not usable here
        return None
    return dgl


def tiny(args: list[str], cwd: Path = Path(".")) -> list[str]:
    """A `cdfgnn` command's arguments made quick: 2 epochs, the tiny scale; `compare` on
    three methods at hidden 8; the benchmark's one quick part, 2 rounds; a small profile."""
    out = list(args)
    sub = out[0]
    if "--scale" in out:
        out[out.index("--scale") + 1] = "tiny"
    if sub in ("train", "compare"):
        if "--epochs" in out:
            out[out.index("--epochs") + 1] = "2"
        else:
            out += ["--epochs", "2"]
    if sub == "compare":
        if "--methods" not in out:
            out += ["--methods", "exact", "sar", "cofree"]
        out += [] if "--hidden" in out else ["--hidden", "8"]
    if sub == "bench":
        out += ["--only", "ledger-op", "--rounds", "2"]
    if sub == "profile":
        out += ["--size", "128", "--repeats", "2"]
    expanded = []
    for a in out:                     # the shell's glob, relative to where it runs
        found = sorted(str(Path(p).relative_to(cwd)) for p in glob(str(cwd / a)))
        expanded += found or [a] if "*" in a else [a]
    return expanded


def run_cdfgnn(args: list[str], cwd: Path) -> tuple[int, str]:
    """`cdfgnn ARGS` in ``cwd``: in this process (quick), or from CDFGNN_README_BIN."""
    if PLAIN:
        proc = subprocess.run([str(BIN / "cdfgnn"), *args], cwd=cwd, env=tool_env(),
                              capture_output=True, text=True, timeout=600)
        return proc.returncode, proc.stdout + proc.stderr
    from cdfgnn.cli import main

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return main(args), ""
    finally:
        os.chdir(old)


def in_tree(argv: list[str], tree: Path) -> list[str]:
    """A README snakemake command for the smoke tree: the repository's Snakefile, paths of
    the repository absolute, configs/smoke.yaml for the default quick.yaml (an override file
    layered on quick.yaml keeps it: it is written for that base, and planned only)."""
    out = ["--snakefile", str(REPO / "Snakefile")]
    files = _configfiles(argv)
    skip = set()
    if files:
        i = argv.index("--configfile")
        skip = set(range(i, i + 1 + len(files)))
    for k, a in enumerate(argv[1:], 1):
        if k in skip:
            continue
        if a.startswith("profiles/"):
            a = str(REPO / a)
        out.append(a)
    if files == ["configs/quick.yaml"]:
        files = []
    files = files or ["configs/smoke.yaml"]
    return out + ["--configfile", *[str(REPO / f) for f in files]]


#: snakemake options followed by one value, and by every word up to the next option
ONE_VALUE = ("--cores", "--report", "--workflow-profile", "-d", "--snakefile")
MANY_VALUES = ("--configfile", "--config", "--resources", "--set-threads")


def targets(argv: list[str]) -> list[str]:
    """The targets named on a snakemake command line (the words no option takes)."""
    out, take = [], 0
    for a in argv[1:]:
        if a.startswith("-"):
            take = 1 if a in ONE_VALUE else -1 if a in MANY_VALUES else 0
        elif take:
            take = take - 1 if take > 0 else take
        else:
            out.append(a)
    return out


@pytest.mark.slow
# the setup waits for the shared smoke build (conftest.py starts it with the session) where
# it is not done yet, and pytest-timeout counts setup and call together
@pytest.mark.timeout(1200)
def test_every_readme_command_runs(request, tmp_path):
    if not RUN_COMMANDS:
        pytest.skip("the README's commands run on its plain install in .ci/run's second "
                    "stage; CDFGNN_README_COMMANDS=1 runs them here")
    smoke_tree = request.getfixturevalue("smoke_tree")
    from cdfgnn.experiments.config import load_config
    from cdfgnn.experiments.grid import Grid

    tree = smoke_tree.work
    assert smoke_tree.resumed.returncode == 0, smoke_tree.resumed.stderr[-3000:]
    groups = Grid(load_config([REPO / "configs" / "smoke.yaml"], root=REPO)).groups()
    ran: dict[str, int] = {}
    done: set[tuple] = set()
    todo: list[tuple[Step, Path]] = []
    for b, block in enumerate(readme_steps()):
        cwd = tree
        if any(s.kind == "cdfgnn" and "--from" in s.argv for s in block):
            cwd = tmp_path / f"block{b}"
            cwd.mkdir()
            make_inputs(cwd)
        for step in block:
            if step.kind in ("install", "suite") or (PLAIN and step.extra) \
                    or (step.extra == "crosscheck" and _dgl() is None):
                continue
            # the same snakemake command twice runs once; so do two README commands that
            # are the same command in the smoke tree (`snakemake --cores 2` and `snakemake
            # --cores 2 --configfile configs/smoke.yaml`: smoke.yaml stands in for the
            # default quick.yaml), the same files removed and rebuilt
            key = (tuple(in_tree(step.argv, tree)) if step.kind in ("dry", "build", "report")
                   else step.command, cwd)
            if step.kind != "cdfgnn" and key in done:
                continue
            done.add(key)
            todo.append((step, cwd))
            ran[step.kind] = ran.get(step.kind, 0) + 1
    # the dry runs and the notebook are single-threaded processes that only read: two at
    # a time beside the builds, which run one after another in this thread. A
    # configs/full.yaml plan reads nothing of the tree (a fresh folder of its own): they
    # start at once, on the core a build leaves idle; the others read the built tree (the
    # notebook shows every table; a plan takes the tree's locks), so they start after
    # (longest first: a whole plan before one figure's, the notebook before the plans)
    full = sorted((s for s, _ in todo if s.kind == "dry" and "configs/full.yaml" in s.command),
                  key=lambda s: len(targets(s.argv)))
    after = sorted((s for s, _ in todo if s.kind in ("dry", "notebook") and s not in full),
                   key=lambda s: s.kind != "notebook")
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        plans = [pool.submit(check_dry, step, tree, tmp_path / f"dry{i}")
                 for i, step in enumerate(full)]
        for step, cwd in todo:
            if step.kind not in ("dry", "notebook"):
                check(step, cwd, tree, tmp_path, groups)
        plans += [pool.submit(check_notebook, step, tree) if step.kind == "notebook"
                  else pool.submit(check_dry, step, tree, tmp_path / "dry") for step in after]
        for plan_ in plans:
            plan_.result()               # a failed check raises here
    finally:
        pool.shutdown(cancel_futures=True)   # on a failure, start no further check
    assert ran.get("cdfgnn", 0) >= 20 and ran.get("build", 0) >= 5 \
        and ran.get("dry", 0) >= 5, ran


def check(step: Step, cwd: Path, tree: Path, tmp_path: Path, groups: dict) -> None:
    where = f"README command {step.command!r}"
    if step.kind == "parse":
        from cdfgnn.cli import build_parser
        build_parser().parse_args(step.argv)
    elif step.kind == "cdfgnn":
        rc, out = run_cdfgnn(tiny(step.argv, cwd), cwd)
        assert rc == 0, f"{where}: exit {rc}\n{out[-3000:]}"
    elif step.kind == "dry":
        check_dry(step, tree, tmp_path / "dry")
    elif step.kind == "build":
        removed = []
        for t in targets(step.argv) or ["figures/engine/accuracy_vs_epoch.png"]:
            path = groups[t][0] if t in groups else t
            (tree / path).unlink()
            removed.append(tree / path)
        proc = snakemake(*in_tree(step.argv, tree), cwd=tree)
        assert proc.returncode == 0, f"{where}:\n{proc.stderr[-3000:]}"
        assert all(p.is_file() for p in removed), f"{where}: did not rebuild {removed}"
    elif step.kind == "report":
        check_report(step, tree)
    elif step.kind == "notebook":
        check_notebook(step, tree)
    else:
        raise AssertionError(f"{where}: unknown kind {step.kind}")


def check_dry(step: Step, tree: Path, empty: Path) -> None:
    """``-n --forceall`` lists every job the command would run; full.yaml's in the fresh
    folder ``empty``."""
    where = f"README command {step.command!r}"
    argv = [a for a in in_tree(step.argv, tree) if a != "-n"] + ["-n", "--forceall"]
    if "configs/full.yaml" in step.command:
        empty.mkdir(exist_ok=True)
        argv += ["-d", str(empty)]
    proc = snakemake(*argv, cwd=tree)
    assert proc.returncode == 0, f"{where}:\n{(proc.stdout + proc.stderr)[-3000:]}"
    assert job_counts(proc.stdout + proc.stderr), f"{where}: planned no job"


def check_report(step: Step, tree: Path) -> None:
    """`snakemake --report report.html`: every figure and table, each with its caption."""
    from cdfgnn.experiments.config import load_config
    from cdfgnn.experiments.grid import Grid

    proc = snakemake(*in_tree(step.argv, tree), cwd=tree)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (tree / "report.html").read_text()
    grid = Grid(load_config([REPO / "configs" / "smoke.yaml"], root=REPO))
    for out in grid.outputs():
        for path in out.paths:
            assert Path(path).name in html, path
        assert f"report ``{out.report}``" in html or out.report in html, out.name


def check_notebook(step: Step, tree: Path) -> None:
    """`jupyter execute workflow/notebooks/review.ipynb --output ...` on the smoke tree: a
    real kernel runs every cell (an error fails), recomputes nothing, and shows every
    configured table, every figure and the claims page."""
    import nbformat

    from cdfgnn.experiments.config import load_config
    from cdfgnn.experiments.grid import Grid

    nb_dir = tree / "workflow" / "notebooks"
    nb_dir.mkdir(parents=True, exist_ok=True)
    (nb_dir / "review.ipynb").write_bytes(
        (REPO / "workflow" / "notebooks" / "review.ipynb").read_bytes())
    argv = list(step.argv)
    argv[0] = str(BIN / "jupyter")
    proc = subprocess.run(argv, cwd=tree, env=tool_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out_name = argv[argv.index("--output") + 1]
    nb = nbformat.read(nb_dir / f"{out_name}.ipynb", as_version=4)
    shown = "".join(o.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                    for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    grid = Grid(load_config([REPO / "configs" / "smoke.yaml"], root=REPO))
    assert f"{len(grid.tables)} configured tables" in shown
    assert f"{len(grid.figures)} figures" in shown
    assert f"{len(grid.all_runs())} run records" in shown
    for name in grid.tables:
        assert f"=== {name}.csv" in shown
    assert f"{len(grid.claims_tables())} claims tables" in shown
