#!/usr/bin/python3
"""A small causal language model (a transformer) trained on a synthetic corpus, for 4 CPU
processes:

    torchrun --nproc_per_node 4 examples/lm.py --sync ddp
    torchrun --nproc_per_node 4 examples/lm.py --sync powersgd

The corpus is an endless text from a fixed random Markov chain over --vocab tokens: each token
has --branch likely successors, so the loss falls from ln(vocab) towards ln(branch) as the model
learns the chain. Defaults: 4 layers, d=256, 4 heads, 16 sequences of 64 tokens per rank per
step (7.4M parameters, all dense gradients — the case for gradient compression). Common flags:
common.py.
"""

import math
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


class LM(nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1))
        nn.init.normal_(self.pos, std=0.02)

    def forward(self, x):
        h = self.tok(x) + self.pos[: x.shape[1]]
        n = x.shape[1]
        return self.head(self.body(h, mask=self.mask[:n, :n]))


class Corpus:
    """Token sequences from a Markov chain: successor table fixed by --seed (the same text
    distribution on every rank), the walk by (seed, rank, step)."""

    def __init__(self, vocab, branch, batch, seq, seed, rank):
        g = np.random.default_rng([seed, 7])
        self.next = g.integers(0, vocab, (vocab, branch))
        w = g.random((vocab, branch)) ** 2 + 0.05
        self.p = np.cumsum(w / w.sum(1, keepdims=True), 1)
        self.vocab, self.batch, self.seq, self.seed, self.rank = vocab, batch, seq, seed, rank

    def __call__(self, step):
        rng = np.random.default_rng([self.seed, self.rank, step])
        x = np.empty((self.batch, self.seq + 1), np.int64)
        x[:, 0] = rng.integers(0, self.vocab, self.batch)
        u = rng.random((self.batch, self.seq))
        for t in range(self.seq):
            k = (u[:, t, None] > self.p[x[:, t]]).sum(1)
            x[:, t + 1] = self.next[x[:, t], np.minimum(k, self.next.shape[1] - 1)]
        x = torch.from_numpy(x)
        return x[:, :-1], x[:, 1:]


def main():
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--vocab", type=int, default=4096, help="vocabulary size (default 4096)")
    p.add_argument("--branch", type=int, default=4, help="likely successors per token")
    p.add_argument("--d-model", type=int, default=256, help="model width (default 256)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument("--layers", type=int, default=4, help="transformer layers (default 4)")
    p.add_argument("--seq", type=int, default=64, help="tokens per sequence (default 64)")
    p.add_argument("--batch", type=int, default=16, help="sequences per rank per step")
    args = p.parse_args()
    rank, world = common.init(args)
    torch.manual_seed(args.seed)
    net = LM(args.vocab, args.d_model, args.heads, args.layers, args.seq)
    sync = common.Sync(args, net)
    opt = torch.optim.Adam(sync.model.parameters(), lr=args.lr or 1e-3)
    data = Corpus(args.vocab, args.branch, args.batch, args.seq, args.seed, rank)
    xent = nn.CrossEntropyLoss()

    def step_loss(model, inputs):
        x, y = inputs
        return xent(model(x).reshape(-1, args.vocab), y.reshape(-1))
    try:
        m = common.train(args, "lm", net, sync.model, opt, data, step_loss, args.batch)
        params = sum(q.numel() for q in net.parameters())
        m.summary({"parameters": params, "uniform_loss": math.log(args.vocab)})
    finally:
        sync.close()
    common.finish()


if __name__ == "__main__":
    main()
