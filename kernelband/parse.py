"""`ast.parse` that threads can share.

On CPython before 3.13 the interpreter keeps one recursion counter for building AST objects;
two threads parsing at once (a suite's problems loaded in a thread pool, the API's request
threads, the scheduler's task threads) can interleave on it, and one of them fails with
`SystemError: AST constructor recursion depth mismatch` (python/cpython#106905 and its
follow-ups). A lock around the call serializes the parses, which the GIL serialized anyway.
"""

from __future__ import annotations

import ast
import sys
import threading
from contextlib import nullcontext

_LOCK: threading.Lock | nullcontext[None] = threading.Lock() if sys.version_info < (3, 13) else nullcontext()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`, one thread at a time where the interpreter needs it."""
    with _LOCK:
        return ast.parse(source, filename)
