"""The REPL's terminal pieces under `frontends.repl`: key bindings (`keys`), the bottom toolbar
(`toolbar`), the reply streamed as Markdown blocks (`stream`), `@path` image attachments
(`attachments`), the walkable tree (`tree_walk`), and the choosers (`pickers`: slash-command
completion, one-key questions, the -r session picker); before prompt_toolkit, the banner
(`banner`) and the instant prompt (`instant`). Importing the package imports none of
its modules (print mode never loads prompt_toolkit)."""
