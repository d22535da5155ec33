"""evalstore's domain: eval files, content, preprocessing, graders, recording, importing, regrading,
comparing and auditing. Writes only through ``store``'s append API; issues no SQL of its own."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("evalstore")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"
