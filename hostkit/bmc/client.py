"""One host's BMC over Redfish, through sushy (the client Ironic and Metal3 use), and its failures
as one line each.

``hostkit_bmc`` (an inventory host variable) says where and how: ``{address, username, password |
password_env, verify_tls, ca_file, system, timeout, vendor_map}``. The password is read once, handed to sushy and
never printed, journaled or put in an error: :func:`scrub` takes it out of any text that leaves this
module. Every request is counted (:attr:`Bmc.requests`), so a run can show what it cost.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlparse

from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput, HostkitError
from hostkit.jsonfile import check_shape

# hostkit_bmc's keys and their types (check_shape's form); address, username and one password are needed.
BMC_SHAPE = {
    "address": str,
    "username": str,
    "password?": (str, type(None)),
    "password_env?": (str, type(None)),
    "verify_tls?": (bool, type(None)),
    "ca_file?": (str, type(None)),
    "system?": (str, type(None)),
    "timeout?": (int, type(None)),
    "vendor_map?": (str, type(None)),
}
BMC_KEYS = [k.rstrip("?") for k in BMC_SHAPE]
DEFAULT_TIMEOUT = 30  # seconds per request: a BMC answers in well under that or is "slow"


class BmcError(HostkitError):
    """A BMC that could not be reached, refused the credentials, failed TLS verification or
    rejected a request: the host failed (exit 1), nothing was changed by hostkit. ``status``: the
    HTTP status the BMC answered with, where it answered."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class BmcSettings:
    host: str
    url: str
    username: str
    password: str  # never printed: repr below hides it
    verify: bool | str
    system: str | None
    timeout: int
    vendor_map: str | None = None

    def __repr__(self) -> str:
        return f"BmcSettings(host={self.host!r}, url={self.url!r}, username={self.username!r}, password=***)"


def bmc_settings(host: str, value, env=os.environ) -> BmcSettings:
    """``hostkit_bmc`` of one host, checked: bad input (exit 2) names the key, never the password."""
    where = f"{host}: hostkit_bmc"
    if not isinstance(value, dict):
        raise BadInput(f"{where} must be a mapping {{address, username, password | password_env}}")
    unknown = sorted(set(value) - set(BMC_KEYS))
    if unknown:
        raise BadInput(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(BMC_KEYS)})")
    for key in ("address", "username"):
        if not value.get(key):
            raise BadInput(f"{where}: {key} is missing")
    # a wrong type is named, never quoted where it may be the password
    check_shape({k: v for k, v in value.items() if k != "password"}, BMC_SHAPE, where)
    password = value.get("password")
    if password is not None and not isinstance(password, str):
        raise BadInput(f"{where}.password must be text, got {type(password).__name__}")
    if value.get("password_env"):
        password = env.get(value["password_env"])
        if password is None:
            raise BadInput(f"{where}: password_env names {value['password_env']}, which is not set")
    if not isinstance(password, str) or not password:
        raise BadInput(f"{where}: no password (give password, from Ansible Vault, or password_env)")
    address = value["address"]
    url = address if "://" in address else f"https://{address}"
    parsed = urlparse(url)
    if parsed.scheme not in ("https", "http") or not parsed.hostname:
        raise BadInput(f"{where}: address {excerpt(address)} is not a host name or an https:// URL")
    timeout = value.get("timeout") or DEFAULT_TIMEOUT
    if not 1 <= timeout <= 600:
        raise BadInput(f"{where}: timeout must be 1-600 seconds, got {timeout}")
    verify: bool | str = value.get("verify_tls", True) if value.get("verify_tls") is not None else True
    if value.get("ca_file"):
        if not os.path.isfile(value["ca_file"]):
            raise BadInput(f"{where}: ca_file {excerpt(value['ca_file'])} does not exist")
        verify = value["ca_file"]
    return BmcSettings(
        host,
        url.rstrip("/"),
        value["username"],
        password,
        verify,
        value.get("system"),
        timeout,
        value.get("vendor_map"),
    )


def scrub(text: str, settings: BmcSettings) -> str:
    """``text`` with the password replaced (an error from below may quote a request)."""
    return text.replace(settings.password, "***") if settings.password else text


