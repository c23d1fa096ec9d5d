#!/usr/bin/env bash
# Start a one-node SLURM cluster (munged + slurmctld + slurmd) without systemd, for the tests of
# profiles/slurm. The node declares count-only GPUs (GRES without devices), so GPU requests can be scheduled
# and checked on a machine without GPUs. Partitions "cpu" and "gpu" match profiles/slurm and config.
# Needs: apt-get install slurmctld slurmd slurm-client munge. State goes to $SLURM_STATE_DIR.
set -euo pipefail
D=${SLURM_STATE_DIR:?set SLURM_STATE_DIR to a scratch folder}
H=$(hostname -s)
# SLURM_NODE_CPUS declares more cores than the machine has (the rehearsal's jobs mostly wait on stand-in
# engines, as a cluster's many nodes would run them side by side); slurmd then trusts the config.
CPUS=${SLURM_NODE_CPUS:-$(nproc)}
OVERRIDES=$([ "$CPUS" -gt "$(nproc)" ] && echo "SlurmdParameters=config_overrides" || true)
MEM=$(( $(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo) - 1024 ))
rm -rf "$D"/{state,spool,log}
mkdir -p "$D"/{state,spool,log} /etc/slurm /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
[ -s /etc/munge/munge.key ] || { mungekey --create --force; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }

# The compiled-in path: the SLURM executor's job step strips SLURM_CONF before its nested srun.
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$H(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=3600
GresTypes=gpu
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
$OVERRIDES
NodeName=$H NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM Gres=gpu:2 State=UNKNOWN
PartitionName=cpu Nodes=$H Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$H MaxTime=INFINITE State=UP
CONF
# Slurm 22.05 drops file-less GPUs from a node, so each declared GPU points at a placeholder character
# device; no cgroup device constraint is configured, so nothing is ever opened.
cat > /etc/slurm/gres.conf <<CONF
Name=gpu File=/dev/null
Name=gpu File=/dev/zero
CONF

pkill -x munged 2>/dev/null || true
runuser -u munge -- /usr/sbin/munged
slurmctld
slurmd
for _ in $(seq 1 60); do
  sinfo -h -o '%T' 2>/dev/null | grep -qx idle && break
  sleep 0.5
done
sinfo
