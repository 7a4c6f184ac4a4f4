#!/usr/bin/env bash
# make demo: the main job on the embedded default, the local lab.
# One real sshd lab host per fixture; facts over SSH through Ansible; plan; apply (guests take
# the vmware-guest profile, the VMware fixture is refused the bare-metal one); a second apply
# that changes nothing; an audit over testinfra; rollback to the byte; a smoke test here.
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTKIT=.venv/bin/hostkit
LAB=.hostkit/demo-lab
$HOSTKIT lab down --dir "$LAB" >/dev/null 2>&1 || true
trap '$HOSTKIT lab down --dir "$LAB"' EXIT
step() { printf '\n== %s\n' "$*"; }

step "this machine (sysroot /)"
$HOSTKIT facts

step "lab: one sshd host per fixture on 127.0.0.2..."
$HOSTKIT lab up --dir "$LAB" --host epyc-nps1=epyc-9634-nps1 --host epyc-nps4=epyc-9654-nps4-smt \
  --host xeon-snc2=xeon-8480-snc2-ht --host vmware-guest=vmware-88vcpu --host kvm-guest=kvm-small \
  --host this-machine=this-machine
INV="$LAB/inventory.yml"

step "facts of every lab host, over SSH through ansible-runner"
$HOSTKIT facts -i "$INV"

step "the seed's VMware guest, in detail"
$HOSTKIT facts --sysroot "$LAB/hosts/vmware-guest/root"

step "plan for the seed's bare-metal host"
$HOSTKIT plan -i "$INV" --limit epyc-nps1

step "apply the bare-metal hosts (the guests are refused the bare-metal profile: exit 3 for them)"
$HOSTKIT apply -i "$INV" --limit 'epyc-nps1,epyc-nps4,xeon-snc2,vmware-guest' || [ $? -eq 3 ]

step "apply again: nothing changes"
$HOSTKIT apply -i "$INV" --limit 'epyc-nps1,epyc-nps4,xeon-snc2' 2>/dev/null

step "audit over testinfra (the planned kernel arguments wait for a reboot)"
$HOSTKIT audit -i "$INV" --limit 'epyc-nps1,epyc-nps4,xeon-snc2'

step "rollback: every tree back to the byte"
$HOSTKIT rollback -i "$INV" --limit 'epyc-nps1,epyc-nps4,xeon-snc2'

step "a short smoke test on this machine (p999 deschedule of SHM inference)"
$HOSTKIT smoke --duration 3 --target-p999-ms 50 || true