class Bmc:
    """A connected BMC: the sushy root, the host's system, and a count of requests by method."""

    def __init__(self, settings: BmcSettings):
        self.settings = settings
        self.requests: Counter = Counter()
        self.paths: Counter = Counter()  # GETs by path: no resource should be read twice in a run
        self.root = self._call("connecting", self._connect)
        self.system = self._call("reading the system", self._find_system)

    # ------------------------------------------------------------------ plumbing

    def _count(self, response) -> None:
        self.requests[response.request.method] += 1
        if response.request.method == "GET":
            self.paths[urlparse(response.request.url).path] += 1

    def _connect(self):
        import sushy
        from sushy import auth

        s = self.settings
        return sushy.Sushy(
            s.url,
            auth=auth.BasicAuth(s.username, s.password),
            verify=s.verify,
            read_timeout=s.timeout,
            connect_timeout=min(s.timeout, 10),
            server_side_retries=1,
            server_side_retries_delay=1,
            connector=_connector(s, self._count),
        )

    def _find_system(self):
        ids = list(self.root.get_system_collection().members_identities)
        if not ids:
            raise BmcError(f"{self.settings.host}: the BMC at {self.settings.url} lists no system")
        if self.settings.system:
            match = [i for i in ids if i.rstrip("/").rsplit("/", 1)[-1] == self.settings.system]
            if not match:
                raise BmcError(f"{self.settings.host}: the BMC has no system {self.settings.system!r}")
            return self.root.get_system(match[0])
        if len(ids) > 1:
            raise BadInput(f"{self.settings.host}: the BMC lists {len(ids)} systems: name one in hostkit_bmc.system")
        return self.root.get_system(ids[0])

    def _call(self, doing: str, fn, *args, **kwargs):
        """``fn`` with sushy's and requests' errors as one :class:`BmcError` line naming the cause."""
        import sushy.exceptions as sx

        s = self.settings
        try:
            return fn(*args, **kwargs)
        except HostkitError:
            raise
        except sx.AccessError as exc:
            raise BmcError(
                f"{s.host}: the BMC at {s.url} refused the credentials of {s.username!r} (HTTP {exc.status_code})"
            ) from None
        except sx.HTTPError as exc:
            raise BmcError(
                scrub(f"{s.host}: {doing}: the BMC answered HTTP {exc.status_code}: {bmc_message(exc)}", s),
                status=exc.status_code,
            ) from None
        except sx.ConnectionError as exc:
            raise BmcError(scrub(f"{s.host}: {doing}: {connection_problem(exc, s)}", s)) from None
        except sx.SushyError as exc:
            raise BmcError(scrub(f"{s.host}: {doing}: {excerpt(str(exc), 200)}", s)) from None

    def accounting(self) -> dict:
        """The requests this run made, by method, and every resource it read more than once."""
        return {**dict(self.requests), "read_twice": sorted(p for p, n in self.paths.items() if n > 1)}

    def call(self, doing: str, fn, *args, **kwargs):
        return self._call(doing, fn, *args, **kwargs)

    def get_json(self, path: str) -> dict:
        """A resource sushy has no class for (Memory), through sushy's own connector."""
        return self._call(f"reading {path}", lambda: self.root._conn.get(path).json())

    def power_state(self) -> str:
        def read():
            self.system.refresh(force=True)
            return str(self.system.power_state)

        return self._call("reading the power state", read)

    def reset(self, reset_type: str) -> None:
        """``ComputerSystem.Reset`` with a Redfish ResetType (``GracefulShutdown``, ``ForceOff``, ``On``)."""
        from sushy import ResetType

        self._call(f"{reset_type} through ComputerSystem.Reset", self.system.reset_system, ResetType(reset_type))

    def wait_power(self, want_on: bool, seconds: float, poll: float = 1.0) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            on = self.power_state().lower().endswith("on")
            if on == want_on:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)


def _connector(settings: BmcSettings, callback):
    from sushy import connector

    return connector.Connector(
        settings.url,
        verify=settings.verify,
        response_callback=callback,
        default_request_timeout=settings.timeout,
        connect_timeout=min(settings.timeout, 10),
        server_side_retries=1,
        server_side_retries_delay=1,
    )


def bmc_message(exc) -> str:
    """The BMC's own words of a rejected request: its @Message.ExtendedInfo messages, else its error."""
    infos = exc.extended_info if isinstance(getattr(exc, "extended_info", None), list) else []
    words = [m.get("Message") or m.get("MessageId") for m in infos if isinstance(m, dict)]
    words = [w for w in words if w]
    text = "; ".join(words) if words else str(exc.detail or exc.code or "no message")
    return " ".join(text.split())[:300]


def connection_problem(exc, settings: BmcSettings) -> str:
    """Why a connection failed, named: TLS verification, a timeout, or nothing listening."""
    text = str(getattr(exc, "kwargs", {}).get("error", exc))
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        how = f"ca_file {settings.verify}" if isinstance(settings.verify, str) else "the system's CAs"
        return f"TLS verification of {settings.url} failed against {how} (set hostkit_bmc.ca_file)"
    if "SSLError" in text or "SSL" in text:
        return f"TLS with {settings.url} failed: {excerpt(text, 160)}"
    if "timed out" in text.lower() or "Timeout" in text:
        return f"the BMC at {settings.url} did not answer within {settings.timeout} s"
    return f"the BMC at {settings.url} is unreachable: {excerpt(text, 160)}"


def connect(settings: BmcSettings) -> Bmc:
    return Bmc(settings)
