"""The coding session (what Tau calls tau_coding): the `Controller` every frontend drives, model
resolution, the session catalog, the lease, and exports.

Above the core (`harness`, `loop`, `session`, `tools`, `providers`) and below the frontends:
nothing here prints, draws or reads a terminal; frontends import this package and render what
it returns.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mulligan.app.controller import Controller, Refused
    from mulligan.app.exports.linear import ExportTargetExists
    from mulligan.app.models import model_label, resolve
    from mulligan.app.sessions.catalog import SessionSummary, find_session_file
    from mulligan.session.stores.lease import LeaseHeld

# Each name is imported when first asked for (PEP 562): importing one module of the package
# (an export, the catalog) does not import the Controller and all it needs (issue 29: a
# quarter of `sessions export`'s time was importing it).
_FROM = {"Controller": "mulligan.app.controller", "Refused": "mulligan.app.controller",
         "ExportTargetExists": "mulligan.app.exports.linear",
         "model_label": "mulligan.app.models", "resolve": "mulligan.app.models",
         "SessionSummary": "mulligan.app.sessions.catalog",
         "find_session_file": "mulligan.app.sessions.catalog",
         "LeaseHeld": "mulligan.session.stores.lease"}


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_FROM[name]), name)
    globals()[name] = value
    return value

__all__ = ["Controller", "ExportTargetExists", "LeaseHeld", "Refused", "SessionSummary",
           "find_session_file", "model_label", "resolve"]
