#!/bin/bash
# What a plain PUBLISH costs the other primaries of a Redis Cluster, against SPUBLISH
# (docs/many-hosts.md, "The changes channel"): a cluster of 3 primaries on loopback (ports
# 31701-31703, a temp dir), 2 subscribers of each kind on primary 1 (as two hosts), then N
# messages of 600 bytes (about a circuit's change message) published on primary 1 by
# redis-benchmark, PUBLISH, SPUBLISH, PUBLISH, SPUBLISH; the CPU (used_cpu_user + used_cpu_sys of
# INFO cpu) of the publishing primary and of the other two, per message.
# Run: N=100000 flock /work/bench.lock bench/cluster-pubsub-bus.sh
set -e
D=$(mktemp -d); cd "$D"
P=(31701 31702 31703)
for p in "${P[@]}"; do mkdir -p n$p; (cd n$p && redis-server --port $p --cluster-enabled yes --cluster-config-file nodes.conf --save '' --appendonly no --daemonize yes --logfile log); done
sleep 1
redis-cli --cluster create 127.0.0.1:31701 127.0.0.1:31702 127.0.0.1:31703 --cluster-yes >/dev/null
sleep 3
cpu() { redis-cli -p $1 INFO cpu | awk -F: '/used_cpu_(user|sys):/{s+=$2} END{printf "%.3f", s}'; }
MSG=$(head -c 600 /dev/zero | tr '\0' x)
# a channel whose slot is on 31701: find a tag
for i in $(seq 0 2000); do s=$(redis-cli -p 31701 CLUSTER KEYSLOT "{t$i}"); if [ $s -lt 5461 ]; then TAG="{t$i}"; break; fi; done
# subscribers: 2 per mode, on primary 1 (as two hosts would be)
PIDS=()
for k in 1 2; do redis-cli -p 31701 SUBSCRIBE plain >/dev/null & PIDS+=($!); redis-cli -p 31701 SSUBSCRIBE "${TAG}ch" >/dev/null & PIDS+=($!); done
sleep 1
N=${N:-200000}
for mode in PUBLISH SPUBLISH PUBLISH SPUBLISH; do
  ch=plain; [ $mode = SPUBLISH ] && ch="${TAG}ch"
  b2=$(cpu 31702); b3=$(cpu 31703); b1=$(cpu 31701)
  t0=$(date +%s.%N)
  redis-benchmark -p 31701 -n $N -c 8 -q $mode "$ch" "$MSG" >/dev/null
  t1=$(date +%s.%N)
  a2=$(cpu 31702); a3=$(cpu 31703); a1=$(cpu 31701)
  echo "$mode: $N messages in $(echo "$t1-$t0" | bc) s; publishing primary $(echo "($a1-$b1)*1000000/$N" | bc -l | cut -c1-5) us/msg; other two primaries $(echo "($a2-$b2+$a3-$b3)*1000000/$N" | bc -l | cut -c1-5) us/msg in all"
done
for p in "${P[@]}"; do redis-cli -p $p SHUTDOWN NOSAVE >/dev/null 2>&1 || true; done
kill "${PIDS[@]}" 2>/dev/null || true
