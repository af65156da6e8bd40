"""Tools for damaged and old session files: check, repair, migrate.

`check(file)` reads the whole file and reports every problem it finds, by line number and entry
id, not just the first. `repair(file)` mends one kind of damage only -- a torn last line -- by
moving the fragment, byte for byte, to a set-aside file (`<file>.torn-<time>`) and truncating
the session to its last complete line; everything else is reported and left for a person.
`migrate(old, new)` turns a file written before entries had parents into a new file in the
current format; the old file is never changed. The CLI wires these to
`mulligan session check|repair|migrate`.

Never: delete a byte (the torn fragment is moved, not dropped), change a complete line, or
write over an existing file.
"""

from __future__ import annotations

from mulligan.session.maintenance.check import CheckReport, check
from mulligan.session.maintenance.migrate import migrate
from mulligan.session.maintenance.repair import RepairReport, repair

__all__ = ["CheckReport", "RepairReport", "check", "migrate", "repair"]
