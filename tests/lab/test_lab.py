"""The lab: real sshd hosts on loopback, reached by Ansible (ansible-runner) and testinfra over SSH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostkit.ansible.agent_call import call_agent
from hostkit.ansible.inventory import load_inventory
from hostkit.facts import gather
from hostkit.lab.lab import pid_alive
from hostkit.ssh import HostKeyError, open_testinfra_host
from tests.conftest import lab_port, new_lab


def cli(*args):
    return subprocess.run([sys.executable, "-m", "hostkit.cli", *args], capture_output=True, text=True)


def test_remote_facts_equal_local_facts_of_each_sysroot(lab):
    results, run = call_agent(str(lab.inventory), ["facts"])
    assert run.status == "successful" and run.rc == 0
    hosts = lab.hosts()
    assert set(results) == {h.name for h in hosts}
    for h in hosts:
        r = results[h.name]
        assert r.status == "ok", r
        # The agent shipped over SSH read the same tree the controller reads locally.
        assert r.doc == gather(h.sysroot), h.name
    assert os.path.isdir(run.private_data_dir)  # the audit trail under .hostkit/runs/<id>/


def test_cli_facts_inventory_json(lab):
    proc = cli("facts", "-i", str(lab.inventory), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    vm = doc["hosts"]["h-vmware-88vcpu"]["facts"]
    assert vm["virtualization"]["deceptive_topology"] is True
    assert doc["hosts"]["h-epyc-9654-nps4-smt"]["facts"]["topology"]["cpus"] == 384


def test_cli_facts_table_of_the_limited_hosts(lab):
    table = cli("facts", "-i", str(lab.inventory), "--limit", "h-kvm-small,h-epyc-9634-nps1")
    assert table.returncode == 0, table.stderr
    assert "h-kvm-small" in table.stdout and "h-epyc-9634-nps1" in table.stdout
    assert "h-vmware-88vcpu" not in table.stdout


def test_testinfra_over_ssh_with_verified_host_keys(lab):
    for h in load_inventory(str(lab.inventory)):
        host = open_testinfra_host(h)
        assert host.run("printenv HOSTKIT_LAB_HOST").stdout.strip() == h.name
        cmdline = host.file(f"{h.sysroot}/proc/cmdline")
        assert cmdline.is_file
        assert cmdline.content_string == open(f"{h.sysroot}/proc/cmdline").read()


@pytest.fixture
def impostor_known_hosts(lab, tmp_path):
    """A known_hosts naming the first lab host with another key: that host's real sshd is an impostor."""
    host = load_inventory(str(lab.inventory))[0]
    impostor = tmp_path / "known_hosts"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    key = (tmp_path / "other.pub").read_text().split()
    impostor.write_text(f"[{host.vars['ansible_host']}]:{host.vars['ansible_port']} {key[0]} {key[1]}\n")
    return host, impostor


def test_impostor_host_key_is_refused_by_testinfra(lab, impostor_known_hosts):
    host, impostor = impostor_known_hosts
    host.vars["ansible_ssh_common_args"] = host.vars["ansible_ssh_common_args"].replace(
        f"UserKnownHostsFile={lab.known_hosts}", f"UserKnownHostsFile={impostor}"
    )  # as Ansible would be told
    with pytest.raises(HostKeyError, match="CHANGED"):
        open_testinfra_host(host).run("true")


def test_unknown_host_key_is_refused_by_testinfra_not_accepted_on_first_use(lab, tmp_path):
    host = load_inventory(str(lab.inventory))[0]
    empty = tmp_path / "empty"
    empty.write_text("")
    host.vars["ansible_ssh_common_args"] = host.vars["ansible_ssh_common_args"].replace(
        f"UserKnownHostsFile={lab.known_hosts}", f"UserKnownHostsFile={empty}"
    )
    with pytest.raises(HostKeyError, match="unknown"):
        open_testinfra_host(host).run("true")


def test_impostor_host_key_is_refused_by_ansible(lab, impostor_known_hosts, tmp_path):
    host, impostor = impostor_known_hosts
    inv = tmp_path / "inventory.yml"  # the lab inventory, its known_hosts swapped for the impostor's
    inv.write_text(lab.inventory.read_text().replace(str(lab.known_hosts), str(impostor)))
    results, _ = call_agent(str(inv), ["facts"], limit=host.name)
    assert results[host.name].status == "unreachable"
    assert "host key" in results[host.name].error.lower()


