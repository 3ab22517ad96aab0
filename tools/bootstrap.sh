#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine: apt packages, a virtual environment in
# .venv with the versions pinned in constraints.txt, and the four workspace packages installed in
# editable mode. Sourced by tools/main.sh and tools/test.sh; safe to run again.
# torch: where an NVIDIA driver is present (tools/gpu/torch_flavour.sh; BCG_TORCH=cpu|cuda
# overrides) the CUDA build of the pinned version, PyPI's own Linux wheel, asked for as
# `torch===VERSION` so that no local `+cpu` build satisfies it; elsewhere `torch==VERSION` as pinned
# (a CPU build where one is at hand). The flavour is part of the stamp: a switch re-runs the set-up.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BCG_VENV:-$ROOT/.venv}"
STAMP="$VENV/.bcg-installed"
log() { printf '[bootstrap] %s\n' "$*" >&2; }

apt_packages=(cyclonedds-dev libosmesa6 python3-venv)
missing=()
for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  log "apt: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# cyclonedds==0.10.2 (the robot's version) has no wheel for this Python: pip builds it against
# Debian's libddsc 0.10.2, looking for $CYCLONEDDS_HOME/{include,bin,lib}. Debian keeps the
# library in the multiarch folder, so point the build at a folder of links.
multiarch="$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH)"
export CYCLONEDDS_HOME="$VENV/cyclonedds-home"

torch_flavour="$(bash "$ROOT/tools/gpu/torch_flavour.sh")"
want="$( { cat "$ROOT/constraints.txt" "$ROOT/tools/requirements.txt" "$ROOT"/*/setup.py; echo "torch=$torch_flavour"; } \
  | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  return 0 2>/dev/null || exit 0
fi
[ -x "$VENV/bin/python" ] || { log "creating $VENV"; python3 -m venv "$VENV"; }
mkdir -p "$CYCLONEDDS_HOME"
ln -sfn /usr/include "$CYCLONEDDS_HOME/include"
ln -sfn /usr/bin "$CYCLONEDDS_HOME/bin"
ln -sfn "/usr/lib/$multiarch" "$CYCLONEDDS_HOME/lib"
pip=("$VENV/bin/python" -m pip -q --disable-pip-version-check)
if [ "$torch_flavour" = cuda ]; then
  torch_version="$(sed -n 's/^torch==\([^[:space:]#]*\).*/\1/p' "$ROOT/constraints.txt")"
  [ -n "$torch_version" ] || { log "error: constraints.txt pins no torch==VERSION"; exit 1; }
  log "pip: torch $torch_version, CUDA build (NVIDIA driver found; several GB on the first run)"
  "${pip[@]}" install -c "$ROOT/constraints.txt" "torch===$torch_version"
fi
log "pip: installing pinned packages (first run builds cyclonedds 0.10.2; a few minutes)"
"${pip[@]}" install -c "$ROOT/constraints.txt" -r "$ROOT/tools/requirements.txt"
"${pip[@]}" install -c "$ROOT/constraints.txt" --no-build-isolation \
  -e "$ROOT/bcg" -e "$ROOT/bcg_sim_bridge" -e "$ROOT/bcg_policy_node" -e "$ROOT/bcg_train"
if [ "$torch_flavour" = cuda ] && ! "$VENV/bin/python" -c 'import sys, torch; sys.exit(torch.version.cuda is None)'; then
  log "error: an NVIDIA driver is present but $VENV holds a CPU build of torch; BCG_TORCH=cpu keeps it knowingly"
  exit 1
fi
echo "$want" > "$STAMP"
log "ready: $VENV"
