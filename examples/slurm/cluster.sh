#!/usr/bin/env bash
# Starts and stops a single-node Slurm cluster (Debian's slurm-wlm and munge) for trying the sharded scan of
# examples/slurm/ on one machine, and for the repository's test of it (tests/scan/cluster.rs).
#
#   examples/slurm/cluster.sh start DIR   configure in DIR (slurm.conf, state, spool, logs), start munged,
#                                         slurmctld and slurmd, wait until the node is idle; prints
#                                         `export SLURM_CONF=DIR/slurm.conf` for the shell that submits
#   examples/slurm/cluster.sh stop DIR    stop the three daemons started with DIR
#
# Needs root (the daemons run as root; munged as the munge user) and the Debian packages slurm-wlm and munge
# (fixtures/cluster-tools.sh installs them). No cgroups, no systemd: process tracking by /proc, no task plugin,
# no accounting. The node is this host with all its CPUs. A real cluster has its own configuration: the job
# scripts of examples/slurm/ run there unchanged.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)

stop() {
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"; do
        if [ -s "$pidfile" ]; then
            pid=$(cat "$pidfile")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$pidfile"
        fi
    done
}

start() {
    if [ "$(id -u)" != 0 ]; then
        echo "cluster.sh: the single-node cluster needs root (slurmd runs jobs as their users)" >&2
        exit 3
    fi
    for tool in munged slurmctld slurmd sbatch sinfo; do
        command -v "$tool" >/dev/null 2>&1 || {
            echo "cluster.sh: $tool is not installed (Debian: apt-get install slurm-wlm munge; or fixtures/cluster-tools.sh)" >&2
            exit 3
        }
    done
    stop
    mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
    host=$(hostname)
    cpus=$(nproc)
    cat > "$dir/slurm.conf" <<CONF
ClusterName=ropescope
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    # munged: its own socket and pid file in DIR's run directory, as the munge user.
    mkdir -p /run/munge
    chown munge:munge /run/munge "$dir/munge"
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        runuser -u munge -- munged --pid-file="$dir/munge/munged.pid" --force
        for _ in $(seq 50); do [ -s "$dir/munge/munged.pid" ] && break; sleep 0.1; done
        cp "$dir/munge/munged.pid" "$dir/munged.pid"
    fi
    munge -n | unmunge >/dev/null
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    for _ in $(seq 100); do
        state=$(sinfo -h -o %T 2>/dev/null || true)
        if [ "$state" = idle ]; then
            echo "export SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        sleep 0.2
    done
    echo "cluster.sh: the node did not become idle within 20 s (state '${state:-none}'); logs in $dir" >&2
    stop
    exit 1
}

case $action in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