def test_unreachable_host_is_reported_and_others_still_gathered(lab):
    victim = "h-kvm-small"
    lab.stop_host(victim)
    try:
        proc = cli("facts", "-i", str(lab.inventory), "--json")
        assert proc.returncode == 1
        doc = json.loads(proc.stdout)["hosts"]
        assert doc[victim]["status"] == "unreachable"
        assert all(r["status"] == "ok" for name, r in doc.items() if name != victim)
    finally:
        lab.start_host(victim)
    assert all(h["answering"] for h in lab.status())


def test_lab_down_stops_exactly_its_own_sshd(lab, lab_root):
    other = new_lab(lab_root, "other")
    hosts = other.up(n_hosts=2, port=lab_port(1))
    pids = [h.pid for h in hosts]
    assert all(pid_alive(p) for p in pids)
    session_pids = [h.pid for h in lab.hosts()]
    assert sorted(other.down()) == ["lab-1", "lab-2"]
    assert not any(pid_alive(p) for p in pids)
    assert all(pid_alive(p) for p in session_pids)  # the other lab untouched
    assert not other.dir.exists()


def test_lab_files_are_private_and_host_checking_strict(lab):
    assert oct(lab.client_key.stat().st_mode & 0o777) == "0o600"
    assert oct(lab.known_hosts.stat().st_mode & 0o777) == "0o600"
    inv = lab.inventory.read_text()
    assert "StrictHostKeyChecking=yes" in inv and "StrictHostKeyChecking=no" not in inv


def test_lab_cli_up_status_down(lab_root):
    d = lab_root / "clilab"
    port = str(lab_port(2))
    up = cli("lab", "up", "--dir", str(d), "--hosts", "2", "--port", port, "--json")
    assert up.returncode == 0, up.stderr
    try:
        st = json.loads(cli("lab", "status", "--dir", str(d), "--json").stdout)
        assert [h["answering"] for h in st["hosts"]] == [True, True]
        again = cli("lab", "up", "--dir", str(d), "--hosts", "1", "--port", port)
        assert again.returncode == 1 and "already up" in again.stderr
    finally:
        down = cli("lab", "down", "--dir", str(d), "--json")
    assert json.loads(down.stdout)["stopped"] == ["lab-1", "lab-2"]


def test_lab_up_bmc_puts_a_redfish_bmc_in_front_of_each_host_and_down_stops_it(lab_root):
    """`hostkit lab up --bmc`: the lab's BMC (TLS, basic auth) serves each sshd host's BIOS, the
    inventory's hostkit_bmc reaches it (hostkit bios facts, hostkit facts, a baseline's bios layer
    and drift against it); `lab down` stops it with the hosts."""
    d = lab_root / "bmclab"
    up = cli("lab", "up", "--dir", str(d), "--hosts", "1", "--port", str(lab_port(2)), "--bmc", "--json")
    assert up.returncode == 0, up.stderr
    try:
        facts = cli("bios", "facts", "-i", str(d / "inventory.yml"), "--json")
        assert facts.returncode == 0, facts.stderr
        bios = json.loads(facts.stdout)["hosts"]["lab-1"]["bios"]
        assert (bios["vendor"], bios["model"]) == ("HPE", "ProLiant DL385 Gen10 Plus v2")
        facts = cli("facts", "-i", str(d / "inventory.yml"), "--json")  # hostkit facts gains bios
        assert facts.returncode == 0, facts.stderr
        os_bios = json.loads(facts.stdout)["hosts"]["lab-1"]["facts"]["bios"]
        assert os_bios["vendor"] == "HPE" and isinstance(os_bios["memory_cross_check"], list)
        # a baseline keeps the BIOS as a layer of the state; drift re-reads it from the BMC
        inv, name = str(d / "inventory.yml"), f"bmc-{os.getpid()}"
        base = cli("baseline", "-i", inv, "--no-smoke", "--name", name, "--why", "test", "--json")
        assert base.returncode == 0, base.stdout[-2000:] + base.stderr[-2000:]
        kept = json.loads(Path(json.loads(base.stdout)["hosts"]["lab-1"]["path"]).read_text())["state"]["bios"]
        assert kept["BIOS version"] == bios["bios_version"] and kept["NumaMemoryDomainsPerSocket"] is not None
        again = cli("drift", "-i", inv, "--no-smoke", "--against", name, "--json")
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
        assert json.loads(again.stdout)["hosts"]["lab-1"]["verdict"] == "same"
        pid = json.loads((d / "bmc" / "bmc.json").read_text())["pid"]
        assert pid_alive(pid)
    finally:
        cli("lab", "down", "--dir", str(d))
    assert not pid_alive(pid) or b"hostkit.lab.bmc.server" not in open(f"/proc/{pid}/cmdline", "rb").read()
