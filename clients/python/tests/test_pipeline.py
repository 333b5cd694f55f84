#!/usr/bin/python3
"""trainwire.pipeline: the engine's schedule keeps Sven's rule (mini-batch u reads version
max(0, u - S)) and so never exceeds the staleness bound, while running S mini-batches ahead of its
updates; a toy model whose updates depend on the version read trains to the closed-form result of
that rule; failures name the half and the mini-batch; Eq. 6.1/6.2 are the chapter's sums."""

import unittest

from trainwire import pipeline as P


class Toy:
    """A scalar model: mini-batch u's update is w -= lr * (w_read - target(u)), where w_read is
    the weight its lookup saw (stashed by prepare) and the update applies to the current one."""

    def __init__(self, steps, s):
        self.w, self.stash, self.lr = 1.0, {}, 0.25
        self.history = [self.w]  # version k's weight
        self.pipe = P.Pipeline(self.prepare, self.train, steps, s)

    def prepare(self, u):
        self.stash[u] = self.w

    def train(self, t):
        self.w -= self.lr * (self.stash.pop(t) - (t % 5))
        self.history.append(self.w)
        return self.w


def by_rule(steps, s):
    """The same training written from the rule, with no engine: u reads version max(0, u - s)."""
    hist, lr = [1.0], 0.25
    w = 1.0
    for t in range(steps):
        w -= lr * (hist[max(0, t - s)] - (t % 5))
        hist.append(w)
    return w


class Schedule(unittest.TestCase):
    def test_bound_never_exceeded_and_reached(self):
        for s in range(5):
            for steps in (0, 1, 2, 3, 4, 7, 20):
                toy = Toy(steps, s)
                out = list(toy.pipe.run())
                self.assertEqual(len(out), steps)
                self.assertEqual([u for u, _ in toy.pipe.reads], list(range(steps)))
                for u, v in toy.pipe.reads:
                    self.assertEqual(v, max(0, u - s), (s, steps, u))
                    self.assertLessEqual(u - v, s)
                # It does run ahead: the bound is reached as soon as there are mini-batches for it.
                self.assertEqual(toy.pipe.max_staleness, min(s, max(0, steps - 1)), (s, steps))
                self.assertEqual(toy.w, by_rule(steps, s), (s, steps))
                self.assertEqual(toy.stash, {})

    def test_in_flight_at_most_s_plus_one(self):
        s, steps = 3, 12
        toy = Toy(steps, s)
        peak = []
        train = toy.train
        toy.pipe.train = lambda t: (peak.append(len(toy.stash)), train(t))[1]
        list(toy.pipe.run())
        self.assertEqual(max(peak), s + 1)

    def test_staleness_zero_is_plain_training(self):
        toy = Toy(6, 0)
        list(toy.pipe.run())
        w = 1.0
        for t in range(6):
            w -= 0.25 * (w - (t % 5))
        self.assertEqual(toy.w, w)

    def test_a_wrong_version_is_refused(self):
        toy = Toy(8, 2)
        toy.pipe.step(0)
        toy.pipe.version = 2  # an update counted twice: mini-batch 3 would read a version too new
        with self.assertRaisesRegex(P.StalenessError, "mini-batch 3 would read version 2, the rule says 1"):
            toy.pipe.step(2)

    def test_steps_out_of_order_refused(self):
        toy = Toy(8, 1)
        with self.assertRaisesRegex(P.PipelineError, "step 2 called after 0 updates"):
            toy.pipe.step(2)

    def test_failure_names_half_and_mini_batch(self):
        toy = Toy(10, 3)

        def bad_prepare(u):
            if u == 6:
                raise OSError("sidecar gone")
            toy.prepare(u)

        toy.pipe.prepare = bad_prepare
        with self.assertRaisesRegex(P.PipelineError, r"prepare, mini-batch 6: sidecar gone"):
            list(toy.pipe.run())
        self.assertEqual(toy.pipe.version, 3)  # mini-batch 6 is prepared before training 3

        toy = Toy(10, 1)
        toy.pipe.train = lambda t: 1 / 0 if t == 4 else toy.train(t)
        with self.assertRaisesRegex(P.PipelineError, "train, mini-batch 4: division by zero"):
            list(toy.pipe.run())

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            P.Pipeline(None, None, 3, -1)
        with self.assertRaises(ValueError):
            P.Pipeline(None, None, -1, 3)


class Equations(unittest.TestCase):
    def test_eq61_eq62(self):
        st = dict(zip(P.STAGES, (24.61, 2.43, 10.20, 1.23, 0.85, 39.05, 0.24, 8.54, 0.88)))
        self.assertAlmostEqual(P.sequential(st), 88.03)
        # max(SFP+FP, fall2all) + max(BP, ball2all) + max(allreduce, SBP) + opt
        self.assertAlmostEqual(P.pipelined(st), 10.20 + 8.54 + 39.05 + 0.24)

    def test_timer(self):
        c = P.StageTimer()
        self.assertEqual(c.timed("FP", lambda a, b: a + b, 2, 3), 5)
        with self.assertRaises(ZeroDivisionError):
            c.timed("BP", lambda: 1 / 0)
        self.assertGreater(c.times["FP"], 0)
        self.assertGreater(c.times["BP"], 0)
        self.assertEqual(set(c.per_step_ms(2)), set(P.STAGES))


if __name__ == "__main__":
    unittest.main()
