"""Every setting of the smoke test, written once: default, bounds, command-line option, agent argv.

``SmokeOptions`` is the typed request ``run_smoke`` takes. The same declaration gives

* ``add_smoke_arguments(parser)``: the argparse options of ``hostkit smoke`` (and of the host
  agent's ``smoke`` sub-command), their defaults and help taken from the fields below;
* ``SmokeOptions.from_args(ns, **fallbacks)``: options from a parsed namespace; an option not
  given on the command line takes ``fallbacks[name]`` (e.g. a profile's transport), else its default;
* ``opts.to_agent_args()``: the argv that makes the agent rebuild the same options on a host
  (``SmokeOptions.from_args(parser.parse_args(opts.to_agent_args())) == opts``).

Standard library only: this module ships to hosts with the agent.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from dataclasses import dataclass, field, fields

from hostkit.errors import BadInput
from hostkit.smoke.metrics import CREDIBLE_P999

DEFAULT_REQUESTS = 20_000
MAX_CLIENTS = 64
IDLE_MODES = ("adaptive", "sleep", "spin")
FIFO_POLICIES = ("budget", "always", "off")


def _opt(
    default,
    help: str = "",
    *,
    flag: str | None = "",
    lo=None,
    hi=None,
    lo_open: bool = False,
    choices=None,
    metavar: str | None = None,
):
    """A field with its command-line option. ``flag=None``: a setting with no option (API only);
    ``lo``/``hi``: inclusive bounds (``lo_open``: lo itself excluded)."""
    return field(
        default=default,
        metadata={
            "flag": flag,
            "help": help,
            "lo": lo,
            "hi": hi,
            "lo_open": lo_open,
            "choices": choices,
            "metavar": metavar,
        },
    )


@dataclass(frozen=True)
class SmokeOptions:
    # transport and queue
    transport: str = _opt(
        "shm",
        "shm (the shared-memory queue) or socket (TCP loopback + pickle, as the original inference actor's socket transport)",
        choices=("shm", "socket"),
    )
    allocator: str = _opt(
        "partition",
        "slot allocation: lock-free partition, or flock as the original inference actor's queue",
        choices=("partition", "flock"),
    )
    state_stride: int = _opt(
        64,
        "bytes per slot state: 64 (own cache line) or 4 (packed as the original inference actor's: false sharing)",
        choices=(4, 64),
    )
    slots: int = _opt(256, "queue slots", lo=1, hi=65536, metavar="N")
    req_size: int = _opt(16384, flag=None, lo=64, hi=1 << 24)
    resp_size: int = _opt(32768, flag=None, lo=64, hi=1 << 24)
    tensor_size: int = _opt(16384, flag=None, lo=64, hi=1 << 24)
    # model
    infer_ms: float = _opt(
        2.0, "synthetic model time per inference (0: the null model, transport only)", lo=0.0, hi=10000.0, metavar="MS"
    )
    model: str | None = _opt(
        None, "an ONNX model instead of the synthetic one (needs onnxruntime)", metavar="FILE.onnx"
    )
    # length and load
    requests: int | None = _opt(
        None,
        f"number of inferences (default {DEFAULT_REQUESTS:,} when --duration is not given)",
        lo=1,
        hi=10**9,
        metavar="N",
    )
    duration: float | None = _opt(None, "run for S seconds", lo=0.0, lo_open=True, hi=86400.0, metavar="S")
    clients: int = _opt(2, "client processes", lo=1, hi=MAX_CLIENTS, metavar="K")
    client_batch: int = _opt(4, "requests each client submits at once (closed loop)", lo=1, hi=65536, metavar="B")
    rate: float | None = _opt(
        None,
        "open loop: requests/s over all clients (latency from when each was due)",
        lo=0.0,
        lo_open=True,
        hi=1e7,
        metavar="R",
    )
    # worker
    max_batch: int = _opt(16, "most requests the worker claims at once", lo=1, hi=65536, metavar="N")
    min_batch: int = _opt(
        8, "batch the worker waits for while more requests are on their way", lo=1, hi=65536, metavar="N"
    )
    min_batch_wait_ms: float = _opt(0.2, "longest wait for --min-batch", lo=0.0, hi=1000.0, metavar="MS")
    idle: str = _opt(
        "adaptive",
        "how the worker and clients wait: adaptive (spin briefly, then block on an "
        "eventfd until woken), sleep (the original inference actor's loop: the worker sleeps --idle-sleep-ms "
        "when idle and waits the whole --min-batch-wait-ms, clients poll every "
        "--poll-sleep-us), spin (as sleep, but the worker never sleeps: the original "
        "inference actor's busy polling)",
        choices=IDLE_MODES,
    )
    spin_us: float = _opt(
        50.0, "with --idle adaptive: the longest spin before blocking", lo=0.0, hi=100000.0, metavar="US"
    )
    idle_sleep_ms: float = _opt(0.5, "with --idle sleep: the worker's idle sleep", lo=0.0, hi=1000.0, metavar="MS")
    poll_sleep_us: float = _opt(
        50.0, "with --idle sleep or spin: the clients' sleep between polls (0: none)", lo=0.0, hi=100000.0, metavar="US"
    )
    cpu: int | None = _opt(
        None, "worker CPU (default: the first isolated CPU, else the last allowed one)", lo=0, hi=1 << 16
    )
    client_cpus: tuple[int, ...] | None = _opt(None, flag=None)
    fifo: str = _opt(
        "budget",
        "when the worker runs inference in SCHED_FIFO (if permitted): budget (in "
        "SCHED_FIFO as long as its SCHED_FIFO time in any one RT period stays under the "
        "host's sched_rt_runtime_us less 5%%, else in SCHED_OTHER at nice -20, so RT "
        "throttling never parks it), always (the original inference actor's worker: every inference, parked "
        "by the throttle once a busy worker overruns the budget), off (never; also "
        "--no-fifo)",
        choices=FIFO_POLICIES,
    )
    request_timeout_s: float = _opt(
        2.0,
        "a request unanswered this long is an error",
        flag="--request-timeout",
        lo=0.0,
        lo_open=True,
        hi=3600.0,
        metavar="S",
    )
    # calibration and peers
    inject_stall_ms: float | None = _opt(None, flag=None, lo=0.0, lo_open=True, hi=60000.0)
    inject_every_s: float | None = _opt(None, flag=None, lo=0.0, lo_open=True, hi=3600.0)
    with_cyclictest: bool = _opt(False, "run cyclictest on the worker CPU alongside")
    probe_gaps: bool = _opt(
        False,
        "run the vCPU-gap probe alongside (hostkit gaps: SCHED_IDLE spinners on every "
        "CPU, for the whole run): co-stops of several vCPUs at once, and the share of the "
        "slowest inferences that overlapped one",
    )
    trace_sched: bool = _opt(
        False,
        "record sched_switch on the worker CPU (tracefs, root) and name who ran "
        "instead for every deschedule longer than --target-p999-ms, and whether only RT "
        "throttling explains it; without tracefs the report says so",
    )
    gap_threshold_us: float = _opt(
        100.0, "with --probe-gaps: record clock gaps longer than this", lo=1.0, hi=1e6, metavar="US"
    )
    # the gate
    target_p999_ms: float = _opt(
        1.0,
        f"SLO on p999 deschedule (needs >= {CREDIBLE_P999:,} samples to pass)",
        lo=0.0,
        lo_open=True,
        hi=1e6,
        metavar="MS",
    )

    def __post_init__(self) -> None:
        if self.client_cpus is not None:
            object.__setattr__(self, "client_cpus", tuple(self.client_cpus))
        for f in fields(self):
            value, m = getattr(self, f.name), f.metadata
            if value is None or isinstance(value, (tuple, str, bool)) and not m["choices"]:
                continue
            name = _flag(f) or f.name
            if m["choices"] and value not in m["choices"]:
                raise BadInput(f"{name} must be one of {', '.join(map(str, m['choices']))}, got {value!r}")
            if (
                m["lo"] is not None
                and (value < m["lo"] or (m["lo_open"] and value == m["lo"]))
                or m["hi"] is not None
                and value > m["hi"]
            ):
                low = f"({m['lo']:g}" if m["lo_open"] else f"[{m['lo']:g}"
                raise BadInput(f"{name} must be in {low}, {m['hi']:g}], got {value}")
        if self.requests is not None and self.duration is not None:
            raise BadInput("--requests and --duration exclude each other")
        if self.clients * self.client_batch > self.slots:
            raise BadInput(
                f"--clients x --client-batch ({self.clients * self.client_batch}) exceeds --slots {self.slots}"
            )
        if not self.min_batch <= self.max_batch <= self.slots:
            raise BadInput("batching needs --min-batch <= --max-batch <= --slots")
        if (self.inject_stall_ms is None) != (self.inject_every_s is None):
            raise BadInput("an injected stall needs both its length and its period")
        if self.inject_stall_ms is not None and self.inject_stall_ms / 1000 >= self.inject_every_s:
            raise BadInput(
                f"--inject-stall {self.inject_stall_ms:g}@{self.inject_every_s:g}: the stall must be "
                "shorter than its period"
            )

    # ------------------------------------------------------------------ derived
    @property
    def total_requests(self) -> int | None:
        """Requests to run (None: run for ``duration``)."""
        if self.requests is not None:
            return self.requests
        return None if self.duration is not None else DEFAULT_REQUESTS

    def credible_duration_s(self) -> float:
        """A lower bound on the seconds a run needs for a credible p999 (CREDIBLE_P999 samples): the
        worker runs one inference at a time, so at least CREDIBLE_P999 x --infer-ms (or x 1/--rate)."""
        per_request_s = max(self.infer_ms / 1000, 1 / self.rate if self.rate else 0.0)
        return CREDIBLE_P999 * per_request_s

    def check_host(self) -> None:
        """The checks that depend on this host (run where the test runs, before anything starts)."""
        allowed = sorted(os.sched_getaffinity(0))
        if self.cpu is not None and self.cpu not in allowed:
            raise BadInput(f"--cpu {self.cpu} is not a CPU this process may run on ({allowed})")
        if self.model and not os.path.isfile(self.model):
            raise BadInput(f"--model {self.model}: no such file")

    def replace(self, **changes) -> SmokeOptions:
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ command line
    @classmethod
    def from_args(cls, ns: argparse.Namespace, **fallbacks) -> SmokeOptions:
        """From a namespace parsed with ``add_smoke_arguments``: what the command line gave, else
        ``fallbacks``, else the defaults. Raises BadInput on values out of bounds."""
        names = {f.name for f in fields(cls)}
        unknown = set(fallbacks) - names
        if unknown:
            raise TypeError(f"unknown smoke options {sorted(unknown)}")
        values = {k: v for k, v in fallbacks.items() if v is not None}
        values.update({k: v for k, v in vars(ns).items() if k in names})
        stall = getattr(ns, "inject_stall", None)
        if stall:
            values["inject_stall_ms"], values["inject_every_s"] = parse_stall(stall)
        return cls(**values)

    def to_agent_args(self) -> list[str]:
        """The options that differ from the defaults, as command-line arguments."""
        argv: list[str] = []
        for f in fields(self):
            value, flag = getattr(self, f.name), _flag(f)
            if value == f.default or flag is None:
                continue
            if isinstance(value, bool):
                argv.append(flag)  # store_true (or store_false)
            else:
                argv += [flag, repr(value) if isinstance(value, float) else str(value)]
        if self.inject_stall_ms is not None:
            argv += ["--inject-stall", f"{self.inject_stall_ms!r}@{self.inject_every_s!r}"]
        if self.client_cpus is not None:
            raise ValueError("client_cpus has no command-line option")
        return argv


_TYPES = {"int": int, "int | None": int, "float": float, "float | None": float, "str": str, "str | None": str}


def _flag(f: dataclasses.Field) -> str | None:
    flag = f.metadata["flag"]
    return "--" + f.name.replace("_", "-") if flag == "" else flag


def parse_stall(text: str) -> tuple[float, float]:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:e-?\d+)?)\s*@\s*(\d+(?:\.\d+)?(?:e-?\d+)?)\s*", text or "")
    if not m or float(m.group(1)) <= 0 or float(m.group(2)) <= 0:
        raise BadInput(f"--inject-stall expects MS@EVERY_S (e.g. 20@0.5), got {text!r}")
    ms, every = float(m.group(1)), float(m.group(2))
    if ms / 1000 >= every:
        raise BadInput(f"--inject-stall {text}: the stall must be shorter than its period")
    return ms, every


_CREDIBLE_S = SmokeOptions().credible_duration_s()
CREDIBLE_RUN_HELP = (
    f"A credible p999 needs >= {CREDIBLE_P999:,} samples: with the default {SmokeOptions.infer_ms:g} "
    f"ms model that is at least {_CREDIBLE_S:.0f} s of inference (--duration "
    f"{_CREDIBLE_S * 1.1:.0f} or --requests {CREDIBLE_P999}); the default --requests "
    f"{DEFAULT_REQUESTS:,} takes at least {DEFAULT_REQUESTS * SmokeOptions.infer_ms / 1000:.0f} s. "
    "Fewer samples give the verdict INCONCLUSIVE (exit 1), never PASSED."
)


def add_smoke_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every smoke option to ``parser``. Options not given stay absent from the namespace
    (``argparse.SUPPRESS``), so ``SmokeOptions.from_args`` can tell them from defaults."""
    length = parser.add_mutually_exclusive_group()
    for f in fields(SmokeOptions):
        flag, m = _flag(f), f.metadata
        if flag is None:
            continue
        default = f.default
        helptext = m["help"] + ("" if default is None or isinstance(default, bool) else f" (default {default})")
        kw: dict = {"dest": f.name, "default": argparse.SUPPRESS, "help": helptext}
        if isinstance(default, bool):
            kw["action"] = "store_false" if default else "store_true"
        else:
            kw["type"] = _TYPES[f.type]
            if m["choices"]:
                kw["choices"] = m["choices"]
            if m["metavar"]:
                kw["metavar"] = m["metavar"]
        if f.name in ("requests", "duration"):
            kw["help"] += ". " + CREDIBLE_RUN_HELP if f.name == "duration" else ""
            length.add_argument(flag, **kw)
        else:
            parser.add_argument(flag, **kw)
    parser.add_argument(
        "--busy-poll",
        dest="idle",
        action="store_const",
        const="spin",
        default=argparse.SUPPRESS,
        help="the same as --idle spin",
    )
    parser.add_argument(
        "--no-fifo",
        dest="fifo",
        action="store_const",
        const="off",
        default=argparse.SUPPRESS,
        help="the same as --fifo off",
    )
    parser.add_argument(
        "--inject-stall",
        metavar="MS@EVERY_S",
        default=argparse.SUPPRESS,
        help="SIGSTOP the worker for MS every EVERY_S seconds (calibration: stalls it must see)",
    )


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's usage errors as bad input, never an exit
        raise BadInput(f"{self.prog}: {message}")


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def options_from_mapping(values: dict, source: str = "smoke options") -> tuple[SmokeOptions, frozenset[str]]:
    """Smoke options from a mapping of option names (``duration``, ``target_p999_ms``, ...,
    ``inject_stall``) to values, as an Ansible task gives them (numbers may arrive as strings), and
    the names given. Each value goes through the command line's own parser, so its types, choices,
    bounds and messages are the CLI's. ``None`` values count as not given."""
    if not isinstance(values, dict):
        raise BadInput(f"{source} must be a mapping, got {type(values).__name__}")
    parser = _RaisingParser(prog=source, add_help=False)
    add_smoke_arguments(parser)
    flags = {f.name: (_flag(f), f.default) for f in fields(SmokeOptions) if _flag(f)}
    flags["inject_stall"] = ("--inject-stall", None)
    argv: list[str] = []
    for name, value in values.items():
        if value is None:
            continue
        if name not in flags:
            raise BadInput(f"{source}: unknown option {name!r} (options: {', '.join(sorted(flags))})")
        flag, default = flags[name]
        if isinstance(default, bool):
            text = str(value).strip().lower()
            if text not in _TRUE + _FALSE:
                raise BadInput(f"{source}: {name} must be true or false, got {value!r}")
            if (text in _TRUE) != default:
                argv.append(flag)
            continue
        argv += [flag, str(value)]
    ns = parser.parse_args(argv)
    given = frozenset(k for k in vars(ns) if k in flags and k != "inject_stall") | (
        frozenset({"inject_stall_ms", "inject_every_s"}) if "inject_stall" in vars(ns) else frozenset()
    )
    return SmokeOptions.from_args(ns), given
