"""The viewer tests' fixtures; their helpers live in ``viewer_helpers`` (a test module importing
``conftest`` by name would get whichever conftest pytest loaded last)."""

from viewer_helpers import hostile, quickstart_db

__all__ = ["hostile", "quickstart_db"]
