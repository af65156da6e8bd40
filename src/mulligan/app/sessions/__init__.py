"""Where sessions live on this machine: the catalog of session files (names, listing, finding
one) and the stores (files, or a PostgreSQL database) that hand out `SessionLog`s. Importing
the package imports none of its modules."""
