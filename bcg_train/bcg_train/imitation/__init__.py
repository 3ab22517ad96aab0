"""The G1 imitation environment: reference motion tracking on the differentiable simulator.

`config` (ImitationEnvConfig) imports without Warp or MuJoCo; `env.G1ImitationEnv` loads both."""
