"""``hostkit collection install``: the Ansible collection hostkit.tuning, where Ansible finds it."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, json_arg


def add_parser(sub) -> argparse.ArgumentParser:
    co = command(
        sub,
        "collection",
        "install the Ansible collection hostkit.tuning this hostkit carries",
        "The collection holds hostkit's roles, playbooks (hostkit.tuning.tune, hostkit.tuning.rollout) and "
        "modules (facts, plan, smoke, audit, rollback): with it installed, plain ansible-playbook, AWX/AAP "
        "and ansible-navigator run hostkit's whole job. Its action plugins run hostkit's own code, so "
        "the controller's Python (or the execution environment) needs the hostkit package too.\n\n"
        "examples:\n"
        "  hostkit collection install                   into ~/.ansible/collections (found by default)\n"
        "  ansible-doc -l hostkit.tuning                every module, once installed\n"
        "  hostkit collection install -p collections    into ./collections: Ansible finds it with\n"
        "                                               ANSIBLE_COLLECTIONS_PATH=./collections",
        raw=True,
    )
    act = co.add_subparsers(dest="action", required=True)
    ins = act.add_parser("install", help="build and install the collection (replacing the installed version)")
    ins.add_argument(
        "-p",
        "--collections-path",
        metavar="PATH",
        help="collections root to install into (default ~/.ansible/collections)",
    )
    json_arg(ins)
    return co


def run(args) -> int:
    result = api.install_collection(api.CollectionInstallRequest(path=args.collections_path))
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    doc = result.to_dict()
    print(f"installed {doc['collection']} {doc['version']} in {doc['path']}")
    if not doc["found_by_default"]:
        print(
            f"  Ansible finds it with ANSIBLE_COLLECTIONS_PATH={doc['collections_path']} "
            "(or collections_path in ansible.cfg)"
        )
    print("  ansible-doc -l hostkit.tuning; ansible-playbook -i INVENTORY hostkit.tuning.rollout -e hostkit_batch=2")
    return result.rc
