"""How the generated functions (_api.py) call the native core: one JSON request per call, checked
against the function's row of python/src/api.h by the core, and the report's dataclass back.

A path parameter takes str or os.PathLike; the ``progress`` argument stays here (the callback the
core calls from the calling thread, see _progress.py). The row's ``returns`` picks the dataclass:
the first whose ``when`` key is true in the report, else the one without ``when``; "dict" returns the
JSON object itself.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Union

from . import _core, _reports
from ._progress import callback_for

PathLike = Union[str, "os.PathLike[str]"]


@functools.lru_cache(maxsize=None)
def _rows() -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in json.loads(_core.api())}


def _request_value(passed_as: str, value: Any) -> Any:
    """An argument as the request carries it, by its row's ``passed_as`` (python/src/api.cc)."""
    if value is None or passed_as == "value":
        return value
    if passed_as == "path":
        return os.fspath(value)
    if passed_as == "paths":
        return [os.fspath(v) for v in value]
    return list(value)  # "list"


def call(function: str, arguments: dict[str, Any]) -> Any:
    """Runs the core's `function` with `arguments` (the generated function's locals())."""
    row = _rows()[function]
    request, callback = {}, None
    for param in row["params"]:
        if param["passed_as"] == "progress":
            callback = callback_for(arguments[param["name"]])
        else:
            request[param["name"]] = _request_value(param["passed_as"], arguments[param["name"]])
    try:
        text = _core.call(function, json.dumps(request), callback)
    finally:
        close = getattr(callback, "close", None)
        if close is not None:
            close()
    report = json.loads(text)
    for returned in row["returns"]:
        if returned["type"] == "dict":  # a report too open for a dataclass (bench's results)
            return report
        if not returned["when"] or report.get(returned["when"]):
            return _reports.from_json(getattr(_reports, returned["type"]), report)
    raise RuntimeError(f"sparkulator._core.{function}: no return row fits the report")
