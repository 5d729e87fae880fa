"""Device choice: CUDA when present, unless ATTN_COURSE_DEVICE says otherwise."""
import os

import torch

ENV_VAR = "ATTN_COURSE_DEVICE"


def get_device() -> torch.device:
    """`torch.device('cuda')` when a GPU exists, else CPU; `ATTN_COURSE_DEVICE=cpu` forces the CPU."""
    wanted = os.environ.get(ENV_VAR, "").strip().lower()
    if wanted and wanted != "auto":
        return torch.device(wanted)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
