"""An environment of your own, registered when this module is imported (docs/environments.md).

PYTHONPATH=docs/examples a3c-train --env myenvs:MyCorridor-v0 --env-kwargs length=8
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class Corridor(gym.Env):
    """Walk from cell 0 to the last cell: 1 there, -0.01 for every other step."""

    def __init__(self, length: int = 5, render_mode: str | None = None) -> None:
        self.length = length
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Discrete(length)
        self.action_space = gym.spaces.Discrete(2)  # 0: left, 1: right
        self.position = 0

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.position = 0
        return self.position, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        self.position = max(0, self.position + (1 if action == 1 else -1))
        arrived = self.position == self.length - 1
        return self.position, 1.0 if arrived else -0.01, arrived, False, {}


gym.register("MyCorridor-v0", entry_point=Corridor, max_episode_steps=100)
