#!/usr/bin/env bash
# An emulated edge cluster on this machine: N devices, each its own network namespace with
# its own address and host name, every link shaped both ways with `tc tbf`, and each
# device's processes in a cgroup whose CPU quota makes an emulated core F times a core here
# (and whose memory limit is the device's memory). Needs root.
#
#   cluster/edge.sh up --devices N (--profile P | --link RATE [--cores C] [--device-speed F] [--memory MB])
#                      [--rtt MS] [--jitter MS]
#   cluster/edge.sh run [--ranks-per-device K] [--devices N] [--timeout S] -- TILETRAIN-ARGS...
#   cluster/edge.sh status            what is up, and the time dilation
#   cluster/edge.sh link DEV up|down  take a device's link down (fault tests) or back up
#   cluster/edge.sh link DEV --rtt MS [--jitter MS]  set a device's round trip to the switch
#   cluster/edge.sh ping DEV DEV [--count N] [--mb M]  round trips between two devices (UDP
#                                     echoes), in order?, and M MB over TCP (rate, intact?)
#   cluster/edge.sh speed DEV F       change a device's CPU quota while it runs
#   cluster/edge.sh exec DEV -- CMD   run CMD inside a device (its namespace, cgroup, host name)
#   cluster/edge.sh down              remove everything (idempotent, also after a crash)
#
# Several clusters can be up side by side: EDGE_CLUSTER=NAME (default `main`) names the
# one a command works on (namespaces tt-NAME-*, cgroups tiletrain-edge/NAME, state in
# /run/tiletrain-edge/NAME); the tests and bench/paper/run.sh use clusters of their own.
#
# Layout: a switch namespace `tt-NAME-sw` holds the bridge; device K is namespace
# `tt-NAME-devK`, address 10.77.0.(K+1), host name devK; the launcher namespace `tt-NAME-host` (10.77.0.254)
# runs mpirun, which starts one Open MPI daemon per device through cluster/agent.sh (a
# stand-in for ssh). Only addresses in 10.77.0.0/24 inside these namespaces are used.
#
# Time dilation (with --profile): a profile gives the real device's one-core sgemm speed
# (cluster/profiles.conf); this machine's is measured with tiletrain's own convolutions at
# one thread (cluster/host_gflops.sh: not numpy's sgemm, which follows OPENBLAS_CORETYPE). An emulated
# core runs at F x here, so it is D = device_gflops / (F x host_gflops) times slower than
# the real core, and the link is shaped to the real rate / D: computation and
# communication keep the real device's ratio. Divide measured times by D for device time.
#
# Latency (--rtt, --jitter, a profile's rtt_ms/jitter_ms): this kernel has no netem, so a
# device whose link has a round trip leaves the bridge; its veth end and a tap port of the
# bridge are joined by build/edge_delay_line (cluster/delay_line.cpp), which holds each frame
# for half the round trip (x D, device time) plus up to +-jitter/2 each way, in order.
# A device's RTT is to the switch: two devices with 2 ms each are 4 ms apart.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cluster=${EDGE_CLUSTER:-main}
[[ "$cluster" =~ ^[a-z0-9]{1,8}$ ]] || { echo "edge.sh: EDGE_CLUSTER must be 1-8 of a-z0-9 (got '$cluster')" >&2; exit 1; }
export EDGE_CLUSTER=$cluster  # for agent.sh
state_dir=/run/tiletrain-edge/$cluster
state=$state_dir/state
subnet=10.77.0
cg_name=tiletrain-edge/$cluster
ns=tt-$cluster  # namespace prefix

