"""Shared by the session diag scripts in this folder: kernel_us(fn) is the summed device time of
every CUDA kernel (and memset/memcpy) that one call of `fn` launches, averaged over `reps` calls
under the torch profiler, after one warm-up call."""
import torch
from torch.profiler import profile, ProfilerActivity


def kernel_us(fn, reps=10):
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return sum(e.device_time_total for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA) / reps
