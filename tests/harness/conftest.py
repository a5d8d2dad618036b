"""Harness tests use the API stand-in's fixtures, registered as a plugin in tests/conftest.py."""
