"""Hugging Face Trainer on a tiny DistilBERT, every row padded to max_length 12 (fixed shapes),
``eval_strategy="steps"`` with ``eval_steps=2`` over ``max_steps=6``: three evaluation passes
(after steps 2, 4 and 6), each over 2 eval batches of 4.

Training compiles only in warm-up; each eval pass reuses the forward-only graphs that the first
one compiled.
"""

import tempfile
from typing import Any

import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification, Trainer, TrainingArguments

MAX_LEN = 12


def _rows(n: int, seed: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(n):
        used = int(torch.randint(4, MAX_LEN + 1, (1,), generator=g))
        ids = torch.zeros(MAX_LEN, dtype=torch.long)
        ids[:used] = torch.randint(5, 90, (used,), generator=g)
        rows.append({"input_ids": ids, "attention_mask": (ids > 0).long(), "labels": torch.tensor(i % 2)})
    return rows


def train(device: Any) -> None:
    del device  # the Trainer places the model itself
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=100, dim=32, hidden_dim=64, n_layers=1, n_heads=2,
                              max_position_embeddings=MAX_LEN, num_labels=2)
    model = DistilBertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=6, per_device_train_batch_size=4,
                                 per_device_eval_batch_size=4, eval_strategy="steps", eval_steps=2,
                                 logging_steps=3, save_strategy="no", report_to=[], optim="adamw_torch",
                                 dataloader_drop_last=True, disable_tqdm=True)
        Trainer(model=model, args=args, train_dataset=_rows(24, 1), eval_dataset=_rows(8, 2)).train()
