"""Loaded (via PYTHONPATH) into the proxy process under test: records every outbound
socket connection the process makes, through Python's audit hooks (PEP 578)."""

import os
import sys

_LOG = os.environ.get("GP_CONNECT_LOG")

if _LOG is not None:

    def _hook(event: str, args: tuple) -> None:  # type: ignore[type-arg]
        if event == "socket.connect":
            address = args[1]
            with open(str(_LOG), "a", encoding="utf-8") as fh:
                fh.write(f"{address!r}\n")

    sys.addaudithook(_hook)
