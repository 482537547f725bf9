"""pog's benchmark figures under the keys of torch_reference.py (the GPU machine's PyTorch
reference), so that the GPU scripts (gpu-run.sh, proof-cost-h200.sh) set the two side by side
figure by figure. Imported by their inline Python (sys.path holds this folder)."""

# pog's copy kinds and torch_reference.py's name for each.
COPY_KEYS = {
    "device_to_device": "d2d_copy_GBps_read_plus_write",
    "host_to_device_pinned": "h2d_pinned_GBps",
    "device_to_host_pinned": "d2h_pinned_GBps",
    "bidirectional_pinned": "bidir_pinned_GBps_total",
    "host_to_device_pageable": "h2d_pageable_GBps",
}


def gemm_key(precision, n):
    """torch_reference.py's key of a GEMM (TOP/s for INT8, TFLOP/s for the rest)."""
    return f"gemm_int8_{n}_tops" if precision == "int8" else f"gemm_{precision}_{n}_tflops"


def gemms(bench):
    """(precision, size, median TFLOP/s or TOP/s) of every GEMM in a `pog bench --json` report."""
    for gpu in bench["gpus"]:
        for r in gpu["gemm"]:
            yield r["precision"], r["size"], r["tflops_median"]


def copies(bench):
    """(torch_reference.py's key, median GB/s) of every copy it also measures."""
    for gpu in bench["gpus"]:
        for c in gpu["copies"]:
            if c["kind"] in COPY_KEYS:
                yield COPY_KEYS[c["kind"]], c["gbs_median"]
