"""Ray, for the work that is embarrassingly parallel: encoding many texts, the benchmark suites'
independent fits. Optional: `pip install 'locus[ray]'`.

`ray_session(address)` connects to a cluster for the length of a `with` block:

- ``"local"`` (the CLI's `--ray` without a value): starts a Ray instance on this machine, every
  server of it (GCS, raylet, object manager, agents, workers) on 127.0.0.1 only, and stops it
  afterwards;
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

__all__ = ["LOCAL", "SINGLE_NODE", "RaySession", "import_ray", "ray_session"]

LOCAL = "local"
# A Ray instance locus starts itself is single-machine. With cluster mode on (Linux's default)
# Ray replaces a loopback node address by the machine's own, and its servers listen there or on
# every interface for other nodes to join; with it off, the node address is 127.0.0.1 and every
# server listens on it alone. Ray reads this when it is imported.
SINGLE_NODE = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


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


def _check_loopback(ray: Any) -> None:
    """A local instance takes 127.0.0.1 as its node address only where Ray runs single-node:
    refused where Ray was imported in cluster mode before `ray_session` could turn it off.
    Read from Ray's setting, not by asking Ray for the node address: in cluster mode that
    lookup opens a UDP socket towards a public address, and nothing here may reach outside."""
    from ray._private import ray_constants

    if getattr(ray_constants, "ENABLE_RAY_CLUSTER", False):
        raise LocusInputError(
            "a local Ray instance would listen on this machine's network address, not on "
            "loopback only: Ray was imported in cluster mode before locus could turn it off; "
            "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before Ray is imported, or start a head "
            "yourself (`ray start --head`) and pass its HOST:PORT"
        )


@contextmanager
def ray_session(address: str | None = LOCAL, *, cpus: int | None = None) -> Iterator[RaySession]:
    """Connect to Ray for the block (see the module's docstring for `address`); a local instance
    gets `cpus` CPUs (default: every core). A session that was already open in this process
    (``ray.is_initialized()``) is used as it is and left open.

    Raises:
        LocusInputError: Ray not installed, the cluster cannot be reached, or a local instance
            would not be on loopback only.
    """
    address = (address or LOCAL).strip() or LOCAL
    local = address == LOCAL
    if local:
        os.environ.update(SINGLE_NODE)
    ray = import_ray()
    opened = False
    if not ray.is_initialized():
        if local:
            _check_loopback(ray)
        else:
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
