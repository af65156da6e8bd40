"""The bash sandbox: bubblewrap (`bwrap`, Debian's `bubblewrap`) around each command.

Inside: the whole filesystem read-only, the working folder writable, a private /tmp, a fresh
/dev and /proc, and no network unless asked for (a new, empty network namespace: not even
loopback reaches the host). The file tools keep their own confinement; this is bash's. What
it does not confine: what the folder itself holds (a command can change or delete anything in
it), reading any file the user can read, and CPU and memory.

`sandbox_problem()` says why the sandbox cannot run here (bwrap missing, or unable to start
in this environment), or None; `--sandbox` refuses to start with that reason rather than run
bash unconfined.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["INSTALL_HINT", "Sandbox", "sandbox_problem"]

INSTALL_HINT = "install it with `apt-get install bubblewrap` (Debian, Ubuntu)"


@dataclass(frozen=True)
class Sandbox:
    """How bash's commands are confined: `network` False cuts them off from every network."""

    network: bool = False

    def argv(self, cwd: str | os.PathLike[str], command: str) -> list[str]:
        """The bwrap command line that runs `command` with `bash -c` in `cwd`."""
        folder = os.fspath(cwd)
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/tmp", "--bind", folder, folder, "--chdir", folder,
                "--die-with-parent"]
        if not self.network:
            argv.append("--unshare-net")
        return [*argv, "--", "bash", "-c", command]


def sandbox_problem(network: bool = False) -> str | None:
    """Why `Sandbox(network)` cannot run here, in words with the fix; None when it can."""
    if shutil.which("bwrap") is None:
        return f"--sandbox needs bubblewrap, which is not installed: {INSTALL_HINT}"
    probe = Sandbox(network).argv(os.getcwd() if os.path.isdir(os.getcwd()) else "/", "true")
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"--sandbox: bubblewrap could not start here ({exc})"
    if done.returncode != 0:
        why = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        return (f"--sandbox: bubblewrap cannot start here ({why}); it needs user namespaces "
                "(or root) -- bash was not run unconfined")
    return None
