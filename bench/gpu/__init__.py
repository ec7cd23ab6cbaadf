"""GPU validation of KernelBand on a real accelerator (`make gpu-validate`, bench/gpu/RESULTS.md)."""