die() { echo "edge.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, tc, cgroups)"

need_tools() {
  local missing=()
  command -v ip >/dev/null || missing+=(iproute2)
  command -v tc >/dev/null || missing+=(iproute2)
  command -v unshare >/dev/null || missing+=(util-linux)
  command -v mpirun >/dev/null || missing+=(openmpi-bin)
  [ -x /usr/bin/python3 ] || missing+=(python3)  # cluster/ping.py
  if [ ${#missing[@]} -gt 0 ]; then
    echo "edge.sh: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# cgroup v1 (cpu.cfs_quota_us, memory.limit_in_bytes) or v2 (cpu.max, memory.max).
cgroup_version() {
  if [ -d /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_period_us ]; then echo 1
  elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then echo 2
  else die "no cgroup CPU controller found (looked for v1 /sys/fs/cgroup/cpu and v2 cgroup.controllers)"; fi
}
cg_dirs() {  # the cgroup directories of device $1
  if [ "$(cgroup_version)" = 1 ]; then
    echo "/sys/fs/cgroup/cpu/$cg_name/dev$1"
    [ -d /sys/fs/cgroup/memory ] && echo "/sys/fs/cgroup/memory/$cg_name/dev$1"
  else
    echo "/sys/fs/cgroup/$cg_name/dev$1"
  fi
  return 0
}
# Short periods, so that a capped device is slower throughout, as a slower core would be,
# not fast for a few ms and then paused (with 20 ms periods, a device at 0.3 of a core ran
# short layers at full speed and a split weighted by speed gained 1.10x instead of 1.28x);
# longer only where the kernel's 1 ms floor on the quota needs it (under 0.2 of a core).
set_speed() {    # device, cores x speed (in cores of this machine)
  local quota period_us
  period_us=$(awk -v c="$2" 'BEGIN { p = 5000; if (c * p < 1000) p = int(1000 / c) + 1; if (p > 1000000) p = 1000000; print p }')
  quota=$(awk -v c="$2" -v p="$period_us" 'BEGIN { q = int(c * p); if (q < 1000) q = 1000; print q }')
  if [ "$(cgroup_version)" = 1 ]; then
    echo $period_us > "/sys/fs/cgroup/cpu/$cg_name/dev$1/cpu.cfs_period_us"
    echo "$quota" > "/sys/fs/cgroup/cpu/$cg_name/dev$1/cpu.cfs_quota_us"
  else
    echo "$quota $period_us" > "/sys/fs/cgroup/$cg_name/dev$1/cpu.max"
  fi
}
set_memory() {  # device, MB
  local bytes=$(($2 * 1024 * 1024))
  if [ "$(cgroup_version)" = 1 ]; then
    [ -d "/sys/fs/cgroup/memory/$cg_name/dev$1" ] || return 0
    echo "$bytes" > "/sys/fs/cgroup/memory/$cg_name/dev$1/memory.limit_in_bytes"
  else
    echo "$bytes" > "/sys/fs/cgroup/$cg_name/dev$1/memory.max"
  fi
}

# The bucket holds 2 ms at the link's rate, 32 KB at least: with 32 KB at 1 Gbit/s (0.26 ms)
# every late wake-up of tbf's timer on this busy host lost tokens, so a "1 Gbit/s" link ran
# the gradient exchange at 0.4-0.5 of its rate, and at one of two speeds from one minute
# to the next (bench/archive/RESULTS-until-2026-11-26.md, thirteenth session). Links up
# to 128 Mbit/s keep 32 KB, as before.
shape() {  # namespace, interface, rate: tbf on the interface's egress
  local burst
  burst=$(awk -v b="$(rate_bps "$3")" 'BEGIN { x = int(b / 8 * 0.002); if (x < 32768) x = 32768; print x }')
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst "$burst" latency 50ms
}

# TCP in these namespaces gives up on unacknowledged data after about 13 s instead of
# Linux's 15 minutes: when a device's link goes down while mpirun is telling its daemon to
# stop, mpirun would otherwise wait that long to end the job.
no_long_retries() { ip netns exec "$1" sysctl -q -w net.ipv4.tcp_retries2=5; }

check_ms() {  # command, option, value: milliseconds, 0-10000
  awk -v v="$3" 'BEGIN { exit !(v ~ /^[0-9]+(\.[0-9]+)?$/ && v <= 10000) }' ||
    die "$1: $2 takes milliseconds, 0 to 10000 (got '$3')"
}

delay_bin() {
  local bin=${EDGE_DELAY_LINE:-$root/build/edge_delay_line}
  if [ ! -x "$bin" ]; then
    (cd "$root" && scripts/setup.sh edge_delay_line >/dev/null) || die "could not build $bin (scripts/setup.sh edge_delay_line)"
  fi
  echo "$bin"
}

delay_off() {  # device: its veth end straight in the bridge again
  local k=$1 pidf=$state_dir/delay$1.pid
  if [ -f "$pidf" ]; then
    kill "$(cat "$pidf")" 2>/dev/null || true
    rm -f "$pidf"
  fi
  ip netns exec $ns-sw ip link del t$k 2>/dev/null || true
  ip netns exec $ns-sw ip link set d$k master br0
}

# A delay line between device $1's veth end and a tap port of the bridge, if its link has a
# round trip or jitter (state_dir/latencyK: "RTT_MS JITTER_MS", device time; x dilation here).
delay_on() {
  local k=$1 rtt jitter bin us jus tries
  read -r rtt jitter <"$state_dir/latency$k"
  delay_off "$k"
  has_latency "$rtt" "$jitter" || return 0
  bin=$(delay_bin)
  us=$(awk -v r="$rtt" -v d="$dilation" 'BEGIN { printf "%.1f", r * 1000 / 2 * d }')
  jus=$(awk -v j="$jitter" -v d="$dilation" 'BEGIN { printf "%.1f", j * 1000 / 2 * d }')
  ip netns exec $ns-sw ip link set d$k nomaster
  ip netns exec $ns-sw ip tuntap add dev t$k mode tap vnet_hdr
  ip netns exec $ns-sw ip link set t$k master br0 up
  ip netns exec $ns-sw setsid "$bin" --wire d$k --tap t$k --delay-us "$us" --jitter-us "$jus" --seed "$k" \
    </dev/null >>"$state_dir/delay$k.log" 2>&1 &
  echo $! >"$state_dir/delay$k.pid"
  # Ready once it holds the tap (carrier up); it may also fail to start.
  for ((tries = 0; ; tries++)); do
    [ "$(ip netns exec $ns-sw cat /sys/class/net/t$k/carrier 2>/dev/null)" = 1 ] && break
    kill -0 "$(cat "$state_dir/delay$k.pid")" 2>/dev/null || die "the delay line of dev$k stopped: $(tail -n 3 "$state_dir/delay$k.log")"
    [ "$tries" -lt 100 ] || die "the delay line of dev$k did not attach to t$k in 10 s"
    sleep 0.1
  done
}

has_latency() {  # rtt ms, jitter ms: is either above 0?
  awk -v r="$1" -v j="$2" 'BEGIN { exit !(r > 0 || j > 0) }'
}

latency_of() {  # device: "rtt ms, jitter ms" for status
  local rtt jitter
  read -r rtt jitter <"$state_dir/latency$1"
  if has_latency "$rtt" "$jitter"; then
    echo "RTT $rtt ms +-$jitter ms to the switch$(awk -v r="$rtt" -v j="$jitter" -v d="$dilation" 'BEGIN {
      if (d != 1) printf " (x D: %.3g +-%.3g ms here)", r * d, j * d }')"
  else
    echo "no added latency"
  fi
}

check_device() {  # command, index, the name as given
  [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -lt "$devices" ] || die "$1: no device '$3' (dev0-dev$((devices - 1)))"
}

load_state() {
  [ -f "$state" ] || die "no cluster is up (run: cluster/edge.sh up --devices N --link RATE)"
  # shellcheck disable=SC1090
  . "$state"
}

cmd_down() {
  local n
  for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$ns-(dev[0-9]+|sw|host)\$" || true); do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$n"
  done
  local d
  for d in /sys/fs/cgroup/cpu/$cg_name /sys/fs/cgroup/memory/$cg_name /sys/fs/cgroup/$cg_name; do
    [ -d "$d" ] || continue
    local tasks
    for tasks in "$d"/dev*/cgroup.procs; do
      [ -f "$tasks" ] && xargs -r kill -9 <"$tasks" 2>/dev/null || true
    done
    sleep 0.2
    rmdir "$d"/dev* 2>/dev/null || true
    rmdir "$d" 2>/dev/null || true
    rmdir "$(dirname "$d")" 2>/dev/null || true  # the parent, once no cluster is left
  done
  rm -rf "$state_dir"
  echo "edge cluster down"
}

cmd_up() {
  local devices="" link="" cores="" speed="" memory="" profile="" rtt="" jitter=""
  while [ $# -gt 0 ]; do
    case $1 in
      --devices) devices=$2; shift 2 ;;
      --link) link=$2; shift 2 ;;
      --cores) cores=$2; shift 2 ;;
      --device-speed) speed=$2; shift 2 ;;
      --memory) memory=$2; shift 2 ;;
      --profile) profile=$2; shift 2 ;;
      --rtt) rtt=$2; shift 2 ;;
      --jitter) jitter=$2; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ "$devices" =~ ^[0-9]+$ ]] && [ "$devices" -ge 1 ] && [ "$devices" -le 64 ] ||
    die "up: --devices must be 1-64 (got '${devices}')"
  local dev_gflops="" host_gflops="" dilation=1 real_link=""
  if [ -n "$profile" ]; then
    local row
    row=$(awk -v p="$profile" '!/^#/ && $1 == p' "$here/profiles.conf")
    [ -n "$row" ] || die "up: unknown profile '$profile' (cluster/profiles.conf has: $(awk '!/^#/ && NF {printf "%s ", $1}' "$here/profiles.conf"))"
    local p_cores p_mem p_link p_rtt p_jitter
    read -r _ p_cores p_mem p_link dev_gflops p_rtt p_jitter <<<"$row"
    : "${cores:=$p_cores}" "${memory:=$p_mem}" "${rtt:=${p_rtt:-0}}" "${jitter:=${p_jitter:-0}}"
    real_link=${link:-$p_link}
  fi
  : "${cores:=1}" "${rtt:=0}" "${jitter:=0}"
  check_ms up --rtt "$rtt"
  check_ms up --jitter "$jitter"
  [[ "$cores" =~ ^[0-9]+$ ]] && [ "$cores" -ge 1 ] || die "up: --cores must be a positive integer (got '$cores')"
  need_tools
  if [ -n "$profile" ]; then
    host_gflops=$("$here/host_gflops.sh") || die "up: could not measure this machine's speed (cluster/host_gflops.sh)"
  fi
  # Default speed: the real core's (no dilation) if all emulated cores together fit in 90 %
  # of this machine's cores, else that 90 % shared out.
  local host_cores
  host_cores=$(nproc)
  : "${speed:=$(awk -v h="$host_cores" -v n="$devices" -v c="$cores" -v d="$dev_gflops" -v g="$host_gflops" 'BEGIN {
      s = 0.9 * h / (n * c); if (s > 1) s = 1; if (d != "" && d / g < s) s = d / g; printf "%.4f", s }')}"
  awk -v s="$speed" 'BEGIN { exit !(s > 0 && s <= 64) }' || die "up: --device-speed must be a positive number (got '$speed')"
  if [ -n "$profile" ]; then
    dilation=$(awk -v d="$dev_gflops" -v f="$speed" -v h="$host_gflops" 'BEGIN { printf "%.4f", d / (f * h) }')
    # The link slowed by the same factor: tbf takes bit/s.
    local real_bps
    real_bps=$(rate_bps "$real_link")
    link="$(awk -v b="$real_bps" -v d="$dilation" 'BEGIN { printf "%d", b / d }')bit"
  fi
  [ -n "$link" ] || die "up: give --link RATE (e.g. 100mbit) or --profile P"
  rate_bps "$link" >/dev/null
  cmd_down >/dev/null
  mkdir -p "$state_dir"
  ip netns add $ns-sw
  ip netns exec $ns-sw ip link set lo up
  ip netns exec $ns-sw ip link add br0 type bridge
  ip netns exec $ns-sw ip link set br0 up
  # The launcher: mpirun lives here, unshaped and unthrottled.
  ip netns add $ns-host
  ip netns exec $ns-host ip link set lo up
  ip link add eth0 netns $ns-host type veth peer name host netns $ns-sw
  ip netns exec $ns-sw ip link set host master br0 up
  ip netns exec $ns-host ip addr add $subnet.254/24 dev eth0
  ip netns exec $ns-host ip link set eth0 up
  no_long_retries $ns-host
  local cgv k
  cgv=$(cgroup_version)
  if [ "$cgv" = 2 ]; then
    mkdir -p /sys/fs/cgroup/$cg_name
    echo "+cpu +memory" > /sys/fs/cgroup/$cg_name/cgroup.subtree_control 2>/dev/null || true
  fi
  for ((k = 0; k < devices; k++)); do
    ip netns add $ns-dev$k
    ip netns exec $ns-dev$k ip link set lo up
    ip link add eth0 netns $ns-dev$k type veth peer name d$k netns $ns-sw
    ip netns exec $ns-sw ip link set d$k master br0 up
    ip netns exec $ns-dev$k ip addr add $subnet.$((k + 1))/24 dev eth0
    ip netns exec $ns-dev$k ip link set eth0 up
    no_long_retries $ns-dev$k
    shape $ns-dev$k eth0 "$link"  # device -> switch
    shape $ns-sw d$k "$link"      # switch -> device
    echo "$rtt $jitter" >"$state_dir/latency$k"
    local d
    for d in $(cg_dirs $k); do mkdir -p "$d"; done
    set_speed $k "$(awk -v c="$cores" -v s="$speed" 'BEGIN { print c * s }')"
    [ -n "$memory" ] && set_memory $k "$memory"
  done
  cat >"$state" <<EOF
