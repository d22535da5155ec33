"""``python -m evalstore``: the same command line as ``evalstore``."""

from evalstore.cli import entry

entry()
