"""Running user pipeline code (``pipeline.python``) without letting it take rlplex down.

A config may name a Python function that builds its pipeline. That is user
code run while reading a config: an exception or ``sys.exit`` is caught in
process, but ``os.abort``, a segfault or an endless loop cannot be, so the
function is first imported and called in a forked child
(:func:`probe_pipeline_function`) and refused, with one error naming it, if
the child dies or hangs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import select
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from rlplex.dag.pipeline import Pipeline
from rlplex.errors import ConfigError, RlplexError

PROBE_TIMEOUT_S = 60.0
"""How long a ``pipeline.python`` function may take to return before it is called hung."""


def import_pipeline_module(ref: str, base_dir: Path, file: str | None = None) -> Any:
    """The module of ``pipeline.python`` (``"module:function"`` or ``"file.py:function"``).

    A ``.py`` file is read relative to ``base_dir`` (the config's folder), which
    is also on the import path while a module name is imported.

    Raises:
        ConfigError: the reference is malformed, the file is missing, or the
            module failed to import (naming ``pipeline.python`` and why).
    """
    module_name, sep, func_name = ref.partition(":")
    if not sep or not module_name or not func_name:
        raise ConfigError(
            'must look like "module:function" or "file.py:function"',
            field="pipeline.python",
            value=ref,
            file=file,
        )
    key = (str(base_dir.resolve()), module_name, _modified(base_dir, module_name))
    if key in _PIPELINE_MODULES:  # imported once: its module-level code runs once
        return _PIPELINE_MODULES[key]
    try:
        if module_name.endswith(".py"):
            path = (base_dir / module_name).resolve()
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None or not path.exists():
                raise ConfigError("file not found", field="pipeline.python", value=ref, file=file)
            module = importlib.util.module_from_spec(spec)
            # its own folder on the import path, so that it imports the modules beside it
            # as when run there (as a module name's base folder is)
            sys.path.insert(0, str(path.parent))
            try:
                spec.loader.exec_module(module)
            finally:
                sys.path.remove(str(path.parent))
        else:
            sys.path.insert(0, str(base_dir))
            try:
                module = importlib.import_module(module_name)
            finally:
                sys.path.remove(str(base_dir))
    except (ConfigError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # the import failed, or called sys.exit: say which and why
        raise ConfigError(
            f"cannot import the pipeline module {module_name!r}: {_describe(exc)}",
            field="pipeline.python",
            value=ref,
            file=file,
        ) from exc
    _PIPELINE_MODULES[key] = module
    return module


_PIPELINE_MODULES: dict[tuple[str, str, int], Any] = {}
"""Pipeline modules already imported, by (base folder, module name or file, the file's
modification time): a ``.py`` file edited since (a notebook reloading its config) is read
again."""


def _modified(base_dir: Path, module_name: str) -> int:
    """A ``.py`` file's modification time in nanoseconds (0 for a module name, or a file that
    is not there: the import says so)."""
    if not module_name.endswith(".py"):
        return 0
    try:
        return (base_dir / module_name).stat().st_mtime_ns
    except OSError:
        return 0


def _where(exc: BaseException) -> str:
    """`` at FILE:LINE`` of the innermost frame of the user's code that raised ``exc``."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    # rlplex's own frames are not where the user went wrong: an error its API raises (a
    # stage's bad value) is named at the user's call of it.
    package = Path(__file__).resolve().parents[1]
    user = [f for f in frames if not Path(f.filename).resolve().is_relative_to(package)]
    if not user:
        return ""
    return f" at {user[-1].filename}:{user[-1].lineno} (in {user[-1].name})"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    if isinstance(exc, RlplexError):
        return str(exc)  # rlplex's own words already say what is wrong
    return f"{type(exc).__name__}: {exc}"


def _check_target(ref: str, file: str | None) -> None:
    """Refuse a target that is not user code: a standard-library module (``os:abort``,
    ``sys:exit``) can only end or corrupt the process, never return a Pipeline."""
    module_name = ref.partition(":")[0]
    top = module_name.split(".")[0]
    if not module_name.endswith(".py") and top in getattr(sys, "stdlib_module_names", ()):
        raise ConfigError(
            f"must name a function of your own module, not of the standard library's {top!r}",
            field="pipeline.python",
            value=ref,
            file=file,
        )


def probe_pipeline_function(ref: str, base_dir: Path, file: str | None) -> None:
    """Import the ``pipeline.python`` module and call its function once in a forked
    child; refuse it if the child dies.

    An exception or ``sys.exit`` in user code is caught in-process
    (:func:`import_pipeline_module` and :func:`_call_factory` catch
    ``BaseException``), but ``os.abort``, ``os._exit``, a segfault in an
    extension or an endless loop cannot be: they take the process down or
    never return, at import time (module-level code) as well as in the
    function. So the child imports the module and calls the function, with
    its output discarded, and reports that both returned; only then does this
    process import the module itself. A child that dies, or is silent for
    :data:`PROBE_TIMEOUT_S`, becomes one ConfigError naming the module and
    function; its Python stack (from :mod:`faulthandler`) is kept for
    ``--debug``. The price: module-level code runs twice (once in the child,
    whose writes to stdout are discarded), and a module that imports torch
    pays for that import twice (forking after the import, as first written,
    left import-time crashes uncontained). A module already imported is not
    imported again in the child. Where ``fork`` does not exist (Windows) the
    probe is skipped, and rlplex's own pipelines (``rlplex.pipelines.*``) are
    not probed: they are known to return.
    """
    if not hasattr(os, "fork"):
        return
    with tempfile.TemporaryFile() as log:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns, never runs the parent's cleanup
            try:
                os.close(read_fd)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(log.fileno(), 2)
                import faulthandler

                faulthandler.enable(file=log.fileno())
                # An ordinary failure (an exception, sys.exit) is reported by the parent's
                # own import and call, which catch them.
                with contextlib.suppress(BaseException):
                    _pipeline_factory(ref, base_dir, file)()
                os.write(write_fd, b"1")
            finally:
                os._exit(0)
        os.close(write_fd)
        try:
            ready, _, _ = select.select([read_fd], [], [], PROBE_TIMEOUT_S)
            returned = bool(ready) and os.read(read_fd, 1) == b"1"
        finally:
            os.close(read_fd)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if returned:
            return
        log.seek(0)
        detail = log.read()[-20_000:].decode("utf-8", "replace")
    if not ready:
        why = f"did not return within {PROBE_TIMEOUT_S:g} s"
    elif os.WIFSIGNALED(status):
        why = f"killed the process with {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        why = f"ended the process (exit status {os.waitstatus_to_exitcode(status)})"
    error = ConfigError(
        f"the pipeline function {ref!r} {why}", field="pipeline.python", value=ref, file=file
    )
    error.debug_detail = detail  # type: ignore[attr-defined]
    raise error


def load_python_pipeline(ref: str, base_dir: Path, file: str | None) -> Pipeline:
    _check_target(ref, file)
    if not ref.startswith("rlplex."):  # rlplex's own pipelines are trusted code
        probe_pipeline_function(ref, base_dir, file)
    factory = _pipeline_factory(ref, base_dir, file)
    return _call_factory(factory, ref, file)


def _pipeline_factory(ref: str, base_dir: Path, file: str | None) -> Any:
    """The ``pipeline.python`` function, its module imported in-process."""
    module = import_pipeline_module(ref, base_dir, file)
    module_name, _, func_name = ref.partition(":")
    factory = getattr(module, func_name, None)
    if not callable(factory) or not inspect.isfunction(inspect.unwrap(factory)):
        if callable(factory):
            raise ConfigError(
                f"{module_name}:{func_name} is not a Python function (a builtin or a class"
                " cannot be checked before it runs)",
                field="pipeline.python",
                value=ref,
                file=file,
            )
        raise ConfigError(
            f"module {module_name!r} has no function {func_name!r}",
            field="pipeline.python",
            value=ref,
            file=file,
        )
    return factory


def _call_factory(factory: Any, ref: str, file: str | None) -> Pipeline:
    try:
        pipeline = factory()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's function failed: name it; --debug shows the cause
        raise ConfigError(
            f"the pipeline function failed{_where(exc)}: {_describe(exc)}",
            field="pipeline.python",
            value=ref,
            file=file,
        ) from exc
    if not isinstance(pipeline, Pipeline):
        raise ConfigError(
            f"the function returned {type(pipeline).__name__}, not a rlplex Pipeline",
            field="pipeline.python",
            value=ref,
            file=file,
        )
    return pipeline