devices=$devices
link=$link
real_link=${real_link:-$link}
cores=$cores
speed=$speed
memory=${memory:-}
profile=${profile:-}
device_gflops=${dev_gflops:-}
host_gflops=${host_gflops:-}
dilation=$dilation
cgroup=v$cgv
EOF
  for ((k = 0; k < devices; k++)); do delay_on $k; done
  cmd_status
}

rate_bps() {  # tc rate → bit/s
  awk -v r="$1" 'BEGIN {
    if (match(r, /^[0-9.]+/) == 0) { print "bad rate " r > "/dev/stderr"; exit 1 }
    v = substr(r, 1, RLENGTH); u = tolower(substr(r, RLENGTH + 1))
    m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9
    if (!(u in m)) { print "edge.sh: unknown rate unit in \"" r "\" (use bit, kbit, mbit or gbit)" > "/dev/stderr"; exit 1 }
    printf "%d\n", v * m[u] }'
}

mbit() { awk -v b="$(rate_bps "$1")" 'BEGIN { printf "%.1f Mbit/s", b / 1e6 }'; }

cmd_status() {
  load_state
  echo "edge cluster: $devices device(s), cgroup $cgroup, launcher $ns-host $subnet.254"
  local k
  for ((k = 0; k < devices; k++)); do
    local q
    if [ "$cgroup" = v1 ]; then
      q=$(awk -v q="$(cat /sys/fs/cgroup/cpu/$cg_name/dev$k/cpu.cfs_quota_us)" -v p="$(cat /sys/fs/cgroup/cpu/$cg_name/dev$k/cpu.cfs_period_us)" 'BEGIN { printf "%.3f", q / p }')
    else
      q=$(awk '{ printf "%.3f", $1 / $2 }' /sys/fs/cgroup/$cg_name/dev$k/cpu.max)
    fi
    local up
    up=$(ip netns exec $ns-sw cat /sys/class/net/d$k/operstate 2>/dev/null || echo "?")
    printf '  dev%-2d %s.%-3d ns %s %s cores x %s = %s of a core here, memory %s, link %s both ways (%s), %s\n' \
      $k $subnet $((k + 1)) "$ns-dev$k" "$cores" "$speed" "$q" "${memory:-unlimited}${memory:+ MB}" "$(mbit "$link")" "$up" \
      "$(latency_of $k)"
  done
  if [ -n "$profile" ]; then
    echo "profile $profile: a real core does $device_gflops GFLOP/s (sgemm), one core here $host_gflops, an emulated"
    echo "  core $(awk -v s="$speed" -v h="$host_gflops" 'BEGIN { printf "%.1f", s * h }'): time dilation D = $dilation (emulated time = D x device time);"
    echo "  link $real_link / D = $(mbit "$link"), round trips x D. Device time = measured time / $dilation."
  fi
}

