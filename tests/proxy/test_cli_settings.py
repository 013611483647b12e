"""The CLI reads ``GROUNDPROXY_*`` through :class:`Settings` only; flags override them.

``groundproxy serve`` used to ignore ``GROUNDPROXY_LOG_LEVEL`` (its ``--log-level`` flag
defaulted to ``info`` and won over the environment)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog
import uvicorn

from groundproxy.proxy.cli import main as cli
from groundproxy.proxy.settings import Settings


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[uvicorn.Config]:
    """``uvicorn.Server.run`` recorded instead of run: what ``serve`` would listen with."""
    configs: list[uvicorn.Config] = []

    def run(self: uvicorn.Server, *_: Any, **__: Any) -> None:
        configs.append(self.config)

    monkeypatch.setattr(uvicorn.Server, "run", run)
    for name in ("HOST", "PORT", "LOG_LEVEL", "POLICIES", "DATA"):
        monkeypatch.delenv(f"GROUNDPROXY_{name}", raising=False)
    return configs


DEMO = Path(__file__).resolve().parents[2] / "policies" / "demo.yaml"


def _serve(argv: list[str]) -> int:
    """``serve`` with these flags; ``--policies`` gets the demo policy (serve refuses to start
    on a folder where no policy loads)."""
    policies = Path(argv[argv.index("--policies") + 1])
    (policies / "demo.yaml").write_text(DEMO.read_text(encoding="utf-8"), encoding="utf-8")
    # serve never creates its data folder (issue 41, item 5): one that exists
    data = [] if "--data" in argv else ["--data", str(policies)]
    return cli._run(cli.build_parser().parse_args(["serve", *data, *argv]))


def _logged(capsys: pytest.CaptureFixture[str]) -> str:
    log = structlog.get_logger("test_cli_settings")
    log.info("an_info_line")
    log.warning("a_warning_line")
    return capsys.readouterr().err


def test_serve_honours_log_level_from_the_environment(
    served: list[uvicorn.Config],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GROUNDPROXY_LOG_LEVEL", "warning")
    assert _serve(["--policies", str(tmp_path)]) == 0
    err = _logged(capsys)
    assert "a_warning_line" in err
    assert "an_info_line" not in err


def test_a_flag_overrides_the_environment(
    served: list[uvicorn.Config],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GROUNDPROXY_LOG_LEVEL", "warning")
    monkeypatch.setenv("GROUNDPROXY_PORT", "18123")
    monkeypatch.setenv("GROUNDPROXY_HOST", "127.0.0.2")
    assert _serve(["--policies", str(tmp_path), "--log-level", "info", "--port", "18124"]) == 0
    assert "an_info_line" in _logged(capsys)
    (config,) = served
    assert (config.host, config.port) == ("127.0.0.2", 18124)
    assert config.app.state.gp.settings.policies == tmp_path  # type: ignore[union-attr]


def test_commands_take_data_and_policies_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GROUNDPROXY_DATA", str(tmp_path / "d"))
    monkeypatch.setenv("GROUNDPROXY_POLICIES", "")  # empty counts as unset
    args = cli.build_parser().parse_args(["delete", "--tenant", "acme", "x.md"])
    settings = cli._settings(args)
    assert settings.data == tmp_path / "d"
    assert settings.policies == Settings().policies == Path("policies")


def test_a_bad_setting_is_a_clean_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GROUNDPROXY_PORT", "not-a-port")
    with pytest.raises(SystemExit) as exc:
        cli.main(["serve"])
    assert exc.value.code == 2
    assert "GROUNDPROXY_PORT" in capsys.readouterr().err


def test_a_library_warning_is_a_json_log_line() -> None:
    """A ``warnings.warn`` from a library (pydantic's serializer warnings did) is one JSON
    line in the log, never plain multi-line text (a fresh process: warnings are global)."""
    code = (
        "import warnings\n"
        "from groundproxy.proxy.logs import configure_logging\n"
        "configure_logging('info', json=True)\n"
        "warnings.warn('serializer said\\n  something', UserWarning, stacklevel=1)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    records = [json.loads(ln) for ln in lines]  # every line parses
    assert [r["logger"] for r in records] == ["py.warnings"], lines
    assert "serializer said" in records[0]["event"]
