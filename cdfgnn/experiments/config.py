"""Config files -> one validated config dict (includes, layering, JSON Schema).

**Includes.** A config file may list fragments to merge into it::

    include: [configs/smoke/engine.yaml, configs/smoke/cdfgnn.yaml]

Paths are relative to the repository root (the folder of the Snakefile). A
fragment may include others. The file's own keys and those of every fragment are
deep-merged, so each paper owns its fragment and none edits a shared section:

* mappings merge key by key, recursively;
* lists are unioned, keeping the order of first appearance;
* the same scalar twice is fine; two different values at one key path are an
  error naming the key and both files (no silent winner between papers).

A fragment reached twice (two files include it) is read once.

**Layering.** Several top-level files (``--configfile quick.yaml cdfgnn.yaml``) are
each resolved with their includes, then layered in order as Snakemake merges
config files: mappings merge, any other value of a later file replaces the earlier
one; ``--config key=value`` pairs go on top. This is what lets an override file
change a value that lives in a fragment of the base config.

**Validation.** :func:`check_schema` checks the merged dict against
``workflow/schemas/config.schema.json`` after filling the schema's generated
``$defs`` from the code (the experiment ``train:`` keys from TrainConfig, the
one-process trainer names), so adding a training option or a trainer needs no
schema edit; report names are checked against the report registry by
:class:`cdfgnn.experiments.grid.Grid`.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from cdfgnn.errors import CdfgnnError

INCLUDE = "include"


# ------------------------------------------------------------------ reading
def read_yaml(path: Path, label: str) -> dict[str, Any]:
    """One YAML mapping; an empty file is an empty mapping."""
    import yaml

    # libyaml's loader where PyYAML has it: the same documents, about 8x less CPU (every
    # snakemake invocation reads the configuration)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(path.read_text(), Loader=loader)
    except FileNotFoundError:
        raise CdfgnnError(f"config {label}: no such file") from None
    except yaml.YAMLError as exc:
        raise CdfgnnError(f"config {label}: not valid YAML ({exc})".replace("\n", " ")) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CdfgnnError(f"config {label}: expected a mapping at the top level, "
                          f"got {type(data).__name__}")
    return data


def resolve_file(path: str | os.PathLike, root: str | os.PathLike) -> dict[str, Any]:
    """``path`` with its includes (recursively) deep-merged; ``include`` itself is dropped."""
    root = Path(root)
    merged: dict[str, Any] = {}
    origins: dict[tuple, str] = {}
    seen: set[Path] = set()

    def visit(file: Path, chain: tuple[Path, ...]) -> None:
        label = _label(file, root)
        if file in chain:
            cycle = " -> ".join(_label(f, root) for f in (*chain, file))
            raise CdfgnnError(f"config include cycle: {cycle}")
        if file in seen:
            return
        seen.add(file)
        data = read_yaml(file, label)
        includes = data.pop(INCLUDE, None) or []
        if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
            raise CdfgnnError(f"config {label}: '{INCLUDE}' must be a list of paths "
                              "relative to the repository root")
        merge_into(merged, data, origins, label)
        for inc in includes:
            target = (root / inc).resolve()
            if not target.is_file():
                raise CdfgnnError(f"config {label}: include {inc!r}: no such file under {root}")
            visit(target, (*chain, file))

    visit(Path(path).resolve(), ())
    return merged


def load_config(paths: Iterable[str | os.PathLike], root: str | os.PathLike,
                overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Resolve each file with its includes, layer them in order, then ``overrides``."""
    config: dict[str, Any] = {}
    for p in paths:
        layer(config, resolve_file(p, root))
    layer(config, copy.deepcopy(dict(overrides or {})))
    config.pop(INCLUDE, None)
    return config


# ------------------------------------------------------------------ merging
def merge_into(base: dict[str, Any], new: Mapping[str, Any], origins: dict[tuple, str],
               source: str, path: tuple = ()) -> None:
    """Deep-merge ``new`` (from file ``source``) into ``base`` in place (module doc rules).

    ``origins`` maps each key path set so far to the file that set it, for the
    conflict message.
    """
    for key, value in new.items():
        here = (*path, key)
        if key not in base:
            base[key] = copy.deepcopy(value)
            origins[here] = source
            continue
        old = base[key]
        if isinstance(old, dict) and isinstance(value, dict):
            merge_into(old, value, origins, source, here)
        elif isinstance(old, list) and isinstance(value, list):
            old.extend(copy.deepcopy(v) for v in value if v not in old)
        elif not _same_value(old, value):
            raise CdfgnnError(
                f"config key {'.'.join(map(str, here))}: {_short(old)} in "
                f"{_origin(origins, here)} conflicts with {_short(value)} in {source}")


