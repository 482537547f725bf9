#!/usr/bin/env python3
"""The anchor for pog monitor's sampler cost: pynvml reading 11 fields of GPU 0 every second.

The fields are those ../shared/h200 measured at 4.4 ms of CPU per sample: temperature, power,
utilization, memory, SM and memory clocks, clock-event reasons, total energy, PCIe replays and
the two volatile ECC totals. Prints one JSON object: samples, CPU ms per sample (the reads
alone, time.process_time), and the whole process's CPU share of one core over the run.

Usage: python3 scripts/pynvml_sampler.py [SECONDS]   (needs pynvml / nvidia-ml-py)
"""
import json
import os
import sys
import time

import pynvml as nv

# Renamed in newer NVML bindings; the same call.
CLOCK_EVENT_REASONS = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
    nv, "nvmlDeviceGetCurrentClocksThrottleReasons"
)


def read(h):
    return (
        nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        nv.nvmlDeviceGetPowerUsage(h),
        nv.nvmlDeviceGetUtilizationRates(h),
        nv.nvmlDeviceGetMemoryInfo(h),
        nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
        nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
        CLOCK_EVENT_REASONS(h),
        nv.nvmlDeviceGetTotalEnergyConsumption(h),
        nv.nvmlDeviceGetPcieReplayCounter(h),
        nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC),
        nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC),
    )


def main():
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    start_wall, start_cpu = time.monotonic(), os.times()
    reads_cpu = 0.0
    for i in range(seconds):
        before = time.process_time()
        read(h)
        reads_cpu += time.process_time() - before
        time.sleep(max(0.0, start_wall + i + 1 - time.monotonic()))
    end = os.times()
    wall = time.monotonic() - start_wall
    process_cpu = (end.user - start_cpu.user) + (end.system - start_cpu.system)
    print(json.dumps({
        "tool": "pynvml",
        "fields": 11,
        "samples": seconds,
        "cpu_ms_per_sample": 1000 * reads_cpu / seconds,
        "process_cpu_s": process_cpu,
        "wall_s": wall,
        "percent_of_one_core": 100 * process_cpu / wall,
    }))
    nv.nvmlShutdown()


if __name__ == "__main__":
    main()
