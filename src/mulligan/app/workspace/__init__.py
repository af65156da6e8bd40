"""The working folder's history: content-addressed snapshots, the inotify monitor that spares
walking an unchanged folder, checkpoints around file-changing tool calls and their restores,
and diffs between snapshots. Importing the package imports none of its modules."""
