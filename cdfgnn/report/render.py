"""Writing report outputs: figures (PNG + PDF) and tables (CSV + markdown), atomically.

Shared by every report module so that each writes its files the same way: a
temporary sibling renamed into place (:mod:`cdfgnn.fileio`), so a killed job never
leaves a file that looks finished. Heavy libraries are imported inside the
functions: report modules import this one at their top level.
"""
from __future__ import annotations

import io
import math
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cdfgnn.fileio import atomic_write_bytes, atomic_write_text


def new_figure(nrows: int = 1, ncols: int = 1, **kw):
    """A matplotlib ``Figure`` (no pyplot: no global state) and its axes array (2-D)."""
    from matplotlib.figure import Figure

    fig = Figure(**kw)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def save_figure(fig, png_path: str | os.PathLike, *, pdf: bool = True,
                dpi: int = 150) -> list[Path]:
    """Write ``fig`` as PNG (and the same name with .pdf); returns the paths written."""
    png = Path(png_path)
    paths = [png] + ([png.with_suffix(".pdf")] if pdf else [])
    for path in paths:
        buf = io.BytesIO()
        fig.savefig(buf, format=path.suffix[1:], dpi=dpi, bbox_inches="tight")
        atomic_write_bytes(path, buf.getvalue())
    return paths


def format_cell(x: Any, digits: int = 4) -> str:
    """One markdown cell: '—' for missing, fixed digits for floats, large integers whole."""
    import numpy as np

    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, (float, np.floating)):
        if float(x).is_integer() and abs(x) >= 1000:
            return f"{int(x)}"
        return f"{x:.{digits}f}"
    return str(x)


def markdown_table(df, headers: Sequence[str] | None = None, digits: int = 4,
                   formats: Mapping[str, Callable[[Any], str]] | None = None) -> list[str]:
    """Lines of a markdown table of ``df``; ``formats`` overrides the cell format per column."""
    headers = list(headers or df.columns)
    formats = formats or {}
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for rec in df.itertuples(index=False):
        cells = [formats[col](val) if col in formats else format_cell(val, digits)
                 for col, val in zip(df.columns, rec)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_table(df, csv_path: str | os.PathLike, md_path: str | os.PathLike, *,
                title: str, notes: Sequence[str] = (), digits: int = 4) -> None:
    """CSV of ``df`` and a markdown page (title, notes, the table), both atomically."""
    atomic_write_text(csv_path, df.to_csv(index=False))
    lines = [f"# {title}", ""]
    if notes:
        lines += [*notes, ""]
    lines += markdown_table(df, digits=digits) if len(df) else ["(no rows)"]
    atomic_write_text(md_path, "\n".join(lines) + "\n")
