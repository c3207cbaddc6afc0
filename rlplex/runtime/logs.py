"""structlog for Ray workers, installed by Ray's ``worker_process_setup_hook``.

The CLI configures structlog in the driver; workers are other processes, so
Ray runs :func:`setup_worker_logging` in each one as it starts. Workers log
JSON lines to stderr, which Ray forwards to the driver's log.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog


def setup_worker_logging() -> None:
    """Configure structlog in a Ray worker process: JSON lines, WARNING and above.

    ``RLPLEX_LOG=debug`` or ``info`` (inherited from the driver) shows more.
    """
    level = getattr(logging, os.environ.get("RLPLEX_LOG", "warning").upper(), logging.WARNING)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
