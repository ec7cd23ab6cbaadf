"""Shared parsing: threads parse one at a time where the interpreter needs it (CPython before
3.13 fails a parse that interleaves with another thread's with SystemError)."""

from __future__ import annotations

import ast
import sys
import threading
import time
from typing import Any

import pytest

from kernelband.parse import parse


def test_parse_returns_the_module_ast_parse_would() -> None:
    source = "def f(x):\n    return x + 1\n"
    assert ast.dump(parse(source)) == ast.dump(ast.parse(source))
    with pytest.raises(SyntaxError):
        parse("def f(:\n")


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="the interpreter's AST builder is thread-safe there")
def test_threads_parse_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    real_parse = ast.parse
    active, most = [0], [0]
    guard = threading.Lock()

    def slow_parse(source: str, *args: Any, **kwargs: Any) -> ast.Module:
        with guard:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.05)  # long enough that unserialized threads would overlap
        with guard:
            active[0] -= 1
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", slow_parse)
    threads = [threading.Thread(target=parse, args=(f"x = {i}\n",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
