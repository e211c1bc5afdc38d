"""Hugging Face Trainer (optim="adamw_torch") on a tiny BERT, rows padded to max_length 16.

Every batch has the same shapes, so training compiles only during warm-up; the eval pass
every 3 steps (eval batch 8, train batch 4) compiles its own graphs once and reuses them.
"""

import tempfile
from typing import Any

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

MAX_LEN = 16


def _rows(n: int, seed: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        length = int(torch.randint(4, MAX_LEN + 1, (1,), generator=g))
        ids = torch.zeros(MAX_LEN, dtype=torch.long)
        ids[:length] = torch.randint(1, 50, (length,), generator=g)
        mask = (torch.arange(MAX_LEN) < length).long()
        rows.append({"input_ids": ids, "attention_mask": mask, "labels": ids[1] % 2})
    return rows


def train(device: Any) -> None:
    # The Trainer finds the XLA device by itself (through accelerate); `device` is unused.
    del device
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=MAX_LEN, num_labels=2)
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, max_steps=6, per_device_train_batch_size=4,
            per_device_eval_batch_size=8, eval_strategy="steps", eval_steps=3,
            optim="adamw_torch", learning_rate=1e-3, save_strategy="no",
            report_to="none", disable_tqdm=True, logging_steps=100, seed=0,
            dataloader_drop_last=True, dataloader_pin_memory=False,
        )
        trainer = Trainer(model=model, args=args, train_dataset=_rows(32, 1),
                          eval_dataset=_rows(8, 2))
        trainer.train()
