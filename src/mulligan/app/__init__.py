"""The coding session (what Tau calls tau_coding): the `Controller` every frontend drives, model
resolution, the session catalog, the lease, and exports.

Above the core (`harness`, `loop`, `session`, `tools`, `providers`) and below the frontends:
nothing here prints, draws or reads a terminal; frontends import this package and render what
it returns.
"""

from __future__ import annotations

from mulligan.app.controller import Controller, Refused
from mulligan.app.exports.linear import ExportTargetExists
from mulligan.app.models import model_label, resolve
from mulligan.app.sessions.catalog import SessionSummary, find_session_file
from mulligan.session.stores.lease import LeaseHeld

__all__ = ["Controller", "ExportTargetExists", "LeaseHeld", "Refused", "SessionSummary",
           "find_session_file", "model_label", "resolve"]
