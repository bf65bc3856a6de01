"""Third-party warnings and log lines go to the log file, not the console (unless -v).

Python warnings (transformers' FutureWarnings among them) become records of the `py.warnings` logger. The
LIBRARIES log through loggers of their own, and transformers prints through a stderr handler it adds when
first imported (its `past_key_values` deprecation notice is a `logger.warning_once`); and under CI=true it
also propagates to the root logger. So each library logger gets a handler that passes its records to
`py.warnings`, any handler the library adds later is not attached, and the console handlers drop library
records that propagate. A run's logs/run.log records `py.warnings` (`rundir.LOGGED`); elsewhere they are
dropped, and -v shows everything. Nothing here imports the libraries.
"""

from __future__ import annotations

import logging

LIBRARIES = ("transformers", "datasets", "huggingface_hub", "accelerate", "deepspeed", "torch")
"""Libraries whose log records would otherwise be printed into the live view."""
WARNINGS_LOGGER = "py.warnings"


class _Forward(logging.Handler):
    """A library's records, passed on to `py.warnings` (the run's log file)."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(WARNINGS_LOGGER).handle(record)


class _NotLibraries(logging.Filter):
    """For console handlers: drop records of the LIBRARIES (they reach the log file through `_Forward`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.split(".", 1)[0] not in LIBRARIES


_FORWARD = _Forward()
_CONSOLE_FILTER = _NotLibraries()


def route_third_party(verbose: bool) -> None:
    """Send Python warnings and the LIBRARIES' records to `py.warnings`; show them on the console (the
    root logger's handlers) only when `verbose`."""
    logging.captureWarnings(True)
    target = logging.getLogger(WARNINGS_LOGGER)
    target.propagate = verbose
    if not any(isinstance(h, logging.NullHandler) for h in target.handlers):
        target.addHandler(logging.NullHandler())  # else logging's last-resort handler prints them
    if verbose:
        return
    for handler in logging.getLogger().handlers:
        handler.addFilter(_CONSOLE_FILTER)
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(_FORWARD)
        # transformers adds its stderr handler on first import: keep ours as the only one
        logger.addHandler = lambda handler, _logger=logger: None  # type: ignore[method-assign]
