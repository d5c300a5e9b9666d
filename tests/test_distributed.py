"""Several nodes: local torchrun agents on 127.0.0.1 stand for machines, one worker each."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import BIN, Cli

from a3c.checkpoint import load_checkpoint
from a3c.distributed import Moments, Node, NodeGroup
from a3c.normalize import RunningMeanStd
from a3c.plot import read_csv
from a3c.sharing import SharedObjects


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_nodes(
    cli: Cli,
    run_dir: Path,
    *flags: str,
    node_flags: list[list[str]],
    own_groups: bool = False,
    torchrun_flags: tuple[str, ...] = (),
) -> list[subprocess.Popen[str]]:
    """One torchrun agent per node, as each machine would start its own; node n gets
    `flags` and then `node_flags[n]`. With `own_groups`, each agent leads a process group,
    as it would in its own terminal."""
    endpoint = f"127.0.0.1:{free_port()}"
    launch = ["--nnodes", str(len(node_flags)), "--nproc-per-node", "1", *torchrun_flags,
              "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", cli.marker[:8],
              str(BIN / "a3c-train"), "--run-dir", str(run_dir), "--workers", "1",
              *flags]  # fmt: skip
    agents = []
    for extra in node_flags:
        agents.append(cli.start("torchrun", *launch, *extra, own_group=own_groups))
        if len(agents) == 1:
            # The first agent then hosts the rendezvous store at the endpoint, as the
            # machine named in --rdzv-endpoint would: it must outlive the others.
            time.sleep(2)
    return agents


def finish(agents: list[subprocess.Popen[str]], timeout: float = 240) -> list[int]:
    codes = []
    for agent in agents:
        _, stderr = agent.communicate(timeout=timeout)
        codes.append(agent.returncode)
        assert agent.returncode == 0, stderr[-3000:]
    return codes


def run_folders(run_dir: Path) -> tuple[Path, list[Path]]:
    """Node 0's run folder, and the other nodes' folders beside it."""
    folders = sorted(run_dir.iterdir())
    leader = [f for f in folders if "-node" not in f.name]
    assert len(leader) == 1, folders
    return leader[0], [f for f in folders if f.name.startswith(leader[0].name + "-node")]


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [2, 3])
def test_nodes_meet_on_identical_weights_and_count_every_step(
    cli: Cli, tmp_path: Path, nodes: int
) -> None:
    total = 12_000
    flags = ["--env", "CartPole-v1", "--total-steps", str(total), "--quiet",
             "--sync-interval", "1", "--eval-interval", "5000", "--eval-episodes", "3"]  # fmt: skip
    agents = start_nodes(cli, tmp_path, *flags, node_flags=[[]] * nodes)
    finish(agents)
    assert cli.wait_for_no_leftovers() == []
    leader, others = run_folders(tmp_path)
    assert len(others) == nodes - 1
    logs = [read_csv(folder / "meetings.csv") for folder in (leader, *others)]
    assert len(logs[0]) >= 3
    for log in logs[1:]:
        # Meeting by meeting, every node continued from the same weights and count.
        assert [(r["weights_hash"], r["step"]) for r in log] == [
            (r["weights_hash"], r["step"]) for r in logs[0]
        ]
    assert all(row["nodes_agree"] == "True" for log in logs for row in log)
    # The global counter is the sum of what every node counted, and it passed the budget.
    counted = sum(int(row["local_steps"]) for log in logs for row in log)
    final = int(logs[0][-1]["step"])
    assert counted == final >= total
    # Each node's share is real: its own episodes cover its steps.
    for log, folder in zip(logs, (leader, *others), strict=True):
        episodes = read_csv(folder / "episodes.csv")
        assert (
            0 < sum(int(e["length"]) for e in episodes) <= sum(int(r["local_steps"]) for r in log)
        )
    # Every node's last checkpoint holds the same weights: the last meeting's.
    saved = [load_checkpoint(folder / "checkpoints" / "latest.pt") for folder in (leader, *others)]
    for checkpoint in saved[1:]:
        assert checkpoint["step"] == saved[0]["step"] == final
        for name, tensor in saved[0]["model"].items():
            assert torch.equal(checkpoint["model"][name], tensor), name
    # Node 0 alone evaluates; its last evaluation is of the final weights.
    evals = read_csv(leader / "eval.csv")
    assert int(evals[-1]["step"]) == final
    assert all(not (folder / "eval.csv").exists() or not read_csv(folder / "eval.csv")
               for folder in others)  # fmt: skip


@pytest.mark.slow
def test_nodes_given_different_settings_are_refused(cli: Cli, tmp_path: Path) -> None:
    agents = start_nodes(
        cli, tmp_path, "--env", "CartPole-v1", node_flags=[["--lr", "1e-3"], ["--lr", "2e-3"]]
    )
    for agent in agents:
        _, stderr = agent.communicate(timeout=120)
        assert agent.returncode != 0
        assert "other settings than node 0" in stderr
    assert cli.wait_for_no_leftovers() == []


def test_statistics_merged_at_a_meeting_equal_statistics_of_all_the_data() -> None:
    rng = np.random.default_rng(0)
    anchor = RunningMeanStd((3,))
    anchor.update(rng.normal(2.0, 3.0, (50, 3)))
    batches = [rng.normal(-1.0, 0.5, (70, 3)), rng.normal(4.0, 2.0, (30, 3))]
    nodes = []
    for batch in batches:
        node = RunningMeanStd((3,))
        node.load_state_dict(anchor.state_dict())
        node.update(batch)
        nodes.append(node)
    base = Moments(anchor).read()
    merged = RunningMeanStd((3,))
    Moments(merged).write(base + sum(Moments(node).read() - base for node in nodes))
    everything = RunningMeanStd((3,))
    everything.load_state_dict(anchor.state_dict())
    for batch in batches:
        everything.update(batch)
    for name in ("count", "mean", "var"):
        torch.testing.assert_close(getattr(merged, name), getattr(everything, name))


def move_and_meet(rank: int, port: int, outer_lr: float, results: Any) -> None:
    """Node `rank` of 2 in a real gloo group: from the agreed weights (node 0's, all 1.0),
    move every weight by rank + 1, meet once, and report the weights agreed."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.manual_seed(rank)  # the nodes' weights differ before they start
    model = torch.nn.Linear(3, 2)
    if rank == 0:
        torch.nn.init.ones_(model.weight)
        torch.nn.init.ones_(model.bias)
    shared = SharedObjects.create(model, None, None, None, workers=0, context=mp)  # type: ignore[arg-type]
    group = NodeGroup(Node(rank=rank, world_size=2, run_id="test", restarts=0), 30, outer_lr)
    try:
        group.start(model, 0)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(rank + 1.0)
        group.meet(shared, stop=False)
        results.put((rank, [parameter.detach().clone() for parameter in model.parameters()]))
    finally:
        group.close()


@pytest.mark.parametrize(("outer_lr", "agreed"), [(1.0, 2.5), (2.0, 4.0)])
def test_a_meeting_steps_outer_lr_times_the_mean_change(outer_lr: float, agreed: float) -> None:
    # Changes of 1 and 2 from weights of 1: the mean moves them to 2.5, the sum to 4.
    context = mp.get_context("spawn")
    results = context.Queue()
    port = free_port()
    nodes = [
        context.Process(target=move_and_meet, args=(rank, port, outer_lr, results))
        for rank in range(2)
    ]
    for node in nodes:
        node.start()
    reported = dict(results.get(timeout=120) for _ in nodes)
    for node in nodes:
        node.join(timeout=60)
        assert node.exitcode == 0
    for rank in range(2):
        for parameter in reported[rank]:
            assert torch.equal(parameter, torch.full_like(parameter, agreed)), (rank, parameter)


def node_main_process(cli: Cli, rank: int) -> int | None:
    """PID of node `rank`'s a3c-train process (not its torchrun agent, not its children)."""
    for pid in cli.leftovers():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ and command[1:2] == [b"-u"]:
            return pid
    return None


def start_a_long_run(cli: Cli, run_dir: Path, own_groups: bool) -> list[subprocess.Popen[str]]:
    """Two nodes on an endless budget, returned once they have met three times."""
    flags = ["--env", "CartPole-v1", "--total-steps", "10000000", "--sync-interval", "1",
             "--node-timeout", "30", "--eval-interval", "5000", "--eval-episodes", "3"]  # fmt: skip
    agents = start_nodes(cli, run_dir, *flags, node_flags=[[], []], own_groups=own_groups)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        meetings = list(run_dir.glob("*-node1/meetings.csv"))
        if meetings and len(read_csv(meetings[0])) >= 3:
            break
        time.sleep(0.5)
    return agents


@pytest.mark.slow
def test_a_killed_node_makes_the_others_save_and_exit(cli: Cli, tmp_path: Path) -> None:
    agents = start_a_long_run(cli, tmp_path, own_groups=False)
    victim = node_main_process(cli, 1)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    stderr = "".join(agent.communicate(timeout=60)[1] for agent in agents)
    # Node 0 noticed at its next meeting, well inside --node-timeout, and said so.
    assert time.monotonic() - killed < 30
    assert "training failed: node 0 lost the other nodes" in stderr
    assert all(agent.returncode != 0 for agent in agents)
    assert cli.wait_for_no_leftovers() == []
    leader, _ = run_folders(tmp_path)
    assert load_checkpoint(leader / "checkpoints" / "latest.pt")["step"] > 0
    played = cli.run("a3c-eval", str(leader / "checkpoints" / "latest.pt"), "--json")
    assert played.returncode == 0, played.stderr


@pytest.mark.slow
@pytest.mark.parametrize("killed", [0, 1])
def test_a_group_that_torchrun_restarts_resumes_and_finishes_its_budget(
    cli: Cli, tmp_path: Path, killed: int
) -> None:
    total = 40_000
    flags = ["--env", "CartPole-v1", "--total-steps", str(total), "--sync-interval", "1",
             "--checkpoint-interval", "2000", "--eval-interval", "10000",
             "--eval-episodes", "3"]  # fmt: skip
    agents = start_nodes(
        cli, tmp_path, *flags, node_flags=[[], []], torchrun_flags=("--max-restarts", "1")
    )
    deadline = time.monotonic() + 120
    saved = tmp_path / "missing"
    while time.monotonic() < deadline and not saved.is_file():
        for checkpoint in tmp_path.glob("*/checkpoints/latest.pt"):
            if ("-node" in checkpoint.parent.parent.name) == bool(killed):
                saved = checkpoint  # the victim's
        time.sleep(0.2)
    # Meetings after that checkpoint (a fixed second was not always one on a busy machine:
    # a CI run found no meeting of the victim's before the restart).
    victim_meetings = saved.parent.parent / "meetings.csv"
    while time.monotonic() < deadline and (
        not victim_meetings.is_file() or len(read_csv(victim_meetings)) < 2
    ):
        time.sleep(0.2)
    victim = node_main_process(cli, killed)
    assert victim is not None and saved.is_file()
    saved_step = load_checkpoint(saved)["step"]
    os.kill(victim, signal.SIGKILL)
    finish(agents, timeout=300)
    assert cli.wait_for_no_leftovers() == []
    # One run folder per node: the restarted group went on in the folders of its start.
    leader, (other,) = run_folders(tmp_path)
    logs = [read_csv(folder / "meetings.csv") for folder in (leader, other)]
    after_restart = []
    for log in logs:
        numbers = [int(row["number"]) for row in log]
        assert numbers.count(1) == 2, numbers  # meetings count from 1 again after the restart
        restart = numbers.index(1, 1)
        # It went on from the checkpoints written before the kill, not from step 0.
        assert int(log[restart]["step"]) > saved_step > 0
        after_restart.append([(row["weights_hash"], row["step"]) for row in log[restart:]])
    assert after_restart[0] == after_restart[1]
    final = int(logs[0][-1]["step"])
    assert final >= total and int(logs[1][-1]["step"]) == final
    checkpoints = [load_checkpoint(f / "checkpoints" / "latest.pt") for f in (leader, other)]
    assert checkpoints[0]["step"] == checkpoints[1]["step"] == final
    for name, tensor in checkpoints[0]["model"].items():
        assert torch.equal(checkpoints[1]["model"][name], tensor), name
    assert int(read_csv(leader / "eval.csv")[-1]["step"]) == final


@pytest.mark.slow
def test_ctrl_c_on_one_node_stops_the_group_on_the_same_weights(cli: Cli, tmp_path: Path) -> None:
    agents = start_a_long_run(cli, tmp_path, own_groups=True)
    # What Ctrl-C sends, in the terminal of a machine that does not host the rendezvous.
    os.killpg(agents[1].pid, signal.SIGINT)
    deadline = time.monotonic() + 60
    while any(node_main_process(cli, rank) for rank in (0, 1)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(node_main_process(cli, rank) for rank in (0, 1))
    _, interrupted = agents[1].communicate(timeout=60)
    assert "interrupted" in interrupted
    # torchrun's own agent on the other machine waits at its exit barrier (300 s, deaf to
    # SIGTERM meanwhile) for the interrupted agent, which never comes; a3c is done by then.
    agents[0].kill()
    finished, errors = agents[0].communicate(timeout=60)
    assert "done:" in finished, errors[-2000:]
    assert cli.wait_for_no_leftovers() == []
    leader, (other,) = run_folders(tmp_path)
    logs = [read_csv(folder / "meetings.csv") for folder in (leader, other)]
    assert logs[0][-1]["weights_hash"] == logs[1][-1]["weights_hash"]
    assert logs[0][-1]["stop"] == "True"
    saved = [load_checkpoint(f / "checkpoints" / "latest.pt") for f in (leader, other)]
    assert saved[0]["step"] == saved[1]["step"] == int(logs[0][-1]["step"])


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [2, 3])
def test_cartpole_learns_on_nodes_of_one_worker(cli: Cli, tmp_path: Path, nodes: int) -> None:
    flags = ["--env", "CartPole-v1", "--total-steps", "200000", "--sync-interval", "2",
             "--target-score", "475", "--quiet"]  # fmt: skip
    finish(start_nodes(cli, tmp_path, *flags, node_flags=[[]] * nodes))
    leader, others = run_folders(tmp_path)
    evals = read_csv(leader / "eval.csv")
    assert max(float(row["mean"]) for row in evals) >= 475
    # No child crashed or was restarted on either node: errors.log records both.
    assert [f for f in (leader, *others) if (f / "errors.log").exists()] == []
