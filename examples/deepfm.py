#!/usr/bin/python3
"""A DeepFM-style recommender trained on synthetic click data, for 4 CPU processes:

    torchrun --nproc_per_node 4 examples/deepfm.py --sync ddp
    torchrun --nproc_per_node 4 examples/deepfm.py --sync hashsync --scheme zen

One EmbeddingBag of --rows × --dim (default 1M × 16) serves --fields categorical fields (default
26); each sample's ids are Zipf-distributed (a few hot rows, a long cold tail), so a step's
embedding gradient touches a few thousand rows of a million — the row-sparse gradient Zen syncs.
The model is DeepFM's: a first-order term, the factorization machine's pairwise term
0.5·((Σe)² − Σe²), and an MLP over the concatenated field embeddings, summed into a click logit.
The labels come from a fixed hidden teacher, so the loss goes down. Common flags: common.py.
"""

import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


class DeepFM(nn.Module):
    def __init__(self, rows, dim, fields, hidden, sparse):
        super().__init__()
        self.fields, self.dim = fields, dim
        self.emb = nn.EmbeddingBag(rows, dim, mode="sum", sparse=sparse)
        self.first = nn.EmbeddingBag(rows, 1, mode="sum", sparse=sparse)
        layers, width = [], fields * dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)
        nn.init.normal_(self.emb.weight, std=0.01)
        nn.init.zeros_(self.first.weight)

    def forward(self, ids):
        b = ids.shape[0]
        flat = ids.reshape(-1)
        offsets = torch.arange(flat.numel(), dtype=torch.int64)
        e = self.emb(flat, offsets).view(b, self.fields, self.dim)
        first = self.first(flat, offsets).view(b, self.fields).sum(1)
        s = e.sum(1)
        fm = 0.5 * (s * s - (e * e).sum(1)).sum(1)
        return first + fm + self.mlp(e.reshape(b, -1)).squeeze(1)


class Clicks:
    """Synthetic click logs: field f's ids are Zipf(a) ranks hashed into the field's slice of
    the table; the label is a Bernoulli of a hidden teacher's logit (a fixed weight per row)."""

    def __init__(self, rows, fields, batch, zipf, seed, rank):
        self.rows, self.fields, self.batch, self.zipf = rows, fields, batch, zipf
        self.seed, self.rank = seed, rank
        self.span = rows // fields

    def teacher(self, ids):
        h = (ids.astype(np.uint64) * np.uint64(2654435761)) % np.uint64(1 << 16)
        return (h.astype(np.float64) / (1 << 16) - 0.5) * 6

    def __call__(self, step):
        rng = np.random.default_rng([self.seed, self.rank, step])
        ranks = rng.zipf(self.zipf, (self.batch, self.fields)) - 1
        ids = (ranks * 40503) % self.span + np.arange(self.fields) * self.span
        logit = self.teacher(ids).sum(1) / np.sqrt(self.fields)
        y = (rng.random(self.batch) < 1 / (1 + np.exp(-logit))).astype(np.float32)
        return torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(y)


def main():
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="embedding rows (default 1M)")
    p.add_argument("--dim", type=int, default=16, help="embedding width (default 16)")
    p.add_argument("--fields", type=int, default=26, help="categorical fields (default 26)")
    p.add_argument("--batch", type=int, default=1024, help="samples per rank per step")
    p.add_argument("--hidden", default="256,128", help="MLP widths (default 256,128)")
    p.add_argument("--zipf", type=float, default=1.2, help="Zipf exponent of the ids")
    args = p.parse_args()
    rank, world = common.init(args)
    torch.manual_seed(args.seed)
    net = DeepFM(args.rows, args.dim, args.fields, [int(h) for h in args.hidden.split(",") if h],
                 sparse=args.sync == "sparse")
    sync = common.Sync(args, net)
    opt = torch.optim.SGD(sync.model.parameters(), lr=args.lr or 0.5)
    data = Clicks(args.rows, args.fields, args.batch, args.zipf, args.seed, rank)
    loss = nn.BCEWithLogitsLoss()

    def step_loss(model, inputs):
        ids, y = inputs
        return loss(model(ids), y)
    try:
        m = common.train(args, "deepfm", net, sync.model, opt, data, step_loss, args.batch)
        m.summary({"rows": args.rows, "batch": args.batch})
    finally:
        sync.close()
    common.finish()


if __name__ == "__main__":
    main()