def layer(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Snakemake's config layering: mappings merge, other values of ``over`` replace."""
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            layer(base[key], value)
        else:
            base[key] = value
    return base


def _same_value(a: Any, b: Any) -> bool:
    """Equal scalars; 1 and 1.0 are the same value, True and 1 are not."""
    nums = (int, float)
    if isinstance(a, nums) and isinstance(b, nums) and isinstance(a, bool) == isinstance(b, bool):
        return a == b
    return type(a) is type(b) and a == b


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _origin(origins: dict[tuple, str], path: tuple) -> str:
    for i in range(len(path), 0, -1):
        if path[:i] in origins:
            return origins[path[:i]]
    return "(unknown file)"


def _label(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


# --------------------------------------------------------------- the schema
def generated_defs() -> dict[str, Any]:
    """The schema's ``$defs`` that come from code (TrainConfig, the trainer list)."""
    from cdfgnn.train.config import ONE_PROCESS_TRAINERS, grid_options

    json_types = {int: "integer", float: "number", str: "string", bool: "boolean"}
    train = {}
    for name, opt in grid_options().items():
        scalar = {"type": json_types[opt.type]}
        train[name] = ({"type": "array", "items": scalar, "minItems": 1}
                       if opt.shape == "list" else scalar)
    return {
        "train": {"type": "object", "additionalProperties": False, "properties": train,
                  "description": "model and run settings: TrainConfig fields marked grid=True"},
        "one_process_trainer": {"enum": list(ONE_PROCESS_TRAINERS)},
    }


def load_schema(schema_path: str | os.PathLike) -> dict[str, Any]:
    """The config schema with its generated ``$defs`` filled in."""
    with open(schema_path) as f:
        schema = json.load(f)
    defs = schema.setdefault("$defs", {})
    for key, value in generated_defs().items():
        if key not in defs:
            raise CdfgnnError(f"{schema_path}: $defs.{key} missing (filled in from the code)")
        defs[key] = value
    return schema


def check_schema(config: dict[str, Any], schema_path: str | os.PathLike) -> None:
    """Validate ``config`` against the JSON Schema with a one-line error naming the key.

    Snakemake's own ``validate`` (called next in the Snakefile) prints the whole
    schema on failure; this message comes first and says only what is wrong where.
    """
    import jsonschema
    from jsonschema.exceptions import best_match

    validator = jsonschema.Draft202012Validator(load_schema(schema_path))
    err = best_match(validator.iter_errors(config))
    if err is None:
        return
    where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = set(err.schema.get("properties", {}))
        unknown = sorted(set(err.instance) - known)
        raise CdfgnnError(f"config {where}: unknown key(s) {unknown}; valid: {sorted(known)}")
    # a value outside a list of choices: name the value and the choices, not the schema
    schema = _value_schema(err)
    valid = describe_valid(schema) if schema is not None else ""
    if valid:
        raise CdfgnnError(f"config {where}: {err.instance!r} is not valid; valid: {valid}")
    raise CdfgnnError(f"config {where}: {err.message}".replace("\n", " "))


def _value_schema(err) -> dict | None:
    """The schema of the value that failed: the one holding the enum/anyOf/oneOf, for an
    error raised inside one of its alternatives too."""
    if err.validator in ("enum", "anyOf", "oneOf", "const"):
        return err.schema if err.validator != "const" else {"enum": [err.schema["const"]]}
    parent = getattr(err, "parent", None)
    if parent is not None and parent.validator in ("anyOf", "oneOf"):
        return parent.schema
    return None


def describe_valid(schema: Mapping[str, Any]) -> str:
    """The values ``schema`` accepts in words, e.g. ``tiny, small, medium, or an integer
    >= 1`` ("" when it says nothing a user could act on)."""
    parts: list[str] = []
    if "enum" in schema:
        parts += [str(v) for v in schema["enum"]]
    if "const" in schema:
        parts.append(str(schema["const"]))
    for alt in schema.get("anyOf", []) + schema.get("oneOf", []):
        text = describe_valid(alt)
        if text:
            parts.append(text)
    if not parts and schema.get("type") in ("integer", "number"):
        kind = "an integer" if schema["type"] == "integer" else "a number"
        bounds = [f">= {schema['minimum']}" if "minimum" in schema else "",
                  f"<= {schema['maximum']}" if "maximum" in schema else "",
                  f"> {schema['exclusiveMinimum']}" if "exclusiveMinimum" in schema else ""]
        parts.append(" ".join([kind, *[b for b in bounds if b]]))
    if len(parts) > 1 and not ("enum" in schema and len(parts) == len(schema["enum"])):
        return ", ".join(parts[:-1]) + ", or " + parts[-1]
    return ", ".join(parts)


def parse_params(items: Sequence[str] | None, flag: str) -> dict[str, Any]:
    """``["k=v", ...]`` -> dict; values are YAML scalars (0.1 -> float, true -> bool)."""
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CdfgnnError(f"{flag} {item!r}: expected KEY=VALUE")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            raise CdfgnnError(f"{flag} {item!r}: value is not a valid scalar") from None
        if key in out:
            raise CdfgnnError(f"{flag}: {key!r} given twice")
        out[key] = value
    return out
