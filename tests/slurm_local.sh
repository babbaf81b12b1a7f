#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for testing `SLURM=1 ./ablate.sh` against the real scheduler (Debian's
# slurm-wlm and munge: `apt-get install slurmctld slurmd slurm-client munge`). Needs root.
#
#   tests/slurm_local.sh start DIR    # config, state and logs in DIR; prints `export SLURM_CONF=DIR/slurm.conf`
#   tests/slurm_local.sh stop DIR
#
# The node is this machine (its short hostname, its cores and memory), one partition `debug`, no accounting.
set -euo pipefail
cmd=${1:?usage: $0 start|stop DIR}; dir=$(mkdir -p "${2:?usage: $0 start|stop DIR}" && cd "$2" && pwd)
export SLURM_CONF=$dir/slurm.conf

stop() {
  for d in slurmd slurmctld; do
    [ -f "$dir/$d.pid" ] && kill "$(cat "$dir/$d.pid")" 2>/dev/null || true
  done
  [ -f "$dir/munged.pid" ] && kill "$(cat "$dir/munged.pid")" 2>/dev/null || true
  sleep 1
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
for bin in munged slurmctld slurmd sbatch; do
  command -v "$bin" >/dev/null || { echo "$bin not found: apt-get install slurmctld slurmd slurm-client munge" >&2
                                    exit 3; }
done

# munge: Slurm's authentication, with the key the package made; as root (--force), its socket in DIR
[ -f /etc/munge/munge.key ] || mungekey --create
munged --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
  --seed-file="$dir/munged.seed" --force

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host=$(hostname -s)
mem=$(awk '/MemTotal/ {print int($2 / 1024) - 512}' /proc/meminfo)
mkdir -p "$dir/state" "$dir/spool"
cat > "$SLURM_CONF" <<EOF
ClusterName=local
SlurmctldHost=$host
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerParameters=sched_interval=1
KillWait=10
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -i 2>>"$dir/slurmctld.log"
slurmd 2>>"$dir/slurmd.log"
for _ in $(seq 60); do  # the node registers within seconds
  if sinfo -h -o '%t' 2>/dev/null | grep -qx 'idle'; then echo "export SLURM_CONF=$SLURM_CONF"; exit 0; fi
  sleep 1
done
echo "slurm did not come up: see $dir/slurmctld.log and $dir/slurmd.log" >&2; stop; exit 1
