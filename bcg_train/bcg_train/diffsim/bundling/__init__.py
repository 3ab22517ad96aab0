"""Bundled Contact Gradients: host bookkeeping of the open bundles (`bundler`) and their Warp kernels
(`kernels`). The simulator builds a `Bundler` when `SimConfig.bundle.enabled`."""
from .bundler import Bundler, BundleStats

__all__ = ["Bundler", "BundleStats"]
