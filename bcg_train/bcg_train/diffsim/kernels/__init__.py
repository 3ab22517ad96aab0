"""Warp kernels of one substep (dynamics, contact geometry, integration) and the struct that packs
the model's arrays and the simulator's solver constants into one kernel argument."""
