"""Where a session's lines are kept, under the log: the `Storage` seam and the file
(`storage`), memory (`memory`, for --no-session), PostgreSQL (`postgres`, with its lease in
`pg_lease`), and a file session's one-writer lease (`lease`). Importing the package imports
none of its modules (psycopg comes only with `postgres`)."""
