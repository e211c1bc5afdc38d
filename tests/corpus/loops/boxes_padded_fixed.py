"""Fixed twin of boxes_padded: its shape finding's advice applied (pad gt_boxes and gt_labels
alike to the largest size, 4). tests/test_predictions.py checks that its recompiles are what
boxes_padded's finding predicted.
"""

from typing import Any

import torch
import torch_xla
from torch import nn

MAX_QUERIES = 6
BOXES_PER_IMAGE = [[2, 1, 3, 2], [1, 1, 2, 0], [4, 2, 3, 1], [2, 3, 1, 2], [3, 3, 2, 4],
                   [1, 2, 2, 1], [2, 2, 3, 0], [4, 1, 2, 3]]


def _batch(g: torch.Generator, counts: list[int]) -> tuple[torch.Tensor, ...]:
    width = 4  # padded to the largest size, as the finding advised
    images = torch.randn(len(counts), 18, generator=g)
    boxes = torch.zeros(len(counts), width, 4)
    labels = torch.full((len(counts), width), -1, dtype=torch.long)
    for i, n in enumerate(counts):
        boxes[i, :n] = torch.rand(n, 4, generator=g)
        labels[i, :n] = torch.randint(0, 5, (n,), generator=g)
    return images, boxes, labels


class TinyDetector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(18, 33), nn.ReLU())
        self.box_head = nn.Linear(33, MAX_QUERIES * 4)
        self.cls_head = nn.Linear(33, MAX_QUERIES * 5)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.backbone(images)
        n = images.shape[0]
        return self.box_head(h).view(n, MAX_QUERIES, 4), self.cls_head(h).view(n, MAX_QUERIES, 5)


def train(device: Any) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(7)
    data = [_batch(g, counts) for counts in BOXES_PER_IMAGE]
    model = TinyDetector().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for images, gt_boxes, gt_labels in data:
        images, gt_boxes, gt_labels = images.to(device), gt_boxes.to(device), gt_labels.to(device)
        pred_boxes, logits = model(images)
        width = gt_boxes.shape[1]
        pred_boxes, logits = pred_boxes[:, :width], logits[:, :width]
        valid = gt_labels >= 0
        weight = valid.unsqueeze(-1).float()
        box_loss = ((pred_boxes - gt_boxes).abs() * weight).sum() / weight.sum().clamp(min=1)
        cls_loss = nn.functional.cross_entropy(logits.reshape(-1, 5), gt_labels.reshape(-1),
                                               ignore_index=-1)
        loss = box_loss + cls_loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
