"""Hand loop in a torchvision-detection style: a Dataset of images (fixed 3x32x32) with a
variable number of boxes each, a ``collate_fn`` that stacks the images and pads the targets'
boxes and labels to the most boxes in the batch, dict batches through ``MpDeviceLoader``.

``targets["boxes"]`` and ``targets["labels"]`` change dim 1 together with each batch's largest
box count: one graph per new count. ``images`` never changes shape.
"""

from typing import Any

import torch
import torch_xla.distributed.parallel_loader as pl
from torch import nn
from torch.utils.data import DataLoader, Dataset

BOX_COUNTS = [3, 1, 2, 2, 5, 1, 4, 2, 3, 1, 2, 4, 1, 1, 3, 2, 5, 3, 2, 1, 2, 4, 3, 1]


class Shapes(Dataset):
    def __len__(self) -> int:
        return len(BOX_COUNTS)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        n = BOX_COUNTS[i]
        return {"image": torch.randn(3, 32, 32, generator=g), "boxes": torch.rand(n, 4, generator=g),
                "labels": torch.randint(1, 5, (n,), generator=g)}


def collate(samples: list[dict[str, torch.Tensor]]) -> dict[str, Any]:
    most = max(len(s["labels"]) for s in samples)
    boxes = torch.zeros(len(samples), most, 4)
    labels = torch.zeros(len(samples), most, dtype=torch.long)
    for k, s in enumerate(samples):
        boxes[k, :len(s["labels"])] = s["boxes"]
        labels[k, :len(s["labels"])] = s["labels"]
    return {"images": torch.stack([s["image"] for s in samples]), "targets": {"boxes": boxes, "labels": labels}}


class Detector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.box_head = nn.Linear(8, 4)
        self.cls_head = nn.Linear(8, 5)

    def forward(self, images: torch.Tensor, queries: int) -> tuple[torch.Tensor, torch.Tensor]:
        feats = self.backbone(images).flatten(1)[:, None, :].expand(-1, queries, -1)
        return self.box_head(feats), self.cls_head(feats)


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = Detector().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = pl.MpDeviceLoader(DataLoader(Shapes(), batch_size=4, collate_fn=collate), device)
    for batch in loader:
        boxes, labels = batch["targets"]["boxes"], batch["targets"]["labels"]
        pred_boxes, logits = model(batch["images"], boxes.shape[1])
        valid = (labels > 0).float()
        box_loss = ((pred_boxes - boxes).abs().sum(-1) * valid).sum() / valid.sum().clamp(min=1)
        cls_loss = nn.functional.cross_entropy(logits.reshape(-1, 5), labels.reshape(-1))
        (box_loss + cls_loss).backward()
        opt.step()
        opt.zero_grad()
