"""The `cdfgnn` command line: prepare | partition | train | aggregate | report | plot | claims |
compare | bench.

Each subcommand is one arrow of the data flow in docs/architecture.md (dataset ->
Graph file -> Partitioning file -> RunRecord JSON -> tidy tables -> figures and
report tables; ``report`` runs any plug-in of :mod:`cdfgnn.report.registry`), so
the Snakemake rules can stay one shell line each. Every output is written
atomically (temporary sibling + rename): an interrupted job never leaves a file
that looks finished, which is what lets a re-run of the pipeline resume.

Bad input raises :class:`cdfgnn.errors.CdfgnnError`; :func:`main` prints it as
``cdfgnn: error: <message>`` on stderr and exits with status 2, never with a
traceback. Heavy imports (torch, the partitioners, matplotlib) happen inside the
subcommand that needs them so `cdfgnn --help` and the table steps stay quick.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from cdfgnn.experiments.catalogue import CATALOGUES
from cdfgnn.errors import CdfgnnError, WorkerFailedError
from cdfgnn.experiments.config import parse_params
from cdfgnn.fileio import atomic_write_json, json_default

EXIT_BAD_INPUT = 2
CATALOGUE_NAMES = tuple(CATALOGUES)


# ------------------------------------------------------------ subcommands
def cmd_prepare(args: argparse.Namespace) -> int:
    from cdfgnn.data.stats import dataset_row

    if args.twin_of is not None:
        return _prepare_twin_of(args)
    if args.scale is None:
        args.scale = _default_scale()
    if args.source is not None:
        from cdfgnn.data.importers import describe, import_graph

        graph = import_graph(args.source, args.format, features=args.features,
                             labels=args.labels, name=args.dataset, seed=args.seed,
                             num_features=args.num_features, num_classes=args.num_classes)
        name, scale = graph.name, None
    else:
        if args.dataset is None:
            raise CdfgnnError("give --dataset NAME or --from FILE")
        if args.format or args.features or args.labels:
            raise CdfgnnError("--format, --features and --labels need --from FILE")
        from cdfgnn.data.datasets import get_graph

        graph = get_graph(args.dataset, scale=args.scale, seed=args.seed, root=args.root)
        name, scale = args.dataset, args.scale
        describe = None
    graph.save(args.out)
    if args.stats_out:
        atomic_write_json(args.stats_out, dataset_row(graph, name, scale, args.seed))
    line = describe(graph) if describe else f"{name}: {graph.num_nodes} nodes, {graph.num_edges} edges"
    print(f"{line} -> {args.out}")
    return 0


def _prepare_twin_of(args: argparse.Namespace) -> int:
    """`prepare --twin-of GRAPH`: measure GRAPH, fit a twin's locality, write the twin."""
    from cdfgnn.data.importers import read_any_graph
    from cdfgnn.data.stats import dataset_row
    from cdfgnn.twins.of_graph import twin_of

    if args.source is not None:
        raise CdfgnnError("give --twin-of GRAPH or --from FILE, not both")
    graph = read_any_graph(args.twin_of, args.format, features=args.features,
                           labels=args.labels, seed=args.seed,
                           num_features=args.num_features, num_classes=args.num_classes)
    scale = args.scale if args.scale is not None else graph.num_nodes
    twin, record = twin_of(graph, scale, seed=args.seed, name=args.dataset,
                           log=lambda line: print(line, file=sys.stderr))
    twin.save(args.out)
    if args.stats_out:
        atomic_write_json(args.stats_out, dataset_row(twin, twin.name, twin.num_nodes, args.seed))
    halo = [pt for pt in record["points"] if pt["metric"] == "halo"]
    real = " / ".join(f"{pt['graph']:.3f}" for pt in halo)
    fitted = " / ".join(f"{pt['twin']:.3f}" for pt in halo)
    print(f"twin of {graph.name} ({graph.num_nodes} nodes, {graph.num_edges} edges): "
          f"{twin.num_nodes} nodes, {twin.num_edges} edges; METIS halo copies per vertex at "
          f"P = 2 / 4 / 8: graph {real}, twin at {record['fit_nodes']} nodes {fitted}; "
          f"{record['fit_method']} fit, {record['metis_checks']} METIS checks; average "
          f"clustering (not fitted) graph {record['measured']['avg_clustering']:.3f}, twin "
          f"{record['twin_avg_clustering']:.3f}; {record['cpu_seconds']:.1f} s CPU -> {args.out}")
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    from cdfgnn.data.graph import Graph
    from cdfgnn.partition.api import ensure_registered, partition_graph
    from cdfgnn.partition.base import PARTITIONERS, Topology
    from cdfgnn.partition.stats import partition_stats
    from cdfgnn.progress import progress

    ensure_registered()
    PARTITIONERS.get(args.partitioner)  # unknown names fail before the graph is read
    params = parse_params(args.param, "--param")
    if "seed" in params:
        raise CdfgnnError("--param seed=...: give the seed with --seed")
    topology = Topology.for_workers(args.workers, args.hosts)
    # the partitioners run in compiled kernels: the bar shows the step in progress
    with progress(total=4 if args.stats_out else 3, desc=f"{args.partitioner} {topology.label}",
                  unit="step") as bar:
        bar.set_postfix_str("load graph")
        graph = Graph.load(args.graph)
        bar.update(1)
        bar.set_postfix_str("partition")
        part = partition_graph(graph, args.partitioner, topology, seed=args.seed, **params)
        bar.update(1)
        bar.set_postfix_str("write")
        part.save(args.out)
        bar.update(1)
        if args.stats_out:
            bar.set_postfix_str("statistics")
            stats = partition_stats(graph, part)
            row = {"partitioner": args.label or args.partitioner, "algorithm": args.partitioner,
                   "seed": args.seed, "workers": topology.num_parts, **stats}
            if part.kind == "edge":       # 2-hop halos (CaPGNN Fig. 4)
                from cdfgnn.partition.stats import halo_by_hops
                stats_hops = halo_by_hops(graph, part, 2)
                row["part_halo_2hop"] = stats_hops[1]
            atomic_write_json(args.stats_out, row)
            bar.update(1)
    print(f"{args.partitioner} {topology.label} on {graph.name}: {part.seconds:.3f} s -> {args.out}")
    return 0


