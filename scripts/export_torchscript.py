#!/usr/bin/python3
"""Exports torchvision's own Python ops as TorchScript files for `detfuzz --bind FAMILY=script:FILE.pt`.

Run with the python whose torch detfuzz is built against (the CTest does): Debian's
python3-torch / python3-torchvision 0.14.1, or DETFUZZ_TORCH_PYTHON's (torchvision 0.26.0):
    /usr/bin/python3 scripts/export_torchscript.py OUT_DIR
It writes, into OUT_DIR, one file per op, each a scripted function saved with its `forward`:
    box_iou.pt                  torchvision.ops.box_iou                  --bind box_iou=script:...
    box_area.pt                 torchvision.ops.box_area                 --bind box_area=script:...
    generalized_box_iou.pt      torchvision.ops.generalized_box_iou      --bind generalized_box_iou=script:...
    generalized_box_iou_loss.pt torchvision.ops.generalized_box_iou_loss --bind giou_loss=script:...
    batched_nms.pt              torchvision.ops.batched_nms              --bind batched_nms=script:...
    box_coder.pt                models.detection._utils.BoxCoder         --bind box_coder=script:...
The scripted graphs call torchvision::nms; detfuzz loads torchvision's op library before the files.
Each function has the argument list of detfuzz's contract for its family (`detfuzz list`);
box_coder wraps BoxCoder in the contract box_coder(mode, boxes, other, weights, clip).
"""
import os
import sys
from typing import List

import torch
import torchvision
from torchvision.models.detection._utils import BoxCoder
from torchvision.ops import (batched_nms, box_area, box_iou, generalized_box_iou,
                             generalized_box_iou_loss)


def box_coder(mode: str, boxes: torch.Tensor, other: torch.Tensor, weights: List[float],
              clip: float) -> torch.Tensor:
    # encode: boxes are the proposals, other the matched reference boxes;
    # decode: boxes are the anchors, other the codes (dx, dy, dw, dh) per box.
    coder = BoxCoder((weights[0], weights[1], weights[2], weights[3]), clip)
    if mode == "encode":
        return coder.encode_single(other, boxes)
    return coder.decode_single(other, boxes)


# torchvision 0.2x's box_iou and box_area take a trailing `fmt: str = "xyxy"`, whose default a
# scripted function saved to a file loses: these call them with the contract's arguments
# only, i.e. with the default format, as a user's `box_iou(a, b)` does.
def box_iou_as_called(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    return box_iou(boxes1, boxes2)


def box_area_as_called(boxes: torch.Tensor) -> torch.Tensor:
    return box_area(boxes)


EXPORTS = {
    "box_iou": box_iou_as_called,
    "box_area": box_area_as_called,
    "generalized_box_iou": generalized_box_iou,
    "generalized_box_iou_loss": generalized_box_iou_loss,
    "batched_nms": batched_nms,
    "box_coder": box_coder,
}


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} OUT_DIR", file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name, function in EXPORTS.items():
        scripted = torch.jit.script(function)
        path = os.path.join(out_dir, name + ".pt")
        scripted.save(path)
        print(f"{path}: {scripted.schema}")
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
