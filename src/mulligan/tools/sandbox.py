"""The bash sandbox: bubblewrap (`bwrap`, Debian's `bubblewrap`) around each command.

Inside: the system folders (/usr, /etc, /opt and the /bin, /lib links) read-only, the working
folder read-write, and nothing else of the host: no /home, /root, /var, /srv or /mnt; a
private /tmp and /run, an empty home folder of its own ($HOME, for caches), a fresh /dev. So
no host unix socket is reachable (an agent's in /tmp, a database's in /run, docker's in
/var/run): a socket's file must be seen to be connected to, and a read-only mount does not
stop a connection. A PID namespace of its own (with a fresh /proc): the command sees only its
own processes, cannot signal Mulligan or any other host process, and when the command ends
every process it started ends with it, `setsid` and daemonised ones included (the
namespace's init is gone). Every capability dropped, so a root user's command cannot remount
/ read-write or mount anything. No network unless asked for (a new, empty network namespace:
not even loopback, or an abstract unix socket, reaches the host); its own IPC namespace. The
file tools keep their own confinement; this is bash's. What it does not confine: what the
folder itself holds (a command can change or delete anything in it), reading the system
folders, and CPU and memory.

`sandbox_problem()` says why the sandbox cannot run here (bwrap missing, or unable to start
in this environment), or None; `--sandbox` refuses to start with that reason rather than run
bash unconfined.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

__all__ = ["INSTALL_HINT", "Sandbox", "sandbox_problem"]

INSTALL_HINT = "install it with `apt-get install bubblewrap` (Debian, Ubuntu)"
# What a command needs to run and nothing of the user's: the rest of the host is not there.
SYSTEM_FOLDERS = ("/usr", "/etc", "/opt", "/nix")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True)
class Sandbox:
    """How bash's commands are confined: `network` False cuts them off from every network;
    `read_only` paths of the host are there too, read-only (what a parallel attempt's folder
    links to: the project's virtual environment)."""

    network: bool = False
    read_only: tuple[str, ...] = ()

    def argv(self, cwd: str | os.PathLike[str], command: str) -> list[str]:
        """The bwrap command line that runs `command` with `bash -c` in `cwd`."""
        folder = os.fspath(cwd)
        argv = ["bwrap"]
        for system in SYSTEM_FOLDERS:
            argv += ["--ro-bind-try", system, system]
        for link in SYSTEM_LINKS:  # /bin -> usr/bin on a merged /usr: keep them links
            if os.path.islink(link):
                argv += ["--symlink", os.readlink(link), link]
            else:
                argv += ["--ro-bind-try", link, link]
        argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
        home = os.environ.get("HOME", "")
        if os.path.isabs(home) and home != "/" and not home.startswith(SYSTEM_FOLDERS):
            argv += ["--tmpfs", home]  # an empty home of its own: caches, nothing of yours
        for path in self.read_only:
            argv += ["--ro-bind-try", path, path]
        argv += ["--bind", folder, folder, "--chdir", folder, "--unshare-pid",
                 "--unshare-ipc", "--cap-drop", "ALL", "--die-with-parent"]
        if not self.network:
            argv.append("--unshare-net")
        return [*argv, "--", "bash", "-c", command]


def sandbox_problem(network: bool = False) -> str | None:
    """Why `Sandbox(network)` cannot run here, in words with the fix; None when it can."""
    if shutil.which("bwrap") is None:
        return f"--sandbox needs bubblewrap, which is not installed: {INSTALL_HINT}"
    import subprocess  # only with --sandbox

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
