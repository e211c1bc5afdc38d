"""Hand loop in REINFORCE's shape (a second style of rollout): an episode of environment steps
on the host, each sampling an action with ``torch.multinomial`` from the policy's softmax and
reading it with ``int(action)``; the log-probabilities are kept, with grad, for one update per
episode (``-(log_probs * returns).sum()``, backward, ``optimizer.step()``), then a barrier.

Nothing here is gradient accumulation: the episode's forwards run before the one backward.
Each ``int(action)`` runs everything pending since the barrier (every earlier env step's
forward and sample, the random-number state each sample advances), so each read's graph is
longer than the one before and compiles, one per env step of the first episodes.
"""

from typing import Any

import numpy as np
import torch
import torch_xla
from torch import nn

EPISODES, LENGTH, OBS, ACTIONS = 3, 10, 3, 3


def train(device: Any) -> None:
    torch.manual_seed(1)
    policy = nn.Sequential(nn.Linear(OBS, 24), nn.ReLU(), nn.Linear(24, ACTIONS)).to(device)
    opt = torch.optim.SGD(policy.parameters(), lr=1e-2)
    rng = np.random.default_rng(1)
    for _ in range(EPISODES):
        state = rng.normal(size=OBS).astype(np.float32)
        log_probs, rewards = [], []
        for _ in range(LENGTH):
            probs = torch.softmax(policy(torch.from_numpy(state).to(device)), dim=-1)
            action = torch.multinomial(probs, 1)
            a = int(action)
            log_probs.append(torch.log(probs.gather(0, action)))
            state = (0.8 * state + rng.normal(size=OBS) + a).astype(np.float32)
            rewards.append(float(-abs(state).sum()))
        returns = torch.tensor(np.cumsum(rewards[::-1])[::-1].copy(), dtype=torch.float32).to(device)
        loss = -(torch.cat(log_probs) * returns).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch_xla.sync()
