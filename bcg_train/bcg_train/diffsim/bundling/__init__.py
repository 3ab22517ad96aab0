"""Bundled Contact Gradients: the open bundles kept on the host (`bundler`) or on the device in fixed
slots (`device_bundler`, `bundle.on_device`), and their Warp kernels (`kernels`, `slot_kernels`). The
simulator builds one of them when `SimConfig.bundle.enabled`."""
from .bundler import Bundler, BundleStats
from .device_bundler import DeviceBundler

__all__ = ["Bundler", "BundleStats", "DeviceBundler"]
