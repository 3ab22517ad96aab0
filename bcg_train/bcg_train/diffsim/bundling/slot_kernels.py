"""Warp kernels of the device bundler's bookkeeping (bundling.device_bundler): its decisions, made on
the device over fixed slots, so that nothing is read back and every launch has the same shape; a
thread per slot, branch row or environment (one thread only to scan the chunks' counts).

Layout: R branch rows in S = R // B slots of B rows (slot s: rows s B .. s B + B - 1; rows from S B on,
when B does not divide R, stay idle); a substep's run is the R branch rows, then the N environments'
rows. Per slot: `slot_env` (the environment whose bundle it holds, -1 free), `slot_left` (substeps
left), `slot_opened` (the substep it opened at); per environment `env_slot` (-1: no bundle); per
branch row and leg `flags` (perturbed already). Counters: `COUNTERS` (int64, summed over substeps).
No kernel here has an adjoint: they move indices, never states. A substep's decisions, in order:
slot_start, branch_events, env_events, admission_draw, free_slots, open_bundles, count_down (then,
after the branch means, close_ending).
"""
import warp as wp

COUNTERS = ("env_substeps", "bundled_env_substeps", "branch_substeps", "bundles", "reperturbations",
            "skipped_events", "released")
"""The device's counters, in order (`BundleStats` fields of the same names)."""

ABOVE = 2
"""bundling.kernels.leg_loads: a leg's largest impulse is above the threshold."""


@wp.func
def open_slot(i: int, branches: int, rows: int, slot_env: wp.array(dtype=int)):
    """The slot of row i when it is a branch row (i < R) of an open slot, else -1 (an environment row, a
    free slot's row, or a row beyond the last slot)."""
    if i < rows:
        s = i // branches
        if s < slot_env.shape[0]:
            if slot_env[s] >= 0:
                return s
    return -1


@wp.func
def row_env(i: int, branches: int, rows: int, envs: int, slot_env: wp.array(dtype=int)):
    """The environment of row i (R + N rows): a branch row's slot's, or for an idle branch row (a free
    slot's, or beyond the last slot) environment i mod N, whose state and control it copies (valid
    values, spread over the environments: its adjoints are zero); an environment row R + e, e."""
    if i >= rows:
        return i - rows
    s = open_slot(i, branches, rows, slot_env)
    if s >= 0:
        return slot_env[s]
    return i % envs


@wp.kernel(enable_backward=False)
def slot_rows(slot_env: wp.array(dtype=int), branches: int, rows: int, envs: int, env_of_row: wp.array(dtype=int)):
    """env_of_row[i] = `row_env`: whose control row i runs under."""
    i = wp.tid()
    env_of_row[i] = row_env(i, branches, rows, envs, slot_env)


@wp.kernel(enable_backward=False)
def run_rows(slot_env: wp.array(dtype=int), branches: int, rows: int, envs: int, env_of_row: wp.array(dtype=int),
             which: wp.array(dtype=int), src: wp.array(dtype=int)):
    """The run's rows (R + N): env_of_row as `slot_rows`, and where each row's input comes from
    (bundling.kernels.select_rows of the branch rows, 0, and the environments, 1): an open slot's row
    its own branch row (0, i), any other row its environment's (1, e)."""
    i = wp.tid()
    e = row_env(i, branches, rows, envs, slot_env)
    env_of_row[i] = e
    which[i] = 1
    src[i] = e
    if open_slot(i, branches, rows, slot_env) >= 0:
        which[i] = 0
        src[i] = i


CHUNK = 64
"""Environments per chunk of the admission's ranking: a thread per chunk sums its events, one thread
scans the chunk sums, a thread per environment ranks itself within its chunk."""

ADMISSION = ("free", "count", "fit", "offset", "now")
"""`admission` (int32): free slots, environments triggered, those admitted, the draw's offset, the substep."""
FREE, COUNT, FIT, OFFSET, NOW = range(len(ADMISSION))
ENV_SUBSTEPS, BUNDLED, BRANCH_SUBSTEPS, BUNDLES, REPERTURBATIONS, SKIPPED, RELEASED = range(len(COUNTERS))


def chunks(envs: int) -> int:
    """Chunks of CHUNK environments covering `envs`."""
    return (envs + CHUNK - 1) // CHUNK


