"""What every firstwrite command line does alike, whichever program parses it.

For ``firstwrite`` and ``python -m firstwrite.demo``: the exit statuses, the one-line error, the port argument type.

:func:`run` runs a command and turns its failures into one line on stderr,
``firstwrite: <why>``, never a traceback (unless ``debug``), with the matching exit status.
"""

from __future__ import annotations

import argparse
import enum
import os
import sqlite3
import sys
from collections.abc import Callable


class ExitCode(enum.IntEnum):
    """The process exit status of every command (``firstwrite --help`` lists them)."""

    OK = 0
    ERROR = 1  # could not do what was asked: unreachable endpoint, missing table, busy port...
    USAGE = 2  # bad command line (argparse's own code)
    VIOLATION = 3  # `race` saw first-writer-wins broken; `console export-diagram`: run broken
    NOT_FOUND = 4  # `keys get` / `keys delete`: no such record
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
    BROKEN_PIPE = 141  # stdout closed early, e.g. piped into `head` (128 + SIGPIPE)


EXIT_CODES_HELP = """exit status:
  0    success
  1    error: the command could not do its work (unreachable endpoint, missing table,
       busy port, unusable --db path, DynamoDB error); one line on stderr says why
  2    bad command line
  3    race: first-writer-wins was violated; console export-diagram: the run
       did not hold (the diagram is written all the same)
  4    keys get / keys delete: no such record
  130  interrupted (Ctrl-C)
  141  stdout was closed early (e.g. piped into head)"""


class CLIError(Exception):
    """A failure the user can act on: printed as ``firstwrite: <message>``, never a traceback."""

    def __init__(self, message: str, code: ExitCode = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.code = code


# -- argument types -------------------------------------------------------------------------------


def integer(text: str, what: str) -> int:
    """``text`` as an int (``_`` and ``,`` allowed as separators), else a usage error
    (``not <what>: 'text'``; ``what`` carries its article: "an integer")."""
    try:
        return int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def port(text: str) -> int:
    value = integer(text, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, not {value}")
    return value


# -- running a command ----------------------------------------------------------------------------

#: The import names of the ``[engine]`` extra's packages (pyproject.toml): a command that needs
#: one of them and finds it missing says which extra to install.
ENGINE_EXTRA = frozenset(
    {"lark", "msgpack", "uvicorn", "httptools", "uvloop", "starlette", "jinja2"}
)
INSTALL_ENGINE = "pip install 'firstwrite[engine]'"


def missing_extra(exc: BaseException) -> CLIError | None:
    """The one-line error for a missing package of the ``[engine]`` extra, or ``None``."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return None
    top = exc.name.partition(".")[0]
    if top not in ENGINE_EXTRA:
        return None
    return CLIError(
        f"this command needs the local engine, which is the [engine] extra ({top} is missing): "
        f"{INSTALL_ENGINE}, or run `make run` in a clone"
    )


def run(
    command: Callable[[], int], *, debug: bool = False, where: Callable[[], str] | None = None
) -> int:
    """Run ``command`` and return its exit status; a failure is one line on stderr and its
    status. ``debug``: an unexpected error raises instead. ``where`` names the DynamoDB the
    command talks to, for the errors that come from it (default: ``DynamoDB``)."""
    try:
        code = int(command())
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except CLIError as exc:
        return _fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return _fail("interrupted", ExitCode.INTERRUPTED)
    except BrokenPipeError:  # stdout closed early (`| head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE
    except Exception as exc:
        if debug:
            raise
        known = missing_extra(exc) or explain(exc, where() if where else "DynamoDB")
        if known is not None:
            return _fail(str(known), known.code)
        if isinstance(exc, OSError):  # e.g. the port is taken: its message, without [Errno N]
            message = exc.strerror if exc.strerror and exc.filename is None else str(exc)
            return _fail(message, ExitCode.ERROR)
        return _fail(
            f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            ExitCode.ERROR,
        )


def _fail(message: str, code: int) -> int:
    print(f"firstwrite: {message}", file=sys.stderr)
    return code


def error_code(exc: BaseException) -> str | None:
    """The DynamoDB error code of a botocore ``ClientError`` (or anything shaped like one)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def explain(exc: BaseException, where: str) -> CLIError | None:
    """The one-line error for an exception from botocore or the engine, or ``None``; ``where``
    names the DynamoDB it came from."""
    from botocore import exceptions as bx

    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectionClosedError)):
        return CLIError(f"cannot reach {where}: {exc}")
    if isinstance(exc, (bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return CLIError(f"{where} did not answer in time: {exc}")
    if isinstance(exc, bx.NoCredentialsError):
        return CLIError(
            "no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or use --db PATH for the local engine"
        )
    if isinstance(exc, bx.NoRegionError):
        return CLIError("no AWS region: pass --region or set AWS_REGION")
    if isinstance(exc, bx.ClientError):
        code = error_code(exc) or "error"
        message = exc.response.get("Error", {}).get("Message", "")
        return CLIError(f"{where} answered {code}: {message}".rstrip(": "))
    if isinstance(exc, bx.BotoCoreError):
        return CLIError(f"{where}: {exc}")
    if isinstance(exc, sqlite3.Error):
        return CLIError(f"local engine database: {exc}")
    return None