def build_train_config(args: argparse.Namespace):
    """Map the `cdfgnn train` flags (generated from TrainConfig) onto a validated TrainConfig."""
    from cdfgnn.train.config import TrainConfig, train_options

    if args.dataset is None and args.graph is None:
        raise CdfgnnError("give --dataset NAME or --graph FILE")
    cfg = TrainConfig()
    cfg.dataset = args.dataset
    for opt in train_options():
        value = getattr(args, opt.name)
        if opt.shape == "params":
            setattr(cfg, opt.name, parse_params(value, opt.flag))
        elif value is not None:
            setattr(cfg, opt.name, list(value) if opt.shape == "list" else value)
    from cdfgnn.train.torchrun import adopt_env
    adopt_env(cfg, workers_given=args.workers is not None, hosts_given=args.hosts is not None,
              backend_given=args.backend is not None)
    if args.partition_file is not None:
        _adopt_partition_file(cfg, args)
    cfg.validate()
    return cfg


def _adopt_partition_file(cfg, args: argparse.Namespace) -> None:
    """Take partitioner name, params and topology from a `cdfgnn partition` file.

    The file is the truth for what the run used; conflicting flags are an error
    rather than a record that claims something the run did not do.
    """
    from cdfgnn.partition.base import Partitioning

    part = Partitioning.load(args.partition_file)
    if args.partitioner is not None and args.partitioner != part.method:
        raise CdfgnnError(f"--partitioner {args.partitioner} contradicts --partition "
                          f"{args.partition_file}, which was made by {part.method!r}")
    if args.partition_params:
        raise CdfgnnError("--partition-param cannot be combined with --partition FILE "
                          "(the file's parameters are used)")
    topo = part.topology
    if args.workers is not None and args.workers != topo.num_parts:
        # fewer workers than parts: each trains several (communication-free methods;
        # run_training checks the method)
        if args.workers < 1 or topo.num_parts % args.workers:
            raise CdfgnnError(f"--workers {args.workers} contradicts --partition "
                              f"{args.partition_file}, made for {topo.num_parts} parts "
                              f"({topo.label}): give a divisor of {topo.num_parts}")
        cfg.workers = args.workers
        cfg.hosts = args.hosts if args.hosts is not None else 1
    else:
        if args.hosts is not None and args.hosts != topo.hosts:
            raise CdfgnnError(f"--hosts {args.hosts} contradicts --partition {args.partition_file}, "
                              f"made for {topo.hosts} hosts ({topo.label})")
        cfg.workers, cfg.hosts = topo.num_parts, topo.hosts
    cfg.partition_file = args.partition_file
    cfg.partitioner = part.method
    cfg.partition_params = {k: v for k, v in part.params.items() if k != "seed"}


