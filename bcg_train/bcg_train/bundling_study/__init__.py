"""Gradient-variance study of Bundled Contact Gradients on the G1 and the cost of a bundled SHAC
window (the library behind bench/bundling_study.py).

Measure: sum_k Var_e[g_{e,k}] (unbiased, across environments e) of the SHAC actor-loss gradient
g_e = d loss_e / d(.), loss_e = -sum_{t<32} gamma^t r_{e,t} (gamma 0.99, no critic term: the
terminal value is a fixed zero), (a) with respect to the policy parameters and (b) with respect to
the actions a_{e,t} (32 x 29 per environment; total derivatives in the closed loop, as SHAC's
backward pass sees them). Every environment has its own copy of the policy's parameters (batched
weights, all copies equal at the start), so one backward of sum_e loss_e leaves env e's gradient in
param.grad[e]. Error bars: 95 % percentile intervals over bootstrap resamples of the environments;
the with/without ratio is bootstrapped on the same resamples (paired: same environments, initial
states and action noise in both).

Policy: MLP obs (66) -> 64 tanh -> 64 tanh -> 29, fixed random init (seed POLICY_SEED), output x 0.1 rad
= joint-target offsets added to the reference pose. Observation: joint position minus reference (29),
0.1 x joint velocity (29), 0.25 x base angular velocity in the base frame (3), projected gravity (3),
sin / cos of a 1 Hz clock of the reference time (2). Targets: reference joints at t + 1 + action
+ fixed action noise; PD gains of the stand policy
(`bcg.contract.builtin.stand_gains`). Reward (differentiable in the
simulated state): r = 0.5 exp(-2 |q_j - q_j,ref|^2) + 0.3 exp(-100 (z - z_ref)^2) + 0.2 exp(-10 (1 - u)),
z the pelvis height [m], u the world z component of the pelvis z axis.

Scenarios (E environments each, identical in the runs with and without bundling):
- stand: default pose settled for 1 s by the plain simulator at the kappa studied, reference = that
  pose; per-env action noise N(0, 0.05^2) rad per step and joint.
- jump: reference-state initialisation from the synthetic_jump clip 2..8 control steps (random per
  env) before the landing (falling at ~2.3 m/s), joints perturbed N(0, 0.02^2) rad, the same action
  noise; the window covers the landing and 0.5 s of recovery. Environments differ in phase.
- jump_tight: as jump but every env starts 5 steps before landing, joints perturbed N(0, 0.001^2) rad,
  no action noise: the variance left is the sensitivity of the landing itself.

Modules: `scenarios` (batches, model, settings), `window` (per-environment policy, one taped window),
`statistics`, `pointmass` (the 1-D case), `study` (the runs), `report` (markdown, CSV, figures).
"""
