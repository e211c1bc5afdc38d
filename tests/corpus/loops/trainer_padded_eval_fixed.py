"""Fixed twin of trainer_padded_eval: its padding finding's advice applied in the collate
(`padding='max_length'`, 13: the largest length), which the evaluation shares.
tests/test_predictions.py checks the training steps' recompiles against the prediction.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch
import transformers

LENGTHS = [6, 11, 8, 13, 7, 10, 9, 12]


def _collate(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    longest = 13  # padding='max_length' (max_length=13), as the finding advised
    ids = [r["input_ids"] + [0] * (longest - len(r["input_ids"])) for r in rows]
    mask = [[1] * len(r["input_ids"]) + [0] * (longest - len(r["input_ids"])) for r in rows]
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask),
            "labels": torch.tensor([r["labels"] for r in rows])}


def train(device: Any) -> None:
    del device  # the Trainer picks the XLA device itself
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=90, hidden_size=10, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=18,
                                     max_position_embeddings=16, num_labels=2)
    model = transformers.BertForSequenceClassification(config)
    g = torch.Generator().manual_seed(1)
    data = [{"input_ids": torch.randint(1, 90, (n,), generator=g).tolist(), "labels": i % 2}
            for i, n in enumerate(LENGTHS * 6)]
    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out, max_steps=9, per_device_train_batch_size=4, logging_steps=3,
            optim="adamw_torch", report_to=[], save_strategy="no", disable_tqdm=True, use_cpu=False,
            eval_strategy="steps", eval_steps=3, per_device_eval_batch_size=4)
        transformers.Trainer(model=model, args=args, train_dataset=data, data_collator=_collate,
                             eval_dataset=data[:8]).train()
