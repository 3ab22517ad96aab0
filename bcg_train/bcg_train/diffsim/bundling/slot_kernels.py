"""Warp kernels of the device bundler's bookkeeping (bundling.device_bundler): its decisions, made on
the device over fixed slots, so that nothing is read back and every launch has the same shape.

Layout: R branch rows in S = R // B slots of B rows (slot s: rows s B .. s B + B - 1; rows from S B on,
when B does not divide R, stay idle); a substep's run is the R branch rows, then the N environments'
rows. Per slot: `slot_env` (the environment whose bundle it holds, -1 free), `slot_left` (substeps
left), `slot_opened` (the substep it opened at); per environment `env_slot` (-1: no bundle); per
branch row and leg `flags` (perturbed already). Counters: `COUNTERS` (int64, summed over substeps).
No kernel here has an adjoint: they move indices, never states.
"""
import warp as wp

COUNTERS = ("env_substeps", "bundled_env_substeps", "branch_substeps", "bundles", "reperturbations",
            "skipped_events", "released")
"""The device's counters, in order (`BundleStats` fields of the same names)."""

LOADED, ABOVE = 1, 2
"""bundling.kernels.leg_loads: a leg's largest impulse above the onset level, above the threshold."""


@wp.kernel(enable_backward=False)
def slot_rows(slot_env: wp.array(dtype=int), branches: int, rows: int, env_of_row: wp.array(dtype=int)):
    """env_of_row[i]: the environment whose control row i runs under: branch row i < R its slot's
    environment (0 in a free slot: its rows run, unread), environment row R + e its own."""
    i = wp.tid()
    if i >= rows:
        env_of_row[i] = i - rows
        return
    s = i // branches
    e = int(0)
    if s < slot_env.shape[0]:
        e = wp.max(slot_env[s], 0)
    env_of_row[i] = e


