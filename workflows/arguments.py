"""Checks on run.py's raw arguments that no single flag owns: text that cannot be an argument at all.

Why: every argument ends up in run.log, cli_args.json and a console line. A NUL, an escape
sequence, bytes that are not UTF-8 (Python hands them over as lone surrogates) or a megabyte-long
value would corrupt those files or crash the writer long after validation, as a traceback. They
are refused here, before argparse, with one line that names the flag (values shown escaped).
Each message is a ``ValueError``; ``workflows.cli`` turns it into a usage error (exit 2).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Sequence

from workflows.server_url import mask_credentials

MAX_ARGUMENT_CHARS = 8192
# Docker's reference grammar, loosely: [registry[:port]/]name[/name...][:tag][@digest].
_DOCKER_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?::[0-9]+)?(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*"
                           r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z0-9]+:[0-9a-fA-F]{32,})?")


def _shown(text: str, limit: int = 80) -> str:
    """A value as an error line may show it: escaped (ascii) and cut to ``limit`` characters."""
    text = mask_credentials(text)
    return ascii(text if len(text) <= limit else text[:limit] + "...")


_FLAG = re.compile(r"--?[A-Za-z][A-Za-z0-9-]*")


def _flag_of(argv: Sequence[str], index: int) -> str:
    """The flag a token belongs to (``--flag=value``, or the ``--flag`` before it), else its position."""
    for token in (argv[index], argv[index - 1] if index > 0 else ""):
        name = token.split("=", 1)[0]
        if _FLAG.fullmatch(name):
            return name
    return f"argument {index + 1}"


def check_argv(argv: Sequence[str]) -> None:
    """Refuse arguments with control characters, non-UTF-8 bytes or more than MAX_ARGUMENT_CHARS."""
    for index, token in enumerate(argv):
        flag = _flag_of(argv, index)
        if len(token) > MAX_ARGUMENT_CHARS:
            raise ValueError(f"{flag}: the value is {len(token)} characters long; at most {MAX_ARGUMENT_CHARS}")
        if any("\ud800" <= c <= "\udfff" for c in token):
            raise ValueError(f"{flag}: {_shown(token)} holds bytes that are not UTF-8 text")
        if any(not c.isprintable() and c not in " \t" for c in token):
            raise ValueError(f"{flag}: {_shown(token)} holds control characters (NUL, escape, newline...)")


def check_bind_host(text: str) -> None:
    """``--bind-host`` is an address Docker publishes the port on: an IP literal."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"invalid --bind-host {_shown(text)}: must be an IP address "
                         f"(127.0.0.1, 0.0.0.0, ::1)") from None


def check_docker_image(text: str) -> None:
    """``--override-docker-image`` is a Docker image reference (it is printed into a shell command too)."""
    if len(text) > 255 or not _DOCKER_IMAGE.fullmatch(text):
        raise ValueError(f"invalid --override-docker-image {_shown(text)}: must be an image reference "
                         f"like repo/name:tag or registry:5000/name@sha256:<digest>")
