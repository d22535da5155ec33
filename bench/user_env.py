"""The environment the benchmarks start ``evalstore`` in: the caller's, as a user's shell has it, with
bytecode cached. A PYTHONDONTWRITEBYTECODE inherited from a CI or sandbox shell would make every start
compile evalstore's own modules again (0.1-0.2 s on a 2-core machine), which no installed copy pays:
pip compiles an installed package, and an editable one caches its bytecode on its first run."""

import os

USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
