"""How the ``evalstore`` process ends (``cli.entry``): the command's exit code, its output flushed, the exit
handlers run, without the interpreter's teardown, unless a thread Python's exit waits for still runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evalstore import __version__


def _entry(prelude: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys\n{prelude}\nfrom evalstore.cli import entry\nsys.argv = ['evalstore', *{list(args)!r}]\nentry()\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_exit_code_output_and_exit_handlers_are_kept(tmp_path: Path) -> None:
    handler = "import atexit\natexit.register(lambda: print('handler ran', file=sys.stderr))\nprint('buffered', end='')"
    done = _entry(handler, "--version")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"bufferedevalstore, version {__version__}\n",
        "handler ran\n",
    )
    done = _entry(handler, "--db", f"sqlite:///{tmp_path / 'none.db'}", "runs")
    assert done.returncode == 2 and done.stderr.startswith("Error: no store at") and "handler ran" in done.stderr


def test_a_thread_python_would_wait_for_is_waited_for(tmp_path: Path) -> None:
    marker = tmp_path / "written"
    thread = (
        "import threading, time\n"
        f"threading.Thread(target=lambda: (time.sleep(0.5), open({str(marker)!r}, 'w').close())).start()"
    )
    done = _entry(thread, "--version")
    assert done.returncode == 0 and marker.exists()


def test_an_interrupt_dropped_by_a_finalizer_reaches_the_command() -> None:
    """Python drops an exception raised in a weakref callback or a finalizer (printing "Exception ignored"):
    a Ctrl-C that lands in one must still stop the command, not let it run on to its end."""
    code = (
        "import sys, time, weakref\n"
        "from evalstore.cli import keep_interrupts\n"
        "keep_interrupts()\n"
        "class Held: pass\n"
        "def callback(ref): raise KeyboardInterrupt\n"
        "held = Held()\n"
        "ref = weakref.ref(held, callback)\n"
        "try:\n"
        "    del held\n"
        "    time.sleep(10)\n"
        "    print('ran on')\n"
        "except KeyboardInterrupt:\n"
        "    print('stopped')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "stopped\n", "")
