"""Local fake provider servers for tests: real HTTP on 127.0.0.1, scripted per test."""