cmd_run() {
  load_state
  local per=1 timeout="" use=$devices
  while [ $# -gt 0 ]; do
    case $1 in
      --ranks-per-device) per=$2; shift 2 ;;
      --devices) use=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      --) shift; break ;;
      *) die "run: unknown option '$1' (tiletrain's arguments go after --)" ;;
    esac
  done
  [[ "$per" =~ ^[0-9]+$ ]] && [ "$per" -ge 1 ] || die "run: --ranks-per-device must be a positive integer"
  [[ "$use" =~ ^[0-9]+$ ]] && [ "$use" -ge 1 ] && [ "$use" -le "$devices" ] ||
    die "run: --devices must be 1-$devices, the devices that are up (got '$use')"
  local bin=${TILETRAIN_BIN:-$root/build/tiletrain}
  [ -x "$bin" ] || die "no $bin: build it first (scripts/setup.sh tiletrain)"
  local hosts="" k
  for ((k = 0; k < use; k++)); do hosts+="${hosts:+,}$subnet.$((k + 1)):$per"; done
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  local pre=()
  [ -n "$timeout" ] && pre=(timeout -k 5 "$timeout")
  # TCP between devices, shared memory between ranks of one device; one TCP link per peer
  # (with btl_tcp_links 2 Open MPI 4.1.4 hung in the first halo exchange of a 2-rank
  # Fashion-MNIST run, over loopback too); no pinning (all ranks would pin to
  # core 0 of the cgroup otherwise); keepalives on the launcher's connections, so that a
  # device whose link is down is noticed in about 15 s instead of Open MPI's 8 minutes.
  # nsenter, not `ip netns exec`: the latter mounts the namespace's own /sys, where the
  # agents that mpirun starts could not see /sys/fs/cgroup to join their device's cgroups.
  "${pre[@]}" nsenter --net=/run/netns/$ns-host mpirun -np $((use * per)) --host "$hosts" \
    --mca plm_rsh_agent "$here/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,vader,self --mca btl_tcp_if_include $subnet.0/24 --mca oob_tcp_if_include $subnet.0/24 \
    --bind-to none \
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 5 \
    "$bin" "$@"
}