@wp.kernel(enable_backward=False)
def slot_events(loads: wp.array2d(dtype=int), branches: int, span: int, onset: int, release: int, seed: int,
                key: wp.array(dtype=int), slot_env: wp.array(dtype=int), slot_left: wp.array(dtype=int),
                slot_opened: wp.array(dtype=int), env_slot: wp.array(dtype=int), flags: wp.array2d(dtype=int),
                unloaded: wp.array2d(dtype=int), triggered: wp.array2d(dtype=int),
                counters: wp.array(dtype=wp.int64), rerun: wp.array(dtype=int), legs: wp.array2d(dtype=int),
                src: wp.array(dtype=int), branch_src: wp.array(dtype=int), ending: wp.array(dtype=int),
                env_which: wp.array(dtype=int), env_src: wp.array(dtype=int)):
    """One thread: a substep's events, from the loads (R + N, 2) of its run (bundling.kernels.leg_loads).
    - a branch row whose leg is ABOVE and not yet perturbed is re-run with that leg perturbed
      (rerun[r] = 1, legs[r, leg] = 1, src[r] = r); with `release` 1 an open bundle none of whose rows is
      ABOVE ends after this substep;
    - an environment without a bundle triggers on a leg ABOVE (with `onset` 1 only where that leg was
      unloaded, below the onset level, the substep before: `unloaded`); as many as there are free slots
      open one, drawn uniformly without replacement (selection sampling, seeded by `seed` and the
      substep counter key[0]) and placed in the free slots in increasing order; their B rows re-run from
      the environment's row (src = R + e) with the triggering legs perturbed; a refused onset stays
      pending (its leg stays unloaded);
    - every open bundle counts a substep down and ends at zero; `ending` (S) 1 for those that end after
      this substep (`close_ending` frees them); env_which / env_src select each environment's state
      (1, its slot: the branch mean; 0, e: its own row); branch_src the row a branch row keeps (its own,
      or in a free slot the first environment's, a valid state); the counters; key[0] += 1."""
    now = key[0]
    slots = slot_env.shape[0]
    rows = rerun.shape[0]
    n = env_slot.shape[0]
    old_rows = int(0)
    rerun_rows = int(0)
    reperturbed = int(0)
    for s in range(slots):
        e = slot_env[s]
        ending[s] = 0
        any_above = int(0)
        for b in range(branches):
            r = s * branches + b
            rerun[r] = 0
            src[r] = r
            branch_src[r] = r
            for leg in range(2):
                legs[r, leg] = 0
                if e >= 0 and loads[r, leg] == ABOVE:
                    any_above = 1
                    if flags[r, leg] == 0:
                        legs[r, leg] = 1
                        flags[r, leg] = 1
                        rerun[r] = 1
                        reperturbed += 1
            if e < 0:
                branch_src[r] = rows
            rerun_rows += rerun[r]
        if e >= 0:
            old_rows += branches
            if release == 1 and any_above == 0:
                ending[s] = 2
    for r in range(slots * branches, rows):
        rerun[r] = 0
        src[r] = r
        branch_src[r] = rows
        legs[r, 0] = 0
        legs[r, 1] = 0
    count = int(0)
    for e in range(n):
        fired = int(0)
        for leg in range(2):
            load = loads[rows + e, leg]
            ev = int(0)
            if load == ABOVE and env_slot[e] < 0 and (onset == 0 or unloaded[e, leg] == 1):
                ev = 1
            triggered[e, leg] = ev
            fired += ev
            if onset == 1:
                unloaded[e, leg] = int(load == 0)
        if fired > 0:
            count += 1
    fit = wp.min(slots - old_rows // branches, count)
    rng = wp.rand_init(seed, now)
    needed = fit
    remaining = count
    s = int(0)
    opened = int(0)
    for e in range(n):
        if triggered[e, 0] + triggered[e, 1] > 0:
            if needed > 0 and wp.randf(rng) * float(remaining) < float(needed):
                needed -= 1
                while slot_env[s] >= 0:
                    s += 1
                slot_env[s] = e
                env_slot[e] = s
                slot_left[s] = span
                slot_opened[s] = now
                for b in range(branches):
                    r = s * branches + b
                    rerun[r] = 1
                    src[r] = rows + e
                    branch_src[r] = r
                    for leg in range(2):
                        legs[r, leg] = triggered[e, leg]
                        flags[r, leg] = triggered[e, leg]
                opened += 1
            elif onset == 1:
                for leg in range(2):
                    if triggered[e, leg] == 1:
                        unloaded[e, leg] = 1
            remaining -= 1
    bundled = int(0)
    released = int(0)
    for w in range(slots):
        if slot_env[w] >= 0:
            bundled += 1
            slot_left[w] = slot_left[w] - 1
            if ending[w] == 2 and slot_left[w] > 0:
                released += 1
            if slot_left[w] <= 0 or ending[w] == 2:
                ending[w] = 1
            else:
                ending[w] = 0
    for e in range(n):
        w = env_slot[e]
        env_which[e] = int(w >= 0)
        env_src[e] = e
        if w >= 0:
            env_src[e] = w
    counters[0] = counters[0] + wp.int64(n)
    counters[1] = counters[1] + wp.int64(bundled)
    counters[2] = counters[2] + wp.int64(old_rows + rerun_rows + opened * branches)
    counters[3] = counters[3] + wp.int64(opened)
    counters[4] = counters[4] + wp.int64(reperturbed)
    counters[5] = counters[5] + wp.int64(count - fit)
    counters[6] = counters[6] + wp.int64(released)
    key[0] = now + 1


@wp.kernel(enable_backward=False)
def close_ending(ending: wp.array(dtype=int), slot_env: wp.array(dtype=int), env_slot: wp.array(dtype=int)):
    """Free slot s where ending[s] == 1 (after its mean was taken)."""
    s = wp.tid()
    e = slot_env[s]
    if ending[s] == 1 and e >= 0:
        env_slot[e] = -1
        slot_env[s] = -1


@wp.kernel(enable_backward=False)
def close_restarted(restart: wp.array(dtype=int), slot_env: wp.array(dtype=int), env_slot: wp.array(dtype=int),
                    unloaded: wp.array2d(dtype=int)):
    """Environment e with restart[e] == 1 (its state replaced from outside): its bundle closes, its legs
    count as unloaded (an onset may follow), restart[e] <- 0."""
    e = wp.tid()
    if restart[e] == 0:
        return
    s = env_slot[e]
    if s >= 0:
        slot_env[s] = -1
        env_slot[e] = -1
    unloaded[e, 0] = 1
    unloaded[e, 1] = 1
    restart[e] = 0
