"""A zygote started with `python -m` is the module its runs import (they read RESULT_FD there)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
print("same:", sys.modules["kernelband.sandbox.zygote"] is sys.modules["__main__"], flush=True)
"""


def test_a_module_imported_in_the_zygote_sees_the_running_zygote(tmp_path: Path) -> None:
    (tmp_path / "zygote_probe.py").write_text(PROBE)
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    zygote = subprocess.Popen(
        [sys.executable, "-m", "kernelband.sandbox.zygote", str(child.fileno()), "zygote_probe"],
        pass_fds=[child.fileno()], stdout=subprocess.PIPE, text=True, env=env)
    child.close()
    try:
        assert json.loads(parent.recv(4096))["ready"] is True
    finally:
        parent.close()  # the zygote ends when its parent's end closes
    out, _ = zygote.communicate(timeout=60)
    assert "same: True" in out