cmd_link() {
  load_state
  local k=${1#dev}
  check_device link "$k" "$1"
  if [ "${2:-}" = --rtt ] || [ "${2:-}" = --jitter ]; then
    local rtt jitter
    read -r rtt jitter <"$state_dir/latency$k"
    shift
    while [ $# -gt 0 ]; do
      case $1 in
        --rtt) rtt=${2:-}; shift 2 || die "link: --rtt needs a value" ;;
        --jitter) jitter=${2:-}; shift 2 || die "link: --jitter needs a value" ;;
        *) die "link: unknown option '$1'" ;;
      esac
    done
    check_ms link --rtt "$rtt"
    check_ms link --jitter "$jitter"
    echo "$rtt $jitter" >"$state_dir/latency$k"
    delay_on "$k"
    wait_reachable "$k"
    echo "dev$k: $(latency_of "$k")"
    return
  fi
  case ${2:-} in
    down) ip netns exec $ns-sw ip link set d$k down ;;
    up)
      ip netns exec $ns-sw ip link set d$k up
      wait_reachable "$k"
      ;;
    *) die "link: say up, down, or --rtt MS [--jitter MS]" ;;
  esac
  echo "dev$k link $2"
}

# Returns once device $1 reaches the launcher and every other device (a TCP connect to a
# closed port: refused means the packet got there and back), as a re-plugged cable would
# be used only once the link works. Open MPI 4.1.4 started right after the link came back
# sometimes failed its first connect ("Open MPI failed to TCP connect", EAGAIN) and hung.
wait_reachable() {
  local k=$1 j addr tries
  for addr in $subnet.254 $(for ((j = 0; j < devices; j++)); do [ "$j" -eq "$k" ] || echo "$subnet.$((j + 1))"; done); do
    for ((tries = 0; ; tries++)); do
      # bash's /dev/tcp: "Connection refused" (status 1 quickly) means reachable.
      local said
      said=$(ip netns exec $ns-dev$k timeout 1 bash -c "exec 3<>/dev/tcp/$addr/9" 2>&1 || true)
      [[ "$said" == *refused* ]] && break
      [ "$tries" -lt 20 ] || die "link: dev$k does not reach $addr (20 tries in about 30 s after its link came up)"
      sleep 0.5
    done
  done
}

