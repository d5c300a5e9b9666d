"""Running statistics: merged batches equal one big batch; returns restart at episode ends."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import torch

from a3c.normalize import OBSERVATION_CLIP, DiscountedReturns, RunningMeanStd


def test_batches_merged_one_by_one_give_the_statistics_of_all_of_them() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 3)) * [1, 10, 0.01] for n in (1, 7, 50, 2)]
    stats = RunningMeanStd((3,))
    for batch in batches:
        stats.update(batch)
    everything = np.concatenate(batches)
    assert stats.count.item() == len(everything)
    np.testing.assert_allclose(stats.mean.numpy(), everything.mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats.var.numpy(), everything.var(0), rtol=1e-10)


def test_normalize_is_the_identity_before_any_data_and_clips_after() -> None:
    stats = RunningMeanStd((2,))
    values = torch.tensor([[0.5, -3.0]])
    torch.testing.assert_close(stats.normalize(values), values)
    stats.update(np.array([[0.0, 0.0], [0.0, 0.002]]))  # second feature: std 0.001
    out = stats.normalize(torch.tensor([[0.0, 5.0]]))
    assert out.dtype == torch.float32
    assert out[0, 1].item() == OBSERVATION_CLIP


def test_statistics_are_buffers_that_travel_in_the_state_dict() -> None:
    stats = RunningMeanStd((4,))
    stats.update(np.ones((3, 4)))
    assert set(stats.state_dict()) == {"count", "mean", "var"}
    assert not list(stats.parameters())


def test_discounted_returns_restart_after_an_episode_end() -> None:
    returns = DiscountedReturns(2, gamma=0.5)
    seen = returns.step(np.array([1.0, 2.0]), np.array([False, True]))
    np.testing.assert_allclose(seen, [1.0, 2.0])
    seen = returns.step(np.array([1.0, 1.0]), np.array([False, False]))
    np.testing.assert_allclose(seen, [1.5, 1.0])  # the second env began a new episode


def _merge_batches(stats: RunningMeanStd, seed: int, batches: int) -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    for _ in range(batches):
        stats.update(rng.normal([3.0, -1.0], [2.0, 0.5], size=(80, 2)))


def test_a_non_finite_sample_leaves_the_statistics_and_the_returns_finite() -> None:
    stats = RunningMeanStd((2,))
    stats.update(np.array([[1.0, 2.0], [np.nan, 0.0], [3.0, np.inf], [3.0, 4.0]]))
    assert stats.count.item() == 2
    assert np.allclose(stats.mean.numpy(), [2.0, 3.0])
    returns = DiscountedReturns(2, gamma=0.5)
    seen = returns.step(np.array([np.nan, 1.0]), np.array([False, False]))
    assert np.isnan(seen[0]) and seen[1] == 1.0
    after = returns.step(np.array([2.0, 2.0]), np.array([False, False]))
    assert after.tolist() == [2.0, 2.5]


def test_workers_merging_at_once_without_a_lock_keep_the_statistics_right() -> None:
    """Workers merge lock-free (a lock a killed worker held would stall the run): two
    processes merging without pause lose some counts to each other, but the mean and
    variance stay those of the data."""
    context = mp.get_context("forkserver")
    stats = RunningMeanStd((2,))
    stats.share_memory()
    merging = [context.Process(target=_merge_batches, args=(stats, seed, 3000)) for seed in (1, 2)]
    for process in merging:
        process.start()
    for process in merging:
        process.join(60)
        assert process.exitcode == 0
    assert 0 < stats.count.item() <= 2 * 3000 * 80
    np.testing.assert_allclose(stats.mean.numpy(), [3.0, -1.0], atol=0.01)
    np.testing.assert_allclose(stats.var.numpy(), [4.0, 0.25], rtol=0.01)
