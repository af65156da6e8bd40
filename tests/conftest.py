"""Fixtures shared by several test files: a throwaway PostgreSQL server (tests/pg_server.py).

`pg_server` starts one server for the whole run, on first use; `pg_url` is a fresh, empty
database on it for each test. Without PostgreSQL's server binaries they skip with the reason
-- except under CI=true, where a missing server is a missing install step and fails.

PYTHONPATH is made absolute for the whole run: the tests start `python -m mulligan` in
folders of their own (a tmux pane, a subprocess's cwd), where a relative one
(`PYTHONPATH=src`) finds nothing and the installed mulligan would be tested instead."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

import pg_server

if os.environ.get("PYTHONPATH"):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(part) for part in os.environ["PYTHONPATH"].split(os.pathsep) if part)


@pytest.fixture(scope="session")
def pg_server_running() -> Iterator[pg_server.Server]:
    pg_server.require()
    server = pg_server.Server().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server_running: pg_server.Server) -> str:
    return pg_server_running.database(f"t_{secrets.token_hex(4)}")