# Round trips between two devices: UDP echoes (cluster/ping.py), emulated and device time.
cmd_ping() {
  load_state
  local a=${1#dev} b=${2#dev} count=200 mb=0
  check_device ping "$a" "${1:-}"
  [[ "$b" =~ ^[0-9]+$ ]] && [ "$b" -lt "$devices" ] && [ "$b" != "$a" ] || die "ping: no second device '${2:-}' other than the first"
  shift 2
  while [ $# -gt 0 ]; do
    case $1 in
      --count) count=${2:-}; shift 2 || die "ping: --count needs a value" ;;
      --mb) mb=${2:-}; shift 2 || die "ping: --mb needs a value" ;;
      *) die "ping: unknown option '$1'" ;;
    esac
  done
  [[ "$count" =~ ^[0-9]+$ ]] && [ "$count" -ge 1 ] || die "ping: --count must be a positive integer"
  awk -v m="$mb" 'BEGIN { exit !(m ~ /^[0-9]+(\.[0-9]+)?$/ && m <= 10000) }' || die "ping: --mb must be 0-10000 megabytes"
  nsenter --net=/run/netns/$ns-dev$b /usr/bin/python3 "$here/ping.py" serve 9999 "$mb" &
  local server=$!
  nsenter --net=/run/netns/$ns-dev$a /usr/bin/python3 "$here/ping.py" send $subnet.$((b + 1)) 9999 "$count" "$dilation" "$mb" ||
    { kill $server 2>/dev/null; die "ping: dev$a to dev$b failed (above)"; }
  wait $server || true
}

cmd_speed() {
  load_state
  local k=${1#dev}
  check_device speed "$k" "$1"
  awk -v s="${2:-}" 'BEGIN { exit !(s > 0) }' || die "speed: give a positive factor"
  set_speed "$k" "$(awk -v c="$cores" -v s="$2" 'BEGIN { print c * s }')"
  echo "dev$k: $cores cores x $2 of a core here"
}

cmd_exec() {
  load_state
  local k=${1#dev}
  check_device exec "$k" "${1:-}"
  shift
  [ "${1:-}" = -- ] && shift
  exec "$here/agent.sh" "$subnet.$((k + 1))" "$(printf '%q ' "$@")"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  run) shift; cmd_run "$@" ;;
  link) shift; cmd_link "$@" ;;
  ping) shift; cmd_ping "$@" ;;
  speed) shift; cmd_speed "$@" ;;
  exec) shift; cmd_exec "$@" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
