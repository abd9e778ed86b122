"""Server settings from a TOML file and options; `locus serve` refuses a taken port first."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from locus.errors import LocusInputError
from locus.server.settings import ServerSettings
from tests.conftest import CliResult


def test_settings_from_a_toml_file_then_options(tmp_path: Path) -> None:
    config = tmp_path / "serve.toml"
    config.write_text("max_attempts = 5\nfirst_token_timeout_s = 4.5\nretries_per_llm = 0\n")
    settings = ServerSettings.from_file(config).with_(max_attempts=2, stall_timeout_s=None)
    assert (settings.max_attempts, settings.first_token_timeout_s) == (2, 4.5)
    assert settings.retries_per_llm == 0 and settings.stall_timeout_s == 10.0
    assert ServerSettings.from_json(settings.to_json()) == settings
    config.write_text("max_atempts = 5\n")
    with pytest.raises(LocusInputError, match="unknown server setting 'max_atempts'"):
        ServerSettings.from_file(config)
    config.write_text("retries_per_llm = -1\n")
    with pytest.raises(LocusInputError, match="retries_per_llm: expected a number >= 0"):
        ServerSettings.from_file(config)
    config.write_text("not toml [")
    with pytest.raises(LocusInputError, match="not a readable TOML settings file"):
        ServerSettings.from_file(config)


def test_the_first_token_timeout_defaults_to_10_s() -> None:
    """Chosen from measured times to the first token: a public fault harness's reference
    client moves on at about 10 s, and at 15 s the slow-first-token case exceeded its bound."""
    assert ServerSettings().first_token_timeout_s == 10.0
    assert ServerSettings().with_(first_token_timeout_s=4.0).first_token_timeout_s == 4.0


def test_serve_refuses_a_taken_port_before_announcing(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run_cli("serve", "--port", port, "--no-auth", "-w", tmp_path / "none")
    assert result.exit_code == 2
    assert f"serve: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "locus serve: workspace" not in result.stderr  # no banner


def test_an_endpoint_removed_by_a_reload_mid_request_is_a_fallback_not_a_500() -> None:
    import asyncio

    from locus.server.upstream import UpstreamError, Upstreams

    with pytest.raises(UpstreamError) as caught:
        asyncio.run(Upstreams({}).complete("gone", {"messages": []}, timeout=1.0))
    assert caught.value.kind == "retired" and caught.value.retryable
