"""The check reporter: prints "PASS <name>" or "FAIL <name>: <why>" per check,
one line each, as soon as it is decided, and remembers whether any failed."""

from __future__ import annotations

import sys
import traceback
from typing import Callable


class CheckFailed(Exception):
    """Raised inside a check to fail it with a readable reason."""


def require(condition: bool, why: str) -> None:
    """Fails the running check with `why` unless `condition` holds."""
    if not condition:
        raise CheckFailed(why)


class Reporter:
    def __init__(self, verbose: bool = False) -> None:
        self.passed = 0
        self.failed = 0
        self.verbose = verbose

    def passes(self, name: str) -> None:
        self.passed += 1
        print(f"PASS {name}", flush=True)

    def fails(self, name: str, why: str) -> None:
        self.failed += 1
        why = " ".join(str(why).split()) or "failed"
        print(f"FAIL {name}: {why}", flush=True)

    def check(self, name: str, fn: Callable[[], object]) -> bool:
        """Runs fn; any exception fails the check. Returns whether it passed."""
        try:
            fn()
        except CheckFailed as failure:
            self.fails(name, str(failure))
            return False
        except Exception as error:  # noqa: BLE001 - every error is a failed check
            if self.verbose:
                traceback.print_exc(file=sys.stderr)
            self.fails(name, f"{type(error).__name__}: {describe(error)}")
            return False
        self.passes(name)
        return True

    def skip(self, name: str, because: str) -> None:
        """A check that could not run because an earlier one failed counts as failed."""
        self.fails(name, f"not run: {because}")


def describe(error: BaseException) -> str:
    """A one-line description, with the status and details of a gRPC error."""
    code = getattr(error, "code", None)
    details = getattr(error, "details", None)
    if callable(code) and callable(details):
        try:
            return f"{code()} {details()}"
        except Exception:  # noqa: BLE001
            pass
    return str(error) or repr(error)
