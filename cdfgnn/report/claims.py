"""Claims tables: each paper's headline numbers beside the values measured here.

A paper declares its claims as data, a tuple of :class:`ClaimSpec`: the claim's
text, the paper's value, the query that measures it (a function of the paper's
flattened rows returning :class:`Measurement` s, one per configuration it finds),
the checks that compare the measured numbers with the paper's (:func:`at_least`,
:func:`at_most`, :func:`above`, :func:`below`, :func:`near`) and a note.
:func:`evaluate` is the one function that turns them into :class:`Claim` rows, so a
verdict is decided in one place; :func:`write_claims` writes them. The columns are
the same for every paper so that :func:`claims_page` can put them on one page
(``results/tables/claims.md``). Adding a claim is adding a :class:`ClaimSpec`;
adding a column is a field of :class:`Claim` (filled from the spec or the
measurement) and its name in :data:`COLUMNS`.

A verdict is one of :data:`VERDICTS`. ``reproduced`` / ``not reproduced`` compare
like with like (:func:`verdict_for`); ``different setting`` says the measured value
comes from a configuration the paper's number cannot be compared with one to one
(twins instead of the real graph, a modelled network), and ``not measured`` that
the runs needed for it are missing. A claim that does not reproduce is a result:
it is reported, never tuned away.

A row's ``source`` is ``paper`` (a claim of the paper) or ``suite target`` (a goal this
suite set itself, e.g. a minimum cut, declared with ``ClaimSpec(suite_target=True)``):
targets are shown in a section of their own and never counted in a paper's totals.

**Two sets of totals.** A speed claim is judged twice: on the CPU-measured model (this
machine's CPU time, which moves with its load) and on the device model (operation counts
priced on the papers' GPUs, which does not). :func:`verdict_counts` gives both totals over
the papers' claims: ``device`` takes a speed row's device verdict and any other row's
verdict (counts and accuracy do not depend on load), ``cpu`` every row's CPU-measured
verdict; pages lead with the device totals (:func:`headline`).
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from cdfgnn.errors import CdfgnnError

VERDICTS = ("reproduced", "not reproduced", "different setting", "not measured")
#: where a row's claim comes from: the paper, or a target this suite set itself
SOURCES = ("paper", "suite target")
COLUMNS = ("paper", "source", "claim", "paper_value", "measured", "config", "verdict", "device_profile",
           "device_measured", "device_verdict", "note", "runs")


@dataclass
class Claim:
    """One headline claim: the paper's statement and number beside ours.

    ``measured`` is the value measured here as printed (a number is formatted
    with ``digits`` significant digits; ``None`` means not measured, and then the
    verdict must say so). ``runs`` are the run records the value was computed from.
    """

    claim: str
    paper_value: str
    measured: float | str | None
    config: str
    verdict: str
    note: str = ""
    runs: Sequence[str] = field(default_factory=tuple)
    unit: str = ""
    #: a speed claim judged again on the device model (docs/time-model.md): the device
    #: and network profiles of its runs, the value and the verdict; empty for a claim
    #: about counts or accuracy (``device_verdict`` "")
    device_profile: str = ""
    device_measured: float | str | None = None
    device_verdict: str = ""
    #: "paper" or "suite target" (:data:`SOURCES`)
    source: str = "paper"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise CdfgnnError(f"claim {self.claim!r}: source {self.source!r} is not one of "
                              f"{', '.join(SOURCES)}")
        if self.verdict not in VERDICTS:
            raise CdfgnnError(f"claim {self.claim!r}: verdict {self.verdict!r} is not one of "
                              f"{', '.join(VERDICTS)}")
        if self.measured is None and self.verdict != "not measured":
            raise CdfgnnError(f"claim {self.claim!r}: no measured value, so the verdict must be "
                              f"'not measured', not {self.verdict!r}")
        if self.device_verdict not in ("", *VERDICTS):
            raise CdfgnnError(f"claim {self.claim!r}: device verdict {self.device_verdict!r} is "
                              f"not one of {', '.join(VERDICTS)}")
        if self.device_verdict and self.device_measured is None \
                and self.device_verdict != "not measured":
            raise CdfgnnError(f"claim {self.claim!r}: no device-modelled value, so the device "
                              f"verdict must be 'not measured', not {self.device_verdict!r}")

    def measured_text(self, digits: int = 3) -> str:
        return self._text(self.measured, digits)

    def device_text(self, digits: int = 3) -> str:
        """The device-modelled value as printed; empty for a claim that is not about speed
        and for one without a device-modelled value (its device verdict says why)."""
        if self.device_measured is None:
            return ""
        return self._text(self.device_measured, digits)

    def _text(self, value: float | str | None, digits: int) -> str:
        if value is None:
            return "not measured"
        if isinstance(value, str):
            return value
        if not math.isfinite(float(value)):
            return str(value)
        return f"{float(value):.{digits}g}{self.unit}"


def verdict_for(measured: float | None, paper_value: float, *, better: str = "higher",
                rel_tol: float = 0.25, setting_differs: bool = False) -> str:
    """``reproduced`` when ``measured`` is at least as good as the paper's value or
    within ``rel_tol`` (relative) of it, ``not reproduced`` otherwise.

    ``better`` is ``"higher"`` (a speed-up, a reduction in percent) or ``"lower"``
    (a time, an error). ``setting_differs`` turns a comparison into ``different
    setting``: the number is reported but the setting is not the paper's.
    """
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        return "not measured"
    if setting_differs:
        return "different setting"
    sign = 1.0 if better == "higher" else -1.0
    gap = sign * (measured - paper_value)
    ok = gap >= 0 or abs(measured - paper_value) <= rel_tol * abs(paper_value)
    return "reproduced" if ok else "not reproduced"


# ------------------------------------------------------------------ claims as data
#: comparison rules of a :class:`Check` (see :func:`_passes`)
RULES = ("at least", "at most", "above", "below", "near")


@dataclass(frozen=True)
class Check:
    """One comparison: the measured number ``of`` against ``target``.

    ``at least`` / ``at most``: :func:`verdict_for` (``better`` higher / lower,
    within ``rel_tol`` of the target also passes); ``above`` / ``below``: strictly;
    ``near``: ``|measured - target| <= rel_tol |target|``. ``of`` names a value of
    the :class:`Measurement`; ``None`` is the claim's own value. A ``target`` given as a
    name is read from the measurement too: the paper's value for that configuration
    (a claim whose paper gives one number per dataset and model).
    """

    rule: str
    target: float | str
    rel_tol: float = 0.0
    of: str | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"check rule must be one of {RULES}, got {self.rule!r}")


def at_least(target: float | str, rel_tol: float = 0.0, of: str | None = None) -> Check:
    return Check("at least", target, rel_tol, of)


def at_most(target: float | str, rel_tol: float = 0.0, of: str | None = None) -> Check:
    return Check("at most", target, rel_tol, of)


def above(target: float, of: str | None = None) -> Check:
    return Check("above", target, 0.0, of)


def below(target: float, of: str | None = None) -> Check:
    return Check("below", target, 0.0, of)


def near(target: float, rel_tol: float, of: str | None = None) -> Check:
    return Check("near", target, rel_tol, of)


@dataclass(frozen=True)
class Measurement:
    """What a claim's query found in one configuration.

    ``values``: the numbers the checks read, by name (``None``/NaN: not measured);
    ``shown``: what the table prints for a claim when it is not the checked number
    itself (a range, a sign-flipped cut, a sentence), by the same names;
    ``labels`` fill ``{placeholders}`` of the claim's texts; ``note`` replaces the
    spec's note; ``paper`` replaces the spec's paper value (the paper's number for this
    configuration); ``setting_differs`` marks a value whose setting the paper's number
    cannot be compared with (a modelled energy, say).
    """

    config: str
    values: Mapping[str, float | None] = field(default_factory=dict)
    runs: Sequence[str] = ()
    shown: Mapping[str, float | str | None] = field(default_factory=dict)
    labels: Mapping[str, Any] = field(default_factory=dict)
    note: str | None = None
    setting_differs: bool = False
    paper: str | None = None

    @classmethod
    def one(cls, value: float | None, config: str, **kw: Any) -> "Measurement":
        """A measurement of a single number (the claim's ``value``)."""
        return cls(config, {"value": value}, **kw)


Query = Callable[[Any], Iterable[Measurement]]


@dataclass(frozen=True)
class ClaimSpec:
    """One claim of a paper, declared as data (see the module docstring).

    ``measure(context)`` returns a measurement per configuration it finds (none: no
    row). ``value`` names the measured number this row prints and checks by
    default. Consecutive specs with the same ``measure`` are measured once and their
    rows interleave configuration by configuration (a cache's bytes, then its
    accuracy, for each setting); a measurement without a claim's ``value`` (no such
    key at all, not even ``None``) makes no row for that claim. ``setting_differs``: the paper's number comes
    from a setting this suite does not have, so the verdict says so. ``suite_target``: not
    a claim of the paper but a goal this suite set itself (shown apart, never counted in
    the paper's totals).
    """

    claim: str
    paper_value: str
    measure: Query
    checks: tuple[Check, ...]
    value: str = "value"
    unit: str = ""
    note: str = ""
    setting_differs: bool = False
    #: a claim about time (epoch time, throughput, speed-up, communication time): judged
    #: again, with the same checks, on the device-modelled times (:class:`DeviceModel`)
    speed: bool = False
    suite_target: bool = False


@dataclass(frozen=True)
class DeviceModel:
    """What :func:`evaluate` judges speed claims on a second time: the paper's context
    built from the device view of its run records (every time device-modelled,
    :func:`cdfgnn.report.aggregate.device_view`), and each record's device and network
    profile by path (:attr:`cdfgnn.report.registry.ReportInputs.device_profiles`)."""

    context: Any
    profiles: Mapping[str, str]

    @classmethod
    def of(cls, inputs: Any, context_of: Callable[[Any], Any]) -> "DeviceModel":
        """``context_of`` (the paper's own context builder) on the device view of ``inputs``."""
        return cls(context_of(inputs.device_view()), inputs.device_profiles)

    def profile_of(self, runs: Sequence[str]) -> str:
        """The distinct profiles of ``runs``, and how many of them the device model did not
        price (``""`` when none is priced)."""
        labels = [self.profiles.get(str(r), "") for r in dict.fromkeys(str(r) for r in runs)]
        shown = sorted({x for x in labels if x}, key=labels.index)
        unpriced = labels.count("")
        if shown and unpriced:
            shown.append(f"{unpriced} of {len(labels)} runs without a device model")
        return "; ".join(shown)


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _passes(check: Check, measured: float, target: float) -> bool:
    if check.rule in ("at least", "at most"):
        better = "higher" if check.rule == "at least" else "lower"
        return verdict_for(measured, target, better=better,
                           rel_tol=check.rel_tol) == "reproduced"
    if check.rule == "above":
        return measured > target
    if check.rule == "below":
        return measured < target
    return abs(measured - target) <= check.rel_tol * abs(target)


def _target(check: Check, m: Measurement) -> float | None:
    """The check's target: its number, or the measurement's value of that name."""
    if isinstance(check.target, str):
        value = m.values.get(check.target)
        return None if _missing(value) else float(value)
    return float(check.target)


def decide(spec: ClaimSpec, m: Measurement) -> str:
    """The verdict of one claim in one configuration: the only place verdicts are made.

    ``not measured`` when a checked number is missing, ``different setting`` when
    the spec or the measurement says the settings differ, else ``reproduced`` when
    every check passes.
    """
    measured = [m.values.get(c.of or spec.value) for c in spec.checks]
    if any(_missing(v) for v in measured):
        return "not measured"
    targets = [_target(c, m) for c in spec.checks]
    if spec.setting_differs or m.setting_differs or any(t is None for t in targets):
        return "different setting"      # no paper number for this setting: nothing to judge
    ok = all(_passes(c, float(v), t) for c, v, t in zip(spec.checks, measured, targets))
    return "reproduced" if ok else "not reproduced"


def _shown(spec: ClaimSpec, m: Measurement) -> float | str | None:
    return m.shown.get(spec.value, m.values.get(spec.value))


def _claim(spec: ClaimSpec, m: Measurement, device: DeviceModel | None,
           dm: Measurement | None) -> Claim:
    note = spec.note if m.note is None else m.note
    on_device = {}
    if spec.speed:
        on_device = {"device_measured": None, "device_verdict": "not measured",
                     "device_profile": ""}
        if device is not None and dm is not None:
            shown = _shown(spec, dm)
            verdict = decide(spec, dm)
            on_device = {"device_measured": None if verdict == "not measured" else shown,
                         "device_verdict": verdict,
                         "device_profile": device.profile_of(dm.runs)}
    return Claim(claim=_fill(spec.claim, m.labels),
                 paper_value=spec.paper_value if m.paper is None else m.paper,
                 measured=_shown(spec, m), config=m.config, verdict=decide(spec, m),
                 note=_fill(note, m.labels), runs=list(m.runs), unit=spec.unit,
                 source=SOURCES[1] if spec.suite_target else SOURCES[0], **on_device)


def _fill(text: str, labels: Mapping[str, Any]) -> str:
    """``text`` with its ``{placeholders}`` filled (texts of label-less claims stay as written)."""
    return text.format(**labels) if labels else text


def evaluate(specs: Sequence[ClaimSpec], context: Any,
             device: DeviceModel | None = None) -> list[Claim]:
    """Every claim of ``specs`` measured on ``context`` (the paper's rows), in order.

    A speed claim (``spec.speed``) is measured a second time, by the same query and
    checks, on ``device.context`` (the same rows with device-modelled times: the same
    configurations in the same order, paired by position); without ``device`` its
    device verdict is ``not measured``.
    """
    out: list[Claim] = []
    i = 0
    while i < len(specs):
        group = [specs[i]]
        while i + len(group) < len(specs) and specs[i + len(group)].measure is specs[i].measure:
            group.append(specs[i + len(group)])
        found = list(specs[i].measure(context))
        on_device: list[Measurement | None] = [None] * len(found)
        if device is not None and any(spec.speed for spec in group):
            priced = list(specs[i].measure(device.context))
            if len(priced) == len(found):
                on_device = list(priced)
        for m, dm in zip(found, on_device):
            out += [_claim(spec, m, device, dm) for spec in group
                    if spec.value in m.values or spec.value in m.shown]
        i += len(group)
    return out


def claims_frame(paper: str, claims: Iterable[Claim], digits: int = 3) -> pd.DataFrame:
    """One row per claim, one column per name in :data:`COLUMNS` (a :class:`Claim` field
    of that name; ``measured`` printed, ``runs`` joined by ``;``)."""
    rows = []
    for c in claims:
        cells = {**asdict(c), "paper": paper, "measured": c.measured_text(digits),
                 "device_measured": c.device_text(digits),
                 "runs": ";".join(str(r) for r in c.runs)}
        rows.append({col: cells[col] for col in COLUMNS})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def verdict_counts(df: pd.DataFrame) -> dict[str, Any]:
    """The totals of a claims frame over the papers' claims (suite targets left out).

    ``device``: a speed row's device verdict, any other row's verdict (counts and
    accuracy do not move with the machine's load); ``cpu``: every row's verdict, speed
    rows on the CPU-measured model (they do move with it). Both are ``{verdict: n}`` in
    :data:`VERDICTS` order; ``rows``, ``speed`` and ``targets`` count the rows.
    """
    source = df["source"] if "source" in df else pd.Series(SOURCES[0], index=df.index)
    papers = df[source == SOURCES[0]]
    dev = papers["device_verdict"].fillna("").astype(str)
    stable = dev.where(dev != "", papers["verdict"])

    def tally(col: pd.Series) -> dict[str, int]:
        counts = col.value_counts()
        return {v: int(counts[v]) for v in VERDICTS if v in counts}

    return {"device": tally(stable), "cpu": tally(papers["verdict"]), "rows": len(papers),
            "speed": int((dev != "").sum()), "targets": int(len(df) - len(papers))}


def _tally_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {v}" for v, n in counts.items()) or "none"


def headline(df: pd.DataFrame) -> list[str]:
    """The verdict totals as the pages lead with them: the device-modelled ones first (they
    do not move with load), the CPU-measured ones beside them, labelled load-sensitive."""
    c = verdict_counts(df)
    lines = [f"**Verdicts on the device model** ({c['rows']} claims of the papers; the "
             f"{c['speed']} speed claims priced on the papers' GPUs and links, counts and "
             f"accuracy as measured; the same under any load): {_tally_text(c['device'])}.",
             f"On the CPU-measured model instead (speed claims on this machine's CPU time; "
             f"load-sensitive, they move with the machine's load): {_tally_text(c['cpu'])}."]
    if c["targets"]:
        lines.append(f"{c['targets']} further rows are this suite's own targets, shown apart "
                     "and not counted in these totals.")
    return lines


def _sections(shown: pd.DataFrame, source: pd.Series, level: str) -> list[str]:
    """The papers' rows as one table, then the suite's targets under a heading of their own."""
    from cdfgnn.report.render import markdown_table

    lines = markdown_table(shown[source == SOURCES[0]]) if (source == SOURCES[0]).any() else []
    targets = shown[source == SOURCES[1]]
    if len(targets):
        lines += ["", f"{level} This suite's own targets (not claims of the paper; not counted "
                  "in the totals)", "", *markdown_table(targets)]
    return lines


def write_claims(paper: str, claims: Iterable[Claim], out: str | os.PathLike,
                 md_out: str | os.PathLike, *, title: str | None = None,
                 notes: Sequence[str] = ()) -> pd.DataFrame:
    """Write the claims CSV ``out`` and its markdown page ``md_out`` (atomically).

    The markdown leads with the verdict totals (:func:`headline`), lists the paper's
    claims, then the suite's own targets apart; it omits the run list (it can be long)
    and says how many runs back each claim; the CSV keeps every path.
    """
    from cdfgnn.fileio import atomic_write_text

    df = claims_frame(paper, claims)
    if df.empty:
        raise CdfgnnError(f"{paper} claims: no claims to write")
    shown = df.drop(columns=["paper", "source", "runs"]).assign(
        runs=[len(r.split(";")) if r else 0 for r in df["runs"]])
    atomic_write_text(out, df.to_csv(index=False))
    lines = [f"# {title or f'{paper}: headline claims against this suite'}", "",
             *headline(df), "", *notes,
             "`runs` counts the run records behind each value; the CSV lists them.", ""]
    lines += _sections(shown, df["source"], "##")
    atomic_write_text(md_out, "\n".join(lines) + "\n")
    return df


def read_claims(csv_paths: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """The claims tables ``csv_paths`` as one frame (one line naming a bad file)."""
    frames = []
    for p in csv_paths:
        try:
            df = pd.read_csv(p, keep_default_na=False)
        except (OSError, ValueError) as exc:
            raise CdfgnnError(f"{p}: cannot read claims table: {exc}") from exc
        missing = set(COLUMNS) - set(df.columns)
        if missing:
            raise CdfgnnError(f"{p}: not a claims table (missing columns {sorted(missing)})")
        frames.append(df[list(COLUMNS)])
    if not frames:
        raise CdfgnnError("claims page: no claims tables given")
    return pd.concat(frames, ignore_index=True)


def claims_page(csv_paths: Sequence[str | os.PathLike], out_md: str | os.PathLike) -> pd.DataFrame:
    """Every paper's claims on one page, each linked to the run records behind it."""
    from cdfgnn.fileio import atomic_write_text

    all_claims = read_claims(csv_paths)
    base = Path(out_md).resolve().parent
    lines = ["# Headline claims of the five papers, measured by this suite", "",
             "Each row: the paper's number, the value measured here, the configuration "
             "that produced it, and a verdict (reproduced / not reproduced / different "
             "setting / not measured); a speed claim has a second verdict on the device "
             "model (`device_verdict`). Links go to the run records behind each value.", "",
             *headline(all_claims), ""]
    for paper, df in all_claims.groupby("paper", sort=False):
        c = verdict_counts(df)
        lines += [f"## {paper}", "", f"Device model: {_tally_text(c['device'])}; "
                  f"CPU-measured (load-sensitive): {_tally_text(c['cpu'])}.", ""]
        shown = df.drop(columns=["paper", "source"]).copy()
        shown["runs"] = [_links(r, base) for r in shown["runs"]]
        lines += _sections(shown, df["source"], "###") + [""]
    atomic_write_text(out_md, "\n".join(lines))
    return all_claims


#: the markers around the verdict totals in a document (README.md, docs/results.md) that
#: ``cdfgnn claims --headline-into FILE`` rewrites from the claims tables
HEADLINE_START, HEADLINE_END = "<!-- claims-headline -->", "<!-- /claims-headline -->"


def fill_headline(doc: str | os.PathLike, df: pd.DataFrame, source: str) -> None:
    """Rewrite the text between :data:`HEADLINE_START` and :data:`HEADLINE_END` in ``doc``
    with the totals of ``df`` (``source``: the page they come from, named in the text)."""
    from cdfgnn.fileio import atomic_write_text

    text = Path(doc).read_text(encoding="utf-8")
    if text.count(HEADLINE_START) != 1 or text.count(HEADLINE_END) != 1:
        raise CdfgnnError(f"{doc}: needs one {HEADLINE_START} ... {HEADLINE_END} block")
    head, rest = text.split(HEADLINE_START)
    _, tail = rest.split(HEADLINE_END)
    body = " ".join(headline(df)) + f" (from `{source}`)"
    atomic_write_text(doc, f"{head}{HEADLINE_START}\n{body}\n{HEADLINE_END}{tail}")


def _links(runs: str, base: Path, limit: int = 3) -> str:
    paths = [r for r in str(runs).split(";") if r]
    if not paths:
        return ""
    shown = [f"[{i + 1}]({os.path.relpath(Path(r).resolve(), base)})"
             for i, r in enumerate(paths[:limit])]
    more = f" +{len(paths) - limit}" if len(paths) > limit else ""
    return " ".join(shown) + more
