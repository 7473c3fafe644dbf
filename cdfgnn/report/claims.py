"""Claims tables: each paper's headline numbers beside the values measured here.

A paper's claims report builds a list of :class:`Claim` from its run records and
writes them with :func:`write_claims`; the columns are the same for every paper so
that :func:`claims_page` can put them on one page (``results/tables/claims.md``).

A verdict is one of :data:`VERDICTS`. ``reproduced`` / ``not reproduced`` compare
like with like (:func:`verdict_for`); ``different setting`` says the measured value
comes from a configuration the paper's number cannot be compared with one to one
(twins instead of the real graph, a modelled network), and ``not measured`` that
the runs needed for it are missing. A claim that does not reproduce is a result:
it is reported, never tuned away.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from cdfgnn.errors import CdfgnnError

VERDICTS = ("reproduced", "not reproduced", "different setting", "not measured")
COLUMNS = ("paper", "claim", "paper_value", "measured", "config", "verdict", "note", "runs")


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

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise CdfgnnError(f"claim {self.claim!r}: verdict {self.verdict!r} is not one of "
                              f"{', '.join(VERDICTS)}")
        if self.measured is None and self.verdict != "not measured":
            raise CdfgnnError(f"claim {self.claim!r}: no measured value, so the verdict must be "
                              f"'not measured', not {self.verdict!r}")

    def measured_text(self, digits: int = 3) -> str:
        if self.measured is None:
            return "not measured"
        if isinstance(self.measured, str):
            return self.measured
        if not math.isfinite(float(self.measured)):
            return str(self.measured)
        return f"{float(self.measured):.{digits}g}{self.unit}"


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


def claims_frame(paper: str, claims: Iterable[Claim], digits: int = 3) -> pd.DataFrame:
    rows = []
    for c in claims:
        d = asdict(c)
        rows.append({"paper": paper, "claim": c.claim, "paper_value": c.paper_value,
                     "measured": c.measured_text(digits), "config": c.config,
                     "verdict": c.verdict, "note": c.note,
                     "runs": ";".join(str(r) for r in d["runs"])})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def write_claims(paper: str, claims: Iterable[Claim], out: str | os.PathLike,
                 md_out: str | os.PathLike, *, title: str | None = None,
                 notes: Sequence[str] = ()) -> pd.DataFrame:
    """Write the claims CSV ``out`` and its markdown page ``md_out`` (atomically).

    The markdown omits the run list (it can be long) and says how many runs back
    each claim; the CSV keeps every path.
    """
    from cdfgnn.fileio import atomic_write_text
    from cdfgnn.report.render import markdown_table

    df = claims_frame(paper, claims)
    if df.empty:
        raise CdfgnnError(f"{paper} claims: no claims to write")
    shown = df.drop(columns=["paper", "runs"]).assign(
        runs=[len(r.split(";")) if r else 0 for r in df["runs"]])
    counts = shown["verdict"].value_counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts)
    atomic_write_text(out, df.to_csv(index=False))
    lines = [f"# {title or f'{paper}: headline claims against this suite'}", "",
             f"Verdicts: {summary}.", *notes,
             "`runs` counts the run records behind each value; the CSV lists them.", ""]
    lines += markdown_table(shown)
    atomic_write_text(md_out, "\n".join(lines) + "\n")
    return df


def claims_page(csv_paths: Sequence[str | os.PathLike], out_md: str | os.PathLike) -> pd.DataFrame:
    """Every paper's claims on one page, each linked to the run records behind it."""
    from cdfgnn.fileio import atomic_write_text
    from cdfgnn.report.render import markdown_table

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
    all_claims = pd.concat(frames, ignore_index=True)
    base = Path(out_md).resolve().parent
    lines = ["# Headline claims of the five papers, measured by this suite", "",
             "Each row: the paper's number, the value measured here, the configuration "
             "that produced it, and a verdict (reproduced / not reproduced / different "
             "setting / not measured). Links go to the run records behind each value.", ""]
    counts = all_claims["verdict"].value_counts()
    lines += ["Verdicts over all papers: "
              + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts) + ".", ""]
    for paper, df in all_claims.groupby("paper", sort=False):
        lines += [f"## {paper}", ""]
        shown = df.drop(columns=["paper"]).copy()
        shown["runs"] = [_links(r, base) for r in shown["runs"]]
        lines += markdown_table(shown) + [""]
    atomic_write_text(out_md, "\n".join(lines))
    return all_claims


def _links(runs: str, base: Path, limit: int = 3) -> str:
    paths = [r for r in str(runs).split(";") if r]
    if not paths:
        return ""
    shown = [f"[{i + 1}]({os.path.relpath(Path(r).resolve(), base)})"
             for i, r in enumerate(paths[:limit])]
    more = f" +{len(paths) - limit}" if len(paths) > limit else ""
    return " ".join(shown) + more