@wp.kernel(enable_backward=False)
def slot_start(slot_env: wp.array(dtype=int), ending: wp.array(dtype=int), loaded: wp.array(dtype=int),
               admission: wp.array(dtype=int)):
    """Slot s: nothing ending and no branch loaded yet; counts the free slots (admission[FREE], zeroed)."""
    s = wp.tid()
    ending[s] = 0
    loaded[s] = 0
    if slot_env[s] < 0:
        wp.atomic_add(admission, FREE, 1)


@wp.kernel(enable_backward=False)
def branch_events(loads: wp.array2d(dtype=int), branches: int, slot_env: wp.array(dtype=int),
                  flags: wp.array2d(dtype=int), loaded: wp.array(dtype=int), counters: wp.array(dtype=wp.int64),
                  rerun: wp.array(dtype=int), legs: wp.array2d(dtype=int), src: wp.array(dtype=int),
                  branch_src: wp.array(dtype=int)):
    """Branch row r (R rows; R + N loads): in an open slot, a leg ABOVE the threshold and not perturbed
    yet is perturbed now (legs[r, leg] = flags[r, leg] = 1) and the row re-run from itself (rerun[r] = 1,
    src[r] = r), and its slot counts as loaded; the row keeps its own result (branch_src[r] = r). In a
    free slot (or beyond the last) it is idle and keeps its environment's plain result (`row_env`:
    branch_src = R + r mod N)."""
    r = wp.tid()
    rows = rerun.shape[0]
    s = open_slot(r, branches, rows, slot_env)
    rerun[r] = 0
    src[r] = r
    branch_src[r] = r
    legs[r, 0] = 0
    legs[r, 1] = 0
    if s < 0:
        branch_src[r] = rows + r % (loads.shape[0] - rows)
        return
    perturbed = int(0)
    for leg in range(2):
        if loads[r, leg] == ABOVE:
            loaded[s] = 1
            if flags[r, leg] == 0:
                legs[r, leg] = 1
                flags[r, leg] = 1
                perturbed += 1
    wp.atomic_add(counters, BRANCH_SUBSTEPS, wp.int64(1))
    if perturbed > 0:
        rerun[r] = 1
        wp.atomic_add(counters, REPERTURBATIONS, wp.int64(perturbed))
        wp.atomic_add(counters, BRANCH_SUBSTEPS, wp.int64(1))


