"""The fixed twin of ``reinforce_multinomial``: the same REINFORCE-shaped loop with
``torch_xla.sync()`` right after ``int(action)``, as xprof's advice for the rollout's reads says.

The advice predicts that each read then runs the same small graph, cached after the first: no
compile after warm-up (against one per env step of the first episodes without it).
"""

from typing import Any

import numpy as np
import torch
import torch_xla
from torch import nn

EPISODES, LENGTH, OBS, ACTIONS = 3, 10, 3, 3


def train(device: Any) -> None:
    torch.manual_seed(1)
    policy = nn.Sequential(nn.Linear(OBS, 23), nn.ReLU(), nn.Linear(23, ACTIONS)).to(device)
    opt = torch.optim.SGD(policy.parameters(), lr=1e-2)
    rng = np.random.default_rng(1)
    for _ in range(EPISODES):
        state = rng.normal(size=OBS).astype(np.float32)
        log_probs, rewards = [], []
        for _ in range(LENGTH):
            probs = torch.softmax(policy(torch.from_numpy(state).to(device)), dim=-1)
            action = torch.multinomial(probs, 1)
            a = int(action)
            torch_xla.sync()  # the fix: each read above runs the same small graph
            log_probs.append(torch.log(probs.gather(0, action)))
            state = (0.8 * state + rng.normal(size=OBS) + a).astype(np.float32)
            rewards.append(float(-abs(state).sum()))
        returns = torch.tensor(np.cumsum(rewards[::-1])[::-1].copy(), dtype=torch.float32).to(device)
        loss = -(torch.cat(log_probs) * returns).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch_xla.sync()
