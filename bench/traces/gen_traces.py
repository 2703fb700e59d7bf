#!/usr/bin/env python3
"""Writes the synthetic training traces used by bench/allocator_bench.cc.

Deterministic (fixed seeds): rerunning it rewrites the committed files
byte for byte. Three workloads, all a decoder-only transformer trained with
bf16 weights/activations, fp32 master weights and Adam (m, v) states:

  steady_transformer.trace  every step has the same shapes (fixed batch and
                            sequence length): the common case the cache is
                            built for.
  varlen.trace              the sequence length changes every step (packed
                            batches of varying length), so activation sizes
                            change and cross kMediumThreshold.
  moe.trace                 mixture-of-experts FFN: 8 experts, top-2
                            routing, tokens per expert drawn unevenly every
                            layer and step.

Format: see allocator/trace.h ("a <id> <bytes>", "f <id>", "e", "#").
Usage: gen_traces.py [OUTPUT_DIR]   (default: this script's directory)
"""

import os
import random
import sys

BF16 = 2
FP32 = 4


class Writer:
    """Collects trace lines; ids are never reused."""

    def __init__(self, header):
        self.lines = [f"# {line}" for line in header]
        self.next_id = 0
        self.live = set()

    def alloc(self, nbytes):
        i = self.next_id
        self.next_id += 1
        self.lines.append(f"a {i} {int(nbytes)}")
        self.live.add(i)
        return i

    def free(self, *ids):
        for i in ids:
            self.live.remove(i)
            self.lines.append(f"f {i}")

    def text(self):
        return "\n".join(self.lines) + "\n"


class Model:
    """Shapes of the transformer."""

    def __init__(self, layers=8, hidden=1024, ffn=4096, heads=16,
                 vocab=32000, experts=0, expert_ffn=2048):
        self.layers, self.hidden, self.ffn = layers, hidden, ffn
        self.heads, self.vocab = heads, vocab
        self.experts, self.expert_ffn = experts, expert_ffn

    def layer_params(self):
        """Element counts of one layer's parameters."""
        h = self.hidden
        params = [3 * h * h, 3 * h, h * h, h, h, h, h, h]  # attn + 2 LNs
        if self.experts:
            params.append(h * self.experts)  # router
            for _ in range(self.experts):
                params += [h * self.expert_ffn, self.expert_ffn,
                           self.expert_ffn * h, h]
        else:
            params += [h * self.ffn, self.ffn, self.ffn * h, h]
        return params

    def all_params(self):
        params = [self.vocab * self.hidden]  # tied embedding / LM head
        for _ in range(self.layers):
            params += self.layer_params()
        return params + [self.hidden, self.hidden]  # final LN


def setup(w, model):
    """Weights, fp32 master copies and Adam states: live for the whole run."""
    for n in model.all_params():
        w.alloc(n * BF16)
        w.alloc(n * FP32)  # master
        w.alloc(n * FP32)  # exp_avg
        w.alloc(n * FP32)  # exp_avg_sq


def dense_ffn_forward(w, model, tokens):
    up = w.alloc(tokens * model.ffn * BF16)
    act = w.alloc(tokens * model.ffn * BF16)
    down = w.alloc(tokens * model.hidden * BF16)
    return [up, act, down]


def moe_ffn_forward(w, model, tokens, rng):
    h = model.hidden
    saved = [w.alloc(tokens * model.experts * FP32),  # router logits
             w.alloc(tokens * 2 * 8)]                  # top-2 indices
    # Uneven load: gamma-distributed shares of the 2 * tokens routed tokens.
    shares = [rng.gammavariate(0.6, 1.0) for _ in range(model.experts)]
    total = sum(shares)
    for s in shares:
        t = int(2 * tokens * s / total)
        if t == 0:
            continue
        gathered = w.alloc(t * h * BF16)
        up = w.alloc(t * model.expert_ffn * BF16)
        act = w.alloc(t * model.expert_ffn * BF16)
        down = w.alloc(t * h * BF16)
        saved += [gathered, up, act, down]
    saved.append(w.alloc(tokens * h * BF16))  # combined output
    return saved


