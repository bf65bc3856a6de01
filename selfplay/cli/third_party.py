"""Third-party warnings and log lines go to the log file, not the console (unless -v).

Python warnings (transformers' FutureWarnings among them) become records of the `py.warnings` logger; the
libraries that print through their own stderr handler (transformers' `past_key_values` deprecation notice
is a `logger.warning_once`) get a logger filter that hands each record to `py.warnings` instead. A run's
logs/run.log records `py.warnings` (`rundir.LOGGED`); elsewhere they are dropped, and -v shows them.
The filter is set on the library's logger object, so the library need not be imported yet.
"""

from __future__ import annotations

import logging

LIBRARIES = ("transformers", "datasets", "huggingface_hub", "accelerate", "deepspeed", "torch")
"""Libraries whose log records would otherwise be printed into the live view by their own handlers."""
WARNINGS_LOGGER = "py.warnings"


class _Reroute(logging.Filter):
    """Pass a library's record to `py.warnings` (the log file) and keep it from the library's handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        logging.getLogger(WARNINGS_LOGGER).handle(record)
        return False


_REROUTE = _Reroute()


def route_third_party(verbose: bool) -> None:
    """Send Python warnings and the LIBRARIES' records to `py.warnings`; show them on the console only
    when `verbose`."""
    logging.captureWarnings(True)
    target = logging.getLogger(WARNINGS_LOGGER)
    target.propagate = verbose
    if not any(isinstance(h, logging.NullHandler) for h in target.handlers):
        target.addHandler(logging.NullHandler())  # else logging's last-resort handler prints them
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        if verbose:
            logger.removeFilter(_REROUTE)
        elif _REROUTE not in logger.filters:
            logger.addFilter(_REROUTE)
