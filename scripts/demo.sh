#!/usr/bin/env bash
# make demo: the main job on the embedded default, the local lab.
# Starts one real sshd lab host per fixture, gathers facts from all of them over
# SSH through Ansible, prints the fleet table, and takes the lab down again.
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTKIT=.venv/bin/hostkit
LAB=.hostkit/demo-lab
$HOSTKIT lab down --dir "$LAB" >/dev/null 2>&1 || true
trap '$HOSTKIT lab down --dir "$LAB"' EXIT

echo "== this machine (sysroot /)"
$HOSTKIT facts
echo
echo "== lab: one sshd host per fixture on 127.0.0.2..."
$HOSTKIT lab up --dir "$LAB" --host epyc-nps1=epyc-9634-nps1 --host epyc-nps4=epyc-9654-nps4-smt \
  --host xeon-snc2=xeon-8480-snc2-ht --host vmware-guest=vmware-88vcpu --host kvm-guest=kvm-small \
  --host this-machine=this-machine
echo
echo "== facts of every lab host, over SSH through ansible-runner"
$HOSTKIT facts -i "$LAB/inventory.yml"
echo
echo "== the seed's VMware guest, in detail"
$HOSTKIT facts --sysroot "$LAB/hosts/vmware-guest/root" || true
