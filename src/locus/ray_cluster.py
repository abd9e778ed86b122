"""Ray, for the work that is embarrassingly parallel: encoding many texts, the benchmark suites'
independent fits. Optional: `pip install 'locus[ray]'`.

`ray_session(address)` connects to a cluster for the length of a `with` block:

- ``"local"`` (the CLI's `--ray` without a value): starts a Ray instance on this machine, on
  loopback only, and stops it afterwards;
- ``"auto"``: the cluster this machine already belongs to (`ray start` ran here);
- ``"HOST:PORT"`` or ``"ray://HOST:PORT"``: that cluster's head (Ray Client for ``ray://``).

Workers of a remote cluster must have locus installed (the same version as the driver): the
work is sent as calls into locus, not as code. Results travel back to the caller through Ray's
object store, so nothing needs a shared disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from locus.errors import LocusInputError

__all__ = ["LOCAL", "RaySession", "import_ray", "ray_session"]

LOCAL = "local"
# a Ray instance locus starts itself is single-machine: Ray then binds every server to loopback
# (with cluster mode on, it listens on every interface for other nodes to join)
_SINGLE_NODE = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def import_ray() -> Any:
    """The `ray` module, or an error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise LocusInputError(
            "--ray needs Ray, which is not installed; pip install 'locus[ray]' (or ray>=2.30)"
        ) from None
    return ray


@dataclass(frozen=True)
class RaySession:
    """A connected cluster: its resources when the session opened."""

    address: str
    cpus: int
    gpus: int
    started_here: bool

    def describe(self) -> str:
        where = "a local Ray instance" if self.started_here else f"Ray at {self.address}"
        gpus = f", {self.gpus} GPU" if self.gpus else ""
        return f"{where} ({self.cpus} CPU{gpus})"


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A HOST:PORT (or ray://HOST:PORT) that takes no TCP connection fails here, in seconds:
    Ray itself keeps retrying for minutes."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as error:
        raise LocusInputError(
            f"cannot connect to Ray at {address!r} ({error.strerror or error}); expected a "
            "running cluster's head HOST:PORT (`ray start --head` prints it), 'auto' or "
            "'local'"
        ) from None


@contextmanager
def ray_session(address: str | None = LOCAL, *, cpus: int | None = None) -> Iterator[RaySession]:
    """Connect to Ray for the block (see the module's docstring for `address`); a local instance
    gets `cpus` CPUs (default: every core). A session that was already open in this process
    (``ray.is_initialized()``) is used as it is and left open.

    Raises:
        LocusInputError: Ray not installed, or the cluster cannot be reached.
    """
    address = (address or LOCAL).strip() or LOCAL
    local = address == LOCAL
    if local:
        for name, value in _SINGLE_NODE.items():
            os.environ.setdefault(name, value)
    ray = import_ray()
    opened = False
    if not ray.is_initialized():
        if not local:
            _check_reachable(address)
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        try:
            if local:
                ray.init(num_cpus=cpus, **options)
            else:
                ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise LocusInputError(
                f"cannot connect to Ray at {address!r} ({' '.join(str(error).split())[:300]}); "
                "expected 'local' (start one here), 'auto' (the cluster `ray start` joined on "
                "this machine) or the head's HOST:PORT / ray://HOST:PORT; a cluster with "
                "token authentication also needs RAY_AUTH_MODE=token and its token "
                "(RAY_AUTH_TOKEN, or ~/.ray/auth_token)"
            ) from error
        opened = True
    resources = ray.cluster_resources()
    try:
        yield RaySession(
            address=address,
            cpus=int(resources.get("CPU", 0)),
            gpus=int(resources.get("GPU", 0)),
            started_here=local and opened,
        )
    finally:
        if opened:
            ray.shutdown()
