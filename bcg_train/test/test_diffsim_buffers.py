"""The simulator's buffer reuse: cached launch sites (kernels.launch) give wp.launch's values and
wp.Tape's gradients bit for bit, follow changed arguments and refuse a backward through a relaunched
site; the buffer pool (diffsim.pool) hands released buffers back best fit, zeroed where it must, and
keeps what is carried."""
import numpy as np
import pytest
import warp as wp

from bcg_train.diffsim import Model, SimConfig
from bcg_train.diffsim.kernels.launch import CachedLaunch, LaunchSites, StaleLaunchError
from bcg_train.diffsim.pool import BufferPool
from bcg_train.diffsim.substep import Substep


@wp.kernel
def _scaled_square(x: wp.array(dtype=wp.float64), s: wp.float64, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = s * x[i] * x[i]


def _arr(values, grad=True):
    return wp.array(np.asarray(values, dtype=np.float64), dtype=wp.float64, device="cpu", requires_grad=grad)


def _reference(x0, s):
    """y and dy/dx . 1 through wp.launch on a wp.Tape."""
    x, y = _arr(x0), _arr(np.zeros(len(x0)))
    tape = wp.Tape()
    with tape:
        wp.launch(_scaled_square, dim=len(x0), inputs=[x, wp.float64(s)], outputs=[y], device="cpu")
    tape.backward(grads={y: wp.array(np.ones(len(x0)), dtype=wp.float64)})
    return y.numpy(), x.grad.numpy()


def test_a_cached_site_matches_wp_launch_and_follows_new_arguments():
    site = CachedLaunch(_scaled_square, "cpu")
    rng = np.random.default_rng(0)
    for s, n in ((2.0, 5), (2.0, 5), (-0.5, 5), (3.0, 3)):     # same arguments, a new scale, fewer rows
        x0 = rng.normal(size=n)
        x, y = _arr(x0), wp.zeros(n, dtype=wp.float64, device="cpu")   # y gets its adjoint only at backward
        tape = wp.Tape()
        with tape:
            site(n, [x, wp.float64(s), y], tape)
        tape.backward(grads={y: wp.array(np.ones(n), dtype=wp.float64)})
        y_ref, g_ref = _reference(x0, s)
        np.testing.assert_array_equal(y.numpy(), y_ref)
        np.testing.assert_array_equal(x.grad.numpy(), g_ref)


def test_a_site_checks_an_argument_of_another_type():
    site = CachedLaunch(_scaled_square, "cpu")
    site(2, [_arr([1.0, 2.0]), wp.float64(1.0), _arr([0.0, 0.0])])
    with pytest.raises(RuntimeError, match="dtype"):
        site(2, [wp.zeros(2, dtype=wp.float32), wp.float64(1.0), _arr([0.0, 0.0])])


def test_backward_through_a_relaunched_site_raises():
    site = CachedLaunch(_scaled_square, "cpu")
    x, y = _arr([1.0, 2.0]), _arr([0.0, 0.0])
    tape = wp.Tape()
    with tape:
        site(2, [x, wp.float64(1.0), y], tape)
    site(2, [x, wp.float64(1.0), y])
    with pytest.raises(StaleLaunchError, match="_scaled_square"):
        tape.backward(grads={y: wp.array([1.0, 1.0], dtype=wp.float64)})


def test_sites_are_handed_out_in_call_order():
    sites = LaunchSites("cpu")
    first = [sites.site(_scaled_square), sites.site(_scaled_square)]
    sites.begin()
    assert [sites.site(_scaled_square), sites.site(_scaled_square)] == first
    assert first[0] is not first[1]


@pytest.fixture(scope="module")
def physics():
    return Substep(Model.from_mujoco(device="cpu"), SimConfig())


def test_released_buffers_serve_the_same_requests_again_zeroed(physics):
    pool = BufferPool(physics, True)
    a, b = pool.state(20), pool.state(20)
    assert a.num_envs == 20 and a.q.grad is not None and a.q.ptr != b.q.ptr
    a.q.grad.fill_(1.0)
    a.qd.fill_(2.0)
    b.qd.fill_(2.0)
    assert pool.state(20).q.ptr not in (a.q.ptr, b.q.ptr)           # taken until released
    pool.release()
    again = pool.state(20)
    assert again is a and np.all(a.q.grad.numpy() == 0.0)         # adjoints zeroed on reuse
    assert np.all(a.qd.numpy() == 2.0)                              # values kept unless asked
    assert pool.state(20, zero=True) is b and np.all(b.qd.numpy() == 0.0)
    ints = pool.ints(np.array([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(ints.numpy(), [[1, 2], [3, 4]])
    assert pool.ints([[1, 2], [3, 4]]) is ints                     # the same values: copied once
    other = pool.ints([[1, 2], [3, 5]])
    assert other is not ints and other.numpy()[1, 1] == 5 and pool.ints([1, 2]).shape == (2,)
    pool.release()                                                  # its buffer may now serve other values:
    np.testing.assert_array_equal(pool.ints([[7, 8], [9, 10]]).numpy(), [[7, 8], [9, 10]])
    np.testing.assert_array_equal(pool.ints([[1, 2], [3, 4]]).numpy(), [[1, 2], [3, 4]])   # copied again


def test_requests_take_the_smallest_buffer_that_fits_and_unused_ones_are_dropped(physics):
    pool = BufferPool(physics, False)
    big, small = pool.state(40), pool.state(10)
    assert big.q.grad is None
    pool.release()
    view = pool.state(7)                            # the smallest that holds 7 rows: a view of it
    assert view.q.ptr == small.q.ptr and view.num_envs == 7
    assert pool.state(12).q.ptr != big.q.ptr        # big holds 12 rows, but over twice as many
    pool.release()                                  # big was not taken since the last release: dropped
    assert pool.state(30).q.ptr != big.q.ptr


def test_a_carried_state_outlives_releases_until_the_next_carry(physics):
    pool = BufferPool(physics, False)
    kept = pool.state(10)
    pool.carry(kept)
    pool.release()
    other = pool.state(10)
    assert other.q.ptr != kept.q.ptr                # still taken
    pool.carry(None)
    pool.release()
    assert {pool.state(10).q.ptr, pool.state(10).q.ptr} == {kept.q.ptr, other.q.ptr}


def test_intermediates_are_reused_best_fit_and_zeroed(physics):
    pool = BufferPool(physics, True)
    big, small = pool.scratch(40), pool.scratch(10)
    assert (big.rows, small.rows) == (40, 10) and big.capacity >= 40 and small.capacity >= 10
    small.crb_m.fill_(3.0)
    small.a.grad.fill_(4.0)
    pool.release()
    assert pool.scratch(7) is small and small.rows == 7
    assert np.all(small.crb_m.numpy() == 0.0) and np.all(small.a.grad.numpy() == 0.0)


def test_a_named_kind_of_intermediates_has_its_own_buffers_of_power_of_two_capacity(physics):
    pool = BufferPool(physics, False)
    plain, named = pool.scratch(40), pool.scratch(9, kind="rerun")
    assert (plain.capacity, named.capacity) == (50, 16) and named.rows == 9
    pool.release()
    assert pool.scratch(12, kind="rerun") is named            # any request of 9 to 16 rows fits it
    assert pool.scratch(40, kind="rerun") is not plain         # the other kind's buffer is not handed out
    assert pool.scratch(33) is plain
