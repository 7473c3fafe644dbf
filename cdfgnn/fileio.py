"""Atomic file writes: a killed writer never leaves a file that looks complete."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary sibling, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def json_default(obj):
    """``json.dumps`` fallback for numpy scalars and arrays."""
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, default=json_default) + "\n")


def read_yaml_mapping(path: str | os.PathLike, what: str, expect: str) -> dict:
    """The mapping in YAML file ``path``; errors name ``what`` (e.g. "network profile
    x.yaml") and what the mapping should hold."""
    import yaml

    from cdfgnn.errors import CdfgnnError

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml: ~8x less CPU
    try:
        spec = yaml.load(Path(path).read_text(), Loader=loader)
    except (OSError, yaml.YAMLError) as exc:
        raise CdfgnnError(f"{what}: not a readable YAML file ({exc})") from None
    if not isinstance(spec, dict):
        raise CdfgnnError(f"{what}: expected a mapping of {expect}")
    return spec


def jsonable(obj: Any) -> Any:
    """Plain JSON types for values that may hold numpy scalars, arrays or tuples (dict
    keys become strings)."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
