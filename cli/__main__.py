"""``python -m evalstore.cli``: the same command line as ``evalstore``."""

from evalstore.cli import entry

entry()
