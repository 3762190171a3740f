"""This machine's matmul ceiling: the best fp32 GFLOP/s torch reaches on square matmuls.

    python benchmarks/matmul_ceiling.py                 # 2 threads, fp32 (+ bf16 for reference)
    python benchmarks/matmul_ceiling.py --threads 1 --sizes 1024 2048

MFU in benchmarks/pretrain.py is measured against the fp32 number (the precision the trainer
uses on this CPU). A matmul of (n x n) @ (n x n) is 2 n^3 FLOPs. Each size is timed for at
least `--seconds`, three times, after a warm-up; the best window of the best size is the
ceiling (on a shared machine the least disturbed window is the closest to the hardware). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time

import torch


def gflops(n: int, dtype: torch.dtype, seconds: float, repeats: int = 3) -> float:
    """Best of `repeats` timing windows: on a shared machine the best window is the least disturbed."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(dtype)
    b = torch.randn(n, n, generator=g).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    for _ in range(2):  # warm-up: thread pool, oneDNN kernel selection
        torch.mm(a, b, out=out)
    best = 0.0
    for _ in range(repeats):
        iters, t0 = 0, time.perf_counter()
        while True:
            torch.mm(a, b, out=out)
            iters += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                break
        best = max(best, 2.0 * n**3 * iters / elapsed / 1e9)
    return best


def measure(
    threads: int = 2, sizes=(512, 1024, 2048), dtype: torch.dtype = torch.float32, seconds: float = 0.5
) -> tuple[float, dict[int, float]]:
    """(best GFLOP/s, {size: GFLOP/s}) with `threads` torch threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        per_size = {n: gflops(n, dtype, seconds) for n in sizes}
    finally:
        torch.set_num_threads(before)
    return max(per_size.values()), per_size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    p.add_argument("--seconds", type=float, default=1.0, help="length of each of the 3 timing windows per size")
    p.add_argument("--no-bf16", action="store_true", help="skip the bf16 rows")
    args = p.parse_args()
    dtypes = [("fp32", torch.float32)] + ([] if args.no_bf16 else [("bf16", torch.bfloat16)])
    print(f"torch {torch.__version__}, {args.threads} threads, CPU capability {torch.backends.cpu.get_cpu_capability()}\n")
    print("| dtype | " + " | ".join(f"n={n}" for n in args.sizes) + " | ceiling |")
    print("|---|" + "---:|" * (len(args.sizes) + 1))
    for name, dtype in dtypes:
        best, per = measure(args.threads, args.sizes, dtype, args.seconds)
        print(f"| {name} | " + " | ".join(f"{per[n]:.1f}" for n in args.sizes) + f" | **{best:.1f}** |")
    print("\nGFLOP/s of torch.mm on n x n matrices (2 n^3 FLOPs each).")


if __name__ == "__main__":
    main()
