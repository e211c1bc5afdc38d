"""transformers.Trainer on a tiny BERT (its own sizes: no graph shared with the other Trainer
runs of the corpus), batches padded to the longest example by the collate, and an evaluation
of 2 batches every 3 steps (`eval_strategy="steps"`).

Training recompiles per new padded length; the evaluation compiles its own forward graphs.
A training graph of a new length is padding's wherever its barrier was asked for.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch
import transformers

LENGTHS = [6, 11, 8, 13, 7, 10, 9, 12]


def _collate(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    longest = max(len(r["input_ids"]) for r in rows)
    ids = [r["input_ids"] + [0] * (longest - len(r["input_ids"])) for r in rows]
    mask = [[1] * len(r["input_ids"]) + [0] * (longest - len(r["input_ids"])) for r in rows]
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask),
            "labels": torch.tensor([r["labels"] for r in rows])}


def train(device: Any) -> None:
    del device  # the Trainer picks the XLA device itself
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=90, hidden_size=12, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=20,
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
