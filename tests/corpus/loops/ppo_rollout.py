"""Hand loop in CleanRL's PPO shape: a rollout of environment steps (a numpy environment on the
host) that samples actions from a ``Categorical`` and reads ``action.item()`` and
``value.item()`` every env step, then an update (forward, backward, ``optimizer.step()``) and a
barrier per update.

The rollout's forward passes run no backward: they are not micro-batches. Each ``.item()`` runs
the pending graph; what torch_xla traces between barriers (the policy's forwards and the RNG
state that each ``sample()`` advances) grows with the env-step index, so each read's graph is
new until the barrier: one compile per env step of the first rollouts.
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
    actor = nn.Sequential(nn.Linear(OBS, 32), nn.Tanh(), nn.Linear(32, ACTIONS)).to(device)
    critic = nn.Sequential(nn.Linear(OBS, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
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
                observations.append(o)
                actions.append(action)
                returns.append(reward + 0.0 * value.item())
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
