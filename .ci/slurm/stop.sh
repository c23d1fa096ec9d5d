#!/usr/bin/env bash
# Stop the daemons start.sh started, by their pid files.
D=${SLURM_STATE_DIR:?set SLURM_STATE_DIR}
for f in "$D/slurmd.pid" "$D/slurmctld.pid" /run/munge/munged.pid; do
  [ -s "$f" ] || continue
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null && for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$f"
done
