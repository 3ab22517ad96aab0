"""Bundled Contact Gradients: what the simulator calls of a bundler (`base.Bundler`), the open bundles
kept on the host (`host_bundler`) or on the device in fixed slots (`device_bundler`, `bundle.on_device`),
and their Warp kernels (`kernels`, `slot_kernels`). The simulator builds one bundler when
`SimConfig.bundle.enabled`."""
from .base import Bundler, BundleStats
from .device_bundler import DeviceBundler
from .host_bundler import HostBundler

__all__ = ["Bundler", "BundleStats", "DeviceBundler", "HostBundler"]
