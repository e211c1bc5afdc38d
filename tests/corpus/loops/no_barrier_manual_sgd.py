"""Hand loop in the shape of pytorch/examples' word_language_model as a user ports it: only the
device switched to torch_xla's. A small LSTM language model trained with manual SGD through
``p.data.add_`` (no optimizer) and ``loss.item()`` read every batch, and no barrier anywhere.

Without a barrier nothing cuts the graph but the read: each ``.item()`` compiles and runs
everything traced since the start (every batch so far, and the weights' whole update history),
a larger graph every batch. The fix is one line: ``torch_xla.sync()`` at the end of each batch.
"""

from typing import Any

import torch
from torch import nn

BATCHES, SEQ, BATCH, VOCAB, DIM = 4, 8, 4, 40, 16


class RNNModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.LSTM(DIM, DIM)
        self.decoder = nn.Linear(DIM, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.encoder(x))
        return self.decoder(out)


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = RNNModel().to(device)
    criterion = nn.NLLLoss()
    lr = 0.5
    data = torch.randint(0, VOCAB, (BATCHES * SEQ + 1, BATCH)).to(device)
    total_loss = 0.0
    for i in range(0, BATCHES * SEQ, SEQ):
        source, targets = data[i:i + SEQ], data[i + 1:i + 1 + SEQ].reshape(-1)
        model.zero_grad()
        output = torch.log_softmax(model(source), dim=-1)
        loss = criterion(output.view(-1, VOCAB), targets)
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