def step(w, model, batch, seq, rng):
    """One forward/backward/optimizer step; frees all it allocates."""
    h, tokens = model.hidden, batch * seq
    act = tokens * h * BF16
    small = []  # small per-step tensors freed at the end of the step
    ids = w.alloc(tokens * 8)  # int64 token ids
    x = w.alloc(act)  # embedding output
    saved_layers = []
    for _ in range(model.layers):
        saved = [x]
        saved.append(w.alloc(act))                     # ln1 out
        saved.append(w.alloc(tokens * 2 * FP32))       # ln1 mean/rstd
        saved.append(w.alloc(tokens * 3 * h * BF16))   # qkv
        saved.append(w.alloc(act))                     # attention out
        saved.append(w.alloc(batch * model.heads * seq * FP32))  # lse
        saved.append(w.alloc(act))                     # out proj
        saved.append(w.alloc(act))                     # residual 1
        saved.append(w.alloc(act))                     # ln2 out
        saved.append(w.alloc(tokens * 2 * FP32))       # ln2 mean/rstd
        if model.experts:
            saved += moe_ffn_forward(w, model, tokens, rng)
        else:
            saved += dense_ffn_forward(w, model, tokens)
        x = w.alloc(act)                               # residual 2
        small.append(w.alloc(4))                       # aux scalar
        saved_layers.append(saved)
    final = w.alloc(act)
    logits = w.alloc(tokens * model.vocab * BF16)
    loss = w.alloc(FP32)
    # Backward.
    dlogits = w.alloc(tokens * model.vocab * BF16)
    w.free(logits)
    grads = [w.alloc(model.vocab * h * BF16)]  # LM head / embedding grad
    dx = w.alloc(act)
    w.free(dlogits, final, x)
    for saved in reversed(saved_layers):
        for n in model.layer_params():
            grads.append(w.alloc(n * BF16))
        # Gradients through the FFN and attention: a few activation-sized
        # temporaries, the widest as large as the FFN's hidden activation.
        wide = model.expert_ffn if model.experts else model.ffn
        d_wide = w.alloc(tokens * wide * BF16)
        d_mid = w.alloc(act)
        w.free(d_wide)
        d_qkv = w.alloc(tokens * 3 * h * BF16)
        d_next = w.alloc(act)
        w.free(d_qkv, d_mid, dx)
        w.free(*saved)
        dx = d_next
    w.free(dx, ids)
    # Optimizer (foreach Adam): fp32 temporaries per parameter.
    for g, n in zip(grads, model.all_params()):
        g32 = w.alloc(n * FP32)
        upd = w.alloc(n * FP32)
        w.free(upd, g32)
    grad_norm = w.alloc(FP32)
    w.free(grad_norm, loss, *small)
    w.free(*grads)  # zero_grad(set_to_none=True)


# name -> (seed, model, description, batch x seq of each step)
WORKLOADS = {
    "steady_transformer": (
        1, Model(),
        "steady transformer: 8 layers, hidden 1024, ffn 4096, vocab 32000, "
        "batch 4 x seq 1024, 12 identical steps",
        lambda rng: (4, 1024)),
    "varlen": (
        2, Model(),
        "variable sequence length: the steady model, batch 4, seq drawn from "
        "128..2048 (multiples of 64) every step, 12 steps",
        lambda rng: (4, 64 * rng.randint(2, 32))),
    "moe": (
        3, Model(experts=8, expert_ffn=2048),
        "mixture of experts: 8 layers, hidden 1024, 8 experts of ffn 2048, "
        "top-2 routing with gamma(0.6) load per expert, batch 4 x seq 1024, "
        "12 steps",
        lambda rng: (4, 1024)),
}


def generate(name):
    seed, model, description, shape = WORKLOADS[name]
    rng = random.Random(seed)
    w = Writer([description, "generated by bench/traces/gen_traces.py"])
    setup(w, model)
    for _ in range(12):
        batch, seq = shape(rng)
        step(w, model, batch=batch, seq=seq, rng=rng)
    return w


def main(argv):
    out_dir = argv[1] if len(argv) > 1 else os.path.dirname(
        os.path.abspath(__file__))
    for name in WORKLOADS:
        w = generate(name)
        path = os.path.join(out_dir, f"{name}.trace")
        with open(path, "w") as f:
            f.write(w.text())
        print(f"{path}: {len(w.lines)} lines")


if __name__ == "__main__":
    main(sys.argv)
