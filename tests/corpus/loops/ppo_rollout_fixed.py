"""The fixed twin of ``ppo_rollout``: the same PPO-shaped loop with ``torch_xla.sync()`` right
after the env step's reads, as xprof's advice for the rollout's reads says.

The advice predicts that each read then runs the same small graph, cached after the first: no
compile after warm-up (against one per env step of the first rollouts without it).
"""

from typing import Any

import numpy as np
import torch
import torch_xla
from torch import nn
from torch.distributions import Categorical

UPDATES, ROLLOUT, OBS, ACTIONS = 3, 6, 4, 2


class Env:
    """A toy environment: the observation drifts with the action taken."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.state = self.rng.normal(size=OBS).astype(np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float]:
        self.state = (0.9 * self.state + (action - 0.5) + 0.1 * self.rng.normal(size=OBS)).astype(np.float32)
        return self.state, float(-abs(self.state).sum())


def train(device: Any) -> None:
    torch.manual_seed(0)
    actor = nn.Sequential(nn.Linear(OBS, 31), nn.Tanh(), nn.Linear(31, ACTIONS)).to(device)
    critic = nn.Sequential(nn.Linear(OBS, 31), nn.Tanh(), nn.Linear(31, 1)).to(device)
    opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=3e-4)
    env = Env(0)
    obs = env.state
    for _ in range(UPDATES):
        observations, actions, returns = [], [], []
        with torch.no_grad():
            for _ in range(ROLLOUT):
                o = torch.from_numpy(obs).to(device)
                dist = Categorical(logits=actor(o))
                action = dist.sample()
                value = critic(o)
                obs, reward = env.step(action.item())
                returns.append(reward + 0.0 * value.item())
                torch_xla.sync()  # the fix: each read above runs the same small graph
                observations.append(o)
                actions.append(action)
        b_obs = torch.stack(observations)
        b_act = torch.stack(actions)
        b_ret = torch.tensor(returns, dtype=torch.float32).to(device)
        logp = Categorical(logits=actor(b_obs)).log_prob(b_act)
        adv = b_ret - critic(b_obs).squeeze(-1)
        loss = -(logp * adv.detach()).mean() + adv.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch_xla.sync()
