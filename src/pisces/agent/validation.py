"""A small JSON-schema validator for tool arguments, with pi's error text.

It covers what tool schemas use: object/properties/required/additionalProperties, string, number, integer,
boolean, array/items, enum/const, anyOf/oneOf, and null. Simple coercions (a numeric string where a number
is expected, "true"/"false" for booleans) are applied in place, as pi's validator does.
"""

from __future__ import annotations

import json
from typing import Any


def _type_ok(expected: str, value: Any) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "array":
        return isinstance(value, list)
    if expected == "object":
        return isinstance(value, dict)
    if expected == "null":
        return value is None
    return True


def _coerce(expected: str, value: Any) -> Any:
    if expected in ("number", "integer") and isinstance(value, str):
        try:
            n = float(value) if expected == "number" else int(value)
            return int(n) if isinstance(n, float) and n.is_integer() else n
        except ValueError:
            return value
    if expected == "boolean" and isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    if expected == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _check(schema: dict[str, Any], value: Any, path: str, errors: list[str]) -> Any:
    """Validate ``value``; return it (possibly coerced). Errors are appended as ``path: message``."""
    where = path or "root"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            for sub in schema[key]:
                sub_errors: list[str] = []
                coerced = _check(sub, value, path, sub_errors)
                if not sub_errors:
                    return coerced
            errors.append(f"{where}: must match a schema in {key}")
            return value
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: must be equal to constant")
        return value
    expected = schema.get("type")
    if isinstance(expected, str):
        if not _type_ok(expected, value):
            value = _coerce(expected, value)
            if not _type_ok(expected, value):
                errors.append(f"{where}: must be {expected}")
                return value
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: must be equal to one of the allowed values")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        missing = [k for k in schema.get("required") or [] if k not in value]
        for k in missing:
            errors.append(f"{(path + '/' if path else '')}{k}: must have required properties {k}".lstrip("/"))
        for k, sub in props.items():
            if k in value:
                value[k] = _check(sub, value[k], f"{path}/{k}" if path else k, errors)
        if schema.get("additionalProperties") is False:
            for k in value:
                if k not in props:
                    errors.append(f"{where}: must NOT have additional properties")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            value[i] = _check(schema["items"], item, f"{path}/{i}" if path else str(i), errors)
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{where}: must NOT have fewer than {schema['minLength']} characters")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: must be <= {schema['maximum']}")
    return value


def validate_tool_arguments(tool_name: str, schema: dict[str, Any], args: Any) -> tuple[dict[str, Any], str | None]:
    """Returns (arguments, error text or None). The error text is pi's, the model reads it."""
    if not isinstance(args, dict):
        args_value: Any = args
    else:
        args_value = json.loads(json.dumps(args))  # a private copy: coercion must not touch the message
    errors: list[str] = []
    value = _check(schema, args_value, "", errors)
    if not errors:
        return value, None
    lines = "\n".join(f"  - {e}" for e in errors)
    received = json.dumps(args, indent=2, ensure_ascii=False)
    return args, f'Validation failed for tool "{tool_name}":\n{lines}\n\nReceived arguments:\n{received}'
