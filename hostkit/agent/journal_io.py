# -*- coding: utf-8 -*-
"""The change journal and atomic file writes: shared by hostkit's Ansible modules (as
``module_utils/hostkit_journal_io.py``, a symlink to this file) and the agent's rollback.
Standard library only; Python 2-compatible syntax because Ansible may load it anywhere.

The journal (``<sysroot>/var/lib/hostkit/journal/<run-id>.json``, mode 0600)
is written *before* each change: the previous runtime value or the previous
file content (or its absence) with a hash, mode and owner, then the new value.
A run cut off mid-way therefore rolls back to the state before it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import datetime
import errno
import hashlib
import json
import os

try:  # in the hostkit package (the agent zipapp, the controller)
    from hostkit.core.sysroot import atomic_write, is_live, sysroot_path
except ImportError:  # inside an Ansible module: the same file as module_utils/hostkit_sysroot.py
    from ansible.module_utils.hostkit_sysroot import atomic_write, is_live, sysroot_path  # noqa: F401

JOURNAL_DIR = "var/lib/hostkit/journal"
WOULD_RUN_LOG = "var/lib/hostkit/would-run.jsonl"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def file_state(full):
    """Everything rollback needs to put a file back exactly."""
    try:
        st = os.lstat(full)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return {"exists": False}
        raise
    with open(full, "rb") as f:
        data = f.read()
    state = {
        "exists": True,
        "sha256": sha256(data),
        "mode": "%04o" % (st.st_mode & 0o7777),
        "uid": st.st_uid,
        "gid": st.st_gid,
    }
    try:
        state["content"] = data.decode("utf-8")
    except UnicodeDecodeError:
        state["content_b64"] = base64.b64encode(data).decode("ascii")
    return state


def state_bytes(state):
    if "content_b64" in state:
        return base64.b64decode(state["content_b64"])
    return state.get("content", "").encode("utf-8")


def missing_parents(full):
    """Directories ``atomic_write`` would create for ``full``, outermost first (journaled, so
    rollback can remove them again)."""
    out = []
    d = os.path.dirname(full)
    while d and d != "/" and not os.path.isdir(d):
        out.insert(0, d)
        d = os.path.dirname(d)
    return out


def journaled_module_options(role_default="", **options):
    """The argument spec of a hostkit Ansible module that journals its changes: the sysroot the
    host is under, the run whose journal it writes, the role its entries name; plus ``options``."""
    spec = dict(
        sysroot=dict(type="str", default=""),
        run_id=dict(type="str", required=True),
        role=dict(type="str", default=role_default),
    )
    spec.update(options)
    return spec


class ModuleFailure(Exception):
    """A hostkit module fails with this message (bad input, or host state found before any
    change); ``fields`` go into its result."""

    def __init__(self, msg, **fields):
        Exception.__init__(self, msg)
        self.fields = fields


def run_journaled(module, work):
    """The rest of a journaled module's main(), once AnsibleModule has checked the arguments:
    ``work(params, journal, check_mode, diff_mode)`` decides, does the work unless in check mode,
    and returns the module's result; a ModuleFailure or ValueError fails the task with its message."""
    params = module.params
    try:
        result = work(params, Journal(params["sysroot"], params["run_id"]), module.check_mode, module._diff)
    except ModuleFailure as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


class JournalError(Exception):
    """The journal entry for a change could not be written (so the change was not made)."""

    def __init__(self, path, reason):
        Exception.__init__(self, "cannot write the journal %s: %s" % (path, reason))
        self.path = path
        self.reason = reason


def change_file(journal, role, path, full, before, data, mode=0o644, after=None):
    """Change one file the journaled way: record its ``before`` state (and the directories the
    write creates) in ``journal`` first, then replace it atomically with ``data`` keeping its
    owner, or remove it when ``data`` is None. A failure to journal raises JournalError, with
    the file untouched."""
    created = [d[len(full) - len(path) :] for d in missing_parents(full)] if data is not None else []
    entry = {
        "kind": "file",
        "role": role,
        "path": path,
        "before": before,
        "after": after or {"exists": data is not None},
        "created_dirs": created,
    }
    try:
        journal.record(entry)
    except (IOError, OSError) as exc:
        raise JournalError(journal.path, exc)
    if data is None:
        os.unlink(full)
    else:
        atomic_write(full, data, mode=mode, uid=before.get("uid"), gid=before.get("gid"))


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Journal(object):
    def __init__(self, sysroot, run_id):
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise ValueError("invalid run id %r" % (run_id,))
        self.sysroot = sysroot
        self.run_id = run_id
        self.dir = sysroot_path(sysroot, JOURNAL_DIR)
        self.path = os.path.join(self.dir, run_id + ".json")

    def load(self):
        try:
            with open(self.path) as f:
                return json.load(f)
        except (IOError, OSError):
            return {"run_id": self.run_id, "started": now(), "entries": []}

    def record(self, entry):
        """Append one entry and make it durable before the caller changes anything."""
        if not os.path.isdir(self.dir):
            os.makedirs(self.dir, 0o700)
        os.chmod(self.dir, 0o700)
        doc = self.load()
        entry = dict(entry)
        entry["seq"] = len(doc["entries"]) + 1
        entry["time"] = now()
        doc["entries"].append(entry)
        atomic_write(self.path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8"), mode=0o600)
        return entry

    def drop_items(self, seq, paths):
        """After the kernel refused some writes of entry ``seq``: forget those items (nothing
        changed there). An entry left empty is removed, and a journal left empty is deleted,
        so a run that changed nothing never becomes "the latest run" to roll back."""
        paths = set(paths)
        doc = self.load()
        entries = []
        for e in doc["entries"]:
            if e.get("seq") == seq and "items" in e:  # kind values or kthreads
                e["items"] = [i for i in e["items"] if i["path"] not in paths]
                if not e["items"]:
                    continue
            entries.append(e)
        doc["entries"] = entries
        if not entries:
            if os.path.exists(self.path):
                os.unlink(self.path)
            return
        atomic_write(self.path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8"), mode=0o600)


def record_would_run(sysroot, argv, reason):
    """On a sysroot other than '/', a command that would act on the real machine is logged, not run."""
    full = sysroot_path(sysroot, WOULD_RUN_LOG)
    d = os.path.dirname(full)
    if not os.path.isdir(d):
        os.makedirs(d, 0o700)
    with open(full, "a") as f:
        f.write(json.dumps({"time": now(), "argv": argv, "reason": reason}) + "\n")
