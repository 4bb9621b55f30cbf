"""Helpers shared by every test package (import as ``from tests.helpers import ...``).

Plain functions live here; fixtures live in ``tests/conftest.py``. One copy of each, so a fix to
how tests pick ports or wait for servers reaches every test at once.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
