"""Training algorithms, one per file (rsl_rl style).

- `returns`: TD(lambda) targets and SHAC window returns, pure functions.
- `networks`, `obs_normalizer`: SHAC's actor, critic ensemble and observation normaliser.
- `add`: the ADD discriminator reward (normaliser, replay buffer, discriminator training).
- `reward`: the named reward terms (ADD + the env's).
- `episodes`: per-iteration rollout statistics.
- `gradient_stats`: statistics of SHAC's actor gradient across updates.
- `data_parallel`: what the algorithms share with the other ranks of a torchrun job.
- `phases`: the loop's phases, timed when a benchmark asks (bench/bench_train.py).
- `shac`: SHAC through the differentiable simulator.
- `ppo`: the rsl-rl-lib PPO baseline on the same env and reward.
"""
