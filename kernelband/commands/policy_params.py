"""`--param NAME=VALUE` options: a job's policy parameters from the command line, validated."""

from __future__ import annotations

import json
from typing import Any

from kernelband.bandit import PolicyConfigError, make_policy


def parse_policy_params(items: list[str] | None, policy: str) -> dict[str, Any]:
    """{name: value} from NAME=VALUE strings; VALUE is JSON when it parses, else a string.

    Raises ValueError naming the bad item, or the policy's own message for a parameter it
    refuses (unknown name, value out of range), so the user sees what to change.
    """
    params: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--param {item!r} is not NAME=VALUE (for example --param c=1.5)")
        if name in params:
            raise ValueError(f"--param {name} is given twice; give each parameter once")
        params[name] = _value(raw.strip())
    try:
        make_policy(policy, params)
    except PolicyConfigError as exc:
        raise ValueError(str(exc).removeprefix("kernelband: ")) from None
    return params


def _value(raw: str) -> Any:
    """3 -> 3, 0.5 -> 0.5, [70,70,75] -> list, {"dram": 60} -> dict; anything else stays text."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
