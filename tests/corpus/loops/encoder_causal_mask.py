"""Hand loop: a small causal language model on ``nn.TransformerEncoder`` given a causal ``mask=``
and a ``src_key_padding_mask=`` but not ``is_causal=True``.

Without ``is_causal`` the encoder checks on the host whether the mask it was given is the causal
one (``torch.nn.modules.transformer._detect_is_causal_mask``: ``bool((mask == causal).all())``),
every forward: a host read that runs a small graph, one more execution per step. Fixed shapes;
the cost is the read, not recompiles. ``is_causal=True`` gives the same result without the read
(encoder_causal_mask_fixed).
"""

from typing import Any

import torch
import torch_xla
from torch import nn

STEPS = 8
SEQ, BATCH, VOCAB, DIM = 12, 4, 50, 32


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        layer = nn.TransformerEncoderLayer(DIM, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        h = self.encoder(self.embed(tokens), mask=causal, src_key_padding_mask=pad)
        return self.head(h)


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = TinyLM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        pad = torch.zeros(BATCH, SEQ, dtype=torch.bool)
        pad[:, -2:] = True
        tokens, pad = tokens.to(device), pad.to(device)
        logits = model(tokens[:, :-1], pad[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
