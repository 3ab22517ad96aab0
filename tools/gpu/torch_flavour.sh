#!/usr/bin/env bash
# Prints which build of torch this machine gets: "cuda" where an NVIDIA driver is present
# (`nvidia-smi` answers, or the kernel module shows /proc/driver/nvidia/version), else "cpu".
# BCG_TORCH=cpu|cuda overrides the detection (e.g. cpu on a GPU machine, to keep the small wheel).
set -euo pipefail
case "${BCG_TORCH:-}" in
  cpu|cuda) echo "$BCG_TORCH"; exit 0 ;;
  "") ;;
  *) echo "torch_flavour.sh: BCG_TORCH must be cpu or cuda, got '$BCG_TORCH'" >&2; exit 2 ;;
esac
if { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; } || [ -r /proc/driver/nvidia/version ]; then
  echo cuda
else
  echo cpu
fi
