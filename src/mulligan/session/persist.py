"""persist_to: the Harness listener that saves a session as it happens."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mulligan.session.log import SessionLog


def persist_to(log: SessionLog) -> Callable[[Mapping[str, Any]], None]:
    """A listener for Harness.subscribe that appends every completed message to `log` on its
    "message_end" event, whichever branch the log is on, and ignores every other event. An
    append that fails raises out of the listener: a saver that cannot save must not be silent."""

    def listener(event: Mapping[str, Any]) -> None:
        if event.get("type") == "message_end":
            log.append_message(event["message"])

    return listener
