"""CaPGNN (Neurocomputing) Table 7 as data: the paper's value for one dataset, model and
GPU group, so that its range claims ("speed-ups 0.17x-18.98x", "communication cut by
18%-99%", sec. 5.9) are judged configuration by configuration.

Each cell of Table 7 is "Epoch / Comm / Acc": total training time and communication time
of 200 epochs in seconds and the validation accuracy (F1 for Yelp and AmazonProducts),
for one dataset (Cl CoraFull, Fr Flickr, Cs CoauthorPhysics, Rt Reddit, Yp Yelp, As
AmazonProducts, Os ogbn-products), model (GCN, GraphSAGE), baseline (DistGCN, CachedGCN,
Vanilla, AdaQP; GraphSAGE has no DistGCN or CachedGCN rows) and GPU group x2..x8 (Table 4,
:data:`cdfgnn.pricing.devices.GROUPS`). "Timeout" (AdaQP's bit-width solver) and "OOM" cells
have no number. A speed-up is baseline Epoch / CaPGNN Epoch of the same cell position; a
communication cut is ``100 (1 - CaPGNN Comm / baseline Comm)``.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Table 7, one line per (model, dataset, algorithm): the cells of groups x2 .. x8
_TABLE7 = """
gcn Cl DistGCN 23.87/15.15/4.57 31.46/23.43/5.20 39.37/31.36/5.81 50.53/41.15/5.41 64.11/54.65/5.61 70.07/58.64/4.24 79.39/67.57/7.10
gcn Cl CachedGCN 10.37/2.08/4.95 11.54/3.66/5.18 13.16/5.20/5.51 17.08/7.74/5.56 18.66/9.48/5.56 22.14/11.19/4.22 26.07/14.51/7.60
gcn Cl Vanilla 15.86/7.21/67.28 22.29/12.97/66.75 22.30/11.99/67.46 21.52/10.97/67.48 22.74/10.73/66.95 25.19/11.05/66.68 25.47/11.24/66.85
gcn Cl AdaQP Timeout Timeout Timeout Timeout Timeout Timeout Timeout
gcn Cl CaPGNN 8.85/0.27/67.00 12.25/1.58/65.68 15.72/3.11/65.66 19.85/5.96/65.31 22.22/7.88/65.34 27.44/10.41/64.98 29.94/12.39/64.83
gcn Fr DistGCN 19.23/10.15/46.77 24.95/16.85/46.82 30.36/22.66/46.98 39.36/29.89/47.23 47.50/38.26/47.64 54.41/42.76/47.67 62.00/49.53/47.67
gcn Fr CachedGCN 14.81/6.70/42.40 18.02/10.45/25.48 21.99/14.23/46.41 28.95/19.57/25.48 33.91/24.48/42.65 41.12/29.13/42.39 45.76/32.92/46.43
gcn Fr Vanilla 48.65/39.69/47.45 54.49/44.64/42.34 47.40/36.91/46.88 47.52/36.68/43.92 42.89/31.59/47.74 42.79/30.01/47.39 41.40/28.41/43.47
gcn Fr AdaQP 22.53/8.78/48.74 25.97/10.81/48.27 26.05/8.62/47.56 26.10/8.97/48.69 30.84/9.33/48.31 29.93/8.90/42.39 35.88/9.34/46.74
gcn Fr CaPGNN 19.13/1.42/47.34 22.58/4.62/42.86 22.29/7.10/42.61 26.09/8.85/42.42 21.00/8.54/42.43 28.08/12.92/42.44 36.81/18.52/42.40
gcn Cs DistGCN 40.96/26.19/96.12 52.52/39.13/96.07 63.81/51.23/96.01 82.22/67.53/95.98 105.04/89.90/96.01 111.67/94.40/96.03 126.66/108.93/96.03
gcn Cs CachedGCN 19.05/4.32/96.12 18.19/4.95/96.07 19.87/7.32/96.01 27.03/11.57/95.98 28.87/14.31/96.00 33.83/16.90/96.03 37.68/20.12/96.01
gcn Cs Vanilla 41.91/30.80/96.48 63.07/51.35/96.54 58.00/46.20/96.54 62.33/49.08/96.58 67.18/52.59/96.62 63.50/47.72/96.52 62.89/46.42/96.52
gcn Cs AdaQP Timeout Timeout Timeout Timeout Timeout Timeout Timeout
gcn Cs CaPGNN 10.91/0.20/96.00 14.58/2.14/95.97 17.58/3.89/95.93 19.51/5.53/95.98 24.21/7.64/95.88 33.03/11.78/95.68 37.42/15.43/95.68
gcn Rt DistGCN 333.73/33.76/94.02 270.05/64.45/93.93 225.90/69.23/93.93 380.56/207.20/94.04 350.98/191.17/94.06 532.15/339.41/94.01 482.47/292.28/93.99
gcn Rt CachedGCN 321.40/21.33/92.30 251.73/45.96/90.29 201.33/44.94/91.88 349.36/175.91/93.01 299.91/143.87/92.10 482.68/292.49/92.62 438.05/248.49/90.81
gcn Rt Vanilla 151.19/96.07/95.33 150.89/107.00/95.28 151.90/112.31/95.30 153.80/113.34/95.26 175.85/131.17/95.28 162.23/115.17/95.27 154.28/111.37/95.33
gcn Rt AdaQP 84.63/23.02/95.21 83.45/29.93/95.22 103.31/27.89/95.35 104.87/34.79/95.28 Timeout Timeout Timeout
gcn Rt CaPGNN 44.83/2.36/95.09 44.01/7.88/94.13 53.98/12.15/93.68 45.61/12.35/93.45 66.16/24.92/93.05 62.28/25.44/93.66 62.06/24.85/93.66
gcn Yp DistGCN 202.17/76.82/20.75 196.57/116.23/20.75 227.22/155.55/20.75 405.91/310.25/20.75 375.77/297.55/20.75 426.99/328.07/20.75 481.74/374.90/20.75
gcn Yp CachedGCN 152.33/54.41/20.75 162.54/82.21/20.75 182.17/110.55/20.75 241.40/162.61/20.75 298.84/220.65/20.75 347.45/249.61/20.75 394.97/288.13/20.75
gcn Yp Vanilla 137.36/107.84/41.92 161.16/133.32/41.71 140.54/114.53/41.55 158.62/128.20/42.53 158.22/128.19/43.21 151.01/120.01/41.79 144.36/113.27/41.84
gcn Yp AdaQP 60.97/24.74/43.66 70.31/32.23/42.95 96.27/28.99/41.50 79.39/31.37/42.46 83.37/33.97/42.32 Timeout Timeout
gcn Yp CaPGNN 46.02/6.46/43.28 37.06/6.08/38.41 49.74/12.51/43.53 39.76/11.63/41.70 45.73/18.91/41.26 81.26/38.68/42.45 84.91/40.89/43.14
gcn As DistGCN 943.64/193.89/11.02 801.19/282.41/11.02 799.19/377.00/11.02 1117.69/671.00/11.02 1148.38/731.20/11.02 1570.68/1070.75/11.02 1564.86/1053.38/11.02
gcn As CachedGCN 821.68/116.81/11.01 744.16/224.84/11.01 671.10/261.45/11.01 1018.29/572.27/11.01 1070.85/620.14/11.01 OOM OOM
gcn As Vanilla 363.51/223.27/37.98 417.01/299.81/38.85 374.93/263.00/37.65 361.98/272.63/37.51 464.24/326.92/38.05 428.67/311.09/37.96 OOM
gcn As AdaQP OOM 226.42/109.35/38.56 225.94/111.96/39.09 185.03/91.75/39.76 294.18/158.07/23.47 259.10/143.20/38.82 Timeout
gcn As CaPGNN 124.99/22.52/49.50 79.10/13.47/50.00 56.37/8.35/50.55 116.31/40.55/50.20 99.23/35.66/50.97 96.38/30.24/52.06 183.83/46.14/50.86
gcn Os DistGCN 931.56/294.40/83.83 1022.72/514.16/85.75 1028.06/607.62/86.72 1611.85/1114.16/86.97 1847.03/1341.05/86.88 2638.53/2005.49/86.77 2647.99/2009.64/86.49
gcn Os CachedGCN 889.51/253.78/83.80 962.86/452.15/86.67 947.17/526.09/86.51 1504.53/1006.94/86.95 1705.32/1199.54/86.84 OOM OOM
gcn Os Vanilla 328.92/209.76/91.79 331.79/233.68/91.85 282.71/199.66/91.77 272.99/191.31/91.70 280.27/192.78/91.62 OOM OOM
gcn Os AdaQP OOM 141.60/45.36/91.86 155.59/42.15/91.85 189.71/49.92/91.71 OOM OOM OOM
gcn Os CaPGNN 92.83/5.22/92.09 83.16/14.58/91.74 80.12/17.42/91.75 94.26/28.50/91.67 150.50/47.84/91.18 146.38/56.89/91.72 139.48/47.55/91.61
sage Cl Vanilla 19.00/7.21/67.84 25.09/12.74/67.33 23.97/10.45/68.01 26.77/10.92/68.01 27.39/10.40/68.37 31.51/11.72/68.34 32.59/11.44/68.37
sage Cl AdaQP Timeout Timeout Timeout Timeout Timeout Timeout Timeout
sage Cl CaPGNN 10.77/0.49/67.94 16.13/3.23/66.90 17.60/3.36/67.74 22.83/6.05/66.50 26.21/8.18/67.21 42.15/15.89/66.55 41.63/14.89/66.93
sage Fr Vanilla 48.29/38.96/49.18 53.30/43.00/50.95 48.61/37.71/42.37 50.04/38.37/50.95 45.51/33.04/50.56 43.81/29.71/50.09 42.50/28.08/51.44
sage Fr AdaQP 20.59/7.40/47.92 24.76/8.52/49.90 26.69/8.55/51.51 32.84/9.26/50.68 34.27/9.61/48.03 40.82/9.11/49.74 44.26/9.67/51.49
sage Fr CaPGNN 20.51/2.34/49.83 24.41/5.82/49.16 22.45/7.45/49.11 29.06/11.22/48.08 25.37/12.56/49.23 32.97/16.15/48.58 42.62/22.97/48.62
sage Cs Vanilla 45.91/31.27/97.01 60.05/44.75/97.01 65.93/49.64/97.03 67.40/48.99/97.09 69.75/49.67/97.09 70.78/49.05/97.06 70.72/47.89/97.20
sage Cs AdaQP Timeout Timeout Timeout Timeout Timeout Timeout Timeout
sage Cs CaPGNN 15.14/3.19/97.00 18.85/4.03/97.17 19.67/4.35/97.09 24.17/7.10/97.14 28.38/8.93/97.15 52.97/18.90/96.79 54.29/19.85/96.89
sage Rt Vanilla 179.69/123.87/96.37 148.65/104.41/96.27 146.56/107.33/96.35 156.22/114.86/96.35 182.81/136.98/96.37 159.59/112.46/96.41 156.95/113.13/96.27
sage Rt AdaQP 84.39/21.37/96.38 95.84/32.44/96.29 114.24/34.16/95.08 Timeout Timeout Timeout Timeout
sage Rt CaPGNN 43.93/2.56/96.41 42.91/8.14/95.90 52.93/11.97/95.85 47.02/13.87/93.34 69.42/27.20/95.22 76.02/34.14/95.52 72.75/28.84/93.96
sage Yp Vanilla 142.50/111.45/58.14 156.42/127.79/58.21 127.67/28.30/57.57 152.77/121.68/57.97 164.70/131.97/57.90 153.03/119.57/57.22 143.54/111.06/57.55
sage Yp AdaQP 67.06/27.71/57.70 74.76/30.91/58.38 127.67/28.30/57.57 90.49/31.29/57.62 97.59/34.93/58.18 Timeout Timeout
sage Yp CaPGNN 47.69/5.60/59.47 43.56/9.42/59.36 45.70/12.69/59.28 42.58/15.92/58.97 49.15/20.93/60.14 106.44/53.09/60.79 106.58/54.43/60.81
sage As Vanilla 388.49/245.20/63.43 434.06/313.61/64.50 359.77/247.83/60.60 366.00/274.26/63.35 469.97/330.98/63.87 407.81/290.41/62.28 OOM
sage As AdaQP OOM 234.89/114.65/62.24 223.84/108.27/60.64 189.41/92.85/61.54 298.78/163.01/61.18 261.04/141.20/62.57 Timeout
sage As CaPGNN 115.60/33.20/63.54 78.41/17.10/64.49 57.62/10.98/64.89 129.89/48.08/64.23 101.85/37.77/63.78 157.49/57.21/64.57 236.39/79.95/62.48
sage Os Vanilla 277.92/155.75/91.02 307.38/210.19/91.55 281.09/196.53/91.51 267.94/184.14/91.34 275.60/187.09/91.60 OOM OOM
sage Os AdaQP OOM 143.15/43.76/91.58 148.02/42.09/91.45 163.56/50.29/91.46 294.32/71.35/91.55 OOM OOM
sage Os CaPGNN 90.96/22.23/92.24 81.22/12.72/92.22 83.01/18.48/92.19 99.53/32.51/92.03 138.41/45.95/91.96 201.70/72.32/92.16 199.11/67.98/92.23
"""

#: the paper's dataset labels by the name of the dataset (real, or the real one of a twin)
DATASET_LABELS = {"flickr": "Fr", "reddit": "Rt", "yelp": "Yp", "amazon-products": "As",
                  "ogbn-products": "Os", "corafull": "Cl", "coauthor-physics": "Cs"}
DATASET_NAMES = {"Cl": "CoraFull", "Fr": "Flickr", "Cs": "CoauthorPhysics", "Rt": "Reddit",
                 "Yp": "Yelp", "As": "AmazonProducts", "Os": "ogbn-products"}
#: the suite's method keys for the paper's algorithms (Vanilla is plain ``exact``)
BASELINES = {"exact": "Vanilla", "adaqp": "AdaQP", "distgcn": "DistGCN",
             "cachedgcn": "CachedGCN"}
MODELS = {"gcn": "GCN", "sage": "GraphSAGE"}
GROUP_NAMES = tuple(f"x{k}" for k in range(2, 9))


@dataclass(frozen=True)
class Cell:
    """One Table 7 cell: seconds for 200 epochs, communication seconds, accuracy (%)."""

    epoch_s: float
    comm_s: float
    acc: float


def _parse(text: str) -> dict[tuple[str, str, str, str], Cell | str]:
    table: dict[tuple[str, str, str, str], Cell | str] = {}
    for line in text.strip().splitlines():
        model, ds, alg, *cells = line.split()
        for group, cell in zip(GROUP_NAMES, cells, strict=True):
            table[(model, ds, alg, group)] = (cell if cell in ("Timeout", "OOM") else
                                              Cell(*(float(x) for x in cell.split("/"))))
    return table


TABLE7 = _parse(_TABLE7)


@dataclass(frozen=True)
class PaperRatio:
    """The paper's speed-up and communication cut of CaPGNN over one baseline in one cell
    position, or why it has none (``missing``)."""

    speedup: float | None
    comm_cut: float | None
    where: str
    missing: str = ""


def paper_ratio(dataset: str, model: str, group: str, baseline: str) -> PaperRatio:
    """Table 7's speed-up / communication cut for the suite's ``dataset`` (a real name or
    its label), ``model`` (gcn, sage), ``group`` (x2..x8) and ``baseline`` (a suite key of
    :data:`BASELINES`)."""
    ds = DATASET_LABELS.get(dataset, dataset)
    alg = BASELINES.get(baseline)
    where = (f"Table 7, {DATASET_NAMES.get(ds, dataset)} {MODELS.get(model, model)} "
             f"{group}, {alg or baseline}")
    if ds not in DATASET_NAMES:
        return PaperRatio(None, None, where, f"Table 7 has no {dataset}")
    if model not in MODELS:
        return PaperRatio(None, None, where, f"Table 7 has no {model} model")
    if group not in GROUP_NAMES:
        return PaperRatio(None, None, where, "devices are not a Table 4 group")
    if alg is None:
        return PaperRatio(None, None, where, f"Table 7 has no baseline {baseline}")
    base = TABLE7.get((model, ds, alg, group))
    cap = TABLE7.get((model, ds, "CaPGNN", group))
    if base is None:
        return PaperRatio(None, None, where, f"Table 7 has no {alg} {MODELS[model]} row")
    for name, cell in ((alg, base), ("CaPGNN", cap)):
        if not isinstance(cell, Cell):
            return PaperRatio(None, None, where, f"{name} is {cell} there")
    return PaperRatio(base.epoch_s / cap.epoch_s, 100.0 * (1.0 - cap.comm_s / base.comm_s),
                      f"{where}: {base.epoch_s:g} s / {cap.epoch_s:g} s, comm "
                      f"{base.comm_s:g} s -> {cap.comm_s:g} s")
