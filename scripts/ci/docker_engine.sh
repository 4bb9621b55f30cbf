#!/bin/bash
# A private, sandbox-safe Docker engine for tests and CI.
#
#   scripts/ci/docker_engine.sh start [STATE_DIR]   -> prints the path of an env file to `source`
#   scripts/ci/docker_engine.sh stop  [STATE_DIR]   -> removes everything `start` created
#
# Why these flags: a default dockerd rewrites iptables (NAT/MASQUERADE) and turns on ip_forward, which
# would let containers route out of the machine. With --iptables=false --ip6tables=false
# --ip-masq=false --ip-forward=false container traffic stays on the in-VM bridge; published ports
# still work through docker-proxy. All state (data root, exec root, socket, pid, log) lives under
# STATE_DIR (default /tmp/tt-docker-engine), which `stop` deletes.
set -euo pipefail

CMD=${1:?usage: docker_engine.sh start|stop [STATE_DIR]}
W=${2:-${TT_DOCKER_STATE_DIR:-/tmp/tt-docker-engine}}
ENV_FILE="$W/docker.env"

log() { echo "[docker_engine] $*" >&2; }

install_engine() {
  command -v dockerd >/dev/null 2>&1 && return 0
  log "installing docker.io from the Debian archive"
  local made_policy=0
  # The package must not start a system daemon with default (unsafe here) flags.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null
  if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
}

start() {
  if [ -f "$W/dockerd.pid" ] && kill -0 "$(cat "$W/dockerd.pid")" 2>/dev/null; then
    log "already running (pid $(cat "$W/dockerd.pid"))"; echo "$ENV_FILE"; return 0
  fi
  install_engine >&2  # stdout carries only the env file path
  mkdir -p "$W/data" "$W/exec"
  # Remember whether docker0 existed so stop deletes only what we created.
  if ip link show docker0 >/dev/null 2>&1; then echo 1 >"$W/docker0.preexisting"; fi
  # dockerd/containerd also leave host state outside the data root; note what was already there.
  for p in /etc/docker/key.json /run/containerd /run/docker; do [ -e "$p" ] && echo "$p"; done >"$W/host-state.preexisting"
  setsid dockerd --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
    --data-root "$W/data" --exec-root "$W/exec" -H "unix://$W/docker.sock" --pidfile "$W/dockerd.pid" \
    >"$W/dockerd.log" 2>&1 </dev/null &
  echo $! >"$W/dockerd.launcher.pid"
  export DOCKER_HOST="unix://$W/docker.sock"
  for _ in $(seq 1 300); do
    docker version -f '{{.Server.Version}}' >/dev/null 2>&1 && break
    sleep 0.1
  done
  if ! docker version -f '{{.Server.Version}}' >/dev/null 2>&1; then
    log "dockerd did not come up; last log lines:"; tail -20 "$W/dockerd.log" >&2; stop; exit 1
  fi
  printf 'export DOCKER_HOST=%q\nexport TT_DOCKER_STATE_DIR=%q\n' "$DOCKER_HOST" "$W" >"$ENV_FILE"
  log "dockerd $(docker version -f '{{.Server.Version}}') up at $DOCKER_HOST"
  echo "$ENV_FILE"
}

stop() {
  set +e
  [ -d "$W" ] || return 0
  export DOCKER_HOST="unix://$W/docker.sock"
  local pid=""
  [ -f "$W/dockerd.pid" ] && pid=$(cat "$W/dockerd.pid")
  [ -z "$pid" ] && [ -f "$W/dockerd.launcher.pid" ] && pid=$(cat "$W/dockerd.launcher.pid")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # Remove every container first: a daemon stopping with live containers waits 10 s per container.
    docker ps -aq 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { log "dockerd ignored SIGTERM; killing"; kill -KILL "$pid"; }
  fi
  # Leftover mounts under the state dir (overlay, nsfs), deepest first.
  awk -v w="$W" 'index($2, w)==1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m"; done
  if [ ! -f "$W/docker0.preexisting" ] && ip link show docker0 >/dev/null 2>&1; then ip link del docker0; fi
  if [ -f "$W/host-state.preexisting" ]; then
    for p in /etc/docker/key.json /run/containerd /run/docker; do
      grep -qx "$p" "$W/host-state.preexisting" || rm -rf "$p"
    done
  fi
  rm -rf "$W"
  log "stopped and cleaned $W"
  return 0
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop [STATE_DIR]" >&2; exit 2 ;;
esac
