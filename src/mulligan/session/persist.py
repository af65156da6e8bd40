"""persist_to: the Harness listener that saves a session as it happens."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mulligan.session.log import SessionLog


def persist_to(
    log: SessionLog, *, before_first: Callable[[], None] | None = None,
    meta: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> Callable[[Mapping[str, Any]], None]:
    """A listener for Harness.subscribe that appends every completed message to `log` on its
    "message_end" event, whichever branch the log is on, and ignores every other event.

    `before_first`, when given, is called just before a message is appended to a log that has
    no entry yet (the coding session creates the file, takes its lease and writes its
    session_info there). `meta(message)`, when given, is the metadata stored on the message's
    entry (workspace checkpoints); it is never part of the message. An append that fails --
    or a hook failing -- raises out of the listener: a saver that cannot save must not be
    silent."""

    def listener(event: Mapping[str, Any]) -> None:
        if event.get("type") != "message_end":
            return
        if before_first is not None and log.tip() is None:
            before_first()
        extra = meta(event["message"]) if meta is not None else {}
        log.append_message(event["message"], **extra)

    return listener
