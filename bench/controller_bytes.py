"""How fast one controller process moves a padded RL batch to its workers and back: the
source of ``efficiency.controller_gb_s``.

Run: ``RAY_AUTH_MODE=disabled .venv/bin/python bench/controller_bytes.py [--json]``.

verl, NeMo RL, OpenRLHF and ROLL run every GPU pass (old and reference log-probs, values,
the actor and critic updates) from one Python process: it splits the step's batch, padded to
a common length, into one share per worker, serializes each share into Ray's object store,
and gathers and concatenates what the workers return. That process is alone for the whole
cluster, so its seconds stay the same however many GPUs the pass runs on. This script times
the controller's side of that round trip on this machine with real Ray actors:

- ``torch.save``: each share copied out of the batch and written with ``torch.save`` into a
  bytes buffer, which Ray stores (how verl's ``DataProto`` pickles itself);
- ``pickle``: each share's rows gathered into new tensors and the dict handed to Ray by
  value (Ray's pickling of torch tensors; how NeMo RL shards a ``BatchedDataDict`` and passes
  each shard).

The batch has verl's layout for a log-prob pass (int64 prompts, responses, response mask,
input ids, attention mask and positions; fp32 scores), the result fp32 log-probs and
entropies. Workers do nothing else; the controller's seconds are the ``submit`` (serialize
and store every share) and ``gather`` (fetch, deserialize, concatenate) it spends, and the
figure is the bytes both ways over those seconds, the median of the repetitions after the
first (which pays the object store's first-touch page faults). Two cores here: the two
workers' deserialization competes with the controller, as it would not on a server.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from typing import Any


def _batch(torch: Any, sequences: int, prompt: int, response: int) -> dict[str, Any]:
    ids = torch.randint(0, 150_000, (sequences, prompt + response))
    return {
        "prompts": ids[:, :prompt].clone(),
        "responses": ids[:, prompt:].clone(),
        "response_mask": torch.ones(sequences, response, dtype=torch.long),
        "input_ids": ids,
        "attention_mask": torch.ones(sequences, prompt + response, dtype=torch.long),
        "position_ids": torch.arange(prompt + response).repeat(sequences, 1),
        "rm_scores": torch.zeros(sequences, response),
    }


def measure(
    sequences: int, prompt: int, response: int, workers: int, reps: int, start_ray: bool = True
) -> list[dict]:
    """One row per path: the bytes both ways and the controller's median seconds.

    ``start_ray``: start (and stop) a local Ray with ``workers`` CPUs; ``False`` uses the Ray
    already started (the test suite's).
    """
    import ray
    import torch

    class Saved:
        """A share that pickles itself as ``torch.save`` bytes of its own copy."""

        def __init__(self, tensors: dict[str, Any]) -> None:
            self.tensors = tensors

        def __reduce__(self) -> tuple[Any, tuple[bytes]]:
            buf = io.BytesIO()
            torch.save({k: v.clone() for k, v in self.tensors.items()}, buf)
            return (Saved.load, (buf.getvalue(),))

        @staticmethod
        def load(data: bytes) -> Saved:
            return Saved(torch.load(io.BytesIO(data)))

    @ray.remote(num_cpus=0)
    class Worker:
        def log_probs(self, share: Any) -> Any:
            tensors = share.tensors if isinstance(share, Saved) else share
            shape = tensors["responses"].shape
            out = {"old_log_probs": torch.zeros(shape), "entropys": torch.zeros(shape)}
            return Saved(out) if isinstance(share, Saved) else out

    if start_ray:
        ray.init(
            address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
            object_store_memory=6 * 2**30,
        )  # fmt: skip
    try:
        pool = [Worker.remote() for _ in range(workers)]
        batch = _batch(torch, sequences, prompt, response)
        out_bytes = sum(t.numel() * t.element_size() for t in batch.values())
        back_bytes = sequences * response * 8
        rows = []
        for path in ("torch.save", "pickle"):
            submits, gathers = [], []
            for _ in range(reps):
                shares = [
                    {k: v[i * sequences // workers : (i + 1) * sequences // workers]
                     for k, v in batch.items()}
                    for i in range(workers)
                ]  # fmt: skip
                t0 = time.perf_counter()
                if path == "pickle":
                    # NeMo RL's shard_by_batch_size gathers each shard's rows into new tensors
                    # before Ray pickles them (verl's share copies itself in __reduce__).
                    shares = [{k: v.clone() for k, v in s.items()} for s in shares]
                refs = [
                    w.log_probs.remote(Saved(s) if path == "torch.save" else s)
                    for w, s in zip(pool, shares, strict=True)
                ]
                t1 = time.perf_counter()
                ray.wait(refs, num_returns=len(refs))
                t2 = time.perf_counter()
                results = ray.get(refs)
                tensors = [r.tensors if isinstance(r, Saved) else r for r in results]
                torch.cat([t["old_log_probs"] for t in tensors])
                torch.cat([t["entropys"] for t in tensors])
                t3 = time.perf_counter()
                submits.append(t1 - t0)
                gathers.append(t3 - t2)
            submit = statistics.median(submits[1:])
            gather = statistics.median(gathers[1:])
            rows.append({
                "path": path, "sequences": sequences, "prompt": prompt, "response": response,
                "out_gb": out_bytes / 1e9, "back_gb": back_bytes / 1e9,
                "submit_s": submit, "gather_s": gather,
                "gb_per_s": (out_bytes + back_bytes) / (submit + gather) / 1e9,
                "first_gb_per_s": (out_bytes + back_bytes) / (submits[0] + gathers[0]) / 1e9,
            })  # fmt: skip
        return rows
    finally:
        if start_ray:
            ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=1024)
    parser.add_argument("--prompt", type=int, default=2048)
    parser.add_argument("--response", type=int, default=16384)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure(args.sequences, args.prompt, args.response, args.workers, args.reps)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(
        f"controller round trip, {args.sequences} sequences padded to {args.prompt} +"
        f" {args.response} tokens, {args.workers} Ray workers (median of {args.reps - 1} after"
        " the first)"
    )
    print("| path | out GB | back GB | submit s | gather s | GB/s | first GB/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['path']} | {r['out_gb']:.2f} | {r['back_gb']:.2f} | {r['submit_s']:.2f} |"
            f" {r['gather_s']:.2f} | {r['gb_per_s']:.2f} | {r['first_gb_per_s']:.2f} |"
        )


if __name__ == "__main__":
    main()
