#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for testing the workflow's SLURM profile
# (tests/test_slurm.py). Debian/Ubuntu, as root; nothing else is assumed.
#
#   .ci/slurm-local.sh start    install slurm-wlm + munge if missing, write /etc/slurm/slurm.conf
#                               (one node: this host, its CPUs and memory; partition `debug`),
#                               start munged, slurmctld and slurmd, wait until the node is idle
#   .ci/slurm-local.sh status   exit 0 when the node answers and is usable, else 1
#   .ci/slurm-local.sh stop     cancel this cluster's jobs, stop the daemons this script started,
#                               remove the slurm.conf it wrote
#
# Exit status: 0 done; 1 failed; 2 usage; 3 cannot work on this machine (not root, or SLURM and
# munge are missing and cannot be installed) - the tests skip on 3 and fail on 1.
#
# No accounting database (slurmdbd): `sacct` cannot report jobs, so job status must come from
# `squeue` (MinJobAge keeps finished jobs visible there for 10 minutes). No cgroups (containers):
# proctrack/linuxproc and task/none. The config must live at /etc/slurm/slurm.conf: the SLURM
# executor plugin's job steps do not keep SLURM_CONF. An existing slurm.conf not written by this
# script is never overwritten.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# written by phenoica .ci/slurm-local.sh"
STATE=/run/phenoica-slurm-local      # names of the daemons this script started
LOGDIR=/var/log/slurm
WAIT_S=${SLURM_LOCAL_WAIT_S:-90}

log() { echo "slurm-local: $*" >&2; }
die() { log "$*"; exit 1; }

unable() { log "$*"; exit 3; }

need_root() { [ "$(id -u)" -eq 0 ] || unable "must run as root (installs packages, starts daemons)"; }

install_packages() {
    local missing=()
    for cmd in slurmctld slurmd sbatch squeue srun sinfo; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    command -v munged >/dev/null 2>&1 || missing+=(munged)
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || unable "missing ${missing[*]} and no apt-get to install them"
    log "installing slurm-wlm and munge (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || unable "apt-get update failed (no package mirror reachable?)"
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null \
        || unable "apt-get install slurm-wlm munge failed"
}

node_name() { hostname -s; }

# Node line values as slurmd itself detects them (so the node is not drained for a mismatch),
# memory from /proc/meminfo less a margin for the OS and the daemons.
node_definition() {
    local detected cpus topo mem_mb margin
    detected=$(slurmd -C 2>/dev/null | head -1 || true)
    cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$detected")
    [ -n "$cpus" ] || cpus=$(nproc --all)
    topo=$(grep -o 'Boards=[0-9]* SocketsPerBoard=[0-9]* CoresPerSocket=[0-9]* ThreadsPerCore=[0-9]*' <<<"$detected" || true)
    mem_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
    margin=$(( mem_mb / 10 < 1024 ? mem_mb / 10 : 1024 ))
    echo "NodeName=$(node_name) NodeAddr=127.0.0.1 CPUs=$cpus $topo RealMemory=$(( mem_mb - margin )) State=UNKNOWN"
}

write_conf() {
    if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        die "$CONF exists and was not written by this script; refusing to overwrite it"
    fi
    mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOGDIR"
    local node
    node=$(node_definition)
    cat >"$CONF" <<EOF
$MARK
ClusterName=phenoica-local
SlurmctldHost=$(node_name)(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
# Containers have no usable cgroups.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
# Jobs share the node by cores and memory; a job without a memory request gets DefMemPerCPU.
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
# No accounting: job status comes from squeue, which shows finished jobs for MinJobAge seconds.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
ReturnToService=2
SlurmdTimeout=300
InactiveLimit=0
KillWait=10
$node
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    log "wrote $CONF ($node)"
}

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_munge() {
    mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile=/etc/munge/munge.key
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        fi
    fi
    chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
    chmod 0700 /etc/munge /var/log/munge
    chmod 0400 /etc/munge/munge.key
    chmod 0755 /run/munge
    if pid_alive /run/munge/munged.pid && munge -n </dev/null | unmunge >/dev/null 2>&1; then
        return 0
    fi
    runuser -u munge -- munged
    echo munged >>"$STATE/started"
    for _ in $(seq 20); do
        munge -n </dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    die "munged does not answer (see /var/log/munge/munged.log)"
}

node_state() { sinfo -h -N -n "$(node_name)" -o '%t' 2>/dev/null | head -1; }

start_daemons() {
    if ! pid_alive /run/slurmctld.pid; then
        # -c: start from a clean job state (a test cluster has nothing to resume).
        slurmctld -c
        echo slurmctld >>"$STATE/started"
    fi
    if ! pid_alive /run/slurmd.pid; then
        slurmd
        echo slurmd >>"$STATE/started"
    fi
    local state=""
    for _ in $(seq "$WAIT_S"); do
        state=$(node_state || true)
        case "$state" in
            idle | mix | alloc) log "node $(node_name) is $state"; return 0 ;;
            down* | drain* | drng*) scontrol update NodeName="$(node_name)" State=RESUME 2>/dev/null || true ;;
        esac
        sleep 1
    done
    log "node state after ${WAIT_S}s: '${state}'"
    tail -n 20 "$LOGDIR/slurmctld.log" "$LOGDIR/slurmd.log" >&2 || true
    die "the node did not become idle"
}

cmd_start() {
    need_root
    if cmd_status 2>/dev/null; then
        log "already running"
        return 0
    fi
    install_packages
    write_conf
    mkdir -p "$STATE"
    start_munge
    start_daemons
    sinfo >&2
}

cmd_status() {
    command -v sinfo >/dev/null 2>&1 || return 1
    pid_alive /run/slurmctld.pid && pid_alive /run/slurmd.pid || return 1
    case "$(node_state)" in idle | mix | alloc) return 0 ;; *) return 1 ;; esac
}

stop_daemon() {  # name pidfile
    pid_alive "$2" || return 0
    local pid
    pid=$(cat "$2")
    kill "$pid"
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
    log "$1 ($pid) did not stop on TERM; killing"
    kill -9 "$pid" 2>/dev/null || true
}

cmd_stop() {
    need_root
    [ -f "$STATE/started" ] || { log "nothing started by this script"; return 0; }
    if pid_alive /run/slurmctld.pid; then
        squeue -h -o '%i' 2>/dev/null | xargs -r scancel 2>/dev/null || true
        for _ in $(seq 20); do [ -z "$(squeue -h -o '%i' 2>/dev/null)" ] && break; sleep 0.5; done
    fi
    grep -qx slurmd "$STATE/started" && stop_daemon slurmd /run/slurmd.pid
    grep -qx slurmctld "$STATE/started" && stop_daemon slurmctld /run/slurmctld.pid
    grep -qx munged "$STATE/started" && stop_daemon munged /run/munge/munged.pid
    rm -f "$STATE/started"
    # Without a config SLURM's clients fail at once; with one and no controller, each waits ~10 s
    # (the executor plugin runs `scontrol show config` whenever Snakemake starts, even locally).
    if grep -qsF "$MARK" "$CONF"; then rm -f "$CONF"; fi
    log "stopped"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
