"""bench/compressor-sync/gen.py — one rank's gradient stream for a built-in model.

    gen.py MODEL.jsonl RANK STEPS SEED OUT.tw

MODEL.jsonl: `profiler model --builtin NAME | profiler dump` (the model frame's grads, in backprop
order, with their element counts). Writes STEPS steps of dense f32 frames, one per gradient in
that order, N(0, 1) values (numpy, seeded by SEED, RANK and the step), each step closed by a
step_end frame. Shapes: the element counts come from the model; the layouts are ResNet's and
BERT's (conv weights [out, in, k, k] with out from the batch-norm that follows, Linear/embedding
weights [out, in]; 1-D otherwise), which matters for PowerSGD (matrix shape[0] x rest).
"""
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] + "/clients/python")
from trainwire import wire  # noqa: E402


def shapes(grads):
    numel = {g["Name"]: g["Numel"] for g in grads}
    out = []
    for g in grads:
        name, n = g["Name"], g["Numel"]
        shape = [n]
        partner = None
        if ".conv" in name or name.startswith("conv"):
            partner = name.replace("conv", "bn")
        elif "downsample.0." in name:
            partner = name.replace("downsample.0.", "downsample.1.")
        if partner and partner in numel:
            o = numel[partner]
            k = 7 if name == "conv1.weight" else 3 if ".conv2." in name else 1
            if n % (o * k * k) == 0:
                shape = [o, n // (o * k * k), k, k]
        elif name == "fc.weight" and n % 1000 == 0:
            shape = [1000, n // 1000]
        elif (name.endswith(".weight") and "norm" not in name.lower() and "bn" not in name
              and "downsample.1." not in name):
            # BERT-like: square projections, 4x FFN, embeddings (hidden from LayerNorm sizes)
            for h in (768, 1024, 512, 2048, 4096, 3072):
                if n % h == 0 and n // h > 1:
                    shape = [n // h, h]
                    if ".output.dense." in name and "attention" not in name:
                        shape = [h, n // h]  # the FFN's second Linear: [hidden, 4·hidden]
                    break
        out.append((name, shape))
    return out


def main():
    model_path, rank, steps, seed, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), sys.argv[5]
    grads = None
    for line in open(model_path):
        d = json.loads(line)
        if "grads" in d:
            grads = d["grads"]
    if not grads:
        raise SystemExit("gen.py: no model frame in " + model_path)
    layout = shapes(grads)
    with open(path, "wb") as f:
        w = wire.Writer(f, producer="bench/compressor-sync")
        for s in range(steps):
            rng = np.random.default_rng([seed, rank, s])
            for name, shape in layout:
                x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32).reshape(shape)
                w.write(wire.dense(name, x, step=s, rank=rank), validate=False)
            w.end_step(s)
        w.close()


if __name__ == "__main__":
    main()