def _check_names(cfg) -> None:
    """An unknown dataset name or a missing Graph file fails before any work (method and
    partitioner names: ``cfg.validate()``, with the method's ``check_compatible``)."""
    if cfg.graph is None:
        from cdfgnn.data.datasets import DATASETS

        DATASETS.get(cfg.dataset)
    elif not Path(cfg.graph).exists():
        raise CdfgnnError(f"--graph {cfg.graph}: file does not exist")


def cmd_train(args: argparse.Namespace) -> int:
    cfg = build_train_config(args)
    _check_names(cfg)
    from cdfgnn.methods.hardware import unverified_warning
    from cdfgnn.train.run import run_training
    from cdfgnn.train.torchrun import is_lead_process

    cfg.check_runtime()   # no GPU: the one-line error, before any warning
    warning = unverified_warning(cfg.method, cfg.device)
    if warning and is_lead_process():
        print(warning, file=sys.stderr)
    record = run_training(cfg)
    if is_lead_process():  # under torchrun, rank 0 speaks for the run
        summary = record.get("summary", {})
        print(json.dumps({"out": cfg.out, **summary}, default=json_default))
    return 0


def cmd_aggregate(args: argparse.Namespace) -> int:
    from cdfgnn.report import aggregate as agg

    if args.format != "tidy":
        # alias of `cdfgnn report NAME` for table reports (documented before reports existed)
        if args.datasets:
            raise CdfgnnError(f"--format {args.format} reads --runs or --partitions, not --datasets")
        run_report(args.format, args.out, runs=args.runs, partitions=args.partitions,
                   md_out=args.md_out, kind="table")
        print(f"{args.format} -> {args.out}")
    elif args.runs:
        records = agg.load_runs(args.runs)
        agg.write_csv(agg.runs_table(records), args.out)
        if args.epochs_out:
            agg.write_csv(agg.epochs_table(records), args.epochs_out)
        print(f"{len(records)} runs -> {args.out}")
    elif args.partitions:
        rows = agg.load_rows(args.partitions, "partition statistics")
        agg.write_csv(agg.partitions_table(rows), args.out)
        print(f"{len(rows)} partitions -> {args.out}")
    else:
        rows = agg.load_rows(args.datasets, "dataset statistics")
        agg.write_csv(agg.datasets_table(rows), args.out)
        print(f"{len(rows)} datasets -> {args.out}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from cdfgnn.report.registry import REPORTS, discover

    if args.list or args.name is None:
        if args.name is None and not args.list:
            raise CdfgnnError(f"give a report NAME; valid: {', '.join(discover().names())}")
        for name in discover().names():
            spec = REPORTS.get(name)
            reads = "+".join(spec.reads)
            params = ", ".join(f"{k}={v}" for k, v in spec.params.items())
            print(f"{name:28s} {spec.kind:6s} reads {reads:16s} {spec.summary}"
                  + (f" [params: {params}]" if params else ""))
        return 0
    run_report(args.name, args.out, runs=args.runs, partitions=args.partitions,
               md_out=args.md_out, params=parse_params(args.param, "--param"))
    print(f"{args.name} -> {args.out}" + (f" (+ {args.md_out})" if args.md_out else ""))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """Alias of `cdfgnn report NAME` for figure reports."""
    run_report(args.figure, args.out, runs=args.runs, partitions=args.partitions,
               params=parse_params(args.param, "--param"), kind="figure")
    print(f"{args.figure} -> {args.out}")
    return 0


def run_report(name: str, out: str, **kw: Any):
    from cdfgnn.report.registry import get_report, run_report as run

    get_report(name)  # an unknown name is the first thing to report
    if not out:
        raise CdfgnnError(f"report {name!r}: give --out FILE")
    return run(name, out, **kw)


def cmd_claims(args: argparse.Namespace) -> int:
    from cdfgnn.report.claims import claims_page, fill_headline

    df = claims_page(args.tables, args.out)
    for doc in args.headline_into:
        fill_headline(doc, df, args.out)
    print(f"{len(df)} claims from {len(args.tables)} papers -> {args.out}"
          + "".join(f", totals -> {d}" for d in args.headline_into))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """The valid names of one catalogue (or of every one, under a heading each)."""
    if args.what is not None and args.what not in CATALOGUES:
        raise CdfgnnError(f"unknown list {args.what!r}; valid: {', '.join(CATALOGUES)}")
    for name in [args.what] if args.what else list(CATALOGUES):
        if not args.what:
            print(f"{name}:")
        for item in CATALOGUES[name]():
            print(("  " if not args.what else "") + item)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from cdfgnn.experiments.compare import compare, table_formats
    from cdfgnn.report.render import markdown_table

    train = {k: v for k, v in (("model", args.model), ("layers", args.layers),
                                ("hidden", args.hidden), ("lr", args.lr),
                                ("dropout", args.dropout), ("backend", args.backend))
             if v is not None}
    if not Path(args.graph).is_file():
        raise CdfgnnError(f"--graph {args.graph}: file does not exist")
    if args.rank_all_by_time and not args.timing_only:
        raise CdfgnnError("--rank-all-by-time applies with --timing-only")
    table = compare(args.graph, workers=args.workers, hosts=args.hosts, network=args.network,
                    methods=args.methods, epochs=args.epochs, seed=args.seed,
                    out_dir=args.out_dir, train=train, devices=args.devices,
                    timing_only=args.timing_only, exact_first=not args.rank_all_by_time,
                    classes=args.classes, log=lambda m: print(m, file=sys.stderr))
    for line in table.attrs.get("notes", []):
        print(line)
    print("\n".join(markdown_table(table, formats=table_formats(table))))
    for line in table.attrs.get("flips", []):
        print(f"winner by {line}")
    print(f"-> {Path(args.out_dir) / 'compare.csv'}, .md, .png", file=sys.stderr)
    return 0


def benchmarks_dir() -> Path:
    """benchmarks/ of the source checkout (the package is installed editable)."""
    here = Path(__file__).resolve().parent.parent / "benchmarks"
    return here if here.is_dir() else Path.cwd() / "benchmarks"


def cmd_bench(args: argparse.Namespace) -> int:
    bdir = benchmarks_dir()
    scripts = sorted(p.stem for p in bdir.glob("*.py") if not p.name.startswith("_"))
    if args.name not in scripts:
        raise CdfgnnError(f"unknown benchmark {args.name!r}; valid: {', '.join(scripts) or '(none found in ' + str(bdir) + ')'}")
    proc = subprocess.run([sys.executable, str(bdir / f"{args.name}.py"), *args.args])
    return proc.returncode


def cmd_profile(args: argparse.Namespace) -> int:
    """Measure this machine's device profile (CaPGNN Table 1 micro-benchmarks)."""
    import yaml

    from cdfgnn.pricing.devices import load_device, measure

    spec = measure(size=args.size, repeats=args.repeats, density=args.density, name=args.name)
    text = yaml.safe_dump(spec, sort_keys=False)
    if args.out:
        Path(args.out).write_text(text)
        load_device(args.out)  # what we wrote loads back
    print(text, end="")
    return 0


# ------------------------------------------------------------------ parser
def _default_scale() -> str:
    from cdfgnn.train.config import TrainConfig

    return TrainConfig().scale


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default and, for a named option, its valid values.

    An action may carry ``shown_default`` (the value an unset flag stands for, when the
    parser's own default is None) and ``catalogue`` (a :data:`cdfgnn.catalogue.CATALOGUES`
    name, listed only when help is printed, so that parsing stays quick)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.help == argparse.SUPPRESS or "%(default)" in text:
            return text
        default = getattr(action, "shown_default", action.default)
        if default not in (None, argparse.SUPPRESS, [], {}, ()) \
                and not isinstance(action, (argparse._StoreTrueAction, argparse._HelpAction,
                                            argparse._VersionAction)):
            text += f" (default: {_shown(default)})".replace("%", "%%")
        catalogue = getattr(action, "catalogue", None)
        if catalogue:
            from cdfgnn.experiments.catalogue import valid_text
            text += f"; {valid_text(catalogue)} (`cdfgnn list {catalogue}`)".replace("%", "%%")
        return text


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def _add(group, *flags: str, catalogue: str | None = None, shown_default: Any = None,
         **kw: Any) -> argparse.Action:
    """``group.add_argument`` that records what :class:`HelpFormatter` shows."""
    action = group.add_argument(*flags, **kw)
    action.catalogue = catalogue
    if shown_default is not None:
        action.shown_default = shown_default
    return action


def add_train_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig field, grouped and typed by its metadata (default None:
    an unset flag keeps TrainConfig's default, which the help shows)."""
    from cdfgnn.train.config import train_options

    groups: dict[str, Any] = {}
    for opt in train_options():
        group = groups.get(opt.group) or groups.setdefault(opt.group,
                                                             parser.add_argument_group(opt.group))
        metavar = opt.metavar or opt.flag[2:].upper().replace("-", "_")
        kw: dict[str, Any] = {"dest": opt.name, "help": opt.help, "metavar": metavar}
        if opt.shape == "params":
            kw["action"] = "append"
        elif opt.type is bool:  # `--flag`, `--flag true`, `--flag false`
            kw.update(type=parse_bool, nargs="?", const=True, metavar="BOOL")
        else:
            kw["type"] = opt.type
            if opt.shape == "list":
                kw["nargs"] = "+"
        _add(group, opt.flag, catalogue=opt.catalogue, shown_default=opt.default, **kw)


def parse_bool(text: str) -> bool:
    """true/false (also yes/no, 1/0, any case) as argparse's type for boolean options."""
    value = str(text).strip().lower()
    if value in ("true", "yes", "1", "on"):
        return True
    if value in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    from cdfgnn import __version__

    parser = argparse.ArgumentParser(
        prog="cdfgnn", formatter_class=HelpFormatter,
        description="Benchmark suite for distributed full-batch GNN training.",
        epilog=f"Commands chained with {THEN} run one after another in one process "
               f"(`cdfgnn train ... {THEN} train ...`), each checked before the first runs.")
    parser.add_argument("--version", action="version", version=f"cdfgnn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, formatter_class=HelpFormatter, **kw)

    p = command("prepare", help="write a dataset, or a graph imported from files, as a "
                                "Graph file (+ a stats row)")
    _add(p, "--dataset", catalogue="datasets",
         help="dataset name, e.g. synth-arxiv or reddit; with --from, the imported graph's "
              "name (default: the file's stem)")
    p.add_argument("--from", dest="source", metavar="PATH",
                   help="import a graph from this file (or OGB folder) instead of a named dataset")
    p.add_argument("--format", help="with --from: snap | mtx | npz | ogb | dgl "
                                    "(default: guessed from the file name)")
    p.add_argument("--features", metavar="FILE", help="with --from: node features (.npy or .csv)")
    p.add_argument("--labels", metavar="FILE", help="with --from: node labels (.npy or .csv)")
    p.add_argument("--num-features", type=int, default=64,
                   help="with --from and no features: width of the random features")
    p.add_argument("--num-classes", type=int, default=32,
                   help="with --from and no labels: number of random classes")
    p.add_argument("--twin-of", metavar="GRAPH",
                   help="write a synthetic twin of GRAPH (a Graph file of `cdfgnn prepare`, or "
                        "any file --from reads): its degrees and METIS halo copies measured, "
                        "locality fitted, planted features and labels (docs/twins.md)")
    p.add_argument("--scale", default=None,
                   help=f"twin size: tiny|small|medium or a node count (default: "
                        f"{_default_scale()}, as `cdfgnn train`; with --twin-of: the size of "
                        f"GRAPH)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the synthetic generator (of the random features/labels/split "
                        "of an imported graph)")
    p.add_argument("--root", default="results/data", help="download/cache folder for real datasets")
    p.add_argument("--out", required=True, help="Graph file to write (.npz)")
    p.add_argument("--stats-out", help="JSON file for the dataset's statistics row")
    p.set_defaults(func=cmd_prepare)

    p = command("partition", help="partition a Graph file for a topology")
    p.add_argument("--graph", required=True, help="Graph file from `cdfgnn prepare`")
    _add(p, "--partitioner", required=True, catalogue="partitioners",
         help="registered partitioner, e.g. metis, ebv")
    p.add_argument("--workers", type=int, required=True, help="number of parts P")
    p.add_argument("--hosts", type=int, default=1, help="hosts H (P must be a multiple)")
    p.add_argument("--seed", type=int, default=0, help="seed of the partitioner")
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="partitioner parameter (repeatable), e.g. gamma=0.1")
    p.add_argument("--label", help="name recorded in the statistics row (the config preset)")
    p.add_argument("--out", required=True, help="Partitioning file to write (.npz)")
    p.add_argument("--stats-out", help="JSON file for the partition statistics")
    p.set_defaults(func=cmd_partition)

    p = command("train", help="run one training and write its RunRecord",
                description="Train once and write the RunRecord. Valid names of methods, "
                            "partitioners, datasets, models, networks and device profiles "
                            "are listed with each option and by `cdfgnn list`.")
    add_train_flags(p)
    p.set_defaults(func=cmd_train)

    p = command("aggregate", help="run records / statistics rows -> tidy CSV tables")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--runs", nargs="+", metavar="PATH", help="RunRecord files or folders")
    src.add_argument("--partitions", nargs="+", metavar="PATH", help="partition statistics files or folders")
    src.add_argument("--datasets", nargs="+", metavar="PATH", help="dataset statistics files or folders")
    p.add_argument("--out", required=True, help="CSV to write (runs: one row per run)")
    p.add_argument("--epochs-out", help="with --runs: CSV with one row per run and epoch")
    p.add_argument("--format", default="tidy",
                   help="tidy rows, or a table report over --partitions, e.g. table3 "
                        "(same as `cdfgnn report NAME`)")
    p.add_argument("--md-out", help="with a table report: markdown rendering")
    p.set_defaults(func=cmd_aggregate)

    p = command("report", help="run a registered report (figure or table); --list shows them")
    p.add_argument("name", nargs="?", metavar="NAME", help="report name, e.g. table3, rf-vs-parts "
                                                          "(`cdfgnn report --list`)")
    p.add_argument("--list", action="store_true", help="list the registered reports and exit")
    p.add_argument("--runs", nargs="+", metavar="PATH", help="RunRecord files or folders")
    p.add_argument("--partitions", nargs="+", metavar="PATH",
                   help="partition statistics files or folders")
    p.add_argument("--out", help="PNG (figure) or CSV (table) to write")
    p.add_argument("--md-out", help="table reports: markdown rendering to write")
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="report parameter (repeatable)")
    p.set_defaults(func=cmd_report)

    p = command("plot", help="draw a figure report (alias of `cdfgnn report NAME`)")
    p.add_argument("figure", metavar="NAME", help="figure report, e.g. accuracy-vs-epoch, "
                                                  "epoch-time-vs-workers, rf-vs-parts "
                                                  "(`cdfgnn report --list`)")
    p.add_argument("--runs", nargs="+", metavar="PATH", help="RunRecord files or folders")
    p.add_argument("--partitions", nargs="+", metavar="PATH",
                   help="partition statistics files or folders")
    p.add_argument("--out", required=True, help="PNG to write")
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="report parameter (repeatable)")
    p.set_defaults(func=cmd_plot)

    p = command("claims", help="every paper's claims table on one page (claims.md)")
    p.add_argument("--tables", nargs="+", required=True, help="the papers' *_claims.csv tables")
    p.add_argument("--out", required=True, help="the markdown page to write")
    p.add_argument("--headline-into", nargs="+", metavar="DOC", default=[],
                   help="also rewrite the verdict totals between the <!-- claims-headline --> "
                        "markers of these documents (README.md, docs/results.md)")
    p.set_defaults(func=cmd_claims)

    add_compare_parser(command("compare", help="rank every technique on one graph and cluster",
                               description=COMPARE_HELP))

    p = command("profile", help="measure this machine's device profile (MM, SpMM, "
                                "H2D, D2H, IDT as CaPGNN Table 1) as YAML")
    p.add_argument("--size", type=int, default=2048, help="matrix side")
    p.add_argument("--repeats", type=int, default=50, help="timed runs")
    p.add_argument("--density", type=float, default=0.004,
                   help="SpMM density (0.004 = 99.6%% sparse)")
    p.add_argument("--name", default="this-machine", help="profile name")
    p.add_argument("--out", help="YAML file to write (usable in --devices)")
    p.set_defaults(func=cmd_profile)

    p = command("list", help="list the valid names of methods, partitioners, datasets, "
                             "models, networks, devices or reports")
    p.add_argument("what", nargs="?", metavar="WHAT", help="one of: " + ", ".join(CATALOGUE_NAMES)
                   + " (default: all)")
    p.set_defaults(func=cmd_list)

    p = command("bench", help="run a performance benchmark from benchmarks/")
    p.add_argument("name", help="script name in benchmarks/ without .py")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    p.set_defaults(func=cmd_bench)
    return parser


