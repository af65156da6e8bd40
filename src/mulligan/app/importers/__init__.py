"""Sessions from other agents, as Mulligan sessions: Claude Code transcripts, Codex CLI
rollouts, pi sessions and Tau sessions, their trees kept. Importing the package imports none
of its modules; `mulligan.app.importers.convert` is the entry point."""