@wp.kernel(enable_backward=False)
def env_events(loads: wp.array2d(dtype=int), rows: int, onset: int, env_slot: wp.array(dtype=int),
               unloaded: wp.array2d(dtype=int), triggered: wp.array2d(dtype=int), fired: wp.array(dtype=int),
               chunk_count: wp.array(dtype=int)):
    """Environment e (loads of row R + e): a leg ABOVE the threshold triggers it when it has no bundle
    (with `onset` 1 only where the leg was unloaded, below the onset level, the substep before; the
    unloaded legs are updated); fired[e] = 1 when any leg did, counted in its chunk (zeroed)."""
    e = wp.tid()
    any_leg = int(0)
    for leg in range(2):
        load = loads[rows + e, leg]
        ev = int(0)
        if load == ABOVE and env_slot[e] < 0 and (onset == 0 or unloaded[e, leg] == 1):
            ev = 1
        triggered[e, leg] = ev
        any_leg += ev
        if onset == 1:
            unloaded[e, leg] = int(load == 0)
    fired[e] = int(any_leg > 0)
    if any_leg > 0:
        wp.atomic_add(chunk_count, e // CHUNK, 1)


@wp.kernel(enable_backward=False)
def admission_draw(seed: int, envs: int, key: wp.array(dtype=int), chunk_count: wp.array(dtype=int),
                   chunk_first: wp.array(dtype=int), admission: wp.array(dtype=int),
                   counters: wp.array(dtype=wp.int64)):
    """One thread: the chunks' first ranks (an exclusive scan of their counts), how many environments
    triggered and how many fit the free slots, and when fewer fit a uniform offset in [0, count) (seeded
    by `seed` and the substep key[0]): the environment of rank k is admitted where (k - offset) mod count
    < fit, so each triggered environment is admitted with probability fit / count. The substep is kept
    in admission[NOW] and key[0] moves on; counts the environment-substeps and the refused ones."""
    now = key[0]
    count = int(0)
    for c in range(chunk_count.shape[0]):
        chunk_first[c] = count
        count += chunk_count[c]
    fit = wp.min(admission[FREE], count)
    offset = int(0)
    if count > fit:
        rng = wp.rand_init(seed, now)
        offset = wp.min(int(wp.randf(rng) * float(count)), count - 1)
    admission[COUNT] = count
    admission[FIT] = fit
    admission[OFFSET] = offset
    admission[NOW] = now
    key[0] = now + 1
    counters[ENV_SUBSTEPS] = counters[ENV_SUBSTEPS] + wp.int64(envs)
    counters[SKIPPED] = counters[SKIPPED] + wp.int64(count - fit)


@wp.kernel(enable_backward=False)
def free_slots(slot_env: wp.array(dtype=int), free: wp.array(dtype=int)):
    """free[k] = the k-th free slot, in increasing order."""
    s = wp.tid()
    if slot_env[s] >= 0:
        return
    k = int(0)
    for t in range(s):
        if slot_env[t] < 0:
            k += 1
    free[k] = s


@wp.kernel(enable_backward=False)
def open_bundles(branches: int, span: int, onset: int, fired: wp.array(dtype=int), triggered: wp.array2d(dtype=int),
                 chunk_first: wp.array(dtype=int), admission: wp.array(dtype=int), free: wp.array(dtype=int),
                 slot_env: wp.array(dtype=int), slot_left: wp.array(dtype=int), slot_opened: wp.array(dtype=int),
                 env_slot: wp.array(dtype=int), flags: wp.array2d(dtype=int), unloaded: wp.array2d(dtype=int),
                 counters: wp.array(dtype=wp.int64), rerun: wp.array(dtype=int), legs: wp.array2d(dtype=int),
                 src: wp.array(dtype=int), branch_src: wp.array(dtype=int), env_which: wp.array(dtype=int),
                 env_src: wp.array(dtype=int)):
    """Environment e: triggered and admitted (`admission_draw`), it takes the free slot of its rank among
    the admitted and the slot's B rows re-run from its row (src = R + e) with its triggering legs
    perturbed; triggered and refused with `onset` 1, its onset stays pending (those legs stay
    unloaded). Then env_which / env_src select its state: (1, its slot) the branch mean, (0, e) its own."""
    e = wp.tid()
    if fired[e] == 1:
        c = e // CHUNK
        rank = chunk_first[c]
        for i in range(c * CHUNK, e):
            rank += fired[i]
        count = admission[COUNT]
        k = (rank - admission[OFFSET] + count) % count
        if k < admission[FIT]:
            s = free[k]
            slot_env[s] = e
            env_slot[e] = s
            slot_left[s] = span
            slot_opened[s] = admission[NOW]
            rows = rerun.shape[0]
            for b in range(branches):
                r = s * branches + b
                rerun[r] = 1
                src[r] = rows + e
                branch_src[r] = r
                for leg in range(2):
                    legs[r, leg] = triggered[e, leg]
                    flags[r, leg] = triggered[e, leg]
            wp.atomic_add(counters, BUNDLES, wp.int64(1))
            wp.atomic_add(counters, BRANCH_SUBSTEPS, wp.int64(branches))
        elif onset == 1:
            for leg in range(2):
                if triggered[e, leg] == 1:
                    unloaded[e, leg] = 1
    w = env_slot[e]
    env_which[e] = int(w >= 0)
    env_src[e] = e
    if w >= 0:
        env_src[e] = w


@wp.kernel(enable_backward=False)
def count_down(release: int, admission: wp.array(dtype=int), slot_env: wp.array(dtype=int),
               slot_left: wp.array(dtype=int), slot_opened: wp.array(dtype=int), loaded: wp.array(dtype=int),
               ending: wp.array(dtype=int), counters: wp.array(dtype=wp.int64)):
    """Open slot s (new ones included) counts a substep down; it ends after this substep at zero, or
    with `release` 1 when it was open before this substep and none of its branches was loaded
    (ending[s] = 1, counted as released when substeps were left)."""
    s = wp.tid()
    if slot_env[s] < 0:
        return
    wp.atomic_add(counters, BUNDLED, wp.int64(1))
    released = release == 1 and slot_opened[s] != admission[NOW] and loaded[s] == 0
    left = slot_left[s] - 1
    slot_left[s] = left
    if released and left > 0:
        wp.atomic_add(counters, RELEASED, wp.int64(1))
    ending[s] = int(left <= 0 or released)


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