COMPARE_HELP = (
    "Partition the graph, train every method on the same topology, model and seed, and rank "
    "them. With labels (real, or planted: the default for a graph without them), the "
    "ranking is by time to 99%% of exact's best validation accuracy, accuracy shown. With "
    "--timing-only it is by epoch time, and every method that changes the model's function "
    "is marked 'accuracy unmeasured' and ranked below the exact-equivalent ones.")


def add_compare_parser(p: argparse.ArgumentParser) -> None:
    """The `cdfgnn compare` options, grouped as the help shows them."""
    g = p.add_argument_group("graph and cluster")
    g.add_argument("--graph", required=True, help="Graph file (`cdfgnn prepare`)")
    g.add_argument("--workers", type=int, required=True, help="workers P")
    g.add_argument("--hosts", type=int, default=1, help="hosts H (P must be a multiple)")
    _add(g, "--methods", nargs="+", metavar="METHOD", catalogue="methods",
         help="methods to compare, `name` or `name:key=value,...` (default: every method)")
    g = p.add_argument_group("pricing (what the runs' counts are priced on)")
    _add(g, "--network", default="cdfgnn-table2", catalogue="networks",
         help="link profile name or a YAML file of bandwidths and latencies")
    _add(g, "--devices", catalogue="devices", shown_default="rtx3090",
         help="device profile(s) the runs are priced on: one for every worker or one per "
              "worker (the runs themselves execute on this machine's CPU)")
    g = p.add_argument_group("training (the same for every method)")
    g.add_argument("--epochs", type=int, default=20, help="epochs per method")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of the partitioner, the model's initialisation, the planted "
                        "labels and every method's sampling")
    _add(g, "--model", catalogue="models", shown_default="gcn", help="GNN model")
    _add(g, "--layers", type=int, shown_default=_train_default("layers"), help="GNN layers")
    _add(g, "--hidden", type=int, shown_default=_train_default("hidden"), help="hidden width")
    _add(g, "--lr", type=float, shown_default=_train_default("lr"), help="Adam learning rate")
    _add(g, "--dropout", type=float, shown_default=_train_default("dropout"),
         help="dropout rate in [0, 1)")
    _add(g, "--backend", shown_default=_train_default("backend"),
         help="thread | process: ranks as threads of one process, or one process each")
    g = p.add_argument_group("ranking")
    g.add_argument("--timing-only", action="store_true",
                   help="rank by epoch time without measuring accuracy (on a graph without "
                        "labels: plant none); methods that change the model's function are "
                        "marked 'accuracy unmeasured' and ranked below the exact-equivalent "
                        "ones")
    g.add_argument("--rank-all-by-time", action="store_true",
                   help="with --timing-only: rank every method by epoch time alone, the ones "
                        "that change the model's function among the others")
    g.add_argument("--classes", type=int,
                   help="on a graph without labels: planted classes (default: the graph's "
                        "label count)")
    p.add_argument("--out-dir", default="compare", help="folder for partitions, runs, table")
    p.set_defaults(func=cmd_compare)


