"""One native thread for the small numerical fits of a policy (k-means, logistic prior).

`threadpoolctl.threadpool_limits` finds the process's BLAS and OpenMP libraries anew on every
call by reading /proc/self/maps, about 2.5 ms in a process that has loaded torch; the
scheduler reclusters many times a second. One controller, made on first use (when every
numerical library is loaded), serves every later call.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None
_lock = threading.Lock()


def one_thread() -> AbstractContextManager[Any]:
    """A context in which BLAS and OpenMP use one thread (tiny inputs; no oversubscription)."""
    global _controller
    if _controller is None:
        with _lock:
            if _controller is None:
                _controller = ThreadpoolController()
    return _controller.limit(limits=1)


__all__ = ["one_thread"]