def _train_default(name: str) -> Any:
    from cdfgnn.train.config import TrainConfig

    return getattr(TrainConfig(), name)


#: separates commands run one after another in one process: ``cdfgnn A ... --then B ...``
THEN = "--then"


def split_commands(argv: Sequence[str]) -> list[list[str]]:
    """``argv`` cut at every :data:`THEN` into the commands it chains (an empty one is an
    error, raised by the parser as for a missing command)."""
    commands: list[list[str]] = [[]]
    for word in argv:
        if word == THEN:
            commands.append([])
        else:
            commands[-1].append(word)
    return commands


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command, or several chained with ``--then`` one after another in this
    process (the pipeline's batched jobs: Python and torch start once). Every command is
    parsed before the first runs, so a bad flag anywhere writes nothing; the first command
    that fails ends the chain with its exit code."""
    parser = build_parser()
    commands = split_commands(sys.argv[1:] if argv is None else list(argv))
    parsed = [parser.parse_args(command) for command in commands]
    for i, args in enumerate(parsed):
        if i:
            from cdfgnn.train.record import reset_peak_rss

            reset_peak_rss()   # each command's records measure their own peak memory
        code = run_command(args)
        if code:
            return code
    return 0


def run_command(args: argparse.Namespace) -> int:
    """One parsed command; bad input is one line on stderr and exit status 2."""
    try:
        return int(args.func(args) or 0)
    except CdfgnnError as exc:
        print(f"cdfgnn: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except WorkerFailedError as exc:
        print(f"cdfgnn: error: run failed: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        if not getattr(exc, "filename", None):
            raise
        # an unreadable input or unwritable output path: name it, no traceback
        print(f"cdfgnn: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("cdfgnn: interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """The console script `cdfgnn`: :func:`main` on the command line, then the process ends
    without the interpreter's teardown (:func:`cdfgnn.exits.end_finished`; 0.3-0.4 CPU-s
    per job once torch is imported). A traceback or an argparse exit ends it as usual."""
    from cdfgnn.exits import end_finished

    end_finished(main())


if __name__ == "__main__":
    run()
